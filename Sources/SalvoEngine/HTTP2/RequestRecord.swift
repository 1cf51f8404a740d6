import SalvoWire

/// An HTTP/2 request as a lane's staging ring holds it: what varies per notification, in a
/// fixed header and four variable parts. The connection turns it into HEADERS and DATA
/// when it writes it, with the headers every request shares (method, authority, the
/// provider token) added there. A broadcast (flag 8) goes to the channel its record names,
/// not to its token (zero), and its topic, if any, is the bundle id of its path.
///
/// ```
///    0  token             32 bytes
///   32  expiry            u32        (flag 1)
///   36  payload length    u16
///   38  flags             u8         1 expiry, 2 priority, 4 apns-id, 8 broadcast
///   39  priority          u8         (flag 2)
///   40  push type         u8         APNsPushType.rawValue
///   41  topic length      u8         0: the sender's topic for the push type
///   42  collapse length   u8         0: no apns-collapse-id
///   43  channel length    u8         a broadcast's channel id; 0 for a push to a device
///   44  apns-id           16 bytes   (flag 4; otherwise the connection makes one)
///   60  topic, collapse id, channel id, payload
/// ```
///
/// Native byte order: a record never leaves the process.
struct RequestRecord {
    static let headerLength = 60
    private static let hasExpiry: UInt8 = 1, hasPriority: UInt8 = 2, hasAPNsID: UInt8 = 4, broadcast: UInt8 = 8

    let bytes: UnsafeRawBufferPointer

    init(_ bytes: UnsafeRawBufferPointer) {
        precondition(bytes.count >= Self.headerLength, "a request record has a \(Self.headerLength)-byte header")
        self.bytes = bytes
    }

    var token: DeviceToken {
        // 32 bytes by construction.
        try! DeviceToken(bytes: UnsafeRawBufferPointer(rebasing: bytes[0..<DeviceToken.byteCount]))
    }

    private var flags: UInt8 { bytes[38] }

    var expiry: UInt32? { flags & Self.hasExpiry != 0 ? bytes.loadUnaligned(fromByteOffset: 32, as: UInt32.self) : nil }
    var priority: UInt8? { flags & Self.hasPriority != 0 ? bytes[39] : nil }
    var pushType: APNsPushType { APNsPushType(rawValue: bytes[40]) ?? .alert }
    /// A broadcast to `channelID`'s subscribers rather than a push to `token`.
    var isBroadcast: Bool { flags & Self.broadcast != 0 }
    var apnsID: APNsID? {
        guard flags & Self.hasAPNsID != 0 else { return nil }
        return APNsID(high: bytes.loadUnaligned(fromByteOffset: 44, as: UInt64.self),
                      low: bytes.loadUnaligned(fromByteOffset: 52, as: UInt64.self))
    }

    private var topicLength: Int { Int(bytes[41]) }
    private var collapseLength: Int { Int(bytes[42]) }
    private var channelLength: Int { Int(bytes[43]) }
    private var payloadLength: Int { Int(bytes.loadUnaligned(fromByteOffset: 36, as: UInt16.self)) }

    /// The notification's own `apns-topic`; nil: the sender's.
    var topic: UnsafeRawBufferPointer? {
        topicLength == 0 ? nil : UnsafeRawBufferPointer(rebasing: bytes[Self.headerLength..<Self.headerLength + topicLength])
    }

    var collapseID: UnsafeRawBufferPointer? {
        let start = Self.headerLength + topicLength
        return collapseLength == 0 ? nil : UnsafeRawBufferPointer(rebasing: bytes[start..<start + collapseLength])
    }

    /// A broadcast's channel id (empty for a push to a device).
    var channelID: UnsafeRawBufferPointer {
        let start = Self.headerLength + topicLength + collapseLength
        return UnsafeRawBufferPointer(rebasing: bytes[start..<start + channelLength])
    }

    var payload: UnsafeRawBufferPointer {
        let start = Self.headerLength + topicLength + collapseLength + channelLength
        return UnsafeRawBufferPointer(rebasing: bytes[start..<start + payloadLength])
    }

