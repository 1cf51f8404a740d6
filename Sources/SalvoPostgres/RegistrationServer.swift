import Foundation
import NIOCore
import NIOHTTP1
import NIOPosix
import SalvoWire

/// The registration endpoint apps (or their backend) call with a device token:
/// `POST /devices` with `{"token": "<64 hex>", "topic": "<bundle id>", "environment":
/// "production"|"sandbox"}` (environment optional, production by default).
///
/// Answers 201 for a new registration, 200 for one already known (registering again is
/// idempotent: it refreshes the last-seen time and makes an invalidated token valid
/// again), 400 with `{"reason": …}` naming what is wrong with the request, 404 and 405 for
/// other paths and methods, 413 for a body above 4 KiB.
public final class RegistrationServer: Sendable {
    private let registry: DeviceRegistry
    private let channel: NIOAsyncChannel<NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>, Never>
    /// The port it listens on (the one asked for, or the one the system chose for 0).
    public let port: Int

    private static let maximumBody = 4096

    /// Listens on `host`:`port` (0: any free port).
    public init(registry: DeviceRegistry, host: String = "127.0.0.1", port: Int) async throws {
        self.registry = registry
        channel = try await ServerBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .serverChannelOption(.backlog, value: 256)
            .serverChannelOption(.socketOption(.so_reuseaddr), value: 1)
            .bind(host: host, port: port) { child in
                child.eventLoop.makeCompletedFuture {
                    try child.pipeline.syncOperations.configureHTTPServerPipeline()
                    return try NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>(wrappingChannelSynchronously: child)
                }
            }
        self.port = channel.channel.localAddress?.port ?? port
    }

    /// Serves until the task is cancelled; each connection on a task of its own.
    public func run() async throws {
        try await withThrowingDiscardingTaskGroup { group in
            try await channel.executeThenClose { connections in
                for try await connection in connections {
                    group.addTask { try? await self.serve(connection) }
                }
            }
        }
    }

    private func serve(_ connection: NIOAsyncChannel<HTTPServerRequestPart, HTTPServerResponsePart>) async throws {
        try await connection.executeThenClose { inbound, outbound in
            var head: HTTPRequestHead?
            var body = ByteBuffer()
            var tooLarge = false
            for try await part in inbound {
                switch part {
                case .head(let requestHead):
                    (head, body, tooLarge) = (requestHead, ByteBuffer(), false)
                case .body(var chunk):
                    if body.readableBytes + chunk.readableBytes > Self.maximumBody { tooLarge = true } else { body.writeBuffer(&chunk) }
                case .end:
                    guard let requestHead = head else { continue }
                    let (status, answer) = tooLarge
                        ? (.payloadTooLarge, #"{"reason":"the body is larger than 4096 bytes"}"#)
                        : await answer(requestHead, body: body)
                    var headers = HTTPHeaders([("content-type", "application/json"), ("content-length", "\(answer.utf8.count + 1)")])
                    if !requestHead.isKeepAlive { headers.add(name: "connection", value: "close") }
                    try await outbound.write(.head(HTTPResponseHead(version: requestHead.version, status: status, headers: headers)))
                    try await outbound.write(.body(.byteBuffer(ByteBuffer(string: answer + "\n"))))
                    try await outbound.write(.end(nil))
                    if !requestHead.isKeepAlive { return }
                }
            }
        }
    }

    /// The status and JSON body for one request.
    func answer(_ head: HTTPRequestHead, body: ByteBuffer) async -> (HTTPResponseStatus, String) {
        guard head.uri.split(separator: "?").first == "/devices" else { return (.notFound, #"{"reason":"POST /devices"}"#) }
        guard head.method == .POST else { return (.methodNotAllowed, #"{"reason":"POST /devices"}"#) }
        let registration: (DeviceToken, RegistryScope)
        switch Self.parse(Data(body.readableBytesView)) {
        case .success(let parsed): registration = parsed
        case .failure(let problem): return (.badRequest, Self.reason(problem.description))
        }
        do {
            let isNew = try await registry.register(registration.0, in: registration.1)
            return isNew ? (.created, #"{"registered":"new"}"#) : (.ok, #"{"registered":"again"}"#)
        } catch {
            // The database's trouble, not the app's: worth retrying later.
            return (.serviceUnavailable, Self.reason("the registry is unavailable"))
        }
    }

    struct RequestProblem: Error, CustomStringConvertible { var description: String }

    /// A registration from a JSON body, validated: the token 64 hex digits, the topic a
    /// bundle id (letters, digits, `.`, `-`, `_`; at most 255), the environment one of two.
    static func parse(_ body: Data) -> Result<(DeviceToken, RegistryScope), RequestProblem> {
        guard let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any] else {
            return .failure(RequestProblem(description: "the body is not a JSON object"))
        }
        guard let hex = object["token"] as? String else { return .failure(RequestProblem(description: "no \"token\" string")) }
        let token: DeviceToken
        do { token = try DeviceToken(hex: hex) } catch {
            return .failure(RequestProblem(description: "token: \(error)"))
        }
        guard let topic = object["topic"] as? String else { return .failure(RequestProblem(description: "no \"topic\" string")) }
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-_")
        guard (1...255).contains(topic.count), topic.allSatisfy(allowed.contains) else {
            return .failure(RequestProblem(description: "topic: a bundle id of 1-255 letters, digits, '.', '-' or '_'"))
        }
        let environmentName = object["environment"] as? String ?? RegistryScope.Environment.production.rawValue
        guard let environment = RegistryScope.Environment(rawValue: environmentName),
              RegistryScope.Environment.apns.contains(environment) else {
            return .failure(RequestProblem(description: "environment: production or sandbox"))
        }
        return .success((token, RegistryScope(topic: topic, environment: environment)))
    }

    private static func reason(_ text: String) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: ["reason": text])) ?? Data()
        return String(decoding: data, as: UTF8.self)
    }
}
