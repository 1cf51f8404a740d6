import Logging
import SalvoIO
import SalvoTelemetry
import SalvoWire
import Synchronization

/// What the mock NOC does wrong on purpose. Counters are NOC-wide over valid `notify`
/// requests (checkToken requests are answered from the token alone), so a plan gives the
/// same outcomes whatever the number of connections.
public struct GNPFailurePlan: Sendable, Hashable {
    /// Tokens ending with this are dead: code 402 to notify and checkToken. Empty: none.
    public var invalidTokenSuffix = "dead"
    /// Every Nth notification gets code 402 as well.
    public var invalidEvery: Int?
    /// Every Nth notification gets HTTP 503 without a code (the sender retries it).
    public var unavailableEvery: Int?
    /// Every Nth notification gets HTTP 200 with code `503 Service Unavailable` (retried too).
    public var busyEvery: Int?
    /// Every Nth notification gets a code nobody knows, `409 Conflict` (the sender fails it).
    public var unknownCodeEvery: Int?
    /// Every Nth notification is read and not answered: its connection closes at once.
    public var dropEvery: Int?
    /// Every answer is held back this long, as a distant NOC answers.
    public var responseDelay: Duration = .zero
    /// Payloads over this many bytes get code 413.
    public var maximumPayloadBytes = GNP.defaultMaximumPayloadBytes

    /// A plan that does nothing wrong (tokens ending in `dead` are still dead).
    public init() {}

    /// Checks the counts are positive.
    public func validate() throws(FailurePlanError) {
        for (name, every) in [("invalidEvery", invalidEvery), ("unavailableEvery", unavailableEvery),
                              ("busyEvery", busyEvery), ("unknownCodeEvery", unknownCodeEvery), ("dropEvery", dropEvery)] {
            if let every, every < 1 { throw .invalid("\(name) must be at least 1, got \(every)") }
        }
        if responseDelay < .zero { throw .invalid("responseDelay must not be negative") }
        if maximumPayloadBytes < 0 { throw .invalid("maximumPayloadBytes must not be negative") }
    }
}

/// What the mock NOC saw and answered: `accepted` counts every code 100 written to a
/// notify (a resent notification counts again, and `duplicates` says how many did).
public struct GNPStatistics: Sendable, Hashable, Codable, AcceptedCounts {
    /// Notify requests answered 100 OK.
    public var accepted = 0
    /// Notify requests answered 402.
    public var rejected = 0
    /// Notify answers of another kind: 503s (both kinds), the unknown code, 413.
    public var otherAnswers = 0
    /// Notify requests read and dropped with their connection.
    public var dropped = 0
    /// checkToken requests answered (100 or 402).
    public var checkedTokens = 0
    /// Requests refused as malformed (answered 4xx or 501, then closed).
    public var badRequests = 0
    /// TCP connections accepted.
    public var connections = 0
    /// Connections whose TLS handshake failed.
    public var handshakeFailures = 0
    /// Accepted notifications whose token and payload had been accepted before.
    public var duplicates = 0
    /// With `recordAccepted`: the digest of each accepted token and payload, sorted.
    public var acceptedDigests: [UInt64]?

    /// The digest `acceptedDigests` holds for a notification: what a test computes from
    /// its own campaign to compare.
    public static func digest(token: String, payload: [UInt8]) -> UInt64 {
        Array(token.utf8).withUnsafeBytes { tokenBytes in
            payload.withUnsafeBytes { MockStatistics.digest(token: tokenBytes, payload: $0) }
        }
    }
}

/// An in-process BlackBerry Dynamics NOC serving the Push Channel back-end API (`notify`,
/// `checkToken`) over HTTP/1.1 keep-alive and TLS, with a `GNPFailurePlan`, for tests, the
/// demo and the benchmark. It runs on the mock gateways' `ServerRuntime` and parses
/// requests with `HTTP1RequestParser`, so it counts exactly what it answered.
///
/// ```swift
/// let pki = try DevelopmentPKI.Bundle()
/// let noc = try GNPMockNOC(.init(server: .init(tls: .server(certificateChain: pki.server.certificate,
///                                                          privateKey: pki.server.privateKey))))
/// defer { noc.stop() }
/// // POST https://127.0.0.1:\(noc.port)/GNP1.0?method=notify …
/// print(noc.statistics().accepted)
/// ```
public final class GNPMockNOC: Sendable {
    /// How it listens and what it does wrong.
    public struct Configuration: Sendable, MockServerConfiguration {
        /// Where and how it listens.
        public var server: MockServerSettings
        /// What it does wrong.
        public var failurePlan: GNPFailurePlan

