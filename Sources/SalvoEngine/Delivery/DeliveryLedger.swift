import Histogram
import SalvoIO
import SalvoWire
import Synchronization

/// The sender's accounting, shared by every connection, and the error wait it adapts.
/// Counters are atomics updated in batches (one add per settlement, not per
/// notification); the rarer rejections, failures and error latencies go through locks.
final class DeliveryLedger: Sendable {
    let accepted = Atomic<Int>(0)
    let resent = Atomic<Int>(0)
    let reconnects = Atomic<Int>(0)
    let resumedReconnects = Atomic<Int>(0)
    let windowOverruns = Atomic<Int>(0)
    let lateErrors = Atomic<Int>(0)
    let possibleDuplicates = Atomic<Int>(0)
    /// Monotonic nanoseconds of the last write to any connection.
    let lastWrite = Atomic<UInt64>(0)
    private let rejectedByReason = Locked<[String: Int]>([:])
    private let failedByReason = Locked<[FailureReason: Int]>([:])

    /// How long after a write an error can still arrive, in nanoseconds: raised for the
    /// rest of the run when an error arrives later than it.
    private let errorWaitNanoseconds: Atomic<UInt64>
    private let configuredRetention: UInt64
    private let latencies = Locked(ErrorLatencies())
    /// Where the histograms report (`SenderInstruments`).
    let instruments: SenderInstruments

    /// Error waits are raised to twice the latency that broke them, up to this.
    static let longestErrorWait: UInt64 = 60_000_000_000

    struct ErrorLatencies {
        /// Microseconds from the write of a named notification to its error response.
        var histogram = Histogram<UInt64>(highestTrackableValue: 3_600_000_000, numberOfSignificantValueDigits: .two)
        var raises: [ErrorWaitRaise] = []
    }

    init(errorWait: Duration, retention: Duration, instruments: SenderInstruments = .none) {
        errorWaitNanoseconds = Atomic(errorWait.nanosecondsClamped)
        configuredRetention = retention.nanosecondsClamped
        self.instruments = instruments
    }

    /// The error wait now.
    var errorWait: UInt64 { errorWaitNanoseconds.load(ordering: .relaxed) }

    /// How long presumed-accepted notifications are kept for late errors: the configured
    /// retention, and at least twice the error wait.
    var retention: UInt64 { max(configuredRetention, 2 * errorWait) }

    func recordRejected(_ rejection: Rejection) { rejectedByReason.withLock { $0[rejection.reasonName, default: 0] += 1 } }

    func recordFailed(_ reason: FailureReason, count: Int = 1) {
        failedByReason.withLock { $0[reason, default: 0] += count }
    }

    /// The lowest sequence of a failed notification (`UInt64.max`: none), so that a
    /// checkpoint stops before it: a resume then sends it again.
    let firstFailedSequence = Atomic<UInt64>(.max)

    /// A notification with this sequence failed, or one after it (where a run of them
    /// could not be read again to name them, the run's reading position stands in). Call
    /// before the failure leaves the staging ring or the window: `completedSequence` reads
    /// it after them.
    func noteFailed(sequence: UInt64) {
        // Not `Atomic.min`: Swift 6.3's compares UInt64 as signed, so it never lowers `.max`.
        var current = firstFailedSequence.load(ordering: .relaxed)
        while sequence < current {
            let (exchanged, found) = firstFailedSequence.compareExchange(
                expected: current, desired: sequence, ordering: .releasing)
            if exchanged { return }
            current = found
        }
    }

    /// Notifications released as accepted that an error response showed were discarded:
    /// moved from accepted to failed as `deliveryUnknown`.
    func reclassifyAcceptedAsUnknown(_ count: Int) {
        failedByReason.withLock { failed in
            accepted.subtract(count, ordering: .relaxed)
            failed[.deliveryUnknown, default: 0] += count
        }
    }

    func noteWrite(at now: UInt64) {
        if now > lastWrite.load(ordering: .relaxed) { lastWrite.store(now, ordering: .relaxed) }
    }

