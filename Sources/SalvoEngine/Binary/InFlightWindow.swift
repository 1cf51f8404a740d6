import DequeModule
import SalvoWire

/// When the window may release notifications, and how long it waits for errors.
struct SettlePolicy {
    /// How long after a notification was written (and acknowledged) an error can still name it.
    var errorWait: UInt64
    /// How long records are kept for errors later than that, unless releasing is urgent.
    var retention: UInt64
    /// Whether notifications of a source may be released as soon as their error wait has
    /// passed, whatever follows them: producers wait for room.
    var isUrgent: (SourceID) -> Bool
}

/// The binary protocol's settling of a connection's window, on the runs of a
/// `RunLog`: a notification is presumed accepted once its error wait has passed, an error
/// response rejects the one it names and rewinds everything after it, a drain proves the
/// rest. Loop thread only; pure (time is passed in), so it is tested without sockets.
///
/// Lane indices, in order:
///
/// ```
///   oldest ≤ presumed ≤ written ≤ end
///   [oldest, presumed):  written on this connection, past their error wait and acknowledged
///                        by the gateway's TCP: presumed accepted, kept for late errors
///                        until `retention` passes (or releasing is urgent, or the gateway
///                        answered the connection's close_notify: `drained`), then released
///   [presumed, written): on the wire, within their error wait
///   [written, end):      rewound: to be read from their source and written again
/// ```
///
/// Runs may leave holes (a run failed in the middle); indices in a hole belong to no one.
/// A notification counts as accepted only when its run is released; an error response
/// naming one that is still in the window, however late, rejects it and rewinds
/// everything after it, none of it counted.
final class InFlightWindow: ConnectionWindow {
    // The fields every written notification touches skip exclusivity checks, which cost the
    // hot path (see the Performance notes article): loop thread only, and no method re-enters
    // the window while an access is open.
    @exclusivity(unchecked) private(set) var log = RunLog()
    private var runs: Deque<Run> {
        _read { yield log.runs }
        _modify { yield &log.runs }
    }
    /// The next index to write on this connection.
    @exclusivity(unchecked) private(set) var written: UInt64 = 0
    /// The index just past the newest run (the next new notification's index).
    @exclusivity(unchecked) private(set) var end: UInt64 = 0
    /// The index up to which notifications are presumed accepted.
    private(set) var presumed: UInt64 = 0
    /// The first index written on the current connection.
    private var connectionFirst: UInt64 = 0
    /// Bytes written on the current connection.
    @exclusivity(unchecked) private(set) var streamBytes: UInt64 = 0
    /// Notifications released as accepted from the current connection: bounds what a late
    /// error can show to have been discarded.
    private var acceptedOnConnection = 0
    /// The most notifications on the wire within their error wait. Unlimited until a
    /// silent drop; then halved per drop and grown by what is presumed accepted (additive
    /// increase, multiplicative decrease, as TCP does), so that a gateway that drops
    /// connections every N notifications still sees progress instead of the same
    /// notifications resent until their retry budget is spent.
    private(set) var inFlightLimit: Int = .max
    static let smallestInFlightLimit = 16
    /// The most runs; a full window stops taking new notifications (backpressure).
    let capacity: Int
    /// A run stops growing after this long, so its notifications share a write time.
    let maximumRunSpan: UInt64

    init(capacity: Int = 1 << 20, maximumRunSpan: UInt64 = 5_000_000) {
        self.capacity = capacity
        self.maximumRunSpan = maximumRunSpan
    }

    /// The oldest index not final, or not (re)written yet when that comes first (after a
    /// run failed at the rebuild cursor, `written` may point into a hole).
    var oldest: UInt64 { min(runs.first?.first ?? written, written) }

    /// Whether anything is not final.
    var isEmpty: Bool { runs.isEmpty }

    /// Whether notifications must be read again and written before new ones.
    var needsRebuild: Bool { written < end }

