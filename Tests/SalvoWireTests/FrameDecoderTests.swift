import SalvoWire
import Testing

@Suite("FrameDecoder")
struct FrameDecoderTests {
    static let tokenBytes = wireHex(WireFixture.tokenHex)
    static let payloadBytes = Array(WireFixture.payloadText.utf8)

    static let simpleGolden = wireHex("""
        00 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
        0016 7b22617073223a7b22616c657274223a224869227d7d
        """)
    static let enhancedGolden = wireHex("""
        01 deadbeef 6553f100 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
        0016 7b22617073223a7b22616c657274223a224869227d7d
        """)
    static let frameGolden = WireFixture.frameGolden
    /// Items in reverse order, no expiry: order is free in command 2.
    static let frameReorderedGolden = wireHex("""
        02 00000047
        05 0001 05
        03 0004 00000009
        02 0016 7b22617073223a7b22616c657274223a224869227d7d
        01 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
        """)

    @Test("golden frames of every command decode to their fields")
    func goldenDecode() {
        let stream = Self.simpleGolden + Self.enhancedGolden + Self.frameGolden + Self.frameReorderedGolden
        let expected = [
            DecodedRecord(format: .simple, identifier: 0, expiry: nil, priority: nil, token: Self.tokenBytes, payload: Self.payloadBytes),
            DecodedRecord(format: .enhanced, identifier: 0xDEAD_BEEF, expiry: 1_700_000_000, priority: nil, token: Self.tokenBytes, payload: Self.payloadBytes),
            DecodedRecord(format: .frame, identifier: 0xDEAD_BEEF, expiry: 1_700_000_000, priority: 10, token: Self.tokenBytes, payload: Self.payloadBytes),
            DecodedRecord(format: .frame, identifier: 9, expiry: nil, priority: 5, token: Self.tokenBytes, payload: Self.payloadBytes),
        ]
        for outcome in [decodeWhole(stream), decodeByteByByte(stream)] {
            #expect(outcome.records == expected)
            #expect(outcome.stop == nil)
            #expect(outcome.pending == 0)
        }
    }

    @Test("views point into the input when a frame is whole, and the token copies out")
    func zeroCopyViews() {
        var decoder = FrameDecoder()
        Self.frameGolden.withUnsafeBytes { input in
            var calls = 0
            let stop = decoder.decode(input) { notification in
                calls += 1
                #expect(notification.token.baseAddress == input.baseAddress! + 8)
                #expect(notification.payload.baseAddress == input.baseAddress! + 43)
                #expect(notification.deviceToken == WireFixture.token)
                return true
            }
            #expect(stop == nil)
            #expect(calls == 1)
        }
    }

    @Test("every truncation of a frame yields nothing and waits for the rest")
    func truncatedWaits() {
        for golden in [Self.simpleGolden, Self.enhancedGolden, Self.frameGolden, Self.frameReorderedGolden] {
            for cut in 1..<golden.count {
                var decoder = FrameDecoder()
                var seen = 0
                let first = golden[..<cut].withUnsafeBytes { decoder.decode($0) { _ in seen += 1; return true } }
                #expect(first == nil)
                #expect(seen == 0)
                #expect(decoder.pendingByteCount == cut)
                let second = golden[cut...].withUnsafeBytes { decoder.decode($0) { _ in seen += 1; return true } }
                #expect(second == nil)
                #expect(seen == 1)
                #expect(decoder.pendingByteCount == 0)
            }
        }
        // An empty feed is a no-op.
        var decoder = FrameDecoder()
        #expect(decoder.decode(UnsafeRawBufferPointer(start: nil, count: 0)) { _ in true } == nil)
        #expect(decoder.finished == nil)
    }