    /// Records how long an error response took; when it came later than the error wait,
    /// raises the wait and returns the change. `latency` nil: the notification it named
    /// was no longer in the window (the error came even later than the records are kept;
    /// counted in `windowOverruns`, not as a late error handled exactly).
    func recordErrorResponse(latency: UInt64?, isLate: Bool) -> ErrorWaitRaise? {
        if let latency { instruments.errorLatency.recordNanoseconds(Int64(clamping: latency)) }
        return latencies.withLock { state -> ErrorWaitRaise? in
            if let latency { _ = state.histogram.record(max(1, latency / 1000)) }
            guard isLate || latency == nil else { return nil }
            if latency != nil { lateErrors.add(1, ordering: .relaxed) }
            let current = errorWait
            let wanted = min(Self.longestErrorWait, latency.map { 2 * $0 } ?? 2 * retention)
            guard wanted > current else { return nil }
            errorWaitNanoseconds.store(wanted, ordering: .relaxed)
            let raise = ErrorWaitRaise(from: .nanoseconds(current), to: .nanoseconds(wanted),
                                       latency: latency.map { .nanoseconds($0) })
            state.raises.append(raise)
            return raise
        }
    }

    /// Everything settled so far.
    var settledCount: Int {
        accepted.load(ordering: .relaxed)
            + rejectedByReason.withLock { $0.values.reduce(0, +) }
            + failedByReason.withLock { $0.values.reduce(0, +) }
    }

    /// The report, given how many notifications were submitted (the lanes count those)
    /// and when the run started.
    func report(submitted: Int, connections: Int, connectionsReason: String, started: UInt64, now: UInt64) -> SenderReport {
        let rejected = rejectedByReason.withLock { $0 }
        let failed = failedByReason.withLock { $0 }
        let (latencySummary, raises) = latencies.withLock { state in
            (state.histogram.totalCount == 0 ? nil : ErrorLatencySummary(state.histogram), state.raises)
        }
        let last = lastWrite.load(ordering: .relaxed)
        return SenderReport(
            submitted: submitted,
            accepted: accepted.load(ordering: .relaxed),
            rejected: rejected.values.reduce(0, +),
            failed: failed.values.reduce(0, +),
            resent: resent.load(ordering: .relaxed),
            reconnects: reconnects.load(ordering: .relaxed),
            resumedReconnects: resumedReconnects.load(ordering: .relaxed),
            connections: connections,
            connectionsReason: connectionsReason,
            possibleDuplicates: possibleDuplicates.load(ordering: .relaxed),
            windowOverruns: windowOverruns.load(ordering: .relaxed),
            lateErrors: lateErrors.load(ordering: .relaxed),
            seconds: Double(now &- started) / 1e9,
            sendingSeconds: last > started ? Double(last - started) / 1e9 : 0,
            errorWait: .nanoseconds(errorWait),
            errorWaitRaises: raises,
            errorLatency: latencySummary,
            rejectedByReason: rejected,
            failedByReason: Dictionary(uniqueKeysWithValues: failed.map { ($0.key.rawValue, $0.value) }))
    }
}

/// The error wait went up because an error response arrived later than it.
public struct ErrorWaitRaise: Sendable, Hashable {
    /// The error wait before.
    public var from: Duration
    /// The error wait after.
    public var to: Duration
    /// How long the late error took; nil when the notification it named was already
    /// released (the error came later than records are kept).
    public var latency: Duration?
}

/// How long error responses took to arrive, from the write of the notification they named.
public struct ErrorLatencySummary: Sendable, Hashable, Codable {
    /// How many error responses were timed.
    public var count: Int
    /// The median latency, in milliseconds.
    public var p50Milliseconds: Double
    /// The 99th percentile, in milliseconds: what an error wait must cover to catch 99 of 100.
    public var p99Milliseconds: Double
    /// The longest, in milliseconds.
    public var maximumMilliseconds: Double

    enum CodingKeys: String, CodingKey {
        case count
        case p50Milliseconds = "p50_ms"
        case p99Milliseconds = "p99_ms"
        case maximumMilliseconds = "max_ms"
    }

    init(_ histogram: Histogram<UInt64>) {
        count = Int(histogram.totalCount)
        p50Milliseconds = Double(histogram.valueAtPercentile(50)) / 1000
        p99Milliseconds = Double(histogram.valueAtPercentile(99)) / 1000
        maximumMilliseconds = Double(histogram.max) / 1000
    }
}

