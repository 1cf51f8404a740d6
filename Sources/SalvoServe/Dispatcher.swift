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
    /// With `--db`: where notifications are written before they are taken, and their ends after.
    let journal: NotificationJournal?
    /// Notifications taken and not yet final, at most.
    let queueLimit: Int
    private let inFlight = Atomic<Int>(0)
    /// Batches handed to the submitter and not yet submitted; its wake-up while it waits for
    /// some; whether requests are over (the server drains).
    private let intake = Mutex<(parts: [Part], wake: CheckedContinuation<Bool, Never>?, closed: Bool)>(([], nil, false))
    /// Batches whose outcome is not known yet: a drain waits for none.
    private let openBatches = Mutex<(count: Int, drained: [CheckedContinuation<Void, Never>])>((0, []))
    private let logger: Logger

    init(sender: RoutingSender, store: StatusStore, queueLimit: Int, logger: Logger,
         onRefusal: (@Sendable (NotificationStatus) -> Void)?, journal: NotificationJournal? = nil) {
        self.sender = sender
        self.store = store
        self.onRefusal = onRefusal
        self.journal = journal
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
        /// The journal could not be written (`--db`), for this reason: nothing was taken.
        case unavailable(String)
    }

    /// Takes `items` of `body`: each id the store (or the journal) knows already is answered
    /// with its status and not sent again; the others are journaled, if there is a journal,
    /// and sent, unless the queue has no room for them all.
    func take(_ items: [JSONBatchItem], of body: JSONBody, campaignProtocol: CampaignProtocol) async -> Taking {
        guard inFlight.add(items.count, ordering: .relaxed).newValue <= queueLimit else {
            inFlight.subtract(items.count, ordering: .relaxed)
            return .full
        }
        var known = store.claim(items.map(\.id))
        var fresh = zip(items, known).filter { $0.1 == nil }.map(\.0)
        if let journal, !fresh.isEmpty {
            do {
                // Written (committed) before anything is sent or answered.
                let before = try await journal.append(fresh, of: body)
                if !before.isEmpty {
                    store.release(before.keys)
                    for (index, item) in items.enumerated() where before[item.id] != nil { known[index] = before[item.id] }
                    fresh.removeAll { before[$0.id] != nil }
                }
            } catch {
                store.release(fresh.lazy.map(\.id))
                inFlight.subtract(items.count, ordering: .relaxed)
                return .unavailable("\(error)")
            }
        }
        if fresh.count < items.count { inFlight.subtract(items.count - fresh.count, ordering: .relaxed) }
        let batch = TakenBatch(items: items, known: known, fresh: fresh)
        guard !fresh.isEmpty else {
            batch.complete()
            return .taken(batch)
        }
        await send(batch, of: body, campaignProtocol: campaignProtocol)
        return .taken(batch)
    }

    /// Sends again notifications a lapsed serve instance journaled (`JournalRecovery`): in
    /// the journal already, and within the queue's room, which the caller checked. Those the
    /// store knows are this instance's own, on their way already.
    func resume(_ items: [JSONBatchItem], of body: JSONBody, campaignProtocol: CampaignProtocol) async {
        inFlight.add(items.count, ordering: .relaxed)
        let known = store.claim(items.map(\.id))
        let fresh = zip(items, known).filter { $0.1 == nil }.map(\.0)
        if fresh.count < items.count { inFlight.subtract(items.count - fresh.count, ordering: .relaxed) }
        guard !fresh.isEmpty else { return }
        await send(TakenBatch(items: items, known: known, fresh: fresh), of: body, campaignProtocol: campaignProtocol)
    }

    /// Hands the batch's fresh notifications to the submitter (`runSubmitter`), which
    /// submits them and settles them as the sender answers. Returns at once: the request
    /// does not wait for its turn, and its notifications count in the queue's bound from
    /// here on, as when the sender holds them.
    private func send(_ batch: TakenBatch, of body: JSONBody, campaignProtocol: CampaignProtocol) async {
        openBatches.withLock { $0.count += 1 }
        let part = Part(batch: batch, body: body, campaignProtocol: campaignProtocol)
        let (closed, wake) = intake.withLock { state -> (Bool, CheckedContinuation<Bool, Never>?) in
            guard !state.closed else { return (true, nil) }
            state.parts.append(part)
            defer { state.wake = nil }
            return (false, state.wake)
        }
        if closed { return await submit([part]) }  // a late takeover, while the server drains
        wake?.resume(returning: true)
    }

    /// Submits what requests hand over (`send`), until `closeIntake()` and everything
    /// handed over is submitted. Everything waiting goes to the sender together, as one
    /// source: a submission costs the sender a registration and a word to every shard,
    /// which one notification per request would pay each time, and requests never wait for
    /// one another.
    func runSubmitter() async {
        while true {
            let parts = intake.withLock { state -> [Part] in
                defer { state.parts.removeAll(keepingCapacity: true) }
                return state.parts
            }
            if !parts.isEmpty {
                await submit(parts)
                continue
            }
            let more = await withCheckedContinuation { (continuation: CheckedContinuation<Bool, Never>) in
                let now = intake.withLock { state -> Bool? in
                    if !state.parts.isEmpty { return true }
                    if state.closed { return false }
                    state.wake = continuation
                    return nil
                }
                if let now { continuation.resume(returning: now) }
            }
            if !more { return }
        }
    }

    /// No more requests: the submitter submits what it holds and ends.
    func closeIntake() {
        intake.withLock { state -> CheckedContinuation<Bool, Never>? in
            state.closed = true
            defer { state.wake = nil }
            return state.wake
        }?.resume(returning: false)
    }

    /// A request's batch waiting to be submitted.
    private struct Part: Sendable {
        var batch: TakenBatch
        var body: JSONBody
        var campaignProtocol: CampaignProtocol
    }

    /// Submits the fresh notifications of `parts` as one source; settles them as the sender
    /// answers.
    private func submit(_ parts: [Part]) async {
        let campaignProtocol = parts[0].campaignProtocol
        let fresh = parts.flatMap(\.batch.fresh)
        let source = JSONBatch(parts: parts.map { ($0.body, $0.batch.fresh) }, campaignProtocol: campaignProtocol)
        let submission = await sender.submit(contentsOf: source) { [store, onRefusal, journal] refusal in
            // On a shard thread, before the sender counts the notification final.
            for (index, settled) in Self.settlements(of: refusal) where index < fresh.count {
                let id = fresh[index].id
                guard store.settle(id, settled) else { continue }
                let status = StatusStore.status(id, settled)
                journal?.recordRefused(status)
                onRefusal?(status)
            }
        }
        Task {
            let outcome = await submission.outcome()
            settle(parts.map(\.batch), fresh: fresh, outcome)
        }
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

    /// The outcome of the batches submitted together is known: what was read and not
    /// refused was accepted; what was never read (the sender stopped first) failed.
    private func settle(_ batches: [TakenBatch], fresh: [JSONBatchItem], _ outcome: SubmissionOutcome) {
        let published = min(outcome.published, fresh.count)
        store.settleRemaining(fresh[..<published].lazy.map(\.id), as: .accepted)
        // Those of them refused were recorded first: the journal keeps their refusal.
        journal?.recordAccepted(fresh[..<published].lazy.map(\.id))
        if published < fresh.count, journal != nil {
            // Never read: left pending in the journal, for the next run or another instance
            // to send once this one's leases lapse (or are released as it stops).
            logger.warning("notifications not sent; the journal keeps them for another run",
                           metadata: ["count": "\(fresh.count - published)",
                                      "reason": "\(outcome.stoppedBy.map { "\($0)" } ?? "")"])
            store.release(fresh[published...].lazy.map(\.id))
        } else if published < fresh.count {
            let reason = Self.failureReason(outcome.stoppedBy)
            logger.warning("notifications not sent", metadata: ["count": "\(fresh.count - published)",
                                                                 "reason": "\(outcome.stoppedBy.map { "\($0)" } ?? "")"])
            for item in fresh[published...] where store.settle(item.id, .failed(reason)) {
                onRefusal?(NotificationStatus(id: item.id, failure: reason))
            }
        }
        inFlight.subtract(fresh.count, ordering: .relaxed)
        batches.forEach { $0.complete() }
        let waiters = openBatches.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.count -= batches.count
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