        /// A NOC listening as `server` says, with `failurePlan`.
        public init(server: MockServerSettings, failurePlan: GNPFailurePlan = GNPFailurePlan()) {
            self.server = server
            self.failurePlan = failurePlan
        }
    }

    /// The configuration it runs with.
    public let configuration: Configuration
    /// The port it listens on.
    public var port: Int { core.runtime.port }
    let core: GatewayCore<GNPState, GNPCounters>

    /// Starts listening and the loop threads.
    ///
    /// - Parameter logger: where the runtime logs connection problems; by default, nowhere.
    /// - Throws: `FailurePlanError`, `TLSError`, `ConnectError`/`IOError`.
    public init(_ configuration: Configuration, logger: Logger = .disabled) throws {
        try configuration.failurePlan.validate()
        self.configuration = configuration
        var settings = configuration.server
        settings.tls.applicationProtocols = ["http/1.1"]
        let state = GNPState(configuration)
        core = try GatewayCore(name: "mock-gnp", settings: settings, bufferSize: 1 << 16, state: state,
                               logger: logger, counters: GNPCounters.init) { stream, _, loop, counters, state in
            GNPConnection(stream: stream, loop: loop, counters: counters, state: state)
        }
    }

    /// The counts so far (each read atomically).
    public func statistics() -> GNPStatistics {
        var snapshot = GNPStatistics()
        for loop in core.counters {
            snapshot.accepted += loop.accepted.load(ordering: .acquiring)
            snapshot.rejected += loop.rejected.load(ordering: .acquiring)
            snapshot.otherAnswers += loop.otherAnswers.load(ordering: .acquiring)
            snapshot.dropped += loop.dropped.load(ordering: .acquiring)
            snapshot.checkedTokens += loop.checkedTokens.load(ordering: .acquiring)
            snapshot.badRequests += loop.badRequests.load(ordering: .acquiring)
        }
        core.complete(&snapshot, record: core.state.accepted)
        return snapshot
    }

    /// Stops listening, closes every connection and joins the loop threads. Idempotent.
    public func stop() { core.runtime.stop() }
}

extension GNPStatistics: GatewayStatistics {}

/// What every connection of one NOC shares.
final class GNPState: Sendable {
    let plan: GNPFailurePlan
    let recordAccepted: Bool
    /// Valid notify requests so far, NOC-wide: what the plan's "every Nth" counts.
    let notifications = Atomic<Int>(0)
    let accepted = AcceptedRecord()

    init(_ configuration: GNPMockNOC.Configuration) {
        plan = configuration.failurePlan
        recordAccepted = configuration.server.recordAccepted
    }

    /// What to do with a well-formed notify for `token` with `payload`.
    func judgeNotify(token: String, payloadLength: Int) -> GNPAnswer {
        let plan = self.plan
        if !plan.invalidTokenSuffix.isEmpty, token.hasSuffix(plan.invalidTokenSuffix) || token.isEmpty {
            return .code(.invalidToken)
        }
        if payloadLength > plan.maximumPayloadBytes { return .code(.messageTooLarge) }
        let n = notifications.wrappingAdd(1, ordering: .relaxed).newValue
        func every(_ k: Int?) -> Bool { k.map { n % $0 == 0 } ?? false }
        if every(plan.dropEvery) { return .drop }
        if every(plan.unavailableEvery) { return .status(503) }
        if every(plan.busyEvery) { return .code(.serviceUnavailable) }
        if every(plan.unknownCodeEvery) { return .code(GNPCode(409, "Conflict")) }
        if every(plan.invalidEvery) { return .code(.invalidToken) }
        return .code(.ok)
    }
}

/// One loop's counters, written by that loop only.
final class GNPCounters: Sendable {
    let accepted = Atomic<Int>(0)
    let rejected = Atomic<Int>(0)
    let otherAnswers = Atomic<Int>(0)
    let dropped = Atomic<Int>(0)
    let checkedTokens = Atomic<Int>(0)
    let badRequests = Atomic<Int>(0)
}

/// The mock's decision on one request.
enum GNPAnswer: Equatable {
    /// HTTP 200 with this code.
    case code(GNPCode)
    /// This HTTP status, no code.
    case status(Int)
    /// No answer: close the connection.
    case drop
}
