/// Bytes waiting for the socket: appended at the end, written from the front. Grows when
/// a burst needs it and keeps its size, so steady traffic allocates nothing. Shared by the
/// HTTP/2 mock and the HTTP/2 sender, which gather their frames here before `SSL_write`.
///
/// A buffer made `sharing` a thread's `SharedOutputBuffers` holds its storage only while
/// bytes wait: it takes storage when it is written to, and gives it back once the socket
/// has taken everything.
package struct OutputBuffer: ~Copyable {
    private var storage: UnsafeMutableRawBufferPointer
    private var start = 0
    private var end = 0
    /// Where storage comes from and goes back to, or nil: the buffer keeps its own.
    private let shared: SharedOutputBuffers?
    /// The storage it takes from `shared`: at least this much.
    private let capacity: Int

    package init(capacity: Int) {
        storage = .allocate(byteCount: capacity, alignment: 16)
        self.capacity = capacity
        shared = nil
    }

    /// Holds no storage while empty; takes `capacity` bytes or more from `shared` when written to.
    package init(capacity: Int, sharing shared: SharedOutputBuffers) {
        storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        self.capacity = capacity
        self.shared = shared
    }

    deinit { storage.deallocate() }

    /// Bytes waiting.
    package var count: Int { end - start }
    package var isEmpty: Bool { start == end }

    /// The waiting bytes; valid until the next mutation.
    package var readable: UnsafeRawBufferPointer { UnsafeRawBufferPointer(rebasing: storage[start..<end]) }

    package mutating func append(_ bytes: UnsafeRawBufferPointer) {
        if storage.count - end < bytes.count { makeRoom(for: bytes.count) }
        UnsafeMutableRawBufferPointer(rebasing: storage[end..<end + bytes.count]).copyMemory(from: bytes)
        end += bytes.count
    }

    /// Lets `write` put at most `maximum` bytes straight after the waiting ones; it returns
    /// how many it wrote. The HTTP/2 client encodes its frames this way, without a copy.
    package mutating func append(upTo maximum: Int, _ write: (UnsafeMutableRawBufferPointer) -> Int) {
        if storage.count - end < maximum { makeRoom(for: maximum) }
        let written = write(UnsafeMutableRawBufferPointer(rebasing: storage[end..<end + maximum]))
        precondition(written <= maximum, "wrote more than the room asked for")
        end += written
    }

    /// Drops the first `n` waiting bytes (they were written).
    package mutating func consume(_ n: Int) {
        start += n
        guard start == end else { return }
        start = 0
        end = 0
        if let shared {
            shared.giveBack(storage)
            storage = UnsafeMutableRawBufferPointer(start: nil, count: 0)
        }
    }

    /// Takes everything waiting, leaving the buffer empty.
    package mutating func takeAll() -> [UInt8] {
        defer { consume(count) }
        return Array(readable)
    }

    private mutating func makeRoom(for needed: Int) {
        if storage.baseAddress == nil, let shared {
            storage = shared.take(atLeast: max(capacity, needed))
            return
        }
        let waiting = count
        if storage.count - waiting >= needed {
            // Moving the waiting bytes to the front is enough.
            UnsafeMutableRawBufferPointer(rebasing: storage[0..<waiting]).copyMemory(from: readable)
        } else {
            let larger = UnsafeMutableRawBufferPointer.allocate(byteCount: max(2 * storage.count, waiting + needed), alignment: 16)
            UnsafeMutableRawBufferPointer(rebasing: larger[0..<waiting]).copyMemory(from: readable)
            storage.deallocate()
            storage = larger
        }
        start = 0
        end = waiting
    }
}

/// Output storage that the connections of one loop thread take turns with. A connection
/// holds some only while its frames wait for the socket, and the socket mostly takes them
/// at once, so a thread with many connections keeps about one buffer, not one each. Loop
/// thread only.
///
/// It keeps every buffer given back: as many as were ever held at once (by the connections
/// whose sockets were full, and one more), so that a burst of full sockets, which comes
/// again, allocates nothing the next time.
package final class SharedOutputBuffers {
    /// Buffers nobody holds.
    @exclusivity(unchecked) private var spare: [UnsafeMutableRawBufferPointer] = []

    package init() {}

    deinit { spare.forEach { $0.deallocate() } }

    /// Idle buffers now kept.
    package var spareCount: Int { spare.count }

    func take(atLeast capacity: Int) -> UnsafeMutableRawBufferPointer {
        if let last = spare.last, last.count >= capacity { return spare.removeLast() }
        return .allocate(byteCount: capacity, alignment: 16)
    }

    func giveBack(_ storage: UnsafeMutableRawBufferPointer) { spare.append(storage) }
}