    /// The device, or the broadcast channel, it goes to.
    var target: PushTarget { isBroadcast ? .channel(String(decoding: channelID, as: UTF8.self)) : .device(token) }

    /// Writes a record for `notification` at the start of `buffer` (which holds `length`
    /// bytes, see `RequestRecordBuilder`), with the sender's defaults already applied.
    fileprivate static func write(_ notification: SourceNotification, fields: RequestFields, pushType: APNsPushType,
                                  expiry: UInt32?, priority: UInt8?, collapse: UnsafeRawBufferPointer,
                                  into buffer: UnsafeMutableRawBufferPointer) {
        let apnsID = fields.apnsID
        let none = UnsafeRawBufferPointer(start: nil, count: 0)
        let topic = fields.topic ?? none
        let channel = fields.channelID ?? none
        notification.token.copyBytes(to: buffer.baseAddress!)
        buffer.storeBytes(of: expiry ?? 0, toByteOffset: 32, as: UInt32.self)
        buffer.storeBytes(of: UInt16(notification.payload.count), toByteOffset: 36, as: UInt16.self)
        buffer[38] = (expiry != nil ? hasExpiry : 0) | (priority != nil ? hasPriority : 0)
            | (apnsID != nil ? hasAPNsID : 0) | (fields.channelID != nil ? broadcast : 0)
        buffer[39] = priority ?? 0
        buffer[40] = pushType.rawValue
        buffer[41] = UInt8(topic.count)
        buffer[42] = UInt8(collapse.count)
        buffer[43] = UInt8(channel.count)
        buffer.storeBytes(of: apnsID?.high ?? 0, toByteOffset: 44, as: UInt64.self)
        buffer.storeBytes(of: apnsID?.low ?? 0, toByteOffset: 52, as: UInt64.self)
        var at = headerLength
        append(topic, to: buffer, at: &at)
        append(collapse, to: buffer, at: &at)
        append(channel, to: buffer, at: &at)
        append(notification.payload, to: buffer, at: &at)
    }

    @inline(__always)
    private static func append(_ part: UnsafeRawBufferPointer, to buffer: UnsafeMutableRawBufferPointer, at: inout Int) {
        guard part.count > 0 else { return }
        UnsafeMutableRawBufferPointer(rebasing: buffer[at..<at + part.count]).copyMemory(from: part)
        at += part.count
    }
}

/// Encodes notifications as `RequestRecord`s with the sender's defaults for what a
/// notification leaves open, checking what APNs would refuse anyway: an empty payload, one
/// over its push type's limit (4096 bytes; 5120 for VoIP and broadcasts), a topic or
/// collapse id too long, a broadcast's channel id that is not base64 or push type that is
/// not `liveactivity`.
struct RequestRecordBuilder: Sendable {
    /// The push type of notifications that name none.
    let defaultPushType: APNsPushType
    let defaultExpiry: UInt32?
    let defaultPriority: UInt8?
    /// The `apns-collapse-id` of notifications that give none; empty: none.
    let defaultCollapseID: [UInt8]

    /// The longest `apns-topic` a record holds (a bundle id with its suffix).
    static let topicLimit = 255

    /// The longest record: the largest payload (VoIP's and a broadcast's) with the longest
    /// topic, collapse id and channel id.
    var maximumLength: Int { Self.longestRecord }

    /// Computed once: the connections ask before every request, and `allCases.map` allocates.
    private static let longestRecord = RequestRecord.headerLength + topicLimit + APNsRequestHeader.collapseIdLimit
        + BroadcastRules.channelIDLimit + max(BroadcastRules.payloadLimit, APNsPushType.allCases.map(\.payloadLimit).max()!)

    @inline(__always)
    func length(of notification: SourceNotification) -> Int {
        guard let fields = notification.request?.pointee else {
            return RequestRecord.headerLength + defaultCollapseID.count + notification.payload.count
        }
        if let channel = fields.channelID {
            return RequestRecord.headerLength + (fields.topic?.count ?? 0) + channel.count + notification.payload.count
        }
        return RequestRecord.headerLength + (fields.topic?.count ?? 0)
            + (fields.collapseID?.count ?? defaultCollapseID.count) + notification.payload.count
    }

