import SalvoWire
import Testing

/// What a channel id may be, checked against the alphabets spelled out.
@Suite struct BroadcastRulesTests {
    @Test func aChannelIDIsBase64InEitherAlphabetWithPadding() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/-_=".utf8)
        for byte in UInt8.min...UInt8.max {
            #expect([byte].withUnsafeBytes { BroadcastRules.isChannelID($0) } == allowed.contains(byte),
                    "byte \(byte)")
            // Anywhere in an id.
            let id = Array("dHN0LXNyY2g".utf8) + [byte] + Array("tY2hubA==".utf8)
            #expect(id.withUnsafeBytes { BroadcastRules.isChannelID($0) } == allowed.contains(byte), "byte \(byte) inside")
        }
        #expect(BroadcastRules.isChannelID("dHN0LXNyY2gtY2hubA=="))
        #expect(!BroadcastRules.isChannelID(""))
        #expect(BroadcastRules.isChannelID(String(repeating: "A", count: BroadcastRules.channelIDLimit)))
        #expect(!BroadcastRules.isChannelID(String(repeating: "A", count: BroadcastRules.channelIDLimit + 1)))
    }
}
