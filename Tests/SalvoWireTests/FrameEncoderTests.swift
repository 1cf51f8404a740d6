import SalvoWire
import Testing

@Suite("FrameEncoder")
struct FrameEncoderTests {
    let payload = Array(WireFixture.payloadText.utf8)

    /// The classic PHP sender: `chr(0) . pack('n', 32) . pack('H*', $token)
    /// . pack('n', strlen($payload)) . $payload`, rebuilt piece by piece.
    @Test("command 0 matches the classic PHP formula and the hand-written bytes")
    func simpleGolden() {
        var php: [UInt8] = [0]  // chr(0)
        php += [0x00, 0x20]  // pack('n', 32)
        php += wireHex(WireFixture.tokenHex)  // pack('H*', $token)
        php += [UInt8(payload.count >> 8), UInt8(payload.count & 0xFF)]  // pack('n', strlen($payload))
        php += payload

        let golden = wireHex("""
            00 0020
            000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
            0016 7b22617073223a7b22616c657274223a224869227d7d
            """)
        let encoder = FrameEncoder(format: .simple)
        // Identifier, expiry and priority do not exist in command 0: they must be ignored.
        let encoded = encodeFrame(
            encoder, token: WireFixture.token, payload: payload, identifier: 77, expiry: 5, priority: 5)
        #expect(php == golden)
        #expect(encoded == golden)
    }

