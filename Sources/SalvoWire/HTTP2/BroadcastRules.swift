/// What Apple takes in a broadcast (`POST /4/broadcasts/apps/<bundle id>`, iOS 18 Live
/// Activities): checked before sending, so that a line that could only be refused is
/// refused where it is read, saying why.
public enum BroadcastRules {
    /// The longest channel id sent. Apple's are 24 base64 characters, but it says not to
    /// count on a length; this bounds what a request record holds.
    public static let channelIDLimit = 255
    /// The largest broadcast payload, in bytes.
    public static let payloadLimit = 5120

    /// Whether `byte` may be in a channel id: base64, in either alphabet, with padding.
    /// Inlinable: the encoder checks every byte of every broadcast's channel id.
    @inlinable
    public static func isChannelIDCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "+"), UInt8(ascii: "/"), UInt8(ascii: "="), UInt8(ascii: "-"), UInt8(ascii: "_"):
            true
        default: false
        }
    }
}
