import Testing
@testable import SalvoWire

@Suite("DeviceToken")
struct DeviceTokenTests {
    static let sampleHex = "00112233445566778899aabbccddeeff0123456789abcdeffedcba9876543210"
    static let sampleBytes: [UInt8] = [
        0x00, 0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x88, 0x99, 0xAA, 0xBB, 0xCC, 0xDD, 0xEE, 0xFF,
        0x01, 0x23, 0x45, 0x67, 0x89, 0xAB, 0xCD, 0xEF, 0xFE, 0xDC, 0xBA, 0x98, 0x76, 0x54, 0x32, 0x10,
    ]

    func bytes(of token: DeviceToken) -> [UInt8] {
        token.withUnsafeBytes { Array($0) }
    }

    @Test func everyByteValueInEveryPositionIsJudgedLikeTheCharacterLoop() throws {
        // The word-at-a-time fast path must agree with a plain per-character check for
        // every byte value, wherever it stands in the 64 characters.
        let base = Array(String(repeating: "0123456789abcdefABCDEF", count: 3).utf8.prefix(64))
        let expected = try base.withUnsafeBytes { try DeviceToken(hex: $0) }
        for position in stride(from: 0, to: 64, by: 7) {
            for value in 0...255 {
                var text = base
                text[position] = UInt8(value)
                let isHex = (0x30...0x39).contains(value) || (0x41...0x46).contains(value) || (0x61...0x66).contains(value)
                let result = text.withUnsafeBytes { bytes in Result { () throws(DeviceTokenError) in try DeviceToken(hex: bytes) } }
                switch result {
                case .success(let token):
                    #expect(isHex, "byte \(value) at \(position) was accepted")
                    let nibble = UInt8(value <= 0x39 ? value - 0x30 : (value | 0x20) - 0x61 + 10)
                    let byte = token.withUnsafeBytes { $0[position / 2] }
                    let original = expected.withUnsafeBytes { $0[position / 2] }
                    let want = position % 2 == 0 ? (nibble << 4 | original & 0x0F) : (original & 0xF0 | nibble)
                    #expect(byte == want)
                case .failure(let error):
                    // Whitespace at either end is trimmed, which changes the length instead.
                    let trimmedAway = [0x09, 0x0A, 0x0D, 0x20].contains(value) && (position == 0 || position == 63)
                    #expect(!isHex)
                    if !trimmedAway {
                        guard case .invalidCharacter(_, let reported) = error else {
                            Issue.record("byte \(value) at \(position): \(error)")
                            continue
                        }
                        #expect(reported == position + 1)
                    }
                }
            }
        }
    }

    @Test func parsesLowercaseHexIntoBytesInOrder() throws {
        let token = try DeviceToken(hex: Self.sampleHex)
        #expect(bytes(of: token) == Self.sampleBytes)
        #expect(token.hex == Self.sampleHex)
        #expect(token.description == Self.sampleHex)
    }

    @Test func parsesUppercaseAndMixedCase() throws {
        let upper = try DeviceToken(hex: Self.sampleHex.uppercased())
        let mixed = try DeviceToken(hex: "00112233445566778899AaBbCcDdEeFf0123456789aBcDeFfEdCbA9876543210")
        let lower = try DeviceToken(hex: Self.sampleHex)
        #expect(upper == lower)
        #expect(mixed == lower)
        #expect(upper.hex == Self.sampleHex)
    }

    @Test(arguments: [
        " \(sampleHex)", "\(sampleHex) ", "\t\(sampleHex)\r\n", "\n\n  \(sampleHex)\t \r", "\(sampleHex)\n",
    ])
    func trimsSurroundingWhitespace(_ text: String) throws {
        #expect(try DeviceToken(hex: text).hex == Self.sampleHex)
    }

    @Test func acceptsSubstring() throws {
        let line = "token=\(Self.sampleHex);"
        let slice = line.dropFirst(6).dropLast()
        #expect(try DeviceToken(hex: slice).hex == Self.sampleHex)
    }

    @Test func parsesRawUTF8WithTrimming() throws {
        let line = Array("  \(Self.sampleHex)\r\n".utf8)
        let token = try line.withUnsafeBytes { raw throws(DeviceTokenError) in try DeviceToken(hex: raw) }
        #expect(token.hex == Self.sampleHex)
    }

    @Test func rawBytesRoundTrip() throws {
        let token = try Self.sampleBytes.withUnsafeBytes { raw throws(DeviceTokenError) in try DeviceToken(bytes: raw) }
        #expect(token.hex == Self.sampleHex)
        var copy = [UInt8](repeating: 0xEE, count: 34)
        copy.withUnsafeMutableBytes { token.copyBytes(to: $0.baseAddress! + 1) }
        #expect(copy[0] == 0xEE && copy[33] == 0xEE)
        #expect(Array(copy[1...32]) == Self.sampleBytes)
    }