    @Test("command 1 (enhanced) golden bytes")
    func enhancedGolden() {
        let golden = wireHex("""
            01 deadbeef 6553f100 0020
            000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
            0016 7b22617073223a7b22616c657274223a224869227d7d
            """)
        #expect(encodeFrame(FrameEncoder(format: .enhanced), token: WireFixture.token, payload: payload,
                            identifier: WireFixture.identifier, expiry: WireFixture.expiry, priority: 5) == golden)
    }

    @Test("command 1 writes expiry 0 when none is given")
    func enhancedDefaultExpiry() {
        let golden = wireHex("""
            01 00000007 00000000 0020
            000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
            0016 7b22617073223a7b22616c657274223a224869227d7d
            """)
        let encoded = encodeFrame(FrameEncoder(format: .enhanced), token: WireFixture.token, payload: payload, identifier: 7)
        #expect(encoded == golden)
    }

    @Test("command 2 with all five items: 61 + N bytes, frameLength 56 + N")
    func frameAllItemsGolden() {
        let golden = WireFixture.frameGolden
        let encoder = FrameEncoder()
        #expect(encoder.format == .frame)
        let encoded = encodeFrame(
            encoder, token: WireFixture.token, payload: payload,
            identifier: WireFixture.identifier, expiry: WireFixture.expiry, priority: 10)
        #expect(encoded == golden)
    }

    @Test("command 2 without expiry and priority")
    func frameMinimalGolden() {
        let golden = wireHex("""
            02 00000043
            01 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
            02 0016 7b22617073223a7b22616c657274223a224869227d7d
            03 0004 00000001
            """)
        let encoded = encodeFrame(FrameEncoder(), token: WireFixture.token, payload: payload, identifier: 1)
        #expect(encoded == golden)
    }

    @Test("command 2 with priority only, and with expiry only")
    func frameOneOptionalItemGolden() {
        let priorityOnly = wireHex("""
            02 00000047
            01 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
            02 0016 7b22617073223a7b22616c657274223a224869227d7d
            03 0004 deadbeef
            05 0001 05
            """)
        let expiryOnly = wireHex("""
            02 0000004a
            01 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
            02 0016 7b22617073223a7b22616c657274223a224869227d7d
            03 0004 deadbeef
            04 0004 00000000
            """)
        let encoder = FrameEncoder()
        #expect(
            encodeFrame(encoder, token: WireFixture.token, payload: payload, identifier: WireFixture.identifier, priority: 5)
                == priorityOnly)
        #expect(
            encodeFrame(encoder, token: WireFixture.token, payload: payload, identifier: WireFixture.identifier, expiry: 0)
                == expiryOnly)
    }

    @Test("encodedLength for every format and optional item", arguments: FrameFormat.allCases)
    func encodedLengths(format: FrameFormat) {
        let encoder = FrameEncoder(format: format)
        for n in [1, 22, 256, 2048] {
            for hasExpiry in [false, true] {
                for hasPriority in [false, true] {
                    let expected: Int
                    switch format {
                    case .simple: expected = 37 + n
                    case .enhanced: expected = 45 + n
                    case .frame: expected = 50 + n + (hasExpiry ? 7 : 0) + (hasPriority ? 4 : 0)
                    }
                    #expect(encoder.encodedLength(payloadLength: n, hasExpiry: hasExpiry, hasPriority: hasPriority) == expected)
                }
            }
        }
        #expect(FrameEncoder().encodedLength(payloadLength: 100) == 161)
    }

    @Test("a buffer one byte short gets needsCapacity and is left untouched", arguments: FrameFormat.allCases)
    func needsCapacity(format: FrameFormat) throws {
        let encoder = FrameEncoder(format: format)
        let needed = encoder.encodedLength(payloadLength: payload.count, hasExpiry: true, hasPriority: true)
        for size in [0, 1, needed - 1] {
            var buffer = [UInt8](repeating: 0xEE, count: size)
            let result = try buffer.withUnsafeMutableBytes { out in
                try payload.withUnsafeBytes { p in
                    try encoder.encode(
                        token: WireFixture.token, payload: p, identifier: 1, expiry: 2, priority: 10, into: out)
                }
            }
            #expect(result == .needsCapacity(needed))
            #expect(buffer.allSatisfy { $0 == 0xEE })
        }
        // Exactly enough room, and the bytes after the frame are not touched.
        var buffer = [UInt8](repeating: 0xEE, count: needed + 3)
        let result = try buffer.withUnsafeMutableBytes { out in
            try payload.withUnsafeBytes { p in
                try encoder.encode(token: WireFixture.token, payload: p, identifier: 1, expiry: 2, priority: 10, into: out)
            }
        }
        #expect(result == .written(needed))
        #expect(buffer[needed...].allSatisfy { $0 == 0xEE })
    }

    @Test("empty and oversized payloads throw, saying which and by how much")
    func payloadErrors() {
        let encoder = FrameEncoder()
        var buffer = [UInt8](repeating: 0xEE, count: 4096)
        buffer.withUnsafeMutableBytes { out in
            #expect(throws: FrameEncodingError.emptyPayload) {
                try encoder.encode(token: WireFixture.token, payload: UnsafeRawBufferPointer(start: nil, count: 0), identifier: 1, into: out)
            }
            let big = [UInt8](repeating: 0x61, count: 2049)
            big.withUnsafeBytes { p in
                #expect(throws: FrameEncodingError.payloadTooLong(length: 2049, maximum: 2048)) {
                    try encoder.encode(token: WireFixture.token, payload: p, identifier: 1, into: out)
                }
                // Exactly the maximum is fine.
                #expect((try? encoder.encode(
                    token: WireFixture.token, payload: UnsafeRawBufferPointer(rebasing: p[..<2048]),
                    identifier: 1, into: out)) == .written(50 + 2048))
            }
        }
        let legacy = FrameEncoder(format: .simple, maximumPayloadLength: 256)
        let payload257 = [UInt8](repeating: 0x61, count: 257)
        var untouched = [UInt8](repeating: 0xEE, count: 4096)
        untouched.withUnsafeMutableBytes { out in
            payload257.withUnsafeBytes { p in
                do throws(FrameEncodingError) {
                    _ = try legacy.encode(token: WireFixture.token, payload: p, identifier: 0, into: out)
                    Issue.record("expected an error")
                } catch {
                    #expect(error == .payloadTooLong(length: 257, maximum: 256))
                    #expect(error.description.contains("1 over the maximum of 256"))
                }
            }
        }
        #expect(untouched.allSatisfy { $0 == 0xEE })
    }
}
