/// A message of the binary protocol that always takes `byteCount` bytes on the wire (an
/// error response, a feedback tuple).
public protocol FixedLengthRecord {
    /// The length on the wire.
    static var byteCount: Int { get }
    /// Writes the `byteCount` bytes to `destination`, which must have room for them.
    func encode(to destination: UnsafeMutableRawPointer)
}

extension FixedLengthRecord {
    /// The record's bytes as an array.
    public var bytes: [UInt8] {
        [UInt8](unsafeUninitializedCapacity: Self.byteCount) { buffer, count in
            encode(to: UnsafeMutableRawPointer(buffer.baseAddress!))
            count = Self.byteCount
        }
    }
}
