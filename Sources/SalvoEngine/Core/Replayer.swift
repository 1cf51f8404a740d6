import SalvoWire

/// Why a run could not be read again.
struct ReplayError: Error, CustomStringConvertible {
    var description: String
}

/// Reads runs of notifications again from their sources, on one shard's thread: to write
/// them again after an error response or a drop, and to name them (target, sequence) in
/// rejection and failure events. One reader per source per shard, opened on first use.
final class Replayer {
    private let sources: SourceRegistry
    private var readers: [SourceID: (entry: SourceRegistry.Entry, reader: any NotificationReader)] = [:]
    /// Where the last `read` left its reader: the run (by source and position) and the
    /// item the reader yields next.
    private var continuation: (source: SourceID, position: SourcePosition, next: Int)?

    init(sources: SourceRegistry) {
        self.sources = sources
    }

    /// Calls `body` with notifications `items` of `run`'s reading (`run.skip` counts
    /// among them), in order, while it returns true. Throws when the source cannot
    /// produce them: gone, unreadable, or not what it produced the first time.
    func read(_ run: SourceRun, items: Range<Int>, retained: RetainedStore,
              _ body: (SourceNotification) throws(ReplayError) -> Bool) throws(ReplayError) {
        guard !items.isEmpty else { return }
        let reader = try self.reader(for: run.source, retained: retained)
        // A run rebuilt over several writes is read on where the last call stopped.
        let resumes = continuation.map { $0.source == run.source && $0.position == run.position && $0.next == items.lowerBound }
            ?? false
        continuation = nil
        var item = resumes ? items.lowerBound : 0
        do {
            if !resumes { try reader.seek(to: run.position) }
            while item < items.upperBound {
                guard let notification = try reader.next() else {
                    throw ReplayError(description: "the source ended before notification \(item + 1) of a run at "
                                      + "sequence \(run.position.sequence)")
                }
                if item == 0, notification.position != run.position {
                    throw ReplayError(description: "the source changed: at sequence \(run.position.sequence) it now "
                                      + "yields sequence \(notification.position.sequence)")
                }
                item += 1
                if item > items.lowerBound, try !body(notification) { break }
            }
        } catch let error as ReplayError {
            throw error
        } catch {
            throw ReplayError(description: "\(error)")
        }
        if run.source != RetainedStore.sourceID { continuation = (run.source, run.position, item) }
    }

    /// The target and sequence of notification `item` of `run`'s reading.
    func name(_ run: SourceRun, item: Int, retained: RetainedStore) throws(ReplayError) -> (PushTarget, UInt64) {
        var named: (PushTarget, UInt64)?
        try read(run, items: item..<item + 1, retained: retained) { notification in
            named = (notification.target, notification.position.sequence)
            return false
        }
        return named!
    }

    /// Closes the reader of a source that is done.
    func forget(_ source: SourceID) {
        readers[source] = nil
        if continuation?.source == source { continuation = nil }
    }

    private func reader(for source: SourceID, retained: RetainedStore) throws(ReplayError) -> any NotificationReader {
        if source == RetainedStore.sourceID { return RetainedStore.Reader(retained) }
        guard let entry = sources.entry(source) else {
            throw ReplayError(description: "source \(source) is no longer registered")
        }
        // The identity check catches an identifier reused by a newer source.
        if let cached = readers[source], cached.entry === entry { return cached.reader }
        continuation = nil
        do {
            let reader = try entry.makeReader()
            readers[source] = (entry, reader)
            return reader
        } catch {
            throw ReplayError(description: "cannot open the source again: \(error)")
        }
    }
}
