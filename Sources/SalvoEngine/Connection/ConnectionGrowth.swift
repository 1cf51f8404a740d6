import Synchronization

/// How many of the sender's connections producers publish to: the configured number at
/// first, one more each time every one of them is full, up to a ceiling.
///
/// A full staging ring everywhere means that nothing downstream takes more: the gateway,
/// the path, or a connection the gateway closed after an error response and whose
/// replacement restarts TCP's slow start (over 50 ms that is about eight round trips per
/// error). Another connection carries on meanwhile, so connections are added while that
/// lasts, at most one per `interval` so that the last one has had time to show its effect.
/// They are never removed: a connection nobody publishes to costs nothing, and one in use
/// until the end loses nothing. Any thread.
final class ConnectionGrowth: Sendable {
    /// The most connections there may be.
    let ceiling: Int
    private let interval: UInt64
    private let active: Atomic<Int>
    private let lastGrowth: Atomic<UInt64>

    init(initial: Int, ceiling: Int, interval: Duration) {
        self.ceiling = max(initial, ceiling)
        self.interval = interval.nanosecondsClamped
        active = Atomic(initial)
        lastGrowth = Atomic(0)
    }

    /// Connections in use: producers publish to the first this many.
    var count: Int { active.load(ordering: .acquiring) }

    /// Every connection in use was full at `now` (monotonic nanoseconds): adds one when
    /// the ceiling and the interval allow. Returns whether it did.
    func stalled(at now: UInt64) -> Bool {
        let current = active.load(ordering: .relaxed)
        guard current < ceiling else { return false }
        let last = lastGrowth.load(ordering: .relaxed)
        guard last == 0 || now &- last >= interval,
              lastGrowth.compareExchange(expected: last, desired: now, ordering: .relaxed).exchanged
        else { return false }
        return active.compareExchange(expected: current, desired: current + 1, ordering: .releasing).exchanged
    }
}
