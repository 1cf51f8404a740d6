/// The three notification formats of the binary provider interface, by command byte.
public enum FrameFormat: UInt8, Sendable, CaseIterable {
    /// Command 0: token and payload only. No identifier, so the gateway cannot say which
    /// notification failed; it just closes the connection.
    case simple = 0
    /// Command 1: identifier, expiry, token, payload. Priority is implicitly 10.
    case enhanced = 1
    /// Command 2: a frame of items (token, payload, identifier, optional expiry and
    /// priority). The default, and the only format that carries a priority.
    case frame = 2
}

/// What `FrameEncoder.encode` did.
public enum EncodeResult: Hashable, Sendable {
    /// The frame was written; the associated value is its length in bytes.
    case written(Int)
    /// The buffer was too small and nothing was written; the associated value is the
    /// number of bytes the frame needs. Make room (flush the ring) and call again.
    case needsCapacity(Int)
}

/// Why a notification cannot be encoded. Neither is retryable: fix the payload.
public enum FrameEncodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The payload has no bytes; APNs rejects such a notification with status 7.
    case emptyPayload
    /// The payload is `length` bytes, `length - maximum` more than the `maximum` the
    /// encoder was configured with.
    case payloadTooLong(length: Int, maximum: Int)
    /// An HTTP/2 request header the notification sets is `length` bytes, over its `maximum`
    /// (`apns-topic` 255, `apns-collapse-id` 64).
    case headerTooLong(name: String, length: Int, maximum: Int)
    /// An HTTP/2 request header the notification sets cannot be sent as it is: `problem`
    /// says why (a broadcast's channel id that is not base64, a push type a broadcast
    /// cannot have).
    case invalidHeader(name: String, problem: String)

    /// The problem in a sentence, for error messages.
    public var description: String {
        switch self {
        case .emptyPayload:
            return "the payload is empty; APNs requires a JSON object of at least 1 byte"
        case .payloadTooLong(let length, let maximum):
            return "the payload is \(length) bytes, \(length - maximum) over the maximum of \(maximum); shorten the alert or drop custom keys"
        case .headerTooLong(let name, let length, let maximum):
            return "\(name) is \(length) bytes; at most \(maximum) are allowed"
        case .invalidHeader(let name, let problem):
            return "\(name) \(problem)"
        }
    }
}

/// Encodes notifications into caller-provided memory in one of the binary formats.
///
/// Byte layouts (all integers big endian, `N` = payload length, 32-byte token):
///
/// - `.simple`:   `00 len:u16=32 token len:u16=N payload` — 37 + N bytes.
/// - `.enhanced`: `01 id:u32 expiry:u32 len:u16=32 token len:u16=N payload` — 45 + N bytes.
/// - `.frame`:    `02 frameLength:u32` then the items token (1), payload (2),
///   identifier (3), expiry (4, only when given), priority (5, only when given);
///   each item is `id:u8 len:u16 data`. 61 + N bytes with all five items, 54 + N
///   without expiry, 57 + N without priority, 50 + N with neither.
///
/// The encoder never allocates and writes each frame with a handful of stores and two
/// copies (token, payload), so it can run on a sender's hot path for every notification.
public struct FrameEncoder: Sendable {
    /// The format every frame is written in.
    public let format: FrameFormat
    /// The largest payload accepted, in bytes (2048 for the binary interface since iOS 8;
    /// 256 for the oldest gateways).
    public let maximumPayloadLength: Int

    /// Creates an encoder.
    ///
    /// - Parameters:
    ///   - format: the command to write; `.frame` (command 2) unless a gateway needs older.
    ///   - maximumPayloadLength: 1...65535 (the length field is 16 bits); default 2048.
    public init(format: FrameFormat = .frame, maximumPayloadLength: Int = 2048) {
        precondition(
            (1...Int(UInt16.max)).contains(maximumPayloadLength),
            "maximumPayloadLength must be 1...65535, got \(maximumPayloadLength)")
        self.format = format
        self.maximumPayloadLength = maximumPayloadLength
    }

