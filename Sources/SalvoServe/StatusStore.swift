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

    /// The store holds up to `capacity` notifications, nearly all of them pending or
    /// accepted: those take a byte of state each, and only a refusal (the rare one) keeps
    /// its reason beside, so memory follows `capacity`, never the rate.
    private struct State {
        var states: [APNsID: Word] = [:]
        /// The rejected and failed, with why.
        var refusals: [APNsID: Settled] = [:]
        /// Final ids in the order they became final, with when (seconds since `start`):
        /// what is forgotten first.
        var settledOrder: Deque<(id: APNsID, second: UInt32)> = []

        func settled(_ id: APNsID) -> Settled? {
            switch states[id] {
            case nil: nil
            case .pending?: .pending
            case .accepted?: .accepted
            case .refused?: refusals[id]
            }
        }
    }

    /// A notification's state in the store's main table.
    private enum Word: UInt8 { case pending, accepted, refused }

    let retention: Duration
    let capacity: Int
    private let start = ContinuousClock.now
    private let state = Mutex(State())

    init(retention: Duration, capacity: Int) {
        self.retention = retention
        self.capacity = capacity
    }

    /// Marks each id pending, unless the store knows it already: for those, the status it
    /// has (the request repeats a notification; it is not sent again). Returns one entry
    /// per id: nil for an id now pending.
    func claim(_ ids: [APNsID]) -> [NotificationStatus?] {
        let now = second()
        return state.withLock { state in
            forgetExpired(&state, now: now)
            return ids.map { id in
                if let known = state.settled(id) { return Self.status(id, known) }
                state.states[id] = .pending
                return nil
            }
        }
    }

    /// Forgets pending ids that will not be sent after all (the request was refused).
    func release(_ ids: some Sequence<APNsID>) {
        state.withLock { state in
            for id in ids where state.states[id] == .pending { state.states[id] = nil }
        }
    }

    /// Records a pending notification's end; one already final keeps its first end.
    /// Returns whether it changed.
    @discardableResult
    func settle(_ id: APNsID, _ settled: Settled) -> Bool {
        let now = second()
        return state.withLock { state in settle(&state, id, settled, now: now) }
    }

    /// Settles every id of `ids` still pending as `settled` (a batch's accepted remainder).
    func settleRemaining(_ ids: some Sequence<APNsID>, as settled: Settled) {
        let now = second()
        state.withLock { state in
            for id in ids { settle(&state, id, settled, now: now) }
            forgetExpired(&state, now: now)
        }
    }

    /// The status of `id`, nil when the store does not know it (never taken, or forgotten).
    func status(of id: APNsID) -> NotificationStatus? {
        state.withLock { state in state.settled(id).map { Self.status(id, $0) } }
    }

    /// The statuses of `ids`, nil for one the store does not hold (forgotten, or known
    /// only to the journal).
    func statuses(of ids: [APNsID]) -> [NotificationStatus?] {
        state.withLock { state in ids.map { id in state.settled(id).map { Self.status(id, $0) } } }
    }

    /// How many notifications the store holds, pending and final.
    var count: Int { state.withLock { $0.states.count } }

    private func settle(_ state: inout State, _ id: APNsID, _ settled: Settled, now: UInt32) -> Bool {
        guard state.states[id] == .pending else { return false }
        switch settled {
        case .pending: return false
        case .accepted: state.states[id] = .accepted
        case .rejected, .failed:
            state.states[id] = .refused
            state.refusals[id] = settled
        }
        state.settledOrder.append((id, now))
        if state.settledOrder.count > capacity { forgetOldest(&state) }
        return true
    }

    private func forgetExpired(_ state: inout State, now: UInt32) {
        let retained = UInt32(clamping: retention.components.seconds)
        while let oldest = state.settledOrder.first, now &- oldest.second > retained { forgetOldest(&state) }
    }

    private func forgetOldest(_ state: inout State) {
        let oldest = state.settledOrder.removeFirst()
        if state.states.removeValue(forKey: oldest.id) == .refused { state.refusals[oldest.id] = nil }
    }

    /// Whole seconds since the store began: what a final status's age is kept in.
    private func second() -> UInt32 {
        UInt32(clamping: (ContinuousClock.now - start).components.seconds)
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