    /// Writes the record at the start of `buffer` (at least `length(of:)` bytes).
    @inline(__always)
    func encode(_ notification: SourceNotification, into buffer: UnsafeMutableRawBufferPointer) throws(FrameEncodingError) {
        let fields = notification.request?.pointee ?? RequestFields()
        if let channel = fields.channelID {
            // Checked by a function that returns the problem: calling a typed-throwing one
            // here was miscompiled in release builds (Swift 6.3: good broadcasts came back
            // refused, with an error that crashed when printed).
            if let problem = Self.broadcastProblem(notification, fields: fields, channel: channel) { throw problem }
            // Always an expiration (Apple refuses a broadcast without one) and a priority.
            RequestRecord.write(notification, fields: fields, pushType: .liveactivity,
                                expiry: notification.expiry ?? defaultExpiry ?? 0, priority: notification.priority ?? 10,
                                collapse: UnsafeRawBufferPointer(start: nil, count: 0), into: buffer)
            return
        }
        let pushType = fields.pushType ?? defaultPushType
        let payload = notification.payload.count
        guard payload > 0 else { throw .emptyPayload }
        guard payload <= pushType.payloadLimit else { throw .payloadTooLong(length: payload, maximum: pushType.payloadLimit) }
        if let topic = fields.topic, topic.count > Self.topicLimit {
            throw .headerTooLong(name: "apns-topic", length: topic.count, maximum: Self.topicLimit)
        }
        if let collapse = fields.collapseID, collapse.count > APNsRequestHeader.collapseIdLimit {
            throw .headerTooLong(name: "apns-collapse-id", length: collapse.count, maximum: APNsRequestHeader.collapseIdLimit)
        }
        // A background push must go at priority 5: APNs refuses it at 10, which is what a
        // request without apns-priority means (a campaign line that names its own priority
        // was checked when it was read).
        let priority = notification.priority ?? (pushType == .background ? 5 : defaultPriority)
        let expiry = notification.expiry ?? defaultExpiry
        if let collapse = fields.collapseID {
            RequestRecord.write(notification, fields: fields, pushType: pushType, expiry: expiry, priority: priority,
                                collapse: collapse, into: buffer)
        } else {
            defaultCollapseID.withUnsafeBytes {
                RequestRecord.write(notification, fields: fields, pushType: pushType, expiry: expiry, priority: priority,
                                    collapse: $0, into: buffer)
            }
        }
    }

    /// Why APNs would refuse a broadcast, if it would: always `liveactivity` (a line naming
    /// another type is refused), a payload of at most 5120 bytes, a channel id in base64.
    /// Its expiration is 0 (store nothing) unless the notification or the sender gives one:
    /// a channel that stores nothing refuses anything else. No collapse id: broadcasts have
    /// none.
    private static func broadcastProblem(_ notification: SourceNotification, fields: RequestFields,
                                         channel: UnsafeRawBufferPointer) -> FrameEncodingError? {
        let payload = notification.payload.count
        guard payload > 0 else { return .emptyPayload }
        guard payload <= BroadcastRules.payloadLimit else { return .payloadTooLong(length: payload, maximum: BroadcastRules.payloadLimit) }
        if let pushType = fields.pushType, pushType != .liveactivity {
            return .invalidHeader(name: "apns-push-type", problem: "is \(pushType); a broadcast updates a Live Activity: liveactivity")
        }
        if let topic = fields.topic, topic.count > topicLimit {
            return .headerTooLong(name: "apns-topic", length: topic.count, maximum: topicLimit)
        }
        guard BroadcastRules.isChannelID(channel) else {
            return .invalidHeader(name: "apns-channel-id",
                                  problem: "must be 1 to \(BroadcastRules.channelIDLimit) base64 characters, as Apple made the channel's id")
        }
        return nil
    }
}