    /// The number of bytes `encode` writes for a payload of `payloadLength` bytes.
    ///
    /// `hasExpiry` and `hasPriority` matter only for `.frame`, where those items are
    /// written only when given.
    @inlinable
    public func encodedLength(payloadLength: Int, hasExpiry: Bool = true, hasPriority: Bool = true) -> Int {
        switch format {
        case .simple: return WireLayout.simpleOverhead &+ payloadLength
        case .enhanced: return WireLayout.enhancedOverhead &+ payloadLength
        case .frame:
            return WireLayout.frameBaseOverhead &+ payloadLength
                &+ (hasExpiry ? WireLayout.expiryItemLength : 0)
                &+ (hasPriority ? WireLayout.priorityItemLength : 0)
        }
    }

    /// Encodes one notification at the start of `buffer`.
    ///
    /// - Parameters:
    ///   - token: the device token (32 bytes).
    ///   - payload: the JSON payload bytes, 1...`maximumPayloadLength`.
    ///   - identifier: echoed back by the gateway in an error response. Ignored by `.simple`.
    ///   - expiry: UNIX seconds after which APNs stops trying; 0 = deliver once or never.
    ///     `.frame` writes the item only when given; `.enhanced` writes 0 when nil;
    ///     `.simple` ignores it.
    ///   - priority: 10 (immediate) or 5 (power-saving). Only `.frame` carries it, and
    ///     only when given (the gateway then assumes 10).
    ///   - buffer: where the frame goes; only its first `encodedLength` bytes are touched.
    /// - Returns: `.written(length)`, or `.needsCapacity(length)` with nothing written
    ///   when `buffer` is shorter than the frame.
    /// - Throws: `FrameEncodingError` when the payload is empty or too long; nothing is
    ///   written then either.
    @inlinable
    public func encode(
        token: DeviceToken,
        payload: UnsafeRawBufferPointer,
        identifier: UInt32,
        expiry: UInt32? = nil,
        priority: UInt8? = nil,
        into buffer: UnsafeMutableRawBufferPointer
    ) throws(FrameEncodingError) -> EncodeResult {
        let payloadLength = payload.count
        // One unsigned compare catches both 0 and > maximum; the slow path sorts them out.
        guard UInt(bitPattern: payloadLength &- 1) < UInt(bitPattern: maximumPayloadLength) else {
            throw payloadLength == 0
                ? .emptyPayload : .payloadTooLong(length: payloadLength, maximum: maximumPayloadLength)
        }
        let length = encodedLength(
            payloadLength: payloadLength, hasExpiry: expiry != nil, hasPriority: priority != nil)
        guard length <= buffer.count, let base = buffer.baseAddress else {
            return .needsCapacity(length)
        }
        switch format {
        case .frame:
            Self.writeFrame(
                base, length: length, token: token, payload: payload,
                identifier: identifier, expiry: expiry, priority: priority)
        case .enhanced:
            Self.writeEnhanced(base, token: token, payload: payload, identifier: identifier, expiry: expiry ?? 0)
        case .simple:
            Self.writeSimple(base, token: token, payload: payload)
        }
        return .written(length)
    }

    // The writers below assume the caller checked lengths; `storeBytes(toByteOffset:)` is
    // an unaligned store on every platform Swift supports.

