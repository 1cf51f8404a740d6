import SalvoIO
import SalvoWire
import Synchronization

/// An in-process APNs feedback service: on each TLS connection it writes its tuples
/// (`time:u32 tokenLength:u16=32 token`, 38 bytes each, big endian), sends close_notify and
/// closes. One loop thread; the same start/`port`/`stop()` shape as `MockGateway`.
public final class MockFeedback: Sendable {
    /// How the service listens and what it reports.
    public struct Configuration: Sendable {
        /// The address to listen on.
        public var host: String
        /// The port; 0 picks a free one.
        public var port: Int
        /// The server's TLS setup.
        public var tls: TLSConfiguration
        /// The tuples to hand out.
        public var tuples: [FeedbackTuple]
        /// Empty the list once a connection has been handed it, as Apple does (the next
        /// connection gets only tuples added since). Off: every connection gets the same list.
        public var clearAfterRead: Bool

        public init(host: String = "127.0.0.1", port: Int = 0, tls: TLSConfiguration,
                    tuples: [FeedbackTuple] = [], clearAfterRead: Bool = true) {
            self.host = host
            self.port = port
            self.tls = tls
            self.tuples = tuples
            self.clearAfterRead = clearAfterRead
        }
    }

    /// The port it listens on.
    public var port: Int { runtime.port }

    private let shared: Shared
    private let runtime: ServerRuntime

    final class Shared: Sendable {
        let clearAfterRead: Bool
        let state: Locked<(tuples: [FeedbackTuple], served: Int)>

        init(_ configuration: Configuration) {
            clearAfterRead = configuration.clearAfterRead
            state = Locked((configuration.tuples, 0))
        }

        /// The bytes for one connection; clears the list when configured to.
        func takeBytes() -> [UInt8] {
            let tuples = state.withLock { state in
                defer {
                    if clearAfterRead { state.tuples.removeAll() }
                    state.served += 1
                }
                return state.tuples
            }
            var bytes: [UInt8] = []
            bytes.reserveCapacity(tuples.count * FeedbackTuple.byteCount)
            for tuple in tuples { bytes += tuple.bytes }
            return bytes
        }
    }

    /// Starts listening on its own loop thread.
    public init(_ configuration: Configuration) throws {
        let shared = Shared(configuration)
        self.shared = shared
        let settings = MockServerSettings(host: configuration.host, port: configuration.port, tls: configuration.tls, loops: 1)
        runtime = try ServerRuntime(name: "mock-fb", settings: settings, bufferSize: 16384) { stream, _, loop in
            FeedbackConnection(stream: stream, loop: loop, shared: shared)
        }
    }

    /// The tuples the next connection will receive.
    public var tuples: [FeedbackTuple] { shared.state.withLock { $0.tuples } }

    /// Adds tuples for the next connections.
    public func add(_ tuples: [FeedbackTuple]) { shared.state.withLock { $0.tuples += tuples } }

    /// Connections that completed the handshake and were handed the list.
    public var connectionsServed: Int { shared.state.withLock { $0.served } }

    /// Connections whose TLS handshake failed.
    public var handshakeFailures: Int { runtime.counts.handshakeFailures.load(ordering: .acquiring) }

    /// Closes the listener and connections and joins the thread. Idempotent.
    public func stop() { runtime.stop() }

    deinit { stop() }
}

/// Writes the list once the handshake is done, then closes.
final class FeedbackConnection: ServerConnection {
    private let shared: MockFeedback.Shared

    init(stream: TLSStream, loop: ServerRuntime.Loop, shared: MockFeedback.Shared) {
        self.shared = shared
        super.init(stream: stream, loop: loop)
    }

    override func didEstablish() { respondAndClose(shared.takeBytes()) }
}
