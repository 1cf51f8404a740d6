import Logging
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire
import Synchronization

/// Takes requests' notifications into the sender, within a bound, and settles their
/// statuses as the sender answers: the one place between the HTTP API and the engine.
///
/// The bound is on notifications taken and not yet final (`queueLimit`), so memory follows
/// what is in flight, never how fast callers post: past it a request is refused whole
/// (429), before anything of it is taken.
final class Dispatcher: Sendable {
    let sender: RoutingSender
    let store: StatusStore
    /// Told of each notification that ended rejected or failed (the webhook), on any
    /// thread: it must not block.
    let onRefusal: (@Sendable (NotificationStatus) -> Void)?
    /// Notifications taken and not yet final, at most.
    let queueLimit: Int
    private let inFlight = Atomic<Int>(0)
    /// Batches whose outcome is not known yet: a drain waits for none.
    private let openBatches = Mutex<(count: Int, drained: [CheckedContinuation<Void, Never>])>((0, []))
    private let logger: Logger

    init(sender: RoutingSender, store: StatusStore, queueLimit: Int, logger: Logger,
         onRefusal: (@Sendable (NotificationStatus) -> Void)?) {
        self.sender = sender
        self.store = store
        self.onRefusal = onRefusal
        self.queueLimit = queueLimit
        self.logger = logger
    }

    /// Notifications taken and not final.
    var queueDepth: Int { inFlight.load(ordering: .relaxed) }

    /// What became of a request's notifications at the door.
    enum Taking {
        /// Taken (and, for a repeated id, the status it already has); the batch settles
        /// them as the sender answers.
        case taken(TakenBatch)
        /// The queue has no room for them: nothing was taken.
        case full
    }

    /// Takes `items` of `body`: each id the store knows already is answered with its status
    /// and not sent again; the others are sent, unless the queue has no room for them all.
    func take(_ items: [JSONBatchItem], of body: JSONBody, campaignProtocol: CampaignProtocol) async -> Taking {
        guard inFlight.add(items.count, ordering: .relaxed).newValue <= queueLimit else {
            inFlight.subtract(items.count, ordering: .relaxed)
            return .full
        }
        let known = store.claim(items.map(\.id))
        let fresh = zip(items, known).filter { $0.1 == nil }.map(\.0)
        if fresh.count < items.count { inFlight.subtract(items.count - fresh.count, ordering: .relaxed) }
        let batch = TakenBatch(items: items, known: known, fresh: fresh)
        guard !fresh.isEmpty else {
            batch.complete()
            return .taken(batch)
        }
        openBatches.withLock { $0.count += 1 }
        let source = JSONBatch(body: body, items: fresh, campaignProtocol: campaignProtocol)
        let submission = await sender.submit(contentsOf: source) { [store, onRefusal] refusal in
            // On a shard thread, before the sender counts the notification final.
            for (index, settled) in Self.settlements(of: refusal) where index < fresh.count {
                let id = fresh[index].id
                guard store.settle(id, settled) else { continue }
                onRefusal?(StatusStore.status(id, settled))
            }
        }
        Task {
            let outcome = await submission.outcome()
            settle(batch, outcome)
        }
        return .taken(batch)
    }

    /// Waits until every batch taken so far is settled (after the sender finished, every one is).
    func drained() async {
        await withCheckedContinuation { continuation in
            let now = openBatches.withLock { state -> Bool in
                guard state.count > 0 else { return true }
                state.drained.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    /// The batch's outcome is known: what was read and not refused was accepted; what was
    /// never read (the sender stopped first) failed.
    private func settle(_ batch: TakenBatch, _ outcome: SubmissionOutcome) {
        let published = min(outcome.published, batch.fresh.count)
        store.settleRemaining(batch.fresh[..<published].lazy.map(\.id), as: .accepted)
        if published < batch.fresh.count {
            let reason = Self.failureReason(outcome.stoppedBy)
            logger.warning("notifications not sent", metadata: ["count": "\(batch.fresh.count - published)",
                                                                 "reason": "\(outcome.stoppedBy.map { "\($0)" } ?? "")"])
            for item in batch.fresh[published...] where store.settle(item.id, .failed(reason)) {
                onRefusal?(NotificationStatus(id: item.id, failure: reason))
            }
        }
        inFlight.subtract(batch.fresh.count, ordering: .relaxed)
        batch.complete()
        let waiters = openBatches.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count -= 1
            guard state.count == 0 else { return [] }
            defer { state.drained = [] }
            return state.drained
        }
        waiters.forEach { $0.resume() }
    }

    /// The indices in its batch of the notifications a refusal names, and how they ended.
    static func settlements(of refusal: SenderEvent) -> [(Int, StatusStore.Settled)] {
        switch refusal {
        case .rejected(_, let rejection, let sequence):
            [(Int(sequence), .rejected(rejection))]
        case .failed(_, let reason, let sequence):
            [(Int(sequence), .failed(reason))]
        case .failedUnnamed(let count, let reason, let first?, _):
            (Int(first)..<Int(first) + count).map { ($0, .failed(reason)) }
        default:
            []
        }
    }

    /// Why notifications the sender never took failed.
    static func failureReason(_ stoppedBy: (any Error)?) -> FailureReason {
        switch stoppedBy as? SendError {
        case .gatewayUnreachable?: .gatewayUnreachable
        case .credentialsRefused?: .authenticationFailed
        default: .cancelled
        }
    }
}

/// A request's notifications once taken: which were new, and a signal when all of them
/// are final.
final class TakenBatch: Sendable {
    /// Every good notification of the request, in order.
    let items: [JSONBatchItem]
    /// For each of `items`, the status the store already had (a repeated id), or nil.
    let known: [NotificationStatus?]
    /// The items sent.
    let fresh: [JSONBatchItem]
    /// Whether every notification is final, and who waits for that (by ticket, so that a
    /// wait that times out takes itself away).
    private let completion = Mutex<(done: Bool, nextTicket: Int, waiters: [Int: CheckedContinuation<Void, Never>])>(
        (false, 0, [:]))

    init(items: [JSONBatchItem], known: [NotificationStatus?], fresh: [JSONBatchItem]) {
        self.items = items
        self.known = known
        self.fresh = fresh
    }

    func complete() {
        let waiters = completion.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.done = true
            defer { state.waiters = [:] }
            return Array(state.waiters.values)
        }
        waiters.forEach { $0.resume() }
    }

    /// Returns when every notification is final, or after `timeout`, whichever is first.
    func final(within timeout: Duration) async {
        var timer: Task<Void, Never>?
        await withCheckedContinuation { continuation in
            let ticket = completion.withLock { state -> Int? in
                guard !state.done else { return nil }
                state.nextTicket += 1
                state.waiters[state.nextTicket] = continuation
                return state.nextTicket
            }
            guard let ticket else { return continuation.resume() }
            timer = Task {
                try? await Task.sleep(for: timeout)
                completion.withLock { $0.waiters.removeValue(forKey: ticket) }?.resume()
            }
        }
        timer?.cancel()
    }
}
