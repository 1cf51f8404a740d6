/// A cursor over memory the caller made room for: the HTTP/2 frame and HPACK writers put
/// their bytes through it. Writing past the end traps (the callers size their room from
/// upper bounds, so that would be a bug, not bad input).
public struct ByteWriter {
    /// The room the caller made.
    public let buffer: UnsafeMutableRawBufferPointer
    /// Bytes written so far, from the start of `buffer`.
    public private(set) var count = 0

    /// A writer at the start of `buffer`.
    public init(_ buffer: UnsafeMutableRawBufferPointer) { self.buffer = buffer }

    /// The room after what was written.
    public var freeSpace: UnsafeMutableRawBufferPointer { UnsafeMutableRawBufferPointer(rebasing: buffer[count...]) }

    /// Takes the next `n` bytes, to be filled now or later (a frame header whose length is
    /// known once its payload is written).
    public mutating func reserve(_ n: Int) -> UnsafeMutableRawPointer {
        precondition(buffer.count - count >= n, "ByteWriter: more bytes than the room made for them")
        defer { count += n }
        return buffer.baseAddress! + count
    }

    /// Counts `n` bytes written into `freeSpace` as written.
    public mutating func advance(by n: Int) { _ = reserve(n) }

    /// Writes one byte.
    public mutating func write(_ byte: UInt8) { reserve(1).storeBytes(of: byte, as: UInt8.self) }

    /// Copies `bytes` in.
    public mutating func write(_ bytes: UnsafeRawBufferPointer) {
        guard let source = bytes.baseAddress else { return }
        reserve(bytes.count).copyMemory(from: source, byteCount: bytes.count)
    }

    /// Writes `value` in network byte order.
    public mutating func write<T: FixedWidthInteger>(bigEndian value: T) {
        reserve(MemoryLayout<T>.size).storeBytes(of: value.bigEndian, as: T.self)
    }
}
