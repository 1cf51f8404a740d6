import SalvoIO
import Synchronization

/// The sources a sender is sending from, so that shard threads can open readers of their
/// own to resend, and the sender can tell when a source's notifications are all final.
final class SourceRegistry: Sendable {
    /// One registered source.
    final class Entry: Sendable {
        let id: SourceID
        let makeReader: @Sendable () throws -> any NotificationReader
        /// Every notification of the source has been read: once no other source is being
        /// read, connections drain (see `ConnectionMachine.finishWriting`).
        let isExhausted = Atomic<Bool>(false)
        /// Its notifications that reached a final state.
        let finalCount = Atomic<Int>(0)

        init(id: SourceID, makeReader: @escaping @Sendable () throws -> any NotificationReader) {
            self.id = id
            self.makeReader = makeReader
        }
    }

    private let state = Locked<(entries: [SourceID: Entry], next: SourceID)>(([:], 1))

    /// Registers `source` under a fresh identifier (0 is the lanes' retained store).
    func register<Source: NotificationSource>(_ source: Source) -> Entry {
        state.withLock { state in
            while state.entries[state.next] != nil || state.next == RetainedStore.sourceID { state.next &+= 1 }
            let entry = Entry(id: state.next, makeReader: { try source.makeReader() })
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

    /// Counts notifications of each source that reached a final state. Returns whether any
    /// of them belongs to a source read to its end: its `send(contentsOf:)` waits for them.
    @discardableResult
    func noteFinals(_ finals: [(source: SourceID, count: Int)]) -> Bool {
        var awaited = false
        for (id, count) in finals where id != RetainedStore.sourceID {
            guard let entry = entry(id) else { continue }
            entry.finalCount.add(count, ordering: .releasing)
            awaited = awaited || entry.isExhausted.load(ordering: .relaxed)
        }
        return awaited
    }
}
