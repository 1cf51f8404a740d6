import DequeModule
import SalvoEngine
import SalvoWire
import Synchronization

/// The statuses of the notifications `serve` took, by id: pending until final, then kept
/// for `retention` and at most `capacity` of them, the oldest forgotten first. What
/// `GET /v1/notifications/{id}` answers, and what makes a retried notification (the same
/// `apns_id`) a no-op while it is remembered.
final class StatusStore: Sendable {
    /// Where a notification is, compactly: the store holds up to `capacity` of these.
    enum Settled: Sendable, Hashable {
        case pending
        case accepted
        case rejected(Rejection)
        case failed(FailureReason)
    }

    private struct State {
        var entries: [APNsID: Settled] = [:]
        /// Final entries in the order they became final, with when: what is forgotten first.
        var settledOrder: Deque<(id: APNsID, at: ContinuousClock.Instant)> = []
    }

    let retention: Duration
    let capacity: Int
    private let state = Mutex(State())

    init(retention: Duration, capacity: Int) {
        self.retention = retention
        self.capacity = capacity
    }

    /// Marks each id pending, unless the store knows it already: for those, the status it
    /// has (the request repeats a notification; it is not sent again). Returns one entry
    /// per id: nil for an id now pending.
    func claim(_ ids: [APNsID]) -> [NotificationStatus?] {
        let now = ContinuousClock.now
        return state.withLock { state in
            forgetExpired(&state, now: now)
            return ids.map { id in
                if let known = state.entries[id] { return Self.status(id, known) }
                state.entries[id] = .pending
                return nil
            }
        }
    }

    /// Forgets pending ids that will not be sent after all (the request was refused).
    func release(_ ids: some Sequence<APNsID>) {
        state.withLock { state in
            for id in ids where state.entries[id] == .pending { state.entries[id] = nil }
        }
    }

    /// Records a pending notification's end; one already final keeps its first end.
    /// Returns whether it changed.
    @discardableResult
    func settle(_ id: APNsID, _ settled: Settled) -> Bool {
        let now = ContinuousClock.now
        return state.withLock { state in settle(&state, id, settled, now: now) }
    }

    /// Settles every id of `ids` still pending as `settled` (a batch's accepted remainder).
    func settleRemaining(_ ids: some Sequence<APNsID>, as settled: Settled) {
        let now = ContinuousClock.now
        state.withLock { state in
            for id in ids { settle(&state, id, settled, now: now) }
            forgetExpired(&state, now: now)
        }
    }

    /// The status of `id`, nil when the store does not know it (never taken, or forgotten).
    func status(of id: APNsID) -> NotificationStatus? {
        state.withLock { state in state.entries[id].map { Self.status(id, $0) } }
    }

    /// The statuses of `ids`, pending for one the store no longer holds.
    func statuses(of ids: [APNsID]) -> [NotificationStatus] {
        state.withLock { state in ids.map { Self.status($0, state.entries[$0] ?? .pending) } }
    }

    /// How many notifications the store holds, pending and final.
    var count: Int { state.withLock { $0.entries.count } }

    private func settle(_ state: inout State, _ id: APNsID, _ settled: Settled, now: ContinuousClock.Instant) -> Bool {
        guard state.entries[id] == .pending else { return false }
        state.entries[id] = settled
        state.settledOrder.append((id, now))
        if state.settledOrder.count > capacity { forgetOldest(&state) }
        return true
    }

    private func forgetExpired(_ state: inout State, now: ContinuousClock.Instant) {
        while let oldest = state.settledOrder.first, now - oldest.at > retention { forgetOldest(&state) }
    }

    private func forgetOldest(_ state: inout State) {
        let oldest = state.settledOrder.removeFirst()
        state.entries[oldest.id] = nil
    }

    static func status(_ id: APNsID, _ settled: Settled) -> NotificationStatus {
        switch settled {
        case .pending: NotificationStatus(id: id.description, state: .pending)
        case .accepted: NotificationStatus(id: id.description, state: .accepted)
        case .rejected(let rejection): NotificationStatus(id: id, rejection: rejection)
        case .failed(let reason): NotificationStatus(id: id, failure: reason)
        }
    }
}
