import CoreMetrics
import Prometheus
import SalvoIO

/// `GET /metrics` in the Prometheus text format, served from a registry of swift-prometheus
/// on one loop thread of its own: what `--metrics-port` starts.
///
/// A deliberately tiny HTTP/1.1 server: it reads one request per connection, answers it
/// and closes (`Connection: close`), which is all a Prometheus scrape needs. Not the hot
/// path: scrapes come every few seconds, and each is answered from the registry's own
/// locks without touching the engine's threads.
public final class MetricsEndpoint: @unchecked Sendable {
    // @unchecked: `server` is touched on the endpoint's loop thread only (through `execute`).
    /// What `/metrics` shows.
    public let registry: PrometheusCollectorRegistry
    /// The port it listens on (the one picked when 0 was asked for).
    public let port: Int
    private let thread: LoopThread
    private let server: Server

    /// Listens on `host:port` (port 0 picks a free one) and serves `registry`.
    ///
    /// - Throws: `ConnectError` when the address cannot be bound, `IOError` when the
    ///   thread cannot start.
    public init(registry: PrometheusCollectorRegistry, host: String = "127.0.0.1", port: Int) throws {
        self.registry = registry
        let listener = try Socket.listen(host: host, port: port, backlog: 64)
        self.port = listener.localAddress?.port ?? port
        thread = try LoopThread(name: "salvo-metrics")
        server = Server(listener: listener, registry: registry, loop: thread.loop)
        thread.loop.execute { [server] in server.start() }
    }

    /// A metrics factory for `registry` with Salvo's histogram buckets (latencies from
    /// 100 µs to 60 s, write batches from 256 bytes to 64 KiB) and a `# HELP` line for every
    /// metric (`DescribedMetricsFactory`).
    public static func factory(for registry: PrometheusCollectorRegistry) -> DescribedMetricsFactory {
        DescribedMetricsFactory(
            registry: registry,
            durationBuckets: [
                .microseconds(100), .microseconds(250), .microseconds(500), .milliseconds(1), .milliseconds(2),
                .milliseconds(5), .milliseconds(10), .milliseconds(25), .milliseconds(50), .milliseconds(100),
                .milliseconds(250), .milliseconds(500), .seconds(1), .seconds(2), .seconds(5), .seconds(10), .seconds(60),
            ],
            valueBuckets: (8...16).map { Double(1 << $0) })
    }

    /// Stops listening, closes what is open and joins the thread. Idempotent.
    public func stop() {
        thread.loop.execute { [server] in server.stop() }
        thread.stopAndJoin()
    }

    deinit { stop() }
}

/// The listener and its open connections, on the endpoint's loop thread.
///
/// Thread rule: the endpoint's loop thread only (`MetricsEndpoint` reaches it through `execute`).
private final class Server: EventHandler, @unchecked Sendable {
    private let listener: Socket
    private let registry: PrometheusCollectorRegistry
    unowned let loop: EventLoop
    private var registration: Registration?
    private var clients: [ObjectIdentifier: Client] = [:]

    init(listener: Socket, registry: PrometheusCollectorRegistry, loop: EventLoop) {
        self.listener = listener
        self.registry = registry
        self.loop = loop
    }

    func start() {
        registration = try? loop.register(listener.fd, interest: .read, handler: self)
    }

    func stop() {
        if let registration { loop.deregister(registration) }
        registration = nil
        for client in clients.values { close(client) }
    }

    func handleEvents(_ events: IOEvents) {
        while let socket = (try? listener.accept()) ?? nil {
            let client = Client(socket: socket, server: self)
            guard let registration = try? loop.register(socket.fd, interest: .read, handler: client) else { continue }
            client.registration = registration
            clients[ObjectIdentifier(client)] = client
        }
    }

    /// `request` (the bytes up to the blank line) arrived: the response to it.
    func respond(to request: [UInt8]) -> [UInt8] {
        let line = request.prefix { $0 != UInt8(ascii: "\r") && $0 != UInt8(ascii: "\n") }
        let parts = line.split(separator: UInt8(ascii: " "))
        guard parts.count >= 2, parts[0].elementsEqual("GET".utf8) else {
            return Self.response(status: "405 Method Not Allowed", type: "text/plain", body: Array("GET /metrics only\n".utf8))
        }
        let path = parts[1].prefix { $0 != UInt8(ascii: "?") }
        guard path.elementsEqual("/metrics".utf8) else {
            return Self.response(status: "404 Not Found", type: "text/plain", body: Array("see /metrics\n".utf8))
        }
        var body: [UInt8] = []
        registry.emit(into: &body)
        return Self.response(status: "200 OK", type: "text/plain; version=0.0.4; charset=utf-8", body: body)
    }

    private static func response(status: String, type: String, body: [UInt8]) -> [UInt8] {
        Array("HTTP/1.1 \(status)\r\nContent-Type: \(type)\r\nContent-Length: \(body.count)\r\nConnection: close\r\n\r\n".utf8)
            + body
    }

    func close(_ client: Client) {
        if let registration = client.registration { loop.deregister(registration) }
        client.registration = nil
        clients[ObjectIdentifier(client)] = nil
    }
}

/// One scrape: reads the request until its blank line, then writes the whole response.
private final class Client: EventHandler {
    let socket: Socket
    unowned let server: Server
    var registration: Registration?
    private var request: [UInt8] = []
    private var response: [UInt8] = []
    private var written = 0

    /// Requests larger than this are not scrapes: the connection is closed.
    static let requestLimit = 16 << 10

    init(socket: Socket, server: Server) {
        self.socket = socket
        self.server = server
    }

    func handleEvents(_ events: IOEvents) {
        if response.isEmpty {
            var chunk = [UInt8](repeating: 0, count: 4096)
            let read = chunk.withUnsafeMutableBytes { try? socket.read(into: $0) }
            switch read {
            case .processed(let count)? where count > 0:
                request += chunk.prefix(count)
                if request.count > Self.requestLimit { return server.close(self) }
                guard let end = headerEnd() else { return }
                response = server.respond(to: Array(request[..<end]))
            case .wouldBlock?:
                return
            default:
                return server.close(self)  // closed or failed before a whole request
            }
        }
        while written < response.count {
            let result = response[written...].withUnsafeBytes { try? socket.write($0) }
            switch result {
            case .processed(let count)?:
                written += count
            case .wouldBlock?:
                if let registration { try? server.loop.setInterest(registration, .write) }
                return
            case nil:
                return server.close(self)
            }
        }
        server.close(self)
    }

    /// Where the request's header ends (`\r\n\r\n`, or `\n\n` from lenient clients).
    private func headerEnd() -> Int? {
        for index in request.indices.dropFirst() {
            if request[index] == UInt8(ascii: "\n") && request[index - 1] == UInt8(ascii: "\n") { return index }
            if index >= 3, request[index] == UInt8(ascii: "\n"), request[index - 1] == UInt8(ascii: "\r"),
               request[index - 2] == UInt8(ascii: "\n") { return index }
        }
        return nil
    }
}
