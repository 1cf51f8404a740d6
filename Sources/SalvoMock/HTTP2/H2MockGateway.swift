import SalvoIO
import SalvoWire

/// An in-process APNs gateway speaking Apple's HTTP/2 provider API, for tests and
/// benchmarks: TLS with ALPN `h2` (clients that do not offer it are refused), every request
/// checked as APNs checks it and answered with Apple's statuses and reasons, token
/// authentication (ES256 provider tokens) or client certificates, the stream limit APNs
/// applies, and an `H2FailurePlan` that rejects, throttles, goes away, drops or stalls on
/// purpose.
///
/// The HTTP/2 protocol itself (framing, HPACK, flow control, stream states, SETTINGS, PING,
/// RST_STREAM, GOAWAY) is libnghttp2's; this type owns the APNs rules and runs nghttp2's
/// sessions on Salvo's event loops and TLS streams, as `MockGateway` does for the binary
/// protocol.
///
/// ```swift
/// let pki = try DevelopmentPKI.Bundle()
/// let gateway = try H2MockGateway(.init(tls: .server(certificateChain: pki.server.certificate,
///                                                    privateKey: pki.server.privateKey)))
/// defer { gateway.stop() }
/// // POST https://127.0.0.1:\(gateway.port)/3/device/<token> …
/// print(gateway.statistics().accepted)
/// ```
public final class H2MockGateway: Sendable {
    /// Which APNs environment the gateway plays.
    public enum Environment: String, Sendable, Hashable, CaseIterable {
        /// api.push.apple.com.
        case production
        /// api.sandbox.push.apple.com: successful responses also carry `apns-unique-id`.
        case development
    }

    /// How the gateway listens and behaves.
    public struct Configuration: Sendable {
        /// The address to listen on.
        public var host: String
        /// The port; 0 picks a free one (read it back from `H2MockGateway.port`).
        public var port: Int
        /// The server's TLS setup; the gateway sets its ALPN list to `h2`. Set
        /// `requireClientCertificate` (with `trustRoots` and `verifyPeer`) for certificate
        /// authentication, as Apple's gateway does; the topic then comes from each request.
        public var tls: TLSConfiguration
        /// Token authentication: requests must carry `authorization: bearer <token>` that
        /// this verifier accepts, and a connection may open one stream at a time until its
        /// first valid token. Nil: no token is asked for.
        public var tokenVerifier: ProviderTokenVerifier?
        /// SETTINGS_MAX_CONCURRENT_STREAMS (once a valid token was seen, with token
        /// authentication). Default 1000, as Apple's gateway.
        public var maximumConcurrentStreams: UInt32
        /// The environment; default production.
        public var environment: Environment
        /// The bundle ids topics may name (before the push type's suffix); others get 400
        /// TopicDisallowed. Empty (the default): any well-formed topic.
        public var allowedTopics: [String]
        /// Event-loop threads; default: the number of cores.
        public var loops: Int
        /// What fails on purpose; default: nothing.
        public var failurePlan: H2FailurePlan
        /// Keep the digest of every accepted request (`MockStatistics.digest` of the
        /// device token and the payload) and count duplicates. A hash per request and a
        /// lock per read; off for throughput runs.
        public var recordAccepted: Bool

        public init(
            host: String = "127.0.0.1", port: Int = 0, tls: TLSConfiguration, tokenVerifier: ProviderTokenVerifier? = nil,
            maximumConcurrentStreams: UInt32 = 1000, environment: Environment = .production, allowedTopics: [String] = [],
            loops: Int = availableCores, failurePlan: H2FailurePlan = H2FailurePlan(), recordAccepted: Bool = false
        ) {
            self.host = host
            self.port = port
            self.tls = tls
            self.tokenVerifier = tokenVerifier
            self.maximumConcurrentStreams = maximumConcurrentStreams
            self.environment = environment
            self.allowedTopics = allowedTopics
            self.loops = loops
            self.failurePlan = failurePlan
            self.recordAccepted = recordAccepted
        }
    }

    /// The configuration the gateway runs with.
    public let configuration: Configuration
    /// The port it listens on (the one picked when `configuration.port` was 0).
    public var port: Int { runtime.port }

    private let state: H2GatewayState
    private let counters: [H2LoopCounters]
    let runtime: ServerRuntime

    /// Starts listening and the loop threads.
    ///
    /// - Throws: `FailurePlanError` for an invalid plan or stream limit, `TLSError` for
    ///   unusable certificates or keys, `ConnectError`/`IOError` when the address cannot be bound.
    public init(_ configuration: Configuration) throws {
        try configuration.failurePlan.validate()
        guard configuration.maximumConcurrentStreams >= 1 else {
            throw FailurePlanError.invalid("maximumConcurrentStreams must be at least 1")
        }
        self.configuration = configuration
        var tls = configuration.tls
        tls.applicationProtocols = ["h2"]
        let context = try TLSContext(tls, role: .server)
        let state = H2GatewayState(configuration)
        let counters = (0..<max(1, configuration.loops)).map { _ in H2LoopCounters() }
        self.state = state
        self.counters = counters
        runtime = try ServerRuntime(
            name: "mock-h2", host: configuration.host, port: configuration.port, loopCount: counters.count,
            bufferSize: 1 << 16
        ) { socket, ordinal, loop in
            state.count { $0.connections += 1 }
            guard let stream = try? TLSStream(context: context, socket: socket) else { return nil }
            return H2Connection(stream: stream, ordinal: ordinal, loop: loop,
                                counters: counters[ordinal % counters.count], state: state)
        }
    }

    /// A consistent-enough snapshot: each counter is read atomically; counters are
    /// published after each read, before the answers to it are written.
    public func statistics() -> H2Statistics {
        var snapshot = H2Statistics()
        var rejections = [Int](repeating: 0, count: APNsReason.allCases.count)
        for loop in counters {
            snapshot.accepted += loop.accepted.load(ordering: .acquiring)
            snapshot.requests += loop.requests.load(ordering: .acquiring)
            snapshot.streams += loop.streams.load(ordering: .acquiring)
            snapshot.resetStreams += loop.resetStreams.load(ordering: .acquiring)
            loop.rejections.withLock { counts in
                for index in counts.indices { rejections[index] += counts[index] }
            }
        }
        for reason in APNsReason.allCases where rejections[Int(reason.rawValue)] > 0 {
            let count = rejections[Int(reason.rawValue)]
            snapshot.rejected += count
            snapshot.rejectedByReason[reason.name] = count
            snapshot.rejectedByStatus[String(reason.status), default: 0] += count
        }
        state.events.withLock { events in
            snapshot.connections = events.connections
            snapshot.handshakeFailures = events.handshakeFailures
            snapshot.refusedWithoutH2 = events.refusedWithoutH2
            snapshot.goaways = events.goaways
            snapshot.droppedConnections = events.droppedConnections
            snapshot.flowControlStalls = events.flowControlStalls
        }
        if configuration.recordAccepted {
            let record = state.accepted.snapshot()
            snapshot.acceptedDigests = record.digests
            snapshot.duplicates = record.duplicates
        }
        return snapshot
    }

    /// Closes the listener and every connection and joins the loop threads. Idempotent;
    /// call it from any thread but the gateway's own loops.
    public func stop() { runtime.stop() }

    deinit { stop() }
}