    @inlinable @inline(__always)
    static func writeFrame(
        _ base: UnsafeMutableRawPointer, length: Int, token: DeviceToken, payload: UnsafeRawBufferPointer,
        identifier: UInt32, expiry: UInt32?, priority: UInt8?
    ) {
        let payloadLength = payload.count
        base.storeBytes(of: FrameFormat.frame.rawValue, as: UInt8.self)
        base.storeBytes(of: UInt32(truncatingIfNeeded: length &- 5).bigEndian, toByteOffset: 1, as: UInt32.self)
        // Item 1: token. The id byte and the 16-bit length are one 3-byte header; writing
        // them as separate stores is what the compiler merges best.
        base.storeBytes(of: WireItem.deviceToken, toByteOffset: 5, as: UInt8.self)
        base.storeBytes(of: UInt16(32).bigEndian, toByteOffset: 6, as: UInt16.self)
        token.copyBytes(to: base + 8)
        // Item 2: payload.
        base.storeBytes(of: WireItem.payload, toByteOffset: 40, as: UInt8.self)
        base.storeBytes(of: UInt16(truncatingIfNeeded: payloadLength).bigEndian, toByteOffset: 41, as: UInt16.self)
        (base + 43).copyMemory(from: payload.baseAddress!, byteCount: payloadLength)
        // Item 3: identifier.
        var cursor = base + (43 &+ payloadLength)
        cursor.storeBytes(of: WireItem.identifier, as: UInt8.self)
        cursor.storeBytes(of: UInt16(4).bigEndian, toByteOffset: 1, as: UInt16.self)
        cursor.storeBytes(of: identifier.bigEndian, toByteOffset: 3, as: UInt32.self)
        cursor += 7
        if let expiry {
            cursor.storeBytes(of: WireItem.expiry, as: UInt8.self)
            cursor.storeBytes(of: UInt16(4).bigEndian, toByteOffset: 1, as: UInt16.self)
            cursor.storeBytes(of: expiry.bigEndian, toByteOffset: 3, as: UInt32.self)
            cursor += 7
        }
        if let priority {
            cursor.storeBytes(of: WireItem.priority, as: UInt8.self)
            cursor.storeBytes(of: UInt16(1).bigEndian, toByteOffset: 1, as: UInt16.self)
            cursor.storeBytes(of: priority, toByteOffset: 3, as: UInt8.self)
        }
    }

    @inlinable @inline(__always)
    static func writeEnhanced(
        _ base: UnsafeMutableRawPointer, token: DeviceToken, payload: UnsafeRawBufferPointer,
        identifier: UInt32, expiry: UInt32
    ) {
        base.storeBytes(of: FrameFormat.enhanced.rawValue, as: UInt8.self)
        base.storeBytes(of: identifier.bigEndian, toByteOffset: 1, as: UInt32.self)
        base.storeBytes(of: expiry.bigEndian, toByteOffset: 5, as: UInt32.self)
        base.storeBytes(of: UInt16(32).bigEndian, toByteOffset: 9, as: UInt16.self)
        token.copyBytes(to: base + 11)
        base.storeBytes(of: UInt16(truncatingIfNeeded: payload.count).bigEndian, toByteOffset: 43, as: UInt16.self)
        (base + 45).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
    }

    @inlinable @inline(__always)
    static func writeSimple(_ base: UnsafeMutableRawPointer, token: DeviceToken, payload: UnsafeRawBufferPointer) {
        base.storeBytes(of: FrameFormat.simple.rawValue, as: UInt8.self)
        base.storeBytes(of: UInt16(32).bigEndian, toByteOffset: 1, as: UInt16.self)
        token.copyBytes(to: base + 3)
        base.storeBytes(of: UInt16(truncatingIfNeeded: payload.count).bigEndian, toByteOffset: 35, as: UInt16.self)
        (base + 37).copyMemory(from: payload.baseAddress!, byteCount: payload.count)
    }
}

/// Item ids of command 2.
@usableFromInline
enum WireItem {
    @inlinable static var deviceToken: UInt8 { 1 }
    @inlinable static var payload: UInt8 { 2 }
    @inlinable static var identifier: UInt8 { 3 }
    @inlinable static var expiry: UInt8 { 4 }
    @inlinable static var priority: UInt8 { 5 }
}

/// Fixed sizes shared by the encoder and decoder (32-byte token).
@usableFromInline
enum WireLayout {
    /// `00 len:u16 token len:u16`.
    @inlinable static var simpleOverhead: Int { 37 }
    /// `01 id:u32 expiry:u32 len:u16 token len:u16`.
    @inlinable static var enhancedOverhead: Int { 45 }
    /// `02 frameLength:u32` + token item (35) + payload item header (3) + identifier item (7).
    @inlinable static var frameBaseOverhead: Int { 50 }
    /// `04 00 04 expiry:u32`.
    @inlinable static var expiryItemLength: Int { 7 }
    /// `05 00 01 priority:u8`.
    @inlinable static var priorityItemLength: Int { 4 }
}