/// What happened to a campaign: every submitted notification is in exactly one of
/// accepted, rejected or failed once the sender has finished.
public struct SenderReport: Sendable, Hashable, Codable {
    /// Notifications taken from sources and one-by-one sends (bad lines not included).
    public var submitted: Int
    /// Taken by the gateway: answered 200 over HTTP/2; over the binary protocol, presumed
    /// accepted (no error named them within the error wait) and their records released.
    public var accepted: Int
    /// Refused by the gateway, with a status or a reason (`rejectedByReason`): the
    /// notification itself is at fault, mostly its token. Sending it again would not help.
    public var rejected: Int
    /// Not delivered, or not known to be, for a reason of the sender's or the path's
    /// (`failedByReason`): an unreachable gateway, retries used up, `delivery_unknown`.
    /// A resume sends them again.
    public var failed: Int
    /// Frames written again after an error response or a drop (one frame may count several times).
    public var resent: Int
    /// Connections re-established after the first one of each slot.
    public var reconnects: Int
    /// Of `reconnects`: those that resumed a TLS session (no certificates, no key exchange).
    /// A gateway that does not resume makes every reconnect a full handshake.
    public var resumedReconnects: Int
    /// Connection slots in use at the end: the configured ones plus those the sender added
    /// while every connection was full (`SenderConfiguration.maximumConnectionsPerShard`),
    /// less those of a step it gave back.
    public var connections: Int
    /// Why `connections` are as many as they are: the configured ones, and what made the
    /// sender add the others (every connection at its stream limit with work waiting,
    /// every staging ring full), stop adding (the ceiling, slower answers, a step that
    /// brought little) or give a step back (it did not raise the rate).
    public var connectionsReason: String
    /// Resent frames whose first copy may have been delivered (at-least-once after a silent drop).
    public var possibleDuplicates: Int
    /// Error responses naming a notification older than every record kept: what they may
    /// cover was released as accepted and is counted as failed (`delivery_unknown`) instead.
    public var windowOverruns: Int
    /// Error responses that arrived after their notification's error wait while its record
    /// was still kept: handled exactly, and each raised the wait if it was longer than it.
    public var lateErrors: Int
    /// From the start to the end of the run, the final error wait included.
    public var seconds: Double
    /// From the start to the last write: the time the gateway was being fed.
    public var sendingSeconds: Double
    /// The error wait at the end of the run (raised when errors came late).
    public var errorWait: Duration
    /// Each raise of the error wait, in order.
    public var errorWaitRaises: [ErrorWaitRaise]
    /// Error-response latencies; nil when no error response arrived.
    public var errorLatency: ErrorLatencySummary?
    /// Rejections by reason: the binary status's name (`invalid_token`: 12), or Apple's
    /// reason over HTTP/2 (`Unregistered`: 3). See `Rejection.reasonName`.
    public var rejectedByReason: [String: Int]
    /// Failures by reason (`gateway_unreachable`: 3).
    public var failedByReason: [String: Int]
    /// What made notifications fail for the gateway's sake, if anything did: why the
    /// connections gave up (what the gateway did: refused every connection, broke the
    /// protocol, answered nothing in time; or that it refused the credentials), or why the
    /// last connection was lost when notifications failed after their connections' drops.
    public var failureCause: String?

    /// Final notifications per second over the whole run.
    public var ratePerSecond: Double { seconds > 0 ? Double(accepted + rejected + failed) / seconds : 0 }

    /// Submitted notifications per second while sending (the final error wait left out).
    public var sendRatePerSecond: Double { sendingSeconds > 0 ? Double(submitted) / sendingSeconds : 0 }

    /// Whether every submitted notification reached a terminal state.
    public var isComplete: Bool { submitted == accepted + rejected + failed }

    enum CodingKeys: String, CodingKey {
        case submitted, accepted, rejected, failed, resent, reconnects, connections, seconds
        case resumedReconnects = "resumed_reconnects"
        case connectionsReason = "connections_reason"
        case possibleDuplicates = "possible_duplicates"
        case windowOverruns = "window_overruns"
        case lateErrors = "late_errors"
        case sendingSeconds = "sending_seconds"
        case errorWaitMilliseconds = "error_wait_ms"
        case errorWaitRaises = "error_wait_raises"
        case errorLatency = "error_latency"
        case ratePerSecond = "rate_per_s"
        case sendRatePerSecond = "send_rate_per_s"
        case rejectedByReason = "rejected_by_reason"
        /// What reports written before HTTP/2 called `rejected_by_reason` (status names only).
        case rejectedByStatus = "rejected_by_status"
        case failedByReason = "failed_by_reason"
        case failureCause = "failure_cause"
    }

