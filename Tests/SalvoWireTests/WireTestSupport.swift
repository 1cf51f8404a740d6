import SalvoWire

/// Deterministic PRNG for the randomized tests (SplitMix64): same seed, same cases.
struct SplitMix64: RandomNumberGenerator {
    var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }
}

/// Bytes from hex text written by hand; spaces, newlines and `|` separators are ignored.
func wireHex(_ text: String) -> [UInt8] {
    let digits = text.filter { $0.isHexDigit }
    precondition(digits.count % 2 == 0, "odd hex digit count in fixture")
    var bytes: [UInt8] = []
    var index = digits.startIndex
    while index < digits.endIndex {
        let next = digits.index(index, offsetBy: 2)
        bytes.append(UInt8(digits[index..<next], radix: 16)!)
        index = next
    }
    return bytes
}

enum WireFixture {
    /// Bytes 0x00...0x1f.
    static let tokenHex = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
    static let token = try! DeviceToken(hex: tokenHex)
    /// `{"aps":{"alert":"Hi"}}`, 22 bytes.
    static let payloadText = #"{"aps":{"alert":"Hi"}}"#
    static let identifier: UInt32 = 0xDEAD_BEEF
    /// 2023-11-14T22:13:20Z.
    static let expiry: UInt32 = 1_700_000_000  // 0x6553f100
    /// Command 2 with all five items (token, payload, identifier, expiry, priority 10).
    static let frameGolden = wireHex("""
        02 0000004e
        01 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f
        02 0016 7b22617073223a7b22616c657274223a224869227d7d
        03 0004 deadbeef
        04 0004 6553f100
        05 0001 0a
        """)

    static func randomToken(_ rng: inout SplitMix64) -> DeviceToken {
        var bytes = [UInt8](repeating: 0, count: 32)
        for i in 0..<32 { bytes[i] = UInt8.random(in: 0...255, using: &rng) }
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }
}

/// A decoded notification copied out of the callback, for comparisons.
struct DecodedRecord: Hashable, CustomStringConvertible {
    var format: FrameFormat
    var identifier: UInt32
    var expiry: UInt32?
    var priority: UInt8?
    var token: [UInt8]
    var payload: [UInt8]

    var description: String {
        "\(format) id=\(identifier) expiry=\(expiry.map(String.init) ?? "nil") priority=\(priority.map(String.init) ?? "nil") payload=\(payload.count)B"
    }
}

extension DecodedRecord {
    // In an extension, so that the memberwise initializer stays.
    init(_ notification: DecodedNotification) {
        self.init(
            format: notification.format, identifier: notification.identifier, expiry: notification.expiry,
            priority: notification.priority, token: Array(notification.token), payload: Array(notification.payload))
    }
}

/// Everything one decoding run produced.
struct DecodeOutcome: Equatable {
    var records: [DecodedRecord] = []
    var stop: DecodeStop? = nil
    var pending = 0
}

/// Feeds `stream` to a fresh decoder in chunks of the given sizes (the rest in one piece),
/// collecting notifications until the stream ends or the decoder stops.
func decodeInChunks(
    _ stream: [UInt8], chunkSizes: some Sequence<Int>, maximumPayloadLength: Int = 2048,
    accept: (DecodedRecord) -> Bool = { _ in true }
) -> DecodeOutcome {
    var decoder = FrameDecoder(maximumPayloadLength: maximumPayloadLength)
    var outcome = DecodeOutcome()
    stream.withUnsafeBytes { all in
        var offset = 0
        var sizes = chunkSizes.makeIterator()
        while offset < all.count {
            let size = min(sizes.next() ?? all.count, all.count - offset)
            let chunk = UnsafeRawBufferPointer(rebasing: all[offset..<offset + size])
            offset += size
            let stop = decoder.decode(chunk) { notification in
                let record = DecodedRecord(notification)
                outcome.records.append(record)
                return accept(record)
            }
            if let stop {
                outcome.stop = stop
                break
            }
        }
    }
    outcome.pending = decoder.pendingByteCount
    return outcome
}

func decodeWhole(_ stream: [UInt8], maximumPayloadLength: Int = 2048) -> DecodeOutcome {
    decodeInChunks(stream, chunkSizes: [stream.count], maximumPayloadLength: maximumPayloadLength)
}

func decodeByteByByte(_ stream: [UInt8], maximumPayloadLength: Int = 2048) -> DecodeOutcome {
    decodeInChunks(stream, chunkSizes: repeatElement(1, count: stream.count), maximumPayloadLength: maximumPayloadLength)
}

/// Encodes one notification into a fresh array, trapping on failure (fixtures only).
func encodeFrame(
    _ encoder: FrameEncoder, token: DeviceToken, payload: [UInt8], identifier: UInt32,
    expiry: UInt32? = nil, priority: UInt8? = nil
) -> [UInt8] {
    let length = encoder.encodedLength(
        payloadLength: payload.count, hasExpiry: expiry != nil, hasPriority: priority != nil)
    var frame = [UInt8](repeating: 0xEE, count: length)
    let result = frame.withUnsafeMutableBytes { buffer in
        payload.withUnsafeBytes { payloadBytes in
            try! encoder.encode(
                token: token, payload: payloadBytes, identifier: identifier,
                expiry: expiry, priority: priority, into: buffer)
        }
    }
    precondition(result == .written(length))
    return frame
}
