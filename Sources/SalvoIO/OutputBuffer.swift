/// Bytes waiting for the socket: appended at the end, written from the front. Grows when
/// a burst needs it and keeps its size, so steady traffic allocates nothing. Shared by the
/// HTTP/2 mock and the HTTP/2 sender, which gather their frames here before `SSL_write`.
package struct OutputBuffer: ~Copyable {
    private var storage: UnsafeMutableRawBufferPointer
    private var start = 0
    private var end = 0

    package init(capacity: Int) { storage = .allocate(byteCount: capacity, alignment: 16) }

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
        if start == end { start = 0; end = 0 }
    }

    /// Takes everything waiting, leaving the buffer empty.
    package mutating func takeAll() -> [UInt8] {
        defer { consume(count) }
        return Array(readable)
    }

    private mutating func makeRoom(for needed: Int) {
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
