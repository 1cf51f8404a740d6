import SalvoIO
import SalvoWire
import Synchronization

/// What a submission is told of each of its notifications rejected or failed.
public typealias RefusalObserver = @Sendable (SenderEvent) -> Void

/// The sources a sender is sending from, so that shard threads can open readers of their
/// own to resend, and the sender can tell when a source's notifications are all final.
final class SourceRegistry: Sendable {
    /// One registered source.
    final class Entry: Sendable {
        let id: SourceID
        let makeReader: @Sendable () throws -> any NotificationReader
        /// Told of each of the source's notifications rejected or failed, on a shard
        /// thread, before it counts as final (`Sender.submit(contentsOf:observingRefusals:)`).
        let refusalObserver: RefusalObserver?
        /// Every notification of the source has been read: once no other source is being
        /// read, connections drain (see `ConnectionMachine.finishWriting`).
        let isExhausted = Atomic<Bool>(false)
        /// How many were published: set once, before `isExhausted`.
        let publishedCount = Atomic<Int>(0)
        /// Its notifications that reached a final state.
        let finalCount = Atomic<Int>(0)
        /// Of those, the rejected by reason name and the failed by reason (the rest were
        /// accepted): counted before `finalCount`, so that whoever sees the source complete
        /// sees all of them.
        let refusals = Locked<(rejected: [String: Int], failed: [FailureReason: Int])>(([:], [:]))

        /// Every notification published is final.
        var isComplete: Bool {
            isExhausted.load(ordering: .sequentiallyConsistent)
                && finalCount.load(ordering: .sequentiallyConsistent) >= publishedCount.load(ordering: .relaxed)
        }

        /// Publishing is over, `count` notifications in all.
        func exhausted(after count: Int) {
            publishedCount.store(count, ordering: .relaxed)
            isExhausted.store(true, ordering: .sequentiallyConsistent)
            resumeIfComplete()
        }

        /// Who waits for the source to complete (`untilComplete`): resumed by whichever
        /// thread completes it, and only then; the waiters for room in the rings are not
        /// woken for it, nor it for them.
        private let waiter = Locked<UnsafeContinuation<Void, Never>?>(nil)

        /// Returns once every notification published is final.
        func untilComplete() async {
            await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
                // Checked under the lock `resumeIfComplete` takes after the count changed:
                // either this sees the source complete, or that sees this waiter.
                let waits = waiter.withLock { waiter -> Bool in
                    guard !isComplete else { return false }
                    waiter = continuation
                    return true
                }
                if !waits { continuation.resume() }
            }
        }

        /// Resumes the waiter, if there is one and the source is complete.
        func resumeIfComplete() {
            guard isComplete else { return }
            waiter.withLock { waiter in
                defer { waiter = nil }
                return waiter
            }?.resume()
        }

        init(id: SourceID, makeReader: @escaping @Sendable () throws -> any NotificationReader,
             refusalObserver: RefusalObserver?) {
            self.id = id
            self.makeReader = makeReader
            self.refusalObserver = refusalObserver
        }
    }

    private let state = Locked<(entries: [SourceID: Entry], next: SourceID)>(([:], 1))

    /// Registers `source` under a fresh identifier (0 is the lanes' retained store).
    func register<Source: NotificationSource>(_ source: Source, refusalObserver: RefusalObserver? = nil) -> Entry {
        state.withLock { state in
            while state.entries[state.next] != nil || state.next == RetainedStore.sourceID { state.next &+= 1 }
            let entry = Entry(id: state.next, makeReader: { try source.makeReader() }, refusalObserver: refusalObserver)
            state.entries[entry.id] = entry
            state.next &+= 1
            return entry
        }
    }

    func unregister(_ entry: Entry) {
        state.withLock { state in
            if state.entries[entry.id] === entry { state.entries[entry.id] = nil }
        }
    }

    func entry(_ id: SourceID) -> Entry? { state.withLock { $0.entries[id] } }

    /// Whether sources are registered and every one of them was read to its end: nothing
    /// more will be published until another is registered.
    var areAllExhausted: Bool {
        state.withLock { state in
            !state.entries.isEmpty && state.entries.values.allSatisfy { $0.isExhausted.load(ordering: .relaxed) }
        }
    }

    /// Counts notifications of each source that reached a final state, and resumes whoever
    /// waits for a source that is now complete: read to its end, and every notification
    /// final (its `Submission`).
    func noteFinals(_ finals: [(source: SourceID, count: Int)]) {
        for (id, count) in finals where id != RetainedStore.sourceID {
            guard let entry = entry(id) else { continue }
            // Sequentially consistent, with `exhausted(after:)`'s store: either this sees the
            // source exhausted, or that sees this count (never neither).
            entry.finalCount.add(count, ordering: .sequentiallyConsistent)
            entry.resumeIfComplete()
        }
    }

    /// Counts a rejection, or failures, of `source` (before `noteFinals` counts them final).
    func noteRejected(_ source: SourceID, _ rejection: Rejection) {
        guard source != RetainedStore.sourceID else { return }
        entry(source)?.refusals.withLock { $0.rejected[rejection.reasonName, default: 0] += 1 }
    }

    func noteFailed(_ source: SourceID, _ reason: FailureReason, count: Int) {
        guard source != RetainedStore.sourceID else { return }
        entry(source)?.refusals.withLock { $0.failed[reason, default: 0] += count }
    }

    /// Tells `source`'s observer, if its submission has one, of a rejection or failure
    /// (a `.rejected`, `.failed` or `.failedUnnamed` event naming one of its notifications).
    func observe(_ refusal: SenderEvent, of source: SourceID) {
        guard source != RetainedStore.sourceID, let observer = entry(source)?.refusalObserver else { return }
        observer(refusal)
    }
}
