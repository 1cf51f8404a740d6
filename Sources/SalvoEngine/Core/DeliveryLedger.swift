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
    static let longestErrorWait: Duration = .seconds(60)

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
            let wanted = min(Self.longestErrorWait.nanosecondsClamped, latency.map { 2 * $0 } ?? 2 * retention)
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