    /// Random notifications in all three formats, encoded into one stream, must decode to
    /// the same records whether fed whole, byte by byte, or in random splits.
    @Test("seeded randomized round trips, whole / byte by byte / random splits", arguments: [1, 2, 3, 4] as [UInt64])
    func randomizedRoundTrips(seed: UInt64) {
        var rng = SplitMix64(seed: seed &* 0x1234_5678_9ABC)
        var stream: [UInt8] = []
        var expected: [DecodedRecord] = []
        let count = 250
        for index in 0..<count {
            let format = FrameFormat.allCases.randomElement(using: &rng)!
            let token = WireFixture.randomToken(&rng)
            // Include the extremes every so often.
            let length: Int
            switch index % 10 {
            case 0: length = 1
            case 1: length = 2048
            case 2, 3, 4: length = Int.random(in: 1...300, using: &rng)
            default: length = Int.random(in: 1...2048, using: &rng)
            }
            let payload = (0..<length).map { _ in UInt8.random(in: 0...255, using: &rng) }
            let identifier = UInt32.random(in: 0...UInt32.max, using: &rng)
            let expiry: UInt32? = Bool.random(using: &rng) ? UInt32.random(in: 0...UInt32.max, using: &rng) : nil
            let priority: UInt8? = [nil, 5, 10].randomElement(using: &rng)!
            stream += encodeFrame(
                FrameEncoder(format: format), token: token, payload: payload,
                identifier: identifier, expiry: expiry, priority: priority)
            let tokenBytes = token.withUnsafeBytes { Array($0) }
            switch format {
            case .simple:
                expected.append(DecodedRecord(format: .simple, identifier: 0, expiry: nil, priority: nil, token: tokenBytes, payload: payload))
            case .enhanced:
                expected.append(DecodedRecord(format: .enhanced, identifier: identifier, expiry: expiry ?? 0, priority: nil, token: tokenBytes, payload: payload))
            case .frame:
                expected.append(DecodedRecord(format: .frame, identifier: identifier, expiry: expiry, priority: priority, token: tokenBytes, payload: payload))
            }
        }

        let whole = decodeWhole(stream)
        #expect(whole.records.count == count)
        #expect(whole.records == expected)
        #expect(whole.stop == nil)
        #expect(whole.pending == 0)

        #expect(decodeByteByByte(stream) == whole)

        for round in 0..<8 {
            // Small splits cut headers apart; large ones span several frames.
            let limit = [3, 40, 700, 5000][round % 4]
            let splits = (0..<stream.count).map { _ in Int.random(in: 1...limit, using: &rng) }
            #expect(decodeInChunks(stream, chunkSizes: splits) == whole)
        }
    }

    @Test("the caller can stop at any notification; the decoder stays stopped")
    func stoppedByCaller() {
        let stream = Self.simpleGolden + Self.enhancedGolden + Self.frameGolden
        let outcome = decodeInChunks(stream, chunkSizes: [stream.count]) { $0.format != .enhanced }
        #expect(outcome.records.map(\.format) == [.simple, .enhanced])
        #expect(outcome.stop == .stoppedByCaller)

        var decoder = FrameDecoder()
        var seen = 0
        stream.withUnsafeBytes { input in
            #expect(decoder.decode(input) { _ in seen += 1; return false } == .stoppedByCaller)
            #expect(decoder.decode(input) { _ in seen += 1; return true } == .stoppedByCaller)
        }
        #expect(seen == 1)
        #expect(decoder.finished == .stoppedByCaller)
    }

    struct Rejected: Error, Equatable {}

