/// One notification read by `FrameDecoder`, as views into the decoder's input.
///
/// The buffers are valid only during the callback that receives the value: copy what
/// must outlive it (`deviceToken` copies the token into a value).
public struct DecodedNotification {
    /// The command the notification arrived in.
    public let format: FrameFormat
    /// The notification identifier; 0 for `.simple`, and for a `.frame` without item 3.
    public let identifier: UInt32
    /// The expiry in UNIX seconds: nil for `.simple` and for a `.frame` without item 4.
    public let expiry: UInt32?
    /// The priority (5 or 10): only a `.frame` with item 5 carries one.
    public let priority: UInt8?
    /// The 32 token bytes.
    public let token: UnsafeRawBufferPointer
    /// The payload bytes, 1...`maximumPayloadLength`.
    public let payload: UnsafeRawBufferPointer

    @inlinable
    init(
        format: FrameFormat, identifier: UInt32, expiry: UInt32?, priority: UInt8?,
        token: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer
    ) {
        self.format = format
        self.identifier = identifier
        self.expiry = expiry
        self.priority = priority
        self.token = token
        self.payload = payload
    }

    /// The token as a value that outlives the callback.
    public var deviceToken: DeviceToken {
        // The decoder only yields 32-byte tokens, so this cannot fail.
        try! DeviceToken(bytes: token)
    }
}

/// A malformed notification, and what the gateway answers before closing the connection.
public struct ProtocolViolation: Hashable, Sendable, CustomStringConvertible {
    /// The status the gateway judged it with.
    public let status: Status
    /// The identifier of the offending notification, when the decoder knew it (see
    /// `FrameDecoder` for when that is); nil otherwise.
    public let identifier: UInt32?
    /// Whether the gateway writes an error response before it closes. Not for a simple
    /// notification (command 0): that format has no error responses, and Apple's gateway
    /// just severed the connection, giving no reason.
    public let isAnswered: Bool

    /// Creates a violation.
    @inlinable
    public init(status: Status, identifier: UInt32?, isAnswered: Bool = true) {
        self.status = status
        self.identifier = identifier
        self.isAnswered = isAnswered
    }

    /// The error response the gateway writes, with the identifier or 0 when it is
    /// unknown; nil when it closes without one.
    public var errorResponse: ErrorResponse? {
        isAnswered ? ErrorResponse(status: status, identifier: identifier ?? 0) : nil
    }

    /// The status, the identifier it names and whether it was answered, for logs.
    public var description: String {
        "\(status.name) (status \(status.rawValue)), identifier \(identifier.map { String($0) } ?? "unknown")"
            + (isAnswered ? "" : ", no error response")
    }
}

/// Why `FrameDecoder.decode` stopped before consuming all of its input.
public enum DecodeStop: Hashable, Sendable {
    /// The callback returned false.
    case stoppedByCaller
    /// The stream broke the protocol.
    case violation(ProtocolViolation)
}

/// Decodes the client-to-gateway byte stream incrementally: the mock gateway's parser.
///
/// Feed it the stream in any split. Complete notifications are handed to the callback as
/// views into the input without copying; only a notification split across two `decode`
/// calls is assembled in an internal buffer, allocated once at `init` and `readLimit`
/// bytes long, so decoding never allocates and never holds more than that.
///
/// Validation, and what each problem is answered with, as Apple's gateway answered: the
/// status, and the notification's identifier whenever the bytes carry one.
///
/// - An unknown command byte: 128, identifier unknown.
/// - Command 0: a token length other than 32 (status 5), a payload length of 0 or more
///   than `maximumPayloadLength` (7), judged as soon as the length field arrives. Command
///   0 has no error responses: the violation is not answered (`isAnswered` false), the
///   connection is just closed.
/// - Command 1: the same checks, statuses 5 and 7, with the identifier (which precedes
///   both fields).
/// - Command 2, judged from the 5-byte header: a frame length above `readLimit` - 5 (a
///   frame bigger than all five items with a payload of the largest length an item can
///   state): 128, identifier unknown. Any shorter frame is read whole, also one above the
///   largest legal frame (56 + `maximumPayloadLength`), so that its items are judged and
///   an oversized payload is answered with 7 and the frame's identifier.
/// - Command 2, judged once the whole frame has arrived, in this order:
///   1. Structure: an item header or item data running past the frame length: 128, with
///      the identifier only if an identifier item came *before* it (what follows cannot be
///      delimited). An item id outside 1...5, or an item given twice: 128, with the
///      frame's identifier wherever its (first) identifier item is, since item lengths
///      still delimit every item.
///   2. An identifier item whose length is not 4: 128, identifier unknown.
///   3. No token item: 2. Token length not 32: 5.
///   4. No payload item: 4. Payload length 0 or above the maximum: 7.
///   5. Expiry length not 4, priority length not 1, or a priority other than 5 or 10:
///      128. Apple documented only 5 and 10; this mock rejects anything else rather than
///      guess what a real gateway did with it.
///
///   Checks 3 to 5 report the frame's identifier when it has a well-formed identifier item
///   anywhere in the frame. A frame without an identifier item is accepted, with
///   identifier 0 (that is also what the gateway echoes for it).
///
/// After a violation, or after the callback returned false or threw, the decoder is
/// finished: every later `decode` returns the same stop (`.stoppedByCaller` after a throw)
/// without reading its input. The gateway answers and closes the connection.
///
/// Thread rule: the one owner of this noncopyable value, whichever thread it moved to; the compiler enforces it.
public struct FrameDecoder: ~Copyable, @unchecked Sendable {
    // @unchecked only because the carry buffer is a raw pointer: it is owned by this
    // noncopyable value alone and touched through `mutating` methods, so exclusivity (not
    // a runtime check) guarantees one thread at a time.

