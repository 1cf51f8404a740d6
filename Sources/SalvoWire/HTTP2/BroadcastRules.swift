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
    /// either alphabet, with padding. Inlinable, one table lookup per byte and no branch:
    /// the encoder checks every broadcast's channel id.
    @inlinable
    public static func isChannelID(_ bytes: UnsafeRawBufferPointer) -> Bool {
        guard (1...channelIDLimit).contains(bytes.count) else { return false }
        // Character c is "1" ("0") when ASCII c may (may not) be in an id, 32 to a line:
        // + - / 0-9 = on the second line, A-Z _ and a-z on the last two. A shift and mask
        // per byte over two 64-bit words instead vectorizes badly.
        let allowed: StaticString = """
            00000000000000000000000000000000\
            00000000000101011111111111000100\
            01111111111111111111111111100001\
            01111111111111111111111111100000
            """
        let table = allowed.utf8Start
        var all: UInt8 = 1
        var seen: UInt8 = 0
        for byte in bytes {
            all &= table[Int(byte & 127)]
            seen |= byte
        }
        return all & 1 == 1 && seen < 128
    }

    /// Whether `text` is a channel id (`isChannelID(_:)`).
    public static func isChannelID(_ text: some StringProtocol) -> Bool {
        var text = String(text)
        return text.withUTF8 { isChannelID(UnsafeRawBufferPointer($0)) }
    }
}
