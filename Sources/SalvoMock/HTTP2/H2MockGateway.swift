import CoreMetrics
import Logging
import SalvoIO
import SalvoTelemetry
import SalvoWire

/// An in-process APNs gateway speaking Apple's HTTP/2 provider API, for tests and
/// benchmarks: TLS with ALPN `h2` (clients that offer other protocols only are refused; those
/// that offer none speak HTTP/2 by prior knowledge, as Apple allows), every request
/// checked as APNs checks it and answered with Apple's statuses and reasons, token
/// authentication (ES256 provider tokens) or client certificates, the stream limit APNs
/// applies, and an `H2FailurePlan` that rejects, throttles, goes away, drops or stalls on
/// purpose.
///
/// Broadcasts (iOS 18 Live Activities) are served on the same port:
/// `POST /4/broadcasts/apps/<bundle id>` to a channel of `channels` (checked as
/// `RequestValidation` documents, counted like any request and by channel). With
/// `Configuration.channelManagementPort` set, a second listener plays Apple's channel
/// management host (create, read, delete and list channels; see `ChannelRequest`), with the
/// same TLS setup and token verifier and the same team token history.
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
    /// The configuration the gateway runs with.
    public let configuration: Configuration
    /// The port it listens on (the one picked when `configuration.port` was 0).
    public var port: Int { core.runtime.port }
    /// The channel management port (the one picked when
    /// `configuration.channelManagementPort` was 0); nil without one.
    public var channelsPort: Int? { managementCore?.runtime.port }
    /// The broadcast channels: what the management port creates and broadcasts name. Tests
    /// create channels here directly (`gateway.channels.create(bundleID:policy:)`).
    public var channels: MockChannelRegistry { core.state.channels }
    /// The most accepted requests `Configuration.recordRequests` keeps.
    public static let recordedRequestLimit = 100_000
    let core: GatewayCore<H2GatewayState, H2LoopCounters>
    /// The channel management listener, on a loop of its own, sharing `core.state`.
    let managementCore: GatewayCore<H2GatewayState, H2LoopCounters>?
    /// Where `reportMetrics()` reports.
    let feed: MetricsFeed
    /// Where listening, handshakes and stopping are logged.
    let logger: Logger

    /// Starts listening and the loop threads.
    ///
    /// - Parameters:
    ///   - configuration: where it listens, what it verifies and how it misbehaves.
    ///   - logger: where listening, each client's handshake (failures at info) and stopping go;
    ///     by default, nowhere.
    ///   - metricsFactory: where `reportMetrics()` reports; nil: the global `MetricsSystem.factory`.
    ///
    /// - Throws: `FailurePlanError` for an invalid plan or stream limit, `TLSError` for
    ///   unusable certificates or keys, `ConnectError`/`IOError` when the address cannot be bound.
    public init(_ configuration: Configuration, logger: Logger = .disabled,
                metricsFactory: (any MetricsFactory)? = nil) throws {
        try configuration.failurePlan.validate()
        guard configuration.maximumConcurrentStreams >= 1 else {
            throw FailurePlanError.invalid("maximumConcurrentStreams must be at least 1")
        }
        guard configuration.channelLimit >= 0 else { throw FailurePlanError.invalid("channelLimit must not be negative") }
        self.configuration = configuration
        self.logger = logger
        feed = MetricsFeed(factory: metricsFactory ?? MetricsSystem.factory)
        var settings = configuration.server
        settings.tls.applicationProtocols = ["h2"]
        let state = H2GatewayState(configuration)
        core = try GatewayCore(name: "mock-h2", settings: settings, bufferSize: 1 << 16, state: state,
                               logger: logger, counters: H2LoopCounters.init) { stream, ordinal, loop, counters, state in
            H2Connection(stream: stream, ordinal: ordinal, loop: loop, counters: counters, state: state)
        }
        if let managementPort = configuration.channelManagementPort {
            // One loop: channel management is a few requests, never a load.
            var management = settings
            management.port = managementPort
            management.loops = 1
            do {
                managementCore = try GatewayCore(name: "mock-h2-channels", settings: management, bufferSize: 1 << 16, state: state,
                                                 logger: logger, counters: H2LoopCounters.init) { stream, ordinal, loop, counters, state in
                    H2Connection(stream: stream, ordinal: ordinal, loop: loop, counters: counters, state: state, role: .management)
                }
            } catch {
                core.runtime.stop()
                throw error
            }
        } else {
            managementCore = nil
        }
    }

    /// A consistent-enough snapshot: each counter is read atomically; counters are
    /// published after each read, before the answers to it are written.
    public func statistics() -> H2Statistics { statistics(digests: true) }

    /// The snapshot; without `digests`, the recorded digests and requests and the
    /// broadcasts by channel are left out (cheap enough for a metrics flush every second).
    func statistics(digests: Bool) -> H2Statistics {
        var snapshot = core.state.events.withLock { $0 }
        var rejections = [Int](repeating: 0, count: APNsReason.allCases.count)
        for loop in core.counters {
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
        core.complete(&snapshot, record: core.state.accepted, digests: digests)
        if digests {
            snapshot.broadcastsByChannel = Dictionary(uniqueKeysWithValues: core.state.broadcastsByChannel().map { ($0.key.base64, $0.value) })
        }
        if configuration.recordRequests && digests { snapshot.acceptedRequests = core.state.recordedRequests.withLock { $0 } }
        return snapshot
    }

    /// Closes the listener and every connection and joins the loop threads. Idempotent;
    /// call it from any thread but the gateway's own loops.
    public func stop() {
        core.runtime.stop()
        managementCore?.runtime.stop()
    }

    deinit { stop() }
}