    /// The largest payload accepted, in bytes.
    public let maximumPayloadLength: Int

    @usableFromInline let carry: UnsafeMutableRawPointer
    @usableFromInline var carryCount: Int
    @usableFromInline var stop: DecodeStop?

    /// Creates a decoder, allocating its carry buffer.
    ///
    /// - Parameter maximumPayloadLength: 1...65535; payloads longer than this are status 7.
    public init(maximumPayloadLength: Int = 2048) {
        precondition(
            (1...Int(UInt16.max)).contains(maximumPayloadLength),
            "maximumPayloadLength must be 1...65535, got \(maximumPayloadLength)")
        self.maximumPayloadLength = maximumPayloadLength
        self.carry = .allocate(byteCount: Self.readLimit, alignment: 16)
        self.carryCount = 0
        self.stop = nil
    }

    deinit {
        carry.deallocate()
    }

    /// The length of the largest legal frame: command 2 with all five items.
    @inlinable
    public static func largestFrameLength(_ maximumPayloadLength: Int) -> Int {
        61 &+ maximumPayloadLength
    }

    /// The longest notification the decoder reads whole, in bytes: a command-2 frame with
    /// all five items whose payload item has the largest length its 2-byte field can state
    /// (61 + 65535), 31 times the largest legal frame. Up to this a frame is judged by its
    /// items, as Apple's gateway did; beyond it, it is status 128 from its header alone. No
    /// more than this is ever buffered.
    @inlinable
    public static var readLimit: Int { largestFrameLength(Int(UInt16.max)) }

    /// The bytes of an incomplete notification held for the next `decode` call. At the end
    /// of the stream a nonzero value means the peer closed mid-notification.
    public var pendingByteCount: Int { carryCount }

    /// How decoding ended, once it has: nil while the decoder still accepts input.
    public var finished: DecodeStop? { stop }

    /// Decodes as many notifications as `input` completes, calling `onNotification` for
    /// each in stream order.
    ///
    /// - Parameters:
    ///   - input: the next bytes of the stream; may be empty or end mid-notification.
    ///   - onNotification: receives each notification (views valid only during the call);
    ///     return false to reject it and stop at once.
    /// - Returns: nil when all input was consumed (a trailing partial notification is kept
    ///   for the next call); otherwise why decoding stopped, after which the decoder is
    ///   finished.
    /// - Throws: whatever `onNotification` throws; the decoder is then finished.
    @inlinable
    public mutating func decode<E: Error>(
        _ input: UnsafeRawBufferPointer,
        _ onNotification: (DecodedNotification) throws(E) -> Bool
    ) throws(E) -> DecodeStop? {
        if let stop { return stop }
        // Stays in place if the callback throws, which finishes the decoder.
        stop = .stoppedByCaller
        guard var cursor = input.baseAddress else {
            stop = nil
            return nil
        }
        var remaining = input.count
        let maximum = maximumPayloadLength

        // Finish the frame carried over from the last call, taking only the bytes it needs
        // so that the rest of the input is decoded in place.
        carried: while carryCount > 0 {
            switch Self.measure(UnsafeRawPointer(carry), count: carryCount, maximumPayloadLength: maximum) {
            case .needs(let needed):
                let take = Swift.min(needed &- carryCount, remaining)
                (carry + carryCount).copyMemory(from: cursor, byteCount: take)
                carryCount &+= take
                cursor += take
                remaining &-= take
                if carryCount < needed {
                    stop = nil
                    return nil
                }
            case .complete(let length):
                carryCount = 0
                switch Self.parse(UnsafeRawPointer(carry), length: length, maximumPayloadLength: maximum) {
                case .notification(let notification):
                    guard try onNotification(notification) else { return finish(.stoppedByCaller) }
                case .violation(let violation):
                    return finish(.violation(violation))
                }
                break carried
            case .violation(let violation):
                return finish(.violation(violation))
            }
        }

        while remaining > 0 {
            switch Self.measure(cursor, count: remaining, maximumPayloadLength: maximum) {
            case .complete(let length):
                switch Self.parse(cursor, length: length, maximumPayloadLength: maximum) {
                case .notification(let notification):
                    guard try onNotification(notification) else { return finish(.stoppedByCaller) }
                case .violation(let violation):
                    return finish(.violation(violation))
                }
                cursor += length
                remaining &-= length
            case .needs:
                // `measure` only asks for up to `readLimit` bytes, so this fits.
                carry.copyMemory(from: cursor, byteCount: remaining)
                carryCount = remaining
                remaining = 0
            case .violation(let violation):
                return finish(.violation(violation))
            }
        }
        stop = nil
        return nil
    }

