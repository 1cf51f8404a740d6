/// A binary min-heap in an array that keeps its capacity: once it has held n elements,
/// holding n again allocates nothing. The event loop's timers and the HTTP/2 mock's held
/// answers both sit in one.
///
/// Invariant: for every element at index i > 0, `elements[(i - 1) / 2]` is not greater.
///
/// Inlinable, so that each module using it gets a copy specialized for its element: a
/// generic call per held answer was most of the mock's cost of holding them.
package struct MinHeap<Element: Comparable> {
    @usableFromInline var elements: [Element] = []

    @inlinable package init() {}

    /// The smallest element.
    @inlinable package var first: Element? { elements.first }

    @inlinable package mutating func insert(_ element: Element) {
        elements.append(element)
        var child = elements.count - 1
        while child > 0 {
            let parent = (child - 1) / 2
            guard elements[child] < elements[parent] else { break }
            elements.swapAt(child, parent)
            child = parent
        }
    }

    /// Removes and returns the smallest element.
    @inlinable package mutating func popFirst() -> Element? {
        guard !elements.isEmpty else { return nil }
        elements.swapAt(0, elements.count - 1)
        let first = elements.removeLast()
        var parent = 0
        while true {
            let left = 2 * parent + 1
            guard left < elements.count else { break }
            let right = left + 1
            let smaller = right < elements.count && elements[right] < elements[left] ? right : left
            guard elements[smaller] < elements[parent] else { break }
            elements.swapAt(parent, smaller)
            parent = smaller
        }
        return first
    }
}