extension H2MockGateway {
    /// Which APNs environment the gateway plays.
    public enum Environment: String, Sendable, Hashable, CaseIterable {
        /// api.push.apple.com.
        case production
        /// api.sandbox.push.apple.com: successful responses also carry `apns-unique-id`.
        case development
    }

    /// How the gateway listens and behaves. `host`, `port`, `tls`, `loops` and `recordAccepted`
    /// are its `server` settings; the gateway sets the TLS setup's ALPN list to `h2`. Set
    /// `tls.requireClientCertificate` (with `trustRoots` and `verifyPeer`) for certificate
    /// authentication, as Apple's gateway does; the topic then comes from each request, or,
    /// when a request names none, is the certificate's (as with Apple's single-topic ones).
    public struct Configuration: MockServerConfiguration, Sendable {
        /// Where and how the gateway listens, and whether it records what it accepted.
        public var server: MockServerSettings
        /// Token authentication: requests must carry `authorization: bearer <token>` that
        /// one of these verifiers accepts (the one for the token's key id: one per key of
        /// every team the gateway plays), and a connection may open one stream at a time
        /// until its first valid token. Each team has its own current token (a new one
        /// within 20 minutes of the last is 429 TooManyProviderTokenUpdates for that team
        /// only). A connection that presented a client certificate is the certificate's
        /// and needs no token. Empty: no token is asked for.
        public var tokenVerifiers: [ProviderTokenVerifier]
        /// The first of `tokenVerifiers`; set: the only one (nil: none).
        public var tokenVerifier: ProviderTokenVerifier? {
            get { tokenVerifiers.first }
            set { tokenVerifiers = newValue.map { [$0] } ?? [] }
        }
        /// SETTINGS_MAX_CONCURRENT_STREAMS (once a valid token was seen, with token
        /// authentication). Default 1000, as Apple's gateway.
        public var maximumConcurrentStreams: UInt32
        /// The environment; default production.
        public var environment: Environment
        /// The bundle ids topics may name (before the push type's suffix); others get 400
        /// TopicDisallowed. Empty (the default): any well-formed topic.
        public var allowedTopics: [String]
        /// What fails on purpose; default: nothing.
        public var failurePlan: H2FailurePlan
        /// Keep each accepted request's token and APNs headers (`H2RecordedRequest`), the
        /// first `H2MockGateway.recordedRequestLimit`, for `H2Statistics.acceptedRequests`:
        /// what a test of a sender checks its headers against. Allocates per request; off
        /// for throughput runs.
        public var recordRequests: Bool
        /// The channel management port (Apple's separate host): 0 picks a free one
        /// (`H2MockGateway.channelsPort` tells which); nil (the default): no management
        /// listener (broadcasts are served anyway, to channels made through `channels`).
        public var channelManagementPort: Int?
        /// The most channels one bundle id may have (Apple's 10,000 by default); a create
        /// past it gets 400 CannotCreateChannelConfig.
        public var channelLimit: Int
        /// The app's broadcast capability; false (an app without it): every broadcast and
        /// every channel management request is answered 400 FeatureNotEnabled once
        /// authenticated. Default true.
        public var broadcastsEnabled: Bool
        /// The first requests to the management port are answered with these, one each, in
        /// order (then as usual): 429, 500 or 503, for tests of a client's retries.
        public var managementFailures: [APNsReason] = []

        public init(
            host: String = "127.0.0.1", port: Int = 0, tls: TLSConfiguration, tokenVerifier: ProviderTokenVerifier? = nil,
            maximumConcurrentStreams: UInt32 = 1000, environment: Environment = .production, allowedTopics: [String] = [],
            loops: Int = availableCores, failurePlan: H2FailurePlan = H2FailurePlan(), recordAccepted: Bool = false,
            recordRequests: Bool = false, channelManagementPort: Int? = nil,
            channelLimit: Int = MockChannelRegistry.defaultLimit, broadcastsEnabled: Bool = true
        ) {
            server = MockServerSettings(host: host, port: port, tls: tls, loops: loops, recordAccepted: recordAccepted)
            tokenVerifiers = tokenVerifier.map { [$0] } ?? []
            self.maximumConcurrentStreams = maximumConcurrentStreams
            self.environment = environment
            self.allowedTopics = allowedTopics
            self.failurePlan = failurePlan
            self.recordRequests = recordRequests
            self.channelManagementPort = channelManagementPort
            self.channelLimit = channelLimit
            self.broadcastsEnabled = broadcastsEnabled
        }
    }
}
