import SalvoIO

/// Each topic's counts in a `RoutingSender`: the source entries its notifications were
/// published under, read for their counts; an entry whose notifications are all final is
/// folded into the topic's totals and let go, so that memory does not grow with the number
/// of sources (a campaign worker submits one per chunk).
final class TopicTally: Sendable {
    private struct Topic {
        /// The entries folded in so far.
        var settled = TopicCounts()
        /// The entries with notifications not final yet (or not yet read to their end).
        var open: [SourceRegistry.Entry] = []
    }

    private let topics: Locked<[Topic]>

    init(topics: Int) { self.topics = Locked(Array(repeating: Topic(), count: topics)) }

    /// Counts the notifications of `entries` (by topic index) from now on.
    func add(_ entries: [SourceRegistry.Entry]) {
        topics.withLock { topics in
            for index in entries.indices {
                Self.fold(&topics[index])
                topics[index].open.append(entries[index])
            }
        }
    }

    /// Each topic's counts so far, by topic index. A topic's `submitted` counts a source's
    /// notifications once it was read to its end.
    func counts() -> [TopicCounts] {
        topics.withLock { topics in
            topics.indices.map { index in
                Self.fold(&topics[index])
                return topics[index].open.reduce(into: topics[index].settled) { $0.add($1) }
            }
        }
    }

    /// Moves the complete entries' counts into `settled`.
    private static func fold(_ topic: inout Topic) {
        topic.open.removeAll { entry in
            guard entry.isComplete else { return false }
            topic.settled.add(entry)
            return true
        }
    }
}

extension TopicCounts {
    /// Adds the outcomes of `entry`'s notifications that are final, and its published
    /// count once it was read to its end.
    mutating func add(_ entry: SourceRegistry.Entry) {
        let finals = entry.finalCount.load(ordering: .sequentiallyConsistent)
        let (rejected, failed) = entry.refusals.withLock { $0 }
        if entry.isExhausted.load(ordering: .sequentiallyConsistent) { submitted += entry.publishedCount.load(ordering: .relaxed) }
        rejectedByReason.merge(rejected, uniquingKeysWith: +)
        failedByReason.merge(failed.map { ($0.key.rawValue, $0.value) }, uniquingKeysWith: +)
        accepted += finals - rejected.values.reduce(0, +) - failed.values.reduce(0, +)
    }
}
