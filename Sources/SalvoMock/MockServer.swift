import Logging
import SalvoIO
import Synchronization

/// Where and how a mock gateway listens, and whether it records what it accepted: what
/// `MockGateway` and `H2MockGateway` are configured with alike, and start up with alike
/// (on `ServerRuntime`).
public struct MockServerSettings: Sendable {
    /// The address to listen on.
    public var host: String
    /// The port; 0 picks a free one (read it back from the gateway's `port`).
    public var port: Int
    /// The server's TLS setup. Set `requireClientCertificate` (with `trustRoots` and
    /// `verifyPeer`) to refuse clients without a certificate, as Apple's gateways do with
    /// certificate authentication.
    public var tls: TLSConfiguration
    /// Event-loop threads (at least one is run); default: the number of cores. One listener
    /// is accepted on the first, and connections are handed round-robin to all of them.
    public var loops: Int
    /// Keep the digest of every accepted notification or request (`MockStatistics.digest`
    /// of its token and payload) to compare with what a sender believes was accepted, and
    /// count duplicates. A hash per notification and a lock per read; off for throughput runs.
    public var recordAccepted: Bool

    public init(host: String = "127.0.0.1", port: Int = 0, tls: TLSConfiguration, loops: Int = availableCores,
                recordAccepted: Bool = false) {
        self.host = host
        self.port = port
        self.tls = tls
        self.loops = loops
        self.recordAccepted = recordAccepted
    }
}

/// A mock gateway's configuration: its `MockServerSettings`, whose fields read and write
/// as the configuration's own (`configuration.port`, `configuration.tls`, …).
@dynamicMemberLookup
public protocol MockServerConfiguration {
    /// Where and how the gateway listens.
    var server: MockServerSettings { get set }
}

extension MockServerConfiguration {
    /// `server`'s fields, as if they were the configuration's.
    public subscript<Value>(dynamicMember field: WritableKeyPath<MockServerSettings, Value>) -> Value {
        get { server[keyPath: field] }
        set { server[keyPath: field] = newValue }
    }
}

/// What a mock gateway is made of, whichever protocol it speaks: its `ServerRuntime`, the
/// state its loops share, and one set of counters per loop (written by that loop only, so
/// the per-request path needs no lock). The gateways differ in their state, counters and
/// connections, and in how they sum the counters into statistics.
final class GatewayCore<State: Sendable, Counters: Sendable>: Sendable {
    /// Makes the connection for an accepted client's TLS stream on the loop that owns it,
    /// given the connection's ordinal (accept order) and that loop's counters.
    typealias Connect = @Sendable (TLSStream, Int, ServerRuntime.Loop, Counters, State) -> ServerConnection?

    let state: State
    /// One per loop, in the runtime's loop order.
    let counters: [Counters]
    let runtime: ServerRuntime
    let recordAccepted: Bool

    /// Starts listening and the loop threads.
    init(name: String, settings: MockServerSettings, bufferSize: Int, receiveBuffer: Int? = nil, state: State,
         logger: Logger, counters makeCounters: () -> Counters, connect: @escaping Connect) throws {
        let counters = (0..<max(1, settings.loops)).map { _ in makeCounters() }
        self.state = state
        self.counters = counters
        recordAccepted = settings.recordAccepted
        runtime = try ServerRuntime(name: name, settings: settings, bufferSize: bufferSize, receiveBuffer: receiveBuffer,
                                    logger: logger) {
            stream, ordinal, loop in
            // The runtime hands connection n to loop n % loops, the one these counters are for.
            connect(stream, ordinal, loop, counters[ordinal % counters.count], state)
        }
    }
}

/// The counts every gateway's statistics carry alike.
protocol GatewayStatistics {
    var connections: Int { get set }
    var handshakeFailures: Int { get set }
    var duplicates: Int { get set }
    var acceptedDigests: [UInt64]? { get set }
}

extension MockStatistics: GatewayStatistics, AcceptedCounts {}
extension H2Statistics: GatewayStatistics, AcceptedCounts {}

/// What either mock gateway accepted and rejected: what a test or the demo compares with
/// a sender's report.
public protocol AcceptedCounts {
    /// Notifications accepted (a resent one counts again).
    var accepted: Int { get }
    /// Notifications rejected.
    var rejected: Int { get }
    /// With `recordAccepted`: the digest of each accepted notification, sorted.
    var acceptedDigests: [UInt64]? { get }
}

extension AcceptedCounts {
    /// `acceptedDigests` as a set (empty without `recordAccepted`).
    public var acceptedDigestSet: Set<UInt64> { Set(acceptedDigests ?? []) }
}

extension GatewayCore {
    /// Fills in what every gateway counts alike: connections and failed handshakes, and,
    /// with `recordAccepted` and `digests`, what `record` holds.
    func complete(_ snapshot: inout some GatewayStatistics, record: AcceptedRecord, digests: Bool = true) {
        snapshot.connections = runtime.counts.accepted.load(ordering: .acquiring)
        snapshot.handshakeFailures = runtime.counts.handshakeFailures.load(ordering: .acquiring)
        if recordAccepted && digests {
            (snapshot.acceptedDigests, snapshot.duplicates) = record.snapshot()
        }
    }
}
