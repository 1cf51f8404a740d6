// The channel id's check, old loop against table, on 1,000 ids of 24 characters, 10 M calls
// each. Run: swiftc -O channel-id-check.swift -o /tmp/channel-id-check && /tmp/channel-id-check
import Foundation

/// The old check: a bit per character in two 64-bit words (it vectorizes into emulated shifts).
@inline(never)
func bitPerCharacter(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard (1...255).contains(bytes.count) else { return false }
    let (low, high): (UInt64, UInt64) = (0x23FF_A800_0000_0000, 0x07FF_FFFE_87FF_FFFE)
    var invalid: UInt64 = 0
    for byte in bytes {
        let word = byte & 64 == 0 ? low : high
        invalid |= UInt64(byte >> 7) | ~(word >> UInt64(byte & 63)) & 1
    }
    return invalid == 0
}

/// The new check, as `BroadcastRules.isChannelID`: a table lookup per byte.
@inline(never)
func byTable(_ bytes: UnsafeRawBufferPointer) -> Bool {
    guard (1...255).contains(bytes.count) else { return false }
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

let ids: [[UInt8]] = (0..<1000).map { n in
    Array(Data((0..<16).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ n &* 7) }).base64EncodedString().utf8)
}
for byte in 0..<256 {
    [UInt8(byte)].withUnsafeBytes { precondition(bitPerCharacter($0) == byTable($0), "they differ on byte \(byte)") }
}

func time(_ name: String, _ check: (UnsafeRawBufferPointer) -> Bool) {
    var valid = 0
    let start = DispatchTime.now().uptimeNanoseconds
    for _ in 0..<10_000 {
        for id in ids { id.withUnsafeBytes { if check($0) { valid += 1 } } }
    }
    let nanoseconds = Double(DispatchTime.now().uptimeNanoseconds - start) / 10_000_000
    print(name, String(format: "%.1f ns a call", nanoseconds), "(\(valid) valid)")
}
for _ in 0..<2 {
    time("bit per character", bitPerCharacter)
    time("table", byTable)
}
