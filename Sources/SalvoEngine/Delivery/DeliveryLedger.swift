import SalvoWire
import Synchronization

/// The sender's accounting, shared by every connection. Counters are atomics updated in
/// batches (one add per settled batch, not per notification); the rarer rejections and
/// failures go through small locked dictionaries.
final class DeliveryLedger: Sendable {
    let accepted = Atomic<Int>(0)
    let resent = Atomic<Int>(0)
    let reconnects = Atomic<Int>(0)
    let windowOverruns = Atomic<Int>(0)
    let possibleDuplicates = Atomic<Int>(0)
    private let rejectedByStatus = Mutex<[Status: Int]>([:])
    private let failedByReason = Mutex<[FailureReason: Int]>([:])

    func recordRejected(_ status: Status) { rejectedByStatus.withLock { $0[status, default: 0] += 1 } }
    func recordFailed(_ reason: FailureReason) { failedByReason.withLock { $0[reason, default: 0] += 1 } }

    /// Everything settled so far.
    var settledCount: Int {
        accepted.load(ordering: .relaxed)
            + rejectedByStatus.withLock { $0.values.reduce(0, +) }
            + failedByReason.withLock { $0.values.reduce(0, +) }
    }

    /// The report, given how many notifications were submitted (the rings count those:
    /// one fewer shared atomic on every send).
    func report(submitted: Int, seconds: Double) -> SenderReport {
        let rejected = rejectedByStatus.withLock { $0 }
        let failed = failedByReason.withLock { $0 }
        let accepted = accepted.load(ordering: .relaxed)
        return SenderReport(
            submitted: submitted,
            accepted: accepted,
            rejected: rejected.values.reduce(0, +),
            failed: failed.values.reduce(0, +),
            resent: resent.load(ordering: .relaxed),
            reconnects: reconnects.load(ordering: .relaxed),
            possibleDuplicates: possibleDuplicates.load(ordering: .relaxed),
            windowOverruns: windowOverruns.load(ordering: .relaxed),
            seconds: seconds,
            rejectedByStatus: Dictionary(uniqueKeysWithValues: rejected.map { ($0.key.name, $0.value) }),
            failedByReason: Dictionary(uniqueKeysWithValues: failed.map { ($0.key.rawValue, $0.value) }))
    }
}

/// What happened to a campaign: every submitted notification is in exactly one of
/// accepted, rejected or failed once the sender has finished.
public struct SenderReport: Sendable, Hashable, Codable {
    public var submitted: Int
    public var accepted: Int
    public var rejected: Int
    public var failed: Int
    /// Frames written again after an error response or a drop (one frame may count several times).
    public var resent: Int
    /// Connections re-established after the first one of each slot.
    public var reconnects: Int
    /// Resent frames whose first copy may have been delivered (at-least-once after a silent drop).
    public var possibleDuplicates: Int
    /// Error responses naming a notification no longer in the window (the error wait was too short).
    public var windowOverruns: Int
    public var seconds: Double
    /// Rejections by status name (`invalid_token`: 12).
    public var rejectedByStatus: [String: Int]
    /// Failures by reason (`gateway_unreachable`: 3).
    public var failedByReason: [String: Int]

    /// Settled notifications per second over the whole run.
    public var ratePerSecond: Double

    /// Whether every submitted notification reached a terminal state.
    public var isComplete: Bool { submitted == accepted + rejected + failed }

    enum CodingKeys: String, CodingKey {
        case submitted, accepted, rejected, failed, resent, reconnects, seconds
        case possibleDuplicates = "possible_duplicates"
        case windowOverruns = "window_overruns"
        case ratePerSecond = "rate_per_s"
        case rejectedByStatus = "rejected_by_status"
        case failedByReason = "failed_by_reason"
    }

    public init(submitted: Int, accepted: Int, rejected: Int, failed: Int, resent: Int, reconnects: Int,
                possibleDuplicates: Int, windowOverruns: Int, seconds: Double,
                rejectedByStatus: [String: Int], failedByReason: [String: Int]) {
        self.submitted = submitted
        self.accepted = accepted
        self.rejected = rejected
        self.failed = failed
        self.resent = resent
        self.reconnects = reconnects
        self.possibleDuplicates = possibleDuplicates
        self.windowOverruns = windowOverruns
        self.seconds = seconds
        self.rejectedByStatus = rejectedByStatus
        self.failedByReason = failedByReason
        ratePerSecond = seconds > 0 ? Double(accepted + rejected + failed) / seconds : 0
    }

}

/// Something a sender reports while it runs.
public enum SenderEvent: Sendable, Hashable {
    /// The gateway rejected a notification. Drop the token from your database when
    /// `status.isTokenProblem`.
    case rejected(token: DeviceToken, status: Status, sequence: UInt64)
    /// Salvo gave up on a notification.
    case failed(token: DeviceToken, reason: FailureReason, sequence: UInt64)
    /// A connection opened (shard, slot); `resumed` when it resumed the slot's previous TLS
    /// session (no certificate work), `kernelTLS` when the kernel encrypts its records
    /// (asked for with `TLSConfiguration.kernelTLS`).
    case connected(shard: Int, connection: Int, resumed: Bool, kernelTLS: Bool)
    /// A connection closed; `reason` says why (error response, drop, ...).
    case disconnected(shard: Int, connection: Int, reason: String)
    /// A connection attempt failed; it will be retried after a backoff unless it gave up.
    case connectionFailed(shard: Int, connection: Int, reason: String)
    /// A connection gave up: the gateway is out of reach.
    case unreachable(reason: String)
}