    /// Whether everything in the window is presumed accepted: nothing on the wire within
    /// its error wait, nothing rewound to be written again.
    var isAllPresumed: Bool { presumed == end }

    /// Whether the window takes no new notifications.
    var isFull: Bool { runs.count >= capacity || end - oldest >= 1 << 31 }

    /// Whether releasing should not wait for the retention: the window is filling up.
    var isUnderPressure: Bool { runs.count >= capacity / 4 * 3 }

    /// The sequence of the oldest notification not final.
    var oldestSequence: UInt64? { runs.first?.position.sequence }

    /// Notifications in the window.
    var count: Int { log.notificationCount }

    /// How many more notifications the in-flight limit lets the connection write now.
    var writeBudget: Int {
        inFlightLimit == .max ? .max : max(0, inFlightLimit - inFlight(from: presumed, before: written))
    }

    // MARK: Writing

    /// A connection opened: what it writes starts at `written` (rewound notifications first).
    func connectionOpened() {
        connectionFirst = written
        presumed = written
        streamBytes = 0
        acceptedOnConnection = 0
    }

    /// A new notification's frame (lane index `index`, from the staging ring) was written at `now`.
    @inline(__always)
    func recordNew(index: UInt64, origin: Origin, length: Int, now: UInt64) {
        streamBytes &+= UInt64(length)
        log.append(index: index, origin: origin, now: now, maximumSpan: maximumRunSpan, streamEnd: streamBytes)
        written = index + 1
        end = index + 1
    }

    /// Staged notifications that will never be written (they failed before): the next new
    /// one has index `index`.
    func skipNew(to index: UInt64) {
        precondition(written == end && index >= end)
        written = index
        end = index
    }

    /// The first rewound run holding `index` or after it, and how many of its
    /// notifications come before `index`; nil when none.
    func rebuildRun(atOrAfter index: UInt64) -> (run: Run, done: Int)? {
        guard index < end, let at = runIndex(atOrAfter: index) else { return nil }
        let run = runs[at]
        return (run, index > run.first ? Int(index - run.first) : 0)
    }

    /// Nothing rewound is left to write (what remained were holes).
    func finishRebuild() {
        if runIndex(atOrAfter: written) == nil { written = end }
    }

    /// A rewound notification (index `written`, or after a hole) was written again at `now`.
    func recordRebuilt(index: UInt64, length: Int, now: UInt64) {
        streamBytes &+= UInt64(length)
        if let at = runIndex(containing: index) {
            runs[at].writtenAt = now
            runs[at].waitFrom = now
            runs[at].streamEnd = streamBytes
        }
        written = index + 1
    }

    /// Restarts the error wait of written notifications whose bytes the gateway's TCP has
    /// not acknowledged: the gateway cannot have judged them yet. Without this, a gateway
    /// that reads slowly would see notifications presumed accepted before it read them.
    func holdUnacknowledged(_ unacknowledgedBytes: Int, now: UInt64) {
        let acknowledged = streamBytes &- UInt64(max(0, unacknowledgedBytes))
        // The newest run with something written on this connection, then older ones: their
        // stream ends only decrease.
        var at = runIndex(atOrAfter: written) ?? runs.count
        if at == runs.count || runs[at].first >= written { at -= 1 }
        while at >= 0, runs[at].end > presumed, runs[at].streamEnd > acknowledged {
            runs[at].waitFrom = max(runs[at].waitFrom, now)
            at -= 1
        }
    }

    // MARK: Settling

