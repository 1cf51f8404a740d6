/// Hexadecimal text eight digits at a time, with word arithmetic (SWAR): no table, and no
/// branch per digit to mispredict on random digits. The sender writes a device token (64
/// digits) and an `apns-id` (32) into every request, and the mock reads both back, so a digit
/// at a time showed in both profiles. Measured: the Performance notes article
/// (SalvoEngine.docc/PerformanceNotes.md).
@usableFromInline
enum HexText {
    /// The 8 lowercase digits of `value`, most significant first, as the bytes of the
    /// result lie in memory once stored little endian.
    @inlinable @inline(__always)
    static func digits(_ value: UInt32) -> UInt64 {
        var x = UInt64(value)
        x = (x | x << 16) & 0x0000_FFFF_0000_FFFF
        x = (x | x << 8) & 0x00FF_00FF_00FF_00FF
        x = (x | x << 4) & 0x0F0F_0F0F_0F0F_0F0F
        // Byte i holds nibble i, the least significant first; the text starts with the most.
        x = x.byteSwapped
        // A nibble of 10 or more carries into its byte's bit 4 when 6 is added: those become
        // letters, 39 further on ("a" is "0" + 10 + 39).
        let letters = ((x &+ 0x0606_0606_0606_0606) >> 4) & 0x0101_0101_0101_0101
        return x &+ 0x3030_3030_3030_3030 &+ letters &* 39
    }

    /// Writes the 8 lowercase digits of `value` at `destination`.
    @inlinable @inline(__always)
    static func write(_ value: UInt32, to destination: UnsafeMutableRawPointer) {
        destination.storeBytes(of: digits(value).littleEndian, as: UInt64.self)
    }

    /// The 4 bytes the 8 digits (either case) at `text` spell, the first two digits in the
    /// lowest byte (so `byteSwapped` is their value as one number); nil if any is not a
    /// hex digit.
    @inlinable @inline(__always)
    static func parseEight(_ text: UnsafeRawPointer) -> UInt32? {
        let ones: UInt64 = 0x0101_0101_0101_0101
        let highBits: UInt64 = 0x8080_8080_8080_8080
        // The first character in the lowest byte, on any host.
        let v = UInt64(littleEndian: text.loadUnaligned(as: UInt64.self))
        guard v & highBits == 0 else { return nil }  // non-ASCII
        // A lane's high bit says "byte in [lo, hi]" (no carries: every byte is below 0x80).
        func within(_ x: UInt64, _ lo: UInt64, _ hi: UInt64) -> UInt64 {
            (x &+ (0x80 - lo) &* ones) & ~(x &+ (0x7F - hi) &* ones) & highBits
        }
        let isDigit = within(v, 0x30, 0x39)
        let isLetter = within(v | 0x2020_2020_2020_2020, 0x61, 0x66)
        guard isDigit | isLetter == highBits else { return nil }
        // '0'...'9' -> low nibble; 'a'...'f' and 'A'...'F' -> low nibble + 9.
        let nibbles = (v & 0x0F0F_0F0F_0F0F_0F0F) &+ (isLetter >> 7) &* 9
        // Pair the nibbles into bytes, then gather the four bytes into the low 32 bits.
        var x = ((nibbles << 4) | (nibbles >> 8)) & 0x00FF_00FF_00FF_00FF
        x = (x | (x >> 8)) & 0x0000_FFFF_0000_FFFF
        x = (x | (x >> 16)) & 0x0000_0000_FFFF_FFFF
        return UInt32(truncatingIfNeeded: x)
    }
}
