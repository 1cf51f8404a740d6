/// Lowercase hexadecimal text, eight digits at a time: the nibbles of a 32-bit value are
/// spread one to a byte and made ASCII together, with no table and no branch per digit.
/// The sender writes a device token (64 digits) and an `apns-id` (32) into every request;
/// the `apns-id`, a digit at a time with its hyphens, took 3.5% of its loop threads' CPU.
@usableFromInline
enum LowercaseHex {
    /// The 8 digits of `value`, most significant first, as the bytes of the result lie in
    /// memory (store it little endian).
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

    /// Writes the 8 digits of `value` at `destination`.
    @inlinable @inline(__always)
    static func write(_ value: UInt32, to destination: UnsafeMutableRawPointer) {
        destination.storeBytes(of: digits(value).littleEndian, as: UInt64.self)
    }
}