    /// Presumes accepted what is past its error wait, and releases what may be released.
    func settle(now: UInt64, policy: SettlePolicy) -> Settlement {
        var at = runIndex(atOrAfter: presumed) ?? runs.count
        while at < runs.count, runs[at].first < written, runs[at].waitFrom &+ policy.errorWait <= now {
            // A run rewritten only in part (the in-flight limit stopped it): its written head.
            if runs[at].end > written { splitRun(at: written) }
            if inFlightLimit != .max { inFlightLimit += runs[at].count }
            presumed = runs[at].end
            at += 1
        }
        var settlement = Settlement()
        let urgent = isUnderPressure
        while let front = runs.first, front.end <= presumed,
              urgent || policy.isUrgent(front.source) || front.waitFrom &+ policy.retention <= now {
            runs.removeFirst()
            settlement.accepted += front.count
            settlement.noteFinal(front.sourceRun, count: front.count)
            acceptedOnConnection += front.count
        }
        return settlement
    }

    /// When `settle` next has something to do: the next error wait or retention to pass.
    func nextSettleTime(policy: SettlePolicy) -> UInt64? {
        var next: UInt64?
        if let at = runIndex(atOrAfter: presumed), runs[at].first < written {
            next = runs[at].waitFrom &+ policy.errorWait
        }
        if let front = runs.first, front.end <= presumed {
            let release = isUnderPressure || policy.isUrgent(front.source)
                ? front.waitFrom &+ policy.errorWait : front.waitFrom &+ policy.retention
            next = min(next ?? .max, release)
        }
        return next
    }

    /// Applies the gateway's `08 status identifier`. Notifications before the named one are
    /// accepted; the named one is rejected (status 10, shutdown: accepted, it was the last
    /// success); everything written after it on this connection was discarded and is
    /// rewound. Returns nil when the identifier names nothing written on this connection:
    /// the gateway is confused, and the caller handles the connection as dropped.
    func applyErrorResponse(_ response: ErrorResponse, now: UInt64, errorWait: UInt64)
        -> (Settlement, ErrorResponseEvidence)?
    {
        let oldest = self.oldest
        let isShutdown = response.status == .shutdown
        // Identifiers wrap at 32 bits; so does the distance from the oldest unreleased.
        let distance = UInt64(response.identifier &- StagingRing.identifier(ofIndex: oldest))
        var settlement = Settlement()
        var evidence = ErrorResponseEvidence()
        if distance < written - oldest {
            let named = oldest + distance
            guard let at = runIndex(containing: named) else { return nil }
            let run = runs[at]
            evidence.latency = now &- run.writtenAt
            evidence.isLate = run.waitFrom &+ errorWait < now
            releaseAccepted(before: named, into: &settlement)
            // The named notification is now at the front of the window.
            var front = runs[0]
            if isShutdown {
                settlement.accepted += 1
                acceptedOnConnection += 1
            } else {
                settlement.refused.append(.init(run: front.sourceRun, item: front.skip, rejection: .binary(response.status)))
            }
            settlement.noteFinal(front.sourceRun, count: 1)
            front.first += 1
            front.count -= 1
            front.skip += 1
            if front.count == 0 { runs.removeFirst() } else { runs[0] = front }
        } else {
            // Not in the window. Released earlier on this connection (a late error beyond
            // every record), or the last success just before the window (a shutdown)?
            let back = UInt64(StagingRing.identifier(ofIndex: oldest) &- response.identifier)
            guard back >= 1, back <= oldest - connectionFirst || (isShutdown && back == 1) else { return nil }
            let discarded = Int(back) - (isShutdown ? 1 : 0)
            if discarded > 0 {
                evidence.isBeyondWindow = true
                evidence.acceptedToUnknown = min(discarded, acceptedOnConnection)
            }
        }
        // Everything still written on this connection came after the named one: discarded.
        settlement.resent = inFlight(before: written)
        rewind()
        return (settlement, evidence)
    }