    @Test("a throwing callback propagates its typed error and finishes the decoder")
    func throwingCallback() {
        var decoder = FrameDecoder()
        Self.frameGolden.withUnsafeBytes { input in
            #expect(throws: Rejected()) {
                _ = try decoder.decode(input) { (_) throws(Rejected) -> Bool in throw Rejected() }
            }
            #expect(decoder.decode(input) { _ in true } == .stoppedByCaller)
        }
    }

    // MARK: - Malformed input

    struct Malformed: CustomTestStringConvertible, Sendable {
        var name: String
        var bytes: [UInt8]
        var status: Status
        var identifier: UInt32?
        var isAnswered = true
        var maximumPayloadLength = 2048
        var testDescription: String { name }
    }

    static let token = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"

    /// A well-formed command-2 frame with all five items, identifier 0x40, whatever the
    /// payload's length (up to the 65535 an item can state).
    static func frameWithPayload(length: Int) -> [UInt8] {
        encodeFrame(FrameEncoder(maximumPayloadLength: Int(UInt16.max)), token: WireFixture.token,
                    payload: [UInt8](repeating: 0x20, count: length), identifier: 0x40, expiry: 0, priority: 10)
    }

    static let malformed: [Malformed] = [
        Malformed(name: "unknown command", bytes: wireHex("07 00"), status: .protocolError, identifier: nil),
        Malformed(name: "error-response command from a client", bytes: wireHex("08 08 00000001"), status: .protocolError, identifier: nil),
        // Command 0: no identifier, and no error response either.
        Malformed(name: "cmd 0 token length 31", bytes: wireHex("00 001f"), status: .invalidTokenSize, identifier: nil, isAnswered: false),
        Malformed(name: "cmd 0 token length 0", bytes: wireHex("00 0000 0001 7b"), status: .invalidTokenSize, identifier: nil, isAnswered: false),
        Malformed(name: "cmd 0 payload length 0", bytes: wireHex("00 0020 \(token) 0000"), status: .invalidPayloadSize, identifier: nil, isAnswered: false),
        Malformed(name: "cmd 0 payload length 2049", bytes: wireHex("00 0020 \(token) 0801"), status: .invalidPayloadSize, identifier: nil, isAnswered: false),
        Malformed(name: "cmd 0 payload 257 over a 256 maximum", bytes: wireHex("00 0020 \(token) 0101"), status: .invalidPayloadSize, identifier: nil, isAnswered: false, maximumPayloadLength: 256),
        // Command 1: the identifier comes first, so it is always known.
        Malformed(name: "cmd 1 token length 64", bytes: wireHex("01 0000002a 00000000 0040"), status: .invalidTokenSize, identifier: 42),
        Malformed(name: "cmd 1 payload length 0", bytes: wireHex("01 0000002a 00000000 0020 \(token) 0000"), status: .invalidPayloadSize, identifier: 42),
        Malformed(name: "cmd 1 payload length 65535", bytes: wireHex("01 0000002a 00000000 0020 \(token) ffff"), status: .invalidPayloadSize, identifier: 42),
        // Command 2: only a header beyond the read limit is judged alone.
        Malformed(name: "cmd 2 frame length one beyond the read limit", bytes: wireHex("02 00010038"), status: .protocolError, identifier: nil),
        Malformed(name: "cmd 2 frame length 4 GiB", bytes: wireHex("02 ffffffff"), status: .protocolError, identifier: nil),
        // Command 2: frames shorter than the smallest legal one are judged by their items.
        Malformed(name: "cmd 2 frame with no items", bytes: wireHex("02 00000000"), status: .missingDeviceToken, identifier: nil),
        Malformed(name: "cmd 2 short frame: identifier and payload, no token", bytes: wireHex("02 0000000b 03 0004 00000031 02 0001 7b"), status: .missingDeviceToken, identifier: 0x31),
        // Command 2: frames longer than the largest legal one too, up to the read limit.
        Malformed(name: "cmd 2 all five items, payload of 2049 bytes", bytes: frameWithPayload(length: 2049), status: .invalidPayloadSize, identifier: 0x40),
        Malformed(name: "cmd 2 all five items, payload of 65535 bytes (the read limit)", bytes: frameWithPayload(length: 65535), status: .invalidPayloadSize, identifier: 0x40),
        Malformed(name: "cmd 2 token of 100 bytes beyond the largest legal frame", bytes: wireHex("02 00000841 03 0004 00000032 01 0064 \(String(repeating: "ab", count: 100)) 02 07d0 \(String(repeating: "20", count: 2000))"), status: .invalidTokenSize, identifier: 0x32),
        // Command 2: structure. Undelimited after the break: the identifier only if read before it.
        Malformed(name: "cmd 2 unknown item 6 after the identifier", bytes: wireHex("02 0000002e 03 0004 00000011 06 0001 00 01 0020 \(token)"), status: .protocolError, identifier: 0x11),
        Malformed(name: "cmd 2 unknown item 0 before the identifier", bytes: wireHex("02 0000002e 00 0001 00 01 0020 \(token) 03 0004 00000011"), status: .protocolError, identifier: 0x11),
        Malformed(name: "cmd 2 duplicate token item", bytes: wireHex("02 0000004d 03 0004 00000012 01 0020 \(token) 01 0020 \(token)"), status: .protocolError, identifier: 0x12),
        Malformed(name: "cmd 2 duplicate identifier item", bytes: wireHex("02 00000035 03 0004 00000013 03 0004 00000014 01 0020 \(token) 02 0001 7b"), status: .protocolError, identifier: 0x13),
        Malformed(name: "cmd 2 item data overruns the frame", bytes: wireHex("02 00000027 03 0004 00000015 01 0020 \(token) 02 0005 7b"), status: .protocolError, identifier: 0x15),
        Malformed(name: "cmd 2 item header overruns the frame", bytes: wireHex("02 00000029 01 0020 \(token) 02 0001 7b 03 00"), status: .protocolError, identifier: nil),
        Malformed(name: "cmd 2 identifier item of 3 bytes", bytes: wireHex("02 0000002d 03 0003 000016 01 0020 \(token) 02 0001 7b"), status: .protocolError, identifier: nil),
        // Command 2: semantics (the frame's identifier is echoed wherever it sits).
        Malformed(name: "cmd 2 missing token", bytes: wireHex("02 0000002e 02 0024 \(token) 7b7d7b7d 03 0004 00000021"), status: .missingDeviceToken, identifier: 0x21),
        Malformed(name: "cmd 2 missing token, no identifier", bytes: wireHex("02 00000027 02 0024 \(token) 7b7d7b7d"), status: .missingDeviceToken, identifier: nil),
        Malformed(name: "cmd 2 token of 33 bytes", bytes: wireHex("02 0000002f 01 0021 \(token) ff 02 0001 7b 03 0004 00000022"), status: .invalidTokenSize, identifier: 0x22),
        Malformed(name: "cmd 2 token of 31 bytes", bytes: wireHex("02 0000002e 02 0002 7b7d 01 001f 0102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f 03 0004 00000023"), status: .invalidTokenSize, identifier: 0x23),
        Malformed(name: "cmd 2 missing payload", bytes: wireHex("02 00000035 01 0020 \(token) 03 0004 00000024 04 0004 00000000 05 0001 0a"), status: .missingPayload, identifier: 0x24),
        Malformed(name: "cmd 2 empty payload", bytes: wireHex("02 0000002d 01 0020 \(token) 02 0000 03 0004 00000025"), status: .invalidPayloadSize, identifier: 0x25),
        Malformed(name: "cmd 2 payload over the maximum", bytes: wireHex("02 0000002f 01 0020 \(token) 02 0002 7b7d 03 0004 00000026"), status: .invalidPayloadSize, identifier: 0x26, maximumPayloadLength: 1),
        Malformed(name: "cmd 2 expiry of 2 bytes", bytes: wireHex("02 00000033 01 0020 \(token) 02 0001 7b 04 0002 0000 03 0004 00000027"), status: .protocolError, identifier: 0x27),
        Malformed(name: "cmd 2 priority of 0 bytes last", bytes: wireHex("02 00000031 03 0004 00000028 01 0020 \(token) 02 0001 7b 05 0000"), status: .protocolError, identifier: 0x28),
        Malformed(name: "cmd 2 priority 1", bytes: wireHex("02 00000032 01 0020 \(token) 02 0001 7b 05 0001 01 03 0004 00000029"), status: .protocolError, identifier: 0x29),
    ]

    @Test("malformed input maps to its status and identifier", arguments: malformed)
    func malformedInput(_ testCase: Malformed) {
        let expected = DecodeStop.violation(ProtocolViolation(
            status: testCase.status, identifier: testCase.identifier, isAnswered: testCase.isAnswered))
        // Alone, after a valid frame, fed whole and byte by byte: the same answer, and the
        // valid frame before it is still delivered.
        let valid = encodeFrame(FrameEncoder(), token: WireFixture.token, payload: [0x7b], identifier: 1, priority: 10)
        for prefix in [[], valid] {
            let stream = prefix + testCase.bytes
            for outcome in [
                decodeWhole(stream, maximumPayloadLength: testCase.maximumPayloadLength),
                decodeByteByByte(stream, maximumPayloadLength: testCase.maximumPayloadLength),
            ] {
                #expect(outcome.stop == expected, "\(testCase.name)")
                #expect(outcome.records.count == (prefix.isEmpty ? 0 : 1), "\(testCase.name)")
                #expect(outcome.pending == 0)
            }
        }
    }

    @Test("the error response the gateway writes for a violation")
    func violationErrorResponse() {
        #expect(ProtocolViolation(status: .invalidTokenSize, identifier: 42).errorResponse
            == ErrorResponse(status: .invalidTokenSize, identifier: 42))
        #expect(ProtocolViolation(status: .protocolError, identifier: nil).errorResponse
            == ErrorResponse(status: .protocolError, identifier: 0))
        #expect(ProtocolViolation(status: .invalidTokenSize, identifier: nil, isAnswered: false).errorResponse == nil)
    }

    @Test("after a violation every later call returns it without reading")
    func violationIsFinal() {
        var decoder = FrameDecoder()
        let bad = wireHex("02 ffffffff")
        let expected = DecodeStop.violation(ProtocolViolation(status: .protocolError, identifier: nil))
        bad.withUnsafeBytes { #expect(decoder.decode($0) { _ in true } == expected) }
        var seen = 0
        Self.frameGolden.withUnsafeBytes { #expect(decoder.decode($0) { _ in seen += 1; return true } == expected) }
        #expect(seen == 0)
        #expect(decoder.finished == expected)
    }

    @Test("an oversized frame is carried across calls up to the read limit, never more")
    func oversizedFrameSplit() {
        let frame = Self.frameWithPayload(length: 65535)
        #expect(frame.count == FrameDecoder.readLimit)
        var decoder = FrameDecoder()
        var stop: DecodeStop?
        var largestPending = 0
        frame.withUnsafeBytes { bytes in
            for start in stride(from: 0, to: bytes.count, by: 4000) {
                stop = decoder.decode(UnsafeRawBufferPointer(rebasing: bytes[start..<min(start + 4000, bytes.count)])) { _ in true }
                largestPending = max(largestPending, decoder.pendingByteCount)
            }
        }
        #expect(stop == .violation(ProtocolViolation(status: .invalidPayloadSize, identifier: 0x40)))
        #expect(largestPending == frame.count - frame.count % 4000, "the whole frame but its last piece was carried")
    }

    @Test("a frame of exactly the maximum payload with all five items fits the carry buffer")
    func largestFrameSplit() {
        let payload = [UInt8](repeating: 0x20, count: 2048)
        let frame = encodeFrame(FrameEncoder(), token: WireFixture.token, payload: payload, identifier: 5, expiry: 6, priority: 10)
        #expect(frame.count == FrameDecoder.largestFrameLength(2048))
        let outcome = decodeInChunks(frame, chunkSizes: [1, 4, 1000, 1])
        #expect(outcome.records.count == 1)
        #expect(outcome.records.first?.payload == payload)
    }
}
