import SalvoIO

/// The answers a connection decided but holds back (`H2FailurePlan.responseDelay`,
/// `errorDelay`), earliest due first, in a `MinHeap` (once it has held as many as the
/// connection's streams allow, holding more allocates nothing). Answers due at the same
/// instant leave in the order they came.
struct HeldAnswers {
    struct Entry: Comparable {
        var due: Instant
        /// Arrival order, to keep answers due at the same instant in order.
        var order: UInt64
        var streamID: Int32
        /// The stream's slot in the connection's slot array.
        var slot: Int32

        static func < (a: Entry, b: Entry) -> Bool { (a.due, a.order) < (b.due, b.order) }
    }

    private var heap = MinHeap<Entry>()
    private var arrivals: UInt64 = 0

    /// When the earliest answer is due.
    var earliest: Instant? { heap.first?.due }

    mutating func insert(due: Instant, streamID: Int32, slot: Int32) {
        arrivals &+= 1
        heap.insert(Entry(due: due, order: arrivals, streamID: streamID, slot: slot))
    }

    /// Removes and returns the earliest answer if it is due by `now`.
    mutating func popDue(by now: Instant) -> Entry? {
        guard let first = heap.first, first.due <= now else { return nil }
        return heap.popFirst()
    }
}
