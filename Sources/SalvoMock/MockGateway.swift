import CoreMetrics
import Logging
import SalvoIO
import SalvoTelemetry
import SalvoWire

/// An in-process APNs gateway speaking the legacy binary provider protocol, for tests and
/// benchmarks: TLS (optionally requiring client certificates), commands 0, 1 and 2 decoded
/// strictly, error responses `08 status identifier` followed by close_notify and a close,
/// and a `FailurePlan` that rejects, shuts down, drops, stalls or answers late on purpose.
///
/// It runs `Configuration.loops` event-loop threads (see `MockServerSettings`). Each
/// connection reads into its loop's large buffer and decodes in place; counters are
/// published once per read, so the per-notification path is a decode, a few compares and
/// stack increments.
///
/// ```swift
/// let pki = try DevelopmentPKI.Bundle()
/// let gateway = try MockGateway(.init(tls: .server(certificateChain: pki.server.certificate,
///                                                  privateKey: pki.server.privateKey)))
/// defer { gateway.stop() }
/// // connect to 127.0.0.1:gateway.port …
/// print(gateway.statistics().accepted)
/// ```
public final class MockGateway: Sendable {
    /// The configuration the gateway runs with.
    public let configuration: Configuration
    /// The port it listens on (the one picked when `configuration.port` was 0).
    public var port: Int { core.runtime.port }
    /// Notifications accepted so far: one atomic read per loop, cheap enough to poll
    /// (`statistics()` also copies every recorded digest).
    public var accepted: Int { core.counters.reduce(0) { $0 + $1.accepted.load(ordering: .acquiring) } }
    let core: GatewayCore<GatewayState, LoopCounters>
    /// Where `reportMetrics()` reports.
    let feed: MetricsFeed
    /// Where listening, handshakes and stopping are logged.
    let logger: Logger

    /// Starts listening and the loop threads.
    ///
    /// - Parameters:
    ///   - configuration: where it listens and how it misbehaves.
    ///   - logger: where listening, each client's handshake (failures at info) and stopping go;
    ///     by default, nowhere.
    ///   - metricsFactory: where `reportMetrics()` reports; nil: the global `MetricsSystem.factory`.
    ///
    /// - Throws: `FailurePlanError` for an invalid plan, `TLSError` for unusable
    ///   certificates or keys, `ConnectError`/`IOError` when the address cannot be bound.
    public init(_ configuration: Configuration, logger: Logger = .disabled,
                metricsFactory: (any MetricsFactory)? = nil) throws {
        try configuration.failurePlan.validate()
        guard (1...Int(UInt16.max)).contains(configuration.maximumPayloadLength) else {
            throw FailurePlanError.invalid("maximumPayloadLength must be 1...65535")
        }
        self.configuration = configuration
        self.logger = logger
        feed = MetricsFeed(factory: metricsFactory ?? MetricsSystem.factory)
        let maximumPayloadLength = configuration.maximumPayloadLength
        // Room for at least one whole frame per read keeps the decoder's carry path rare.
        let bufferSize = max(configuration.readBufferSize, FrameDecoder.largestFrameLength(maximumPayloadLength))
        core = try GatewayCore(
            name: "mock-gw", settings: configuration.server, bufferSize: bufferSize, receiveBuffer: configuration.receiveBuffer,
            state: GatewayState(plan: configuration.failurePlan, recordAccepted: configuration.recordAccepted),
            logger: logger, counters: LoopCounters.init
        ) { stream, ordinal, loop, counters, state in
            BinaryMockConnection(stream: stream, ordinal: ordinal, loop: loop, counters: counters, state: state,
                              maximumPayloadLength: maximumPayloadLength)
        }
    }

    /// A consistent-enough snapshot: each counter is read atomically; counters are published
    /// once per read, and always before the gateway answers or closes a connection.
    public func statistics() -> MockStatistics { statistics(digests: true) }

    /// The snapshot; without `digests`, the recorded digests are left out (cheap enough
    /// for a metrics flush every second).
    func statistics(digests: Bool) -> MockStatistics {
        var snapshot = core.state.events.withLock { $0 }
        for loop in core.counters {
            snapshot.accepted += loop.accepted.load(ordering: .acquiring)
            snapshot.framesByCommand.simple += loop.simple.load(ordering: .acquiring)
            snapshot.framesByCommand.enhanced += loop.enhanced.load(ordering: .acquiring)
            snapshot.framesByCommand.frame += loop.frame.load(ordering: .acquiring)
            snapshot.bytesReceived += loop.bytesReceived.load(ordering: .acquiring)
        }
        core.complete(&snapshot, record: core.state.accepted, digests: digests)
        return snapshot
    }

    /// Closes the listener and every connection and joins the loop threads. Idempotent;
    /// call it from any thread but the gateway's own loops.
    public func stop() { core.runtime.stop() }

    deinit { stop() }
}

extension MockGateway {
    /// How the gateway listens and behaves. `host`, `port`, `tls`, `loops` and `recordAccepted`
    /// are its `server` settings; set `tls.requireClientCertificate` (with `trustRoots` and
    /// `verifyPeer`) to refuse clients without a certificate, as Apple's gateway does.
    public struct Configuration: MockServerConfiguration, Sendable {
        /// Where and how the gateway listens, and whether it records what it accepted.
        public var server: MockServerSettings
        /// What fails on purpose; default: nothing.
        public var failurePlan: FailurePlan
        /// The largest payload accepted; longer ones get status 7. Default 2048.
        public var maximumPayloadLength: Int
        /// Bytes per read (one buffer per loop). Default 64 KiB.
        public var readBufferSize: Int
        /// The kernel receive buffer of each connection (nil: the kernel's autotuning, up
        /// to several MiB). Everything in it after a rejected notification is discarded
        /// and must be resent, so it shapes the cost of every error; the default, 256 KiB,
        /// keeps that cost near what a gateway that reads promptly would impose.
        public var receiveBuffer: Int?

        public init(
            host: String = "127.0.0.1", port: Int = 0, tls: TLSConfiguration, loops: Int = availableCores,
            failurePlan: FailurePlan = .none, recordAccepted: Bool = false, maximumPayloadLength: Int = 2048,
            readBufferSize: Int = 65536, receiveBuffer: Int? = 256 << 10
        ) {
            server = MockServerSettings(host: host, port: port, tls: tls, loops: loops, recordAccepted: recordAccepted)
            self.failurePlan = failurePlan
            self.maximumPayloadLength = maximumPayloadLength
            self.readBufferSize = readBufferSize
            self.receiveBuffer = receiveBuffer
        }
    }
}