    /// The connection closed without an error response: what was presumed accepted is
    /// released as such; the fate of what was within its error wait is unknown. At most
    /// once, it fails as `deliveryUnknown`; at least once, it is rewound to be written
    /// again (possible duplicates), and what was in flight on more than `retryBudget`
    /// dropped connections fails as `retryBudgetExhausted`.
    func connectionLost(_ policy: DropHandling) -> Settlement {
        var settlement = Settlement()
        inFlightLimit = max(Self.smallestInFlightLimit, min(inFlightLimit, inFlight(from: presumed, before: written)) / 2)
        releaseAccepted(before: presumed, into: &settlement)
        splitRun(at: written)
        var at = 0
        while at < runs.count, runs[at].first < written {
            var run = runs[at]
            run.drops &+= 1
            if let reason = policy.verdict(drops: Int(run.drops)) {
                runs.remove(at: at)
                settlement.failures.append((run.sourceRun, reason))
                settlement.noteFinal(run.sourceRun, count: run.count)
            } else {
                runs[at] = run
                settlement.resent += run.count
                at += 1
            }
        }
        settlement.possibleDuplicates = settlement.resent
        rewind()
        return settlement
    }

    /// The gateway closed the connection after reading everything written on it (the
    /// sender's close_notify, which followed the last frame, included) and answered no
    /// error: everything written on it is accepted, whatever its error wait.
    func drained() -> Settlement {
        var settlement = Settlement()
        releaseAccepted(before: written, into: &settlement)
        presumed = written
        return settlement
    }

    /// Fails everything in the window with `reason`: the gateway is out of reach, or the
    /// sender is cancelling.
    func failAll(reason: FailureReason) -> Settlement {
        var settlement = Settlement()
        while let run = runs.popFirst() {
            settlement.failures.append((run.sourceRun, reason))
            settlement.noteFinal(run.sourceRun, count: run.count)
        }
        written = end
        presumed = end
        return settlement
    }

    /// Fails the rest of the run that holds `index`, from `index` on: its source could
    /// not be read again there.
    func failRun(from index: UInt64, reason: FailureReason) -> Settlement {
        var settlement = Settlement()
        splitRun(at: index)
        guard let at = runIndex(containing: index) else { return settlement }
        let run = runs.remove(at: at)
        settlement.failures.append((run.sourceRun, reason))
        settlement.noteFinal(run.sourceRun, count: run.count)
        return settlement
    }

    // MARK: Internals

    /// Releases as accepted every notification before index `limit`, splitting a run there.
    private func releaseAccepted(before limit: UInt64, into settlement: inout Settlement) {
        splitRun(at: limit)
        while let front = runs.first, front.end <= limit {
            runs.removeFirst()
            settlement.accepted += front.count
            settlement.noteFinal(front.sourceRun, count: front.count)
            acceptedOnConnection += front.count
        }
    }

    /// Notifications in runs within `lower..<upper`.
    private func inFlight(from lower: UInt64 = 0, before upper: UInt64) -> Int {
        var total = 0
        var at = runIndex(atOrAfter: lower) ?? runs.count
        while at < runs.count, runs[at].first < upper {
            total += Int(min(runs[at].end, upper) - max(runs[at].first, lower))
            at += 1
        }
        return total
    }

    /// The next connection starts with the oldest unreleased notification.
    private func rewind() {
        written = oldest
        presumed = written
    }

    private func splitRun(at index: UInt64) { log.split(at: index) }
    private func runIndex(containing index: UInt64) -> Int? { log.runIndex(containing: index) }
    private func runIndex(atOrAfter index: UInt64) -> Int? { log.runIndex(atOrAfter: index) }
}

/// What an error response shows about the error wait, beside what it settles: how long
/// after its notification was written it came (and whether later than the wait), or that it
/// named a notification older than every record kept, so that what it covers was released
/// as accepted too early. The binary transport applies it (`BinaryTransport`).
struct ErrorResponseEvidence: Equatable {
    /// Write-to-arrival time, when the named notification's run was known (ns).
    var latency: UInt64?
    /// It arrived after its notification's error wait had passed.
    var isLate = false
    /// It named a notification older than every record.
    var isBeyondWindow = false
    /// Notifications released as accepted earlier that it showed the gateway discarded:
    /// they fail as `deliveryUnknown` now.
    var acceptedToUnknown = 0
}