    /// A report with these counts; what is not given is zero (or its neutral value).
    public init(submitted: Int, accepted: Int, rejected: Int, failed: Int, resent: Int = 0, reconnects: Int = 0,
                resumedReconnects: Int = 0, connections: Int = 1, connectionsReason: String = "", possibleDuplicates: Int = 0, windowOverruns: Int = 0,
                lateErrors: Int = 0, seconds: Double,
                sendingSeconds: Double = 0, errorWait: Duration = .seconds(1), errorWaitRaises: [ErrorWaitRaise] = [],
                errorLatency: ErrorLatencySummary? = nil,
                rejectedByReason: [String: Int] = [:], failedByReason: [String: Int] = [:]) {
        self.submitted = submitted
        self.accepted = accepted
        self.rejected = rejected
        self.failed = failed
        self.resent = resent
        self.reconnects = reconnects
        self.resumedReconnects = resumedReconnects
        self.connections = connections
        self.connectionsReason = connectionsReason
        self.possibleDuplicates = possibleDuplicates
        self.windowOverruns = windowOverruns
        self.lateErrors = lateErrors
        self.seconds = seconds
        self.sendingSeconds = sendingSeconds
        self.errorWait = errorWait
        self.errorWaitRaises = errorWaitRaises
        self.errorLatency = errorLatency
        self.rejectedByReason = rejectedByReason
        self.failedByReason = failedByReason
    }

    /// Reads the report JSON that `encode(to:)` writes (`--report`), and those of older
    /// Salvos: fields they lacked take their defaults, `rejected_by_status` stands for
    /// `rejected_by_reason`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        submitted = try container.decode(Int.self, forKey: .submitted)
        accepted = try container.decode(Int.self, forKey: .accepted)
        rejected = try container.decode(Int.self, forKey: .rejected)
        failed = try container.decode(Int.self, forKey: .failed)
        resent = try container.decodeIfPresent(Int.self, forKey: .resent) ?? 0
        reconnects = try container.decodeIfPresent(Int.self, forKey: .reconnects) ?? 0
        resumedReconnects = try container.decodeIfPresent(Int.self, forKey: .resumedReconnects) ?? 0
        connections = try container.decodeIfPresent(Int.self, forKey: .connections) ?? 1
        connectionsReason = try container.decodeIfPresent(String.self, forKey: .connectionsReason) ?? ""
        possibleDuplicates = try container.decodeIfPresent(Int.self, forKey: .possibleDuplicates) ?? 0
        windowOverruns = try container.decodeIfPresent(Int.self, forKey: .windowOverruns) ?? 0
        lateErrors = try container.decodeIfPresent(Int.self, forKey: .lateErrors) ?? 0
        seconds = try container.decode(Double.self, forKey: .seconds)
        sendingSeconds = try container.decodeIfPresent(Double.self, forKey: .sendingSeconds) ?? 0
        errorWait = .milliseconds(try container.decodeIfPresent(Double.self, forKey: .errorWaitMilliseconds) ?? 1000)
        errorWaitRaises = try container.decodeIfPresent([ErrorWaitRaise].self, forKey: .errorWaitRaises) ?? []
        errorLatency = try container.decodeIfPresent(ErrorLatencySummary.self, forKey: .errorLatency)
        rejectedByReason = try container.decodeIfPresent([String: Int].self, forKey: .rejectedByReason)
            ?? container.decodeIfPresent([String: Int].self, forKey: .rejectedByStatus) ?? [:]
        failedByReason = try container.decodeIfPresent([String: Int].self, forKey: .failedByReason) ?? [:]
        failureCause = try container.decodeIfPresent(String.self, forKey: .failureCause)
    }

    /// Writes the report JSON of `--report`: snake_case keys, durations in milliseconds,
    /// and the two rates.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(submitted, forKey: .submitted)
        try container.encode(accepted, forKey: .accepted)
        try container.encode(rejected, forKey: .rejected)
        try container.encode(failed, forKey: .failed)
        try container.encode(resent, forKey: .resent)
        try container.encode(reconnects, forKey: .reconnects)
        try container.encode(resumedReconnects, forKey: .resumedReconnects)
        try container.encode(connections, forKey: .connections)
        try container.encode(connectionsReason, forKey: .connectionsReason)
        try container.encode(possibleDuplicates, forKey: .possibleDuplicates)
        try container.encode(windowOverruns, forKey: .windowOverruns)
        try container.encode(lateErrors, forKey: .lateErrors)
        try container.encode(seconds, forKey: .seconds)
        try container.encode(sendingSeconds, forKey: .sendingSeconds)
        try container.encode(errorWait.secondsDouble * 1000, forKey: .errorWaitMilliseconds)
        try container.encode(errorWaitRaises, forKey: .errorWaitRaises)
        try container.encodeIfPresent(errorLatency, forKey: .errorLatency)
        try container.encodeIfPresent(failureCause, forKey: .failureCause)
        try container.encode(ratePerSecond, forKey: .ratePerSecond)
        try container.encode(sendRatePerSecond, forKey: .sendRatePerSecond)
        try container.encode(rejectedByReason, forKey: .rejectedByReason)
        try container.encode(failedByReason, forKey: .failedByReason)
    }
}