    @Test func hexRoundTripForManyTokens() throws {
        var generator = SplitMix64(seed: 0x70C3)
        for _ in 0..<200 {
            let raw = (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
            let token = try raw.withUnsafeBytes { r throws(DeviceTokenError) in try DeviceToken(bytes: r) }
            let reparsed = try DeviceToken(hex: token.hex)
            #expect(reparsed == token)
            #expect(bytes(of: reparsed) == raw)
            #expect(reparsed.hashValue == token.hashValue)
        }
    }

    @Test func equalityAndHashingDistinguishEveryByte() throws {
        let base = try DeviceToken(hex: Self.sampleHex)
        var set: Set<DeviceToken> = [base]
        for index in 0..<32 {
            var raw = Self.sampleBytes
            raw[index] ^= 0x01
            let other = try raw.withUnsafeBytes { r throws(DeviceTokenError) in try DeviceToken(bytes: r) }
            #expect(other != base)
            set.insert(other)
        }
        #expect(set.count == 33)
        #expect(MemoryLayout<DeviceToken>.size == 32)
    }

    // MARK: errors

    @Test(arguments: ["", " ", "\t\r\n ", "\n"])
    func emptyText(_ text: String) {
        #expect(throws: DeviceTokenError.empty) { try DeviceToken(hex: text) }
    }

    @Test func oddLengthReportsDigitCount() {
        #expect(throws: DeviceTokenError.oddLength(63)) { try DeviceToken(hex: String(Self.sampleHex.dropLast())) }
        #expect(throws: DeviceTokenError.oddLength(3)) { try DeviceToken(hex: " abc ") }
    }

    @Test func wrongLengthReportsBytes() {
        #expect(throws: DeviceTokenError.wrongLength(bytes: 31)) { try DeviceToken(hex: String(Self.sampleHex.dropLast(2))) }
        #expect(throws: DeviceTokenError.wrongLength(bytes: 33)) { try DeviceToken(hex: Self.sampleHex + "ab") }
        #expect(throws: DeviceTokenError.wrongLength(bytes: 1)) { try DeviceToken(hex: "ab") }
        #expect(throws: DeviceTokenError.wrongLength(bytes: 31)) {
            try [UInt8](repeating: 0, count: 31).withUnsafeBytes { r throws(DeviceTokenError) in try DeviceToken(bytes: r) }
        }
        #expect(throws: DeviceTokenError.wrongLength(bytes: 0)) {
            try [UInt8]().withUnsafeBytes { r throws(DeviceTokenError) in try DeviceToken(bytes: r) }
        }
    }

    @Test func invalidCharacterReportsOneBasedPositionInTrimmedText() {
        var text = Array(Self.sampleHex)
        text[16] = "g"
        #expect(throws: DeviceTokenError.invalidCharacter("g", position: 17)) {
            try DeviceToken(hex: "  " + String(text) + "\n")
        }
        // First and last characters of a full-length token.
        #expect(throws: DeviceTokenError.invalidCharacter("x", position: 1)) {
            try DeviceToken(hex: "x" + Self.sampleHex.dropFirst())
        }
        #expect(throws: DeviceTokenError.invalidCharacter("Z", position: 64)) {
            try DeviceToken(hex: Self.sampleHex.dropLast() + "Z")
        }
        // Interior whitespace is not trimmed.
        #expect(throws: DeviceTokenError.invalidCharacter(" ", position: 9)) {
            try DeviceToken(hex: "00112233 44556677")
        }
        // A bad character wins over a bad length, and non-ASCII is named as a character.
        #expect(throws: DeviceTokenError.invalidCharacter("é", position: 4)) { try DeviceToken(hex: "abcé") }
        #expect(throws: DeviceTokenError.invalidCharacter("👍", position: 3)) { try DeviceToken(hex: "ab👍") }
    }

    @Test func invalidRawUTF8IsReportedAsReplacementCharacter() {
        let line: [UInt8] = [0x61, 0x62, 0xFF, 0x63]
        #expect(throws: DeviceTokenError.invalidCharacter("\u{FFFD}", position: 3)) {
            try line.withUnsafeBytes { r throws(DeviceTokenError) in try DeviceToken(hex: r) }
        }
    }

    @Test func errorDescriptionsSayWhatIsWrong() {
        #expect(DeviceTokenError.wrongLength(bytes: 31).description
            == "device token has 31 bytes; APNs tokens are 32 bytes (64 hex characters)")
        #expect(DeviceTokenError.invalidCharacter("g", position: 17).description
            == "non-hex character 'g' at position 17 of the device token")
        #expect(DeviceTokenError.invalidCharacter(" ", position: 9).description
            == "non-hex character U+20 at position 9 of the device token")
        #expect(DeviceTokenError.oddLength(63).description.contains("63 hex characters"))
        #expect(DeviceTokenError.empty.description.contains("empty"))
    }
}
