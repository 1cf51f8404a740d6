import DequeModule
import Synchronization

/// The answers to requests sent with an `Idempotency-Key`, by caller and key, kept for the
/// store's retention: a request repeated with the same key (a client's retry after a lost
/// answer) gets the first answer again, and nothing is sent twice.
final class IdempotencyCache: Sendable {
    /// A kept answer.
    struct Answer: Sendable {
        var status: Int
        var body: [UInt8]
    }

    /// What a request with a key finds.
    enum Lookup {
        /// The first with this key: answer it, then `record` the answer.
        case first
        /// A request with this key is being answered now.
        case inProgress
        /// The answer the key's first request got.
        case answered(Answer)
    }

    private struct State {
        /// By scoped key: the answer (nil while in progress), and when the key came.
        var entries: [String: (answer: Answer?, at: ContinuousClock.Instant)] = [:]
        var order: Deque<(key: String, at: ContinuousClock.Instant)> = []
    }

    let retention: Duration
    let capacity: Int
    private let state = Mutex(State())

    init(retention: Duration, capacity: Int) {
        self.retention = retention
        self.capacity = capacity
    }

    func lookup(_ key: String, caller: String) -> Lookup {
        let scoped = caller + "\u{0}" + key
        let now = ContinuousClock.now
        return state.withLock { state in
            while let oldest = state.order.first,
                  now - oldest.at > retention || state.order.count >= capacity {
                state.order.removeFirst()
                // The key may have been dropped and taken again since: forget only this one.
                if state.entries[oldest.key]?.at == oldest.at { state.entries[oldest.key] = nil }
            }
            guard let entry = state.entries[scoped] else {
                state.entries[scoped] = (nil, now)
                state.order.append((scoped, now))
                return .first
            }
            return entry.answer.map { .answered($0) } ?? .inProgress
        }
    }

    /// The key's first request was answered with `answer`; nil: it was refused before
    /// anything was taken, and a retry may try again.
    func record(_ answer: Answer?, for key: String, caller: String) {
        let scoped = caller + "\u{0}" + key
        state.withLock { state in
            guard state.entries[scoped] != nil else { return }  // forgotten meanwhile
            if let answer { state.entries[scoped]?.answer = answer } else { state.entries[scoped] = nil }
        }
    }
}
