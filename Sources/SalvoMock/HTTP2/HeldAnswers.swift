import SalvoIO

/// The answers a connection decided but holds back (`H2FailurePlan.responseDelay`,
/// `errorDelay`), earliest due first: a binary min-heap in an array that keeps its
/// capacity, so once it has held as many as the connection's streams allow, holding more
/// allocates nothing. Answers due at the same instant leave in the order they came.
///
/// Invariant: for every entry at index i > 0, `entries[(i - 1) / 2]` is not later (by due
/// time, then by arrival) than `entries[i]`.
struct HeldAnswers {
    struct Entry {
        var due: Instant
        /// Arrival order, to keep answers due at the same instant in order.
        var order: UInt64
        var streamID: Int32
        /// The stream's slot in the connection's slot array.
        var slot: Int32

        func precedes(_ other: Entry) -> Bool { (due, order) < (other.due, other.order) }
    }

    private var entries: [Entry] = []
    private var arrivals: UInt64 = 0

    /// When the earliest answer is due.
    var earliest: Instant? { entries.first?.due }

    mutating func insert(due: Instant, streamID: Int32, slot: Int32) {
        arrivals &+= 1
        entries.append(Entry(due: due, order: arrivals, streamID: streamID, slot: slot))
        var child = entries.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard entries[child].precedes(entries[parent]) else { break }
            entries.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the earliest answer if it is due by `now`.
    mutating func popDue(by now: Instant) -> Entry? {
        guard let first = entries.first, first.due <= now else { return nil }
        let last = entries.removeLast()
        guard !entries.isEmpty else { return first }
        entries[0] = last
        var parent = 0
        while true {
            let left = 2 * parent + 1, right = left + 1
            var earliest = parent
            if left < entries.count && entries[left].precedes(entries[earliest]) { earliest = left }
            if right < entries.count && entries[right].precedes(entries[earliest]) { earliest = right }
            guard earliest != parent else { break }
            entries.swapAt(parent, earliest)
            parent = earliest
        }
        return first
    }
}
