import DequeModule

/// Request bodies from the moment their request is submitted until the session has taken
/// them into DATA frames, in submission order: a ring whose space comes back in order as
/// bodies are taken. The staging ring's record is released when the request is submitted,
/// so its payload is copied here once; the session normally takes it right away, in the
/// submit, and only flow control (a gateway that does not read) keeps bodies here longer.
/// A full arena stops new requests until the gateway reads again.
struct BodyArena: ~Copyable {
    /// One body: where it is, how much of it the session took, whether it is done with.
    struct Body {
        var start: UInt64
        var length: Int
        var taken = 0
        var isDone = false
    }

    let capacity: Int
    /// Allocated at the first body kept: a sender keeps an arena per connection, and most
    /// never keep one.
    private var storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// Live bodies in submission order; `bodies[i]` has number `firstNumber + i`.
    private var bodies: Deque<Body> = []
    private var firstNumber: UInt64 = 0
    /// Virtual offsets: bytes before `released` are free again; the next body starts at `end`.
    private var released: UInt64 = 0
    private var end: UInt64 = 0

    init(capacity: Int) { self.capacity = capacity }

    deinit { storage.deallocate() }

    /// Copies `bytes` in and returns the body's number, or nil when there is no room now.
    mutating func store(_ bytes: UnsafeRawBufferPointer) -> UInt64? {
        precondition(bytes.count <= capacity / 2, "a body must fit the arena twice over")
        guard let start = placement(for: bytes.count) else { return nil }
        if storage.baseAddress == nil { storage = .allocate(byteCount: capacity, alignment: 16) }
        let at = Int(start % UInt64(capacity))
        UnsafeMutableRawBufferPointer(rebasing: storage[at..<at + bytes.count]).copyMemory(from: bytes)
        end = start + UInt64(bytes.count)
        bodies.append(Body(start: start, length: bytes.count))
        return firstNumber + UInt64(bodies.count - 1)
    }

    /// Copies the next bytes of body `number` into `destination`; returns how many, and
    /// whether that was the rest of it.
    mutating func take(_ number: UInt64, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool) {
        let place = Int(number - firstNumber)
        let body = bodies[place]
        let count = min(destination.count, body.length - body.taken)
        let at = Int((body.start + UInt64(body.taken)) % UInt64(capacity))
        destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: storage[at..<at + count]))
        bodies[place].taken += count
        return (count, bodies[place].taken == body.length)
    }

    /// Body `number` is no longer needed (taken whole, or its stream ended): its space comes
    /// back once every body before it is done with too.
    mutating func done(_ number: UInt64) {
        guard number >= firstNumber, number - firstNumber < UInt64(bodies.count) else { return }
        bodies[Int(number - firstNumber)].isDone = true
        while let first = bodies.first, first.isDone {
            released = first.start + UInt64(first.length)
            bodies.removeFirst()
            firstNumber += 1
        }
        // Empty: the next body starts at the beginning of the storage again, so that an
        // arena whose bodies leave as they come (the usual case) keeps its first pages
        // warm and never touches the rest of its capacity: those pages never become resident.
        if bodies.isEmpty {
            let capacity = UInt64(capacity)
            end = (end + capacity - 1) / capacity * capacity
            released = end
        }
    }

    /// Whether a body of `length` bytes would fit now.
    func hasRoom(for length: Int) -> Bool { placement(for: length) != nil }

    /// Where a body of `length` bytes would start, or nil when it does not fit now. Bodies
    /// never wrap: one that would cross the end of the storage starts at its beginning.
    private func placement(for length: Int) -> UInt64? {
        var start = end
        let physical = Int(start % UInt64(capacity))
        if physical + length > capacity { start += UInt64(capacity - physical) }
        return start + UInt64(length) - released <= UInt64(capacity) ? start : nil
    }
}