    @inlinable
    mutating func finish(_ reason: DecodeStop) -> DecodeStop {
        stop = reason
        carryCount = 0
        return reason
    }

    // MARK: - Framing

    @usableFromInline
    enum Extent {
        /// A whole frame of this many bytes is available.
        case complete(Int)
        /// Fewer bytes than this are available; nothing can be decided before they arrive.
        /// Never more than `readLimit`.
        case needs(Int)
        case violation(ProtocolViolation)
    }

    @usableFromInline
    enum Parsed {
        case notification(DecodedNotification)
        case violation(ProtocolViolation)
    }

    /// Judges the frame at `bytes` from as much of it as is available: its length, or the
    /// next threshold at which more can be judged, or a violation visible in its headers.
    @inlinable @inline(__always)
    static func measure(_ bytes: UnsafeRawPointer, count: Int, maximumPayloadLength maximum: Int) -> Extent {
        switch bytes.load(as: UInt8.self) {
        case 2:
            guard count >= 5 else { return .needs(5) }
            let frameLength = Int(UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 1, as: UInt32.self)))
            guard frameLength <= readLimit &- 5 else {
                return .violation(ProtocolViolation(status: .protocolError, identifier: nil))
            }
            let total = 5 &+ frameLength
            return count >= total ? .complete(total) : .needs(total)
        case 1:
            guard count >= 11 else { return .needs(11) }
            guard bytes.loadUnaligned(fromByteOffset: 9, as: UInt16.self) == UInt16(32).bigEndian else {
                return .violation(ProtocolViolation(status: .invalidTokenSize, identifier: enhancedIdentifier(bytes)))
            }
            guard count >= 45 else { return .needs(45) }
            let payloadLength = Int(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 43, as: UInt16.self)))
            guard payloadLength != 0, payloadLength <= maximum else {
                return .violation(ProtocolViolation(status: .invalidPayloadSize, identifier: enhancedIdentifier(bytes)))
            }
            let total = 45 &+ payloadLength
            return count >= total ? .complete(total) : .needs(total)
        case 0:
            guard count >= 3 else { return .needs(3) }
            guard bytes.loadUnaligned(fromByteOffset: 1, as: UInt16.self) == UInt16(32).bigEndian else {
                return .violation(ProtocolViolation(status: .invalidTokenSize, identifier: nil, isAnswered: false))
            }
            guard count >= 37 else { return .needs(37) }
            let payloadLength = Int(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: 35, as: UInt16.self)))
            guard payloadLength != 0, payloadLength <= maximum else {
                return .violation(ProtocolViolation(status: .invalidPayloadSize, identifier: nil, isAnswered: false))
            }
            let total = 37 &+ payloadLength
            return count >= total ? .complete(total) : .needs(total)
        default:
            return .violation(ProtocolViolation(status: .protocolError, identifier: nil))
        }
    }

    @inlinable @inline(__always)
    static func enhancedIdentifier(_ bytes: UnsafeRawPointer) -> UInt32 {
        UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 1, as: UInt32.self))
    }

    /// Decodes a whole frame that `measure` found complete (so commands 0 and 1 are
    /// already fully validated).
    @inlinable @inline(__always)
    static func parse(_ bytes: UnsafeRawPointer, length: Int, maximumPayloadLength maximum: Int) -> Parsed {
        switch bytes.load(as: UInt8.self) {
        case 2:
            return parseItems(bytes, length: length, maximumPayloadLength: maximum)
        case 1:
            return .notification(DecodedNotification(
                format: .enhanced,
                identifier: enhancedIdentifier(bytes),
                expiry: UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: 5, as: UInt32.self)),
                priority: nil,
                token: UnsafeRawBufferPointer(start: bytes + 11, count: 32),
                payload: UnsafeRawBufferPointer(start: bytes + 45, count: length &- 45)))
        default:
            return .notification(DecodedNotification(
                format: .simple, identifier: 0, expiry: nil, priority: nil,
                token: UnsafeRawBufferPointer(start: bytes + 3, count: 32),
                payload: UnsafeRawBufferPointer(start: bytes + 37, count: length &- 37)))
        }
    }

    @inlinable
    static func parseItems(_ bytes: UnsafeRawPointer, length: Int, maximumPayloadLength maximum: Int) -> Parsed {
        // Offsets of each item's data (0: absent; data never starts at 0) and lengths.
        var tokenOffset = 0, tokenLength = 0
        var payloadOffset = 0, payloadLength = 0
        var identifierOffset = 0, identifierLength = 0
        var expiryOffset = 0, expiryLength = 0
        var priorityOffset = 0, priorityLength = 0
        var seen: UInt32 = 0
        // An unknown or repeated item: the frame is refused, but only once the rest of it
        // has been searched for the identifier to answer with.
        var hasStrayItem = false
        var offset = 5
        while offset < length {
            guard length &- offset >= 3 else { return structuralViolation(bytes, identifierOffset, identifierLength) }
            let id = bytes.load(fromByteOffset: offset, as: UInt8.self)
            let itemLength = Int(UInt16(bigEndian: bytes.loadUnaligned(fromByteOffset: offset &+ 1, as: UInt16.self)))
            let dataOffset = offset &+ 3
            guard itemLength <= length &- dataOffset else {
                return structuralViolation(bytes, identifierOffset, identifierLength)
            }
            offset = dataOffset &+ itemLength
            let bit: UInt32 = 1 &<< UInt32(id & 31)
            guard id &- 1 < 5, seen & bit == 0 else {
                hasStrayItem = true
                continue
            }
            seen |= bit
            switch id {
            case 1: tokenOffset = dataOffset; tokenLength = itemLength
            case 2: payloadOffset = dataOffset; payloadLength = itemLength
            case 3: identifierOffset = dataOffset; identifierLength = itemLength
            case 4: expiryOffset = dataOffset; expiryLength = itemLength
            default: priorityOffset = dataOffset; priorityLength = itemLength
            }
        }
        if hasStrayItem { return structuralViolation(bytes, identifierOffset, identifierLength) }

        var identifier: UInt32 = 0
        if identifierOffset != 0 {
            guard identifierLength == 4 else {
                return .violation(ProtocolViolation(status: .protocolError, identifier: nil))
            }
            identifier = UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: identifierOffset, as: UInt32.self))
        }
        // The identifier to echo for a semantic error: the frame's own, when it has one.
        let echoed: UInt32? = identifierOffset != 0 ? identifier : nil
        guard tokenOffset != 0 else {
            return .violation(ProtocolViolation(status: .missingDeviceToken, identifier: echoed))
        }
        guard tokenLength == 32 else {
            return .violation(ProtocolViolation(status: .invalidTokenSize, identifier: echoed))
        }
        guard payloadOffset != 0 else {
            return .violation(ProtocolViolation(status: .missingPayload, identifier: echoed))
        }
        guard payloadLength != 0, payloadLength <= maximum else {
            return .violation(ProtocolViolation(status: .invalidPayloadSize, identifier: echoed))
        }
        var expiry: UInt32? = nil
        if expiryOffset != 0 {
            guard expiryLength == 4 else {
                return .violation(ProtocolViolation(status: .protocolError, identifier: echoed))
            }
            expiry = UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: expiryOffset, as: UInt32.self))
        }
        var priority: UInt8? = nil
        if priorityOffset != 0 {
            guard priorityLength == 1 else {
                return .violation(ProtocolViolation(status: .protocolError, identifier: echoed))
            }
            let value = bytes.load(fromByteOffset: priorityOffset, as: UInt8.self)
            guard value == 10 || value == 5 else {
                return .violation(ProtocolViolation(status: .protocolError, identifier: echoed))
            }
            priority = value
        }
        return .notification(DecodedNotification(
            format: .frame, identifier: identifier, expiry: expiry, priority: priority,
            token: UnsafeRawBufferPointer(start: bytes + tokenOffset, count: 32),
            payload: UnsafeRawBufferPointer(start: bytes + payloadOffset, count: payloadLength)))
    }

    /// A broken item structure: echo the identifier only if a well-formed identifier item
    /// was read (before the break, when the break leaves the rest undelimited).
    @inlinable
    static func structuralViolation(_ bytes: UnsafeRawPointer, _ identifierOffset: Int, _ identifierLength: Int) -> Parsed {
        let identifier: UInt32? = identifierOffset != 0 && identifierLength == 4
            ? UInt32(bigEndian: bytes.loadUnaligned(fromByteOffset: identifierOffset, as: UInt32.self))
            : nil
        return .violation(ProtocolViolation(status: .protocolError, identifier: identifier))
    }
}