extension ErrorWaitRaise: Codable {
    enum CodingKeys: String, CodingKey {
        case from = "from_ms"
        case to = "to_ms"
        case latency = "latency_ms"
    }

    /// Reads `from_ms`, `to_ms` and `latency_ms`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        from = .milliseconds(try container.decode(Double.self, forKey: .from))
        to = .milliseconds(try container.decode(Double.self, forKey: .to))
        latency = try container.decodeIfPresent(Double.self, forKey: .latency).map { .milliseconds($0) }
    }

    /// Writes `from_ms`, `to_ms` and `latency_ms` (when known).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(from.secondsDouble * 1000, forKey: .from)
        try container.encode(to.secondsDouble * 1000, forKey: .to)
        try container.encodeIfPresent(latency.map { $0.secondsDouble * 1000 }, forKey: .latency)
    }
}

/// Something a sender reports while it runs.
public enum SenderEvent: Sendable, Hashable {
    /// The gateway rejected a notification. Drop the token from your database when
    /// `rejection.isTokenProblem`.
    case rejected(token: DeviceToken, rejection: Rejection, sequence: UInt64)
    /// Salvo gave up on a notification.
    case failed(token: DeviceToken, reason: FailureReason, sequence: UInt64)
    /// Notifications Salvo cannot name failed together: a source could not be read again
    /// (`sourceUnreadable`), or an error response named a notification older than every
    /// record kept, so what it covers was released as accepted too early (`deliveryUnknown`;
    /// `firstSequence` is then nil).
    case failedUnnamed(count: Int, reason: FailureReason, firstSequence: UInt64?, detail: String)
    /// An error response arrived later than the error wait; the wait was raised for the
    /// rest of the run. Nothing was lost: the notification was still in the window.
    case errorWaitRaised(ErrorWaitRaise)
    /// A connection opened (shard, slot); `resumed` when it resumed the slot's previous TLS
    /// session (no certificate work), `kernelTLS` when the kernel encrypts its records
    /// (asked for with `TLSConfiguration.kernelTLS`).
    case connected(shard: Int, connection: Int, resumed: Bool, kernelTLS: Bool)
    /// A connection closed; `reason` says why (error response, drop, ...).
    case disconnected(shard: Int, connection: Int, reason: String)
    /// A connection attempt failed; it will be retried after a backoff unless it gave up.
    case connectionFailed(shard: Int, connection: Int, reason: String)
    /// A connection gave up: the gateway is out of reach, or refuses the credentials.
    case unreachable(reason: String)
    /// A connection gave up because the gateway refused the sender's credentials (a 403
    /// other than ExpiredProviderToken): the provider token's key, key id or team, or the
    /// client certificate. Every connection shares them, so the run cannot go on.
    case credentialsRefused(reason: String)
    /// HTTP/2: the gateway's SETTINGS allow this many open streams on a connection (APNs:
    /// one until it has seen a valid provider token, then 1000).
    case streamLimit(shard: Int, connection: Int, limit: Int)
}
