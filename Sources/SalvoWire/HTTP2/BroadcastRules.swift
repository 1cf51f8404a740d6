/// What Apple takes in a broadcast (`POST /4/broadcasts/apps/<bundle id>`, iOS 18 Live
/// Activities): checked before sending, so that a line that could only be refused is
/// refused where it is read, saying why.
public enum BroadcastRules {
    /// The longest channel id sent. Apple's are 24 base64 characters, but it says not to
    /// count on a length; this bounds what a request record holds.
    public static let channelIDLimit = 255
    /// The largest broadcast payload, in bytes.
    public static let payloadLimit = 5120

    /// Whether `bytes` is a channel id: 1 to `channelIDLimit` characters of base64, in
    /// either alphabet, with padding. Inlinable, with a bit per character in two words and
    /// no branch per byte: the encoder checks every broadcast's channel id.
    @inlinable
    public static func isChannelID(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard (1...channelIDLimit).contains(bytes.count) else { return false }
        // Bit c set: character c may be in an id; `low` for 0...63 (+ - / 0-9 =), `high`
        // for 64...127 less 64 (A-Z _ a-z).
        let (low, high): (UInt64, UInt64) = (0x23FF_A800_0000_0000, 0x07FF_FFFE_87FF_FFFE)
        var invalid: UInt64 = 0
        for byte in bytes {
            let word = byte & 64 == 0 ? low : high
            invalid |= UInt64(byte >> 7) | ~(word >> UInt64(byte & 63)) & 1
        }
        return invalid == 0
    }

    /// Whether `text` is a channel id (`isChannelID(_:)`).
    public static func isChannelID(_ text: some StringProtocol) -> Bool {
        var text = String(text)
        return text.withUTF8 { isChannelID(UnsafeRawBufferPointer($0)) }
    }
}
