/// An `apns-id`: the UUID that names a notification to APNs, echoed in its answer.
///
/// Kept as 128 bits, not as text: the sender stores one per staged request, and writes
/// the canonical lowercase text (8-4-4-4-12 hex digits) only when it encodes the header.
public struct APNsID: Hashable, Sendable, CustomStringConvertible {
    /// The first 8 bytes, big endian.
    public let high: UInt64
    /// The last 8 bytes, big endian.
    public let low: UInt64

    /// The length of the canonical text.
    public static let textLength = 36

    /// The id of these 128 bits, as they are (no version or variant bits set).
    public init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// A version-4 UUID made of 128 bits (their version and variant bits are overwritten).
    public init(random high: UInt64, _ low: UInt64) {
        self.init(high: (high & ~0xF000) | 0x4000, low: (low & ~(0xC << 60)) | (0x8 << 60))
    }

    /// Parses the canonical form, 8-4-4-4-12 hex digits of either case; nil otherwise.
    public init?(text: UnsafeRawBufferPointer) {
        let dash = UInt8(ascii: "-")
        guard text.count == Self.textLength, text[8] == dash, text[13] == dash, text[18] == dash, text[23] == dash
        else { return nil }
        // The 32 digits without their hyphens, then read eight at a time (`HexText`): a
        // mock parses one per request.
        var digits: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        let groups = withUnsafeMutableBytes(of: &digits) { digits -> (UInt32, UInt32, UInt32, UInt32)? in
            let from = text.baseAddress!, to = digits.baseAddress!
            to.copyMemory(from: from, byteCount: 8)
            (to + 8).copyMemory(from: from + 9, byteCount: 4)
            (to + 12).copyMemory(from: from + 14, byteCount: 4)
            (to + 16).copyMemory(from: from + 19, byteCount: 4)
            (to + 20).copyMemory(from: from + 24, byteCount: 12)
            guard let a = HexText.parseEight(to), let b = HexText.parseEight(to + 8),
                  let c = HexText.parseEight(to + 16), let d = HexText.parseEight(to + 24) else { return nil }
            return (a.byteSwapped, b.byteSwapped, c.byteSwapped, d.byteSwapped)
        }
        guard let (a, b, c, d) = groups else { return nil }
        let high = UInt64(a) << 32 | UInt64(b), low = UInt64(c) << 32 | UInt64(d)
        self.init(high: high, low: low)
    }

    /// Parses the canonical form; nil when `text` is not a UUID.
    public init?(_ text: String) {
        var text = text
        guard let parsed = text.withUTF8({ APNsID(text: UnsafeRawBufferPointer($0)) }) else { return nil }
        self = parsed
    }

    /// Writes the lowercase canonical text into the first `textLength` bytes of `destination`.
    public func write(into destination: UnsafeMutableRawBufferPointer) {
        precondition(destination.count >= Self.textLength, "an apns-id needs \(Self.textLength) bytes")
        let text = destination.baseAddress!
        // 8-4-4-4-12 from four runs of eight digits: the second and third groups are the
        // halves of the second run, the fourth is half the third run, and the last twelve
        // are its other half and the fourth run.
        let second = HexText.digits(UInt32(truncatingIfNeeded: high)).littleEndian
        let fourth = HexText.digits(UInt32(truncatingIfNeeded: low >> 32)).littleEndian
        HexText.write(UInt32(truncatingIfNeeded: high >> 32), to: text)
        text.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 8, as: UInt8.self)
        text.storeBytes(of: UInt32(truncatingIfNeeded: second), toByteOffset: 9, as: UInt32.self)
        text.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 13, as: UInt8.self)
        text.storeBytes(of: UInt32(truncatingIfNeeded: second >> 32), toByteOffset: 14, as: UInt32.self)
        text.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 18, as: UInt8.self)
        text.storeBytes(of: UInt32(truncatingIfNeeded: fourth), toByteOffset: 19, as: UInt32.self)
        text.storeBytes(of: UInt8(ascii: "-"), toByteOffset: 23, as: UInt8.self)
        text.storeBytes(of: UInt32(truncatingIfNeeded: fourth >> 32), toByteOffset: 24, as: UInt32.self)
        HexText.write(UInt32(truncatingIfNeeded: low), to: text + 28)
    }

    /// The canonical lowercase text.
    public var description: String {
        String(unsafeUninitializedCapacity: Self.textLength) { buffer in
            write(into: UnsafeMutableRawBufferPointer(buffer))
            return Self.textLength
        }
    }
}
