import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import NIOHTTP1
import SalvoCampaignFiles
import SalvoEngine
import SalvoMock
import SalvoServe
import SalvoTestSupport
import SalvoWire
import ServiceLifecycle
import Testing

/// `salvo serve` in process: the real HTTP/2 mock, a sender for it, and the server on an
/// ephemeral loopback port, with an HTTP client.
final class ServeRig {
    let mock: H2LoopbackRig
    let sender: RoutingSender
    let server: NotificationServer
    let port: Int
    let client = HTTPClient(eventLoopGroupProvider: .singleton)
    private let group: ServiceGroup
    private let running: Task<Void, any Error>

    /// Starts it all; `configure` adjusts the server's configuration, `mockPlan` the mock's;
    /// `journal`: `--db`; `logger`: the server's.
    init(mockPlan: H2FailurePlan = H2FailurePlan(), services: [any Service] = [],
         _ configure: (inout ServeConfiguration) -> Void = { _ in },
         onRefusal: (@Sendable (NotificationStatus) -> Void)? = nil, journal: NotificationJournal? = nil,
         logger: Logger = Logger(label: "serve-test")) async throws {
        mock = try H2LoopbackRig(plan: mockPlan)
        var senderConfiguration = mock.senderConfiguration()
        // The rig's connect attempts last seconds; while the whole suite runs, a handshake can take longer.
        senderConfiguration.connectAttempts = 1000
        sender = try RoutingSender(senderConfiguration)
        var configuration = ServeConfiguration(campaignProtocol: .http2(defaultPushType: .alert))
        configuration.port = 0
        configure(&configuration)
        server = NotificationServer(configuration: configuration, sender: sender, routing: nil, logger: logger,
                                    onRefusal: onRefusal, journal: journal)
        let (ports, listening) = AsyncStream.makeStream(of: Int.self)
        let server = self.server
        struct Run: Service {
            let server: NotificationServer
            let services: [any Service]
            let listening: AsyncStream<Int>.Continuation
            func run() async throws { try await server.run(services: services) { listening.yield($0) } }
        }
        group = ServiceGroup(services: [Run(server: server, services: services, listening: listening)],
                             logger: Logger(label: "serve-test"))
        running = Task { [group] in try await group.run() }
        var iterator = ports.makeAsyncIterator()
        guard let port = await iterator.next() else { throw CancellationError() }
        self.port = port
    }

    /// SIGTERM's path: stops taking requests, drains, and returns once every service ended.
    func stop() async throws {
        await group.triggerGracefulShutdown()
        try await running.value
        try await client.shutdown()
    }

    var url: String { "http://127.0.0.1:\(port)" }

    /// POSTs `body` to /v1/notifications (with `query`), returning the status, the JSON
    /// answer and the headers.
    func post(_ body: String, query: String = "", headers: [(String, String)] = []) async throws
        -> (status: Int, json: [String: Any], headers: HTTPHeaders)
    {
        var request = HTTPClientRequest(url: url + "/v1/notifications" + query)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        request.body = .bytes(ByteBuffer(string: body))
        return try await send(request)
    }

    func get(_ path: String, headers: [(String, String)] = []) async throws -> (status: Int, json: [String: Any], headers: HTTPHeaders) {
        var request = HTTPClientRequest(url: url + path)
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        return try await send(request)
    }

    func send(_ request: HTTPClientRequest) async throws -> (status: Int, json: [String: Any], headers: HTTPHeaders) {
        let response = try await client.execute(request, timeout: .seconds(60))
        let body = try await response.body.collect(upTo: 64 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(buffer: body))) as? [String: Any] ?? [:]
        return (Int(response.status.code), json, response.headers)
    }

    /// A notification's JSON: device token `n`, its own payload.
    static func notification(_ n: Int, token: DeviceToken? = nil, extra: String = "") -> String {
        let token = token ?? LoopbackRig.token(n)
        return #"{"token":"\#(token.hex)","payload":{"aps":{"alert":"campaign"},"n":\#(n)}\#(extra)}"#
    }

    static func batch(_ items: [String]) -> String { "[" + items.joined(separator: ",") + "]" }
}

extension Dictionary where Key == String, Value == Any {
    /// The answer's `notifications`.
    var notifications: [[String: Any]] { self["notifications"] as? [[String: Any]] ?? [] }
    /// The answer's `errors`.
    var errors: [[String: Any]] { self["errors"] as? [[String: Any]] ?? [] }
}
