import SalvoWire

/// How a notification is staged: the bytes a lane's staging ring holds for it, encoded by
/// producers and made the same way again whenever it is rebuilt from its source. The one
/// seam between the transports and the shared engine (rings, windows, sources).
enum RecordBuilder: Sendable {
    /// A binary frame (command 0, 1 or 2), handed to `SSL_write` as it is.
    case frame(FrameBuilder)
    /// A compact HTTP/2 request record, turned into HEADERS and DATA when it is written.
    case request(RequestRecordBuilder)

    /// The bytes `encode` writes for `notification`.
    @inline(__always)
    func length(of notification: SourceNotification) -> Int {
        switch self {
        case .frame(let builder): builder.length(of: notification)
        case .request(let builder): builder.length(of: notification)
        }
    }

    /// Encodes at the start of `buffer`, which holds at least `length(of:)` bytes.
    /// `identifier` is the binary frame's; a request record has none.
    @inline(__always)
    func encode(_ notification: SourceNotification, identifier: UInt32,
                into buffer: UnsafeMutableRawBufferPointer) throws(FrameEncodingError) {
        switch self {
        case .frame(let builder): try builder.encode(notification, identifier: identifier, into: buffer)
        case .request(let builder): try builder.encode(notification, into: buffer)
        }
    }

    /// The longest record: what a ring and a rebuild buffer must hold at least.
    var maximumLength: Int {
        switch self {
        case .frame(let builder): builder.encoder.encodedLength(payloadLength: builder.encoder.maximumPayloadLength)
        case .request(let builder): builder.maximumLength
        }
    }

    /// The device, or broadcast channel, an encoded record goes to.
    func target(inRecord record: UnsafeRawBufferPointer) -> PushTarget? {
        switch self {
        case .frame(let builder): builder.token(inFrame: record).map(PushTarget.device)
        case .request: RequestRecord(record).target
        }
    }
}

/// Encodes notifications as binary frames the way the sender was configured to, in one
/// place: the first write and every rebuild of a frame must produce the same bytes.
struct FrameBuilder: Sendable {
    let encoder: FrameEncoder
    let defaultExpiry: UInt32?
    let defaultPriority: UInt8?

    func length(of notification: SourceNotification) -> Int {
        encoder.encodedLength(payloadLength: notification.payload.count,
                              hasExpiry: (notification.expiry ?? defaultExpiry) != nil,
                              hasPriority: (notification.priority ?? defaultPriority) != nil)
    }

    /// Encodes at the start of `buffer`, which holds at least `length(of:)` bytes.
    @inline(__always)
    func encode(_ notification: SourceNotification, identifier: UInt32,
                into buffer: UnsafeMutableRawBufferPointer) throws(FrameEncodingError) {
        // A broadcast's token is not its target: sent as a frame, it would go to no one.
        if let request = notification.request, request.pointee.channelID != nil {
            throw .invalidHeader(name: "apns-channel-id", problem: "makes a broadcast, which the binary protocol does not have")
        }
        guard case .written = try encoder.encode(
            token: notification.token, payload: notification.payload, identifier: identifier,
            expiry: notification.expiry ?? defaultExpiry, priority: notification.priority ?? defaultPriority, into: buffer)
        else { preconditionFailure("the buffer is shorter than the frame") }
    }

    /// The device token inside an encoded frame.
    func token(inFrame frame: UnsafeRawBufferPointer) -> DeviceToken? {
        let offset = switch encoder.format {
        case .simple: 3  // 00 len:u16
        case .enhanced: 11  // 01 id:u32 expiry:u32 len:u16
        case .frame: 8  // 02 frameLength:u32 itemId:u8 itemLen:u16 (the encoder writes the token item first)
        }
        guard frame.count >= offset + DeviceToken.byteCount else { return nil }
        return try? DeviceToken(bytes: UnsafeRawBufferPointer(rebasing: frame[offset..<offset + DeviceToken.byteCount]))
    }
}
