import DequeModule
import SalvoIO

/// The answers a connection decided but holds back (`H2FailurePlan.responseDelay`,
/// `errorDelay`), earliest due first. Answers due at the same instant leave in the order
/// they came.
///
/// A fixed delay makes answers fall due in the order they arrive, so those go to a FIFO
/// queue, where holding and releasing one costs a copy; only one due before the newest
/// held (jitter, or an error answer's shorter delay) goes to a `MinHeap`. Once either has
/// held as many as the connection's streams allow, holding more allocates nothing.
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

    /// Entries in arrival order whose due times never decrease.
    private var inOrder: Deque<Entry> = []
    /// The others.
    private var outOfOrder = MinHeap<Entry>()
    /// How many `outOfOrder` holds. With a fixed delay it stays 0, and releasing an answer
    /// need not look at the heap: its accessors are not specialized here, and looking cost
    /// a generic metadata lookup per answer.
    private var outOfOrderCount = 0
    private var arrivals: UInt64 = 0

    /// When the earliest answer is due.
    var earliest: Instant? {
        earlier(inOrder.first?.due, outOfOrderCount == 0 ? nil : outOfOrder.first?.due)
    }

    mutating func insert(due: Instant, streamID: Int32, slot: Int32) {
        arrivals &+= 1
        let entry = Entry(due: due, order: arrivals, streamID: streamID, slot: slot)
        if let last = inOrder.last, due < last.due {
            outOfOrder.insert(entry)
            outOfOrderCount += 1
        } else {
            inOrder.append(entry)
        }
    }

    /// Removes and returns the earliest answer if it is due by `now`.
    mutating func popDue(by now: Instant) -> Entry? {
        let queued = inOrder.first, heaped = outOfOrderCount == 0 ? nil : outOfOrder.first
        if let queued, queued.due <= now, heaped.map({ queued < $0 }) ?? true { return inOrder.removeFirst() }
        guard let heaped, heaped.due <= now else { return nil }
        outOfOrderCount -= 1
        return outOfOrder.popFirst()
    }
}

/// The earlier of two times, either of which may be missing.
func earlier(_ a: Instant?, _ b: Instant?) -> Instant? {
    guard let a else { return b }
    guard let b else { return a }
    return min(a, b)
}
