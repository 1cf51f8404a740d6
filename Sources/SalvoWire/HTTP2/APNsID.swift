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
        guard text.count == Self.textLength else { return nil }
        var high: UInt64 = 0, low: UInt64 = 0
        guard text[8] == UInt8(ascii: "-"), text[13] == UInt8(ascii: "-"), text[18] == UInt8(ascii: "-"),
              text[23] == UInt8(ascii: "-") else { return nil }
        var digits = 0
        for offset in 0..<Self.textLength where offset != 8 && offset != 13 && offset != 18 && offset != 23 {
            guard let value = DeviceToken.nibble(text[offset]) else { return nil }
            if digits < 16 { high = high << 4 | UInt64(value) } else { low = low << 4 | UInt64(value) }
            digits += 1
        }
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
        var at = 0
        for digit in 0..<32 {
            // Hyphens before hex digits 8, 12, 16 and 20.
            if digit == 8 || digit == 12 || digit == 16 || digit == 20 {
                destination[at] = UInt8(ascii: "-")
                at += 1
            }
            let value = digit < 16 ? high : low
            destination[at] = Self.hexDigits.utf8Start[Int(value >> UInt64(60 - 4 * (digit % 16)) & 0xF)]
            at += 1
        }
    }

    /// The canonical lowercase text.
    public var description: String {
        String(unsafeUninitializedCapacity: Self.textLength) { buffer in
            write(into: UnsafeMutableRawBufferPointer(buffer))
            return Self.textLength
        }
    }

    private static let hexDigits: StaticString = "0123456789abcdef"
}
