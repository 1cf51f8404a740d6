import SalvoWire

/// An HTTP/2 request as a lane's staging ring holds it: what varies per notification, in a
/// fixed header and three variable parts. The connection turns it into HEADERS and DATA
/// when it writes it, with the headers every request shares (method, authority, the
/// provider token) added there.
///
/// ```
///    0  token             32 bytes
///   32  expiry            u32        (flag 1)
///   36  payload length    u16
///   38  flags             u8         1 expiry, 2 priority, 4 apns-id
///   39  priority          u8         (flag 2)
///   40  push type         u8         APNsPushType.rawValue
///   41  topic length      u8         0: the sender's topic for the push type
///   42  collapse length   u8         0: no apns-collapse-id
///   43  (unused)
///   44  apns-id           16 bytes   (flag 4; otherwise the connection makes one)
///   60  topic, collapse id, payload
/// ```
///
/// Native byte order: a record never leaves the process.
struct RequestRecord {
    static let headerLength = 60
    private static let hasExpiry: UInt8 = 1, hasPriority: UInt8 = 2, hasAPNsID: UInt8 = 4

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
    var apnsID: APNsID? {
        guard flags & Self.hasAPNsID != 0 else { return nil }
        return APNsID(high: bytes.loadUnaligned(fromByteOffset: 44, as: UInt64.self),
                      low: bytes.loadUnaligned(fromByteOffset: 52, as: UInt64.self))
    }

    private var topicLength: Int { Int(bytes[41]) }
    private var collapseLength: Int { Int(bytes[42]) }
    private var payloadLength: Int { Int(bytes.loadUnaligned(fromByteOffset: 36, as: UInt16.self)) }

    /// The notification's own `apns-topic`; nil: the sender's.
    var topic: UnsafeRawBufferPointer? {
        topicLength == 0 ? nil : UnsafeRawBufferPointer(rebasing: bytes[Self.headerLength..<Self.headerLength + topicLength])
    }

    var collapseID: UnsafeRawBufferPointer? {
        let start = Self.headerLength + topicLength
        return collapseLength == 0 ? nil : UnsafeRawBufferPointer(rebasing: bytes[start..<start + collapseLength])
    }

    var payload: UnsafeRawBufferPointer {
        let start = Self.headerLength + topicLength + collapseLength
        return UnsafeRawBufferPointer(rebasing: bytes[start..<start + payloadLength])
    }

    /// Writes a record for `notification` at the start of `buffer` (which holds `length`
    /// bytes, see `RequestRecordBuilder`), with the sender's defaults already applied.
    fileprivate static func write(_ notification: SourceNotification, fields: RequestFields, pushType: APNsPushType,
                                  expiry: UInt32?, priority: UInt8?, collapse: UnsafeRawBufferPointer,
                                  into buffer: UnsafeMutableRawBufferPointer) {
        let apnsID = fields.apnsID
        let topic = fields.topic ?? UnsafeRawBufferPointer(start: nil, count: 0)
        notification.token.copyBytes(to: buffer.baseAddress!)
        buffer.storeBytes(of: expiry ?? 0, toByteOffset: 32, as: UInt32.self)
        buffer.storeBytes(of: UInt16(notification.payload.count), toByteOffset: 36, as: UInt16.self)
        buffer[38] = (expiry != nil ? hasExpiry : 0) | (priority != nil ? hasPriority : 0)
            | (apnsID != nil ? hasAPNsID : 0)
        buffer[39] = priority ?? 0
        buffer[40] = pushType.rawValue
        buffer[41] = UInt8(topic.count)
        buffer[42] = UInt8(collapse.count)
        buffer[43] = 0
        buffer.storeBytes(of: apnsID?.high ?? 0, toByteOffset: 44, as: UInt64.self)
        buffer.storeBytes(of: apnsID?.low ?? 0, toByteOffset: 52, as: UInt64.self)
        var at = headerLength
        append(topic, to: buffer, at: &at)
        append(collapse, to: buffer, at: &at)
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
/// over its push type's limit (4096 bytes; 5120 for VoIP), a topic or collapse id too long.
struct RequestRecordBuilder: Sendable {
    /// The push type of notifications that name none.
    let defaultPushType: APNsPushType
    let defaultExpiry: UInt32?
    let defaultPriority: UInt8?
    /// The `apns-collapse-id` of notifications that give none; empty: none.
    let defaultCollapseID: [UInt8]

    /// The longest `apns-topic` a record holds (a bundle id with its suffix).
    static let topicLimit = 255

    /// The longest record: the largest payload (VoIP's) with the longest topic and collapse id.
    var maximumLength: Int { Self.longestRecord }

    /// Computed once: the connections ask before every request, and `allCases.map` allocates.
    private static let longestRecord = RequestRecord.headerLength + topicLimit + APNsRequestHeader.collapseIdLimit
        + APNsPushType.allCases.map(\.payloadLimit).max()!

    @inline(__always)
    func length(of notification: SourceNotification) -> Int {
        let fields = notification.request?.pointee
        return RequestRecord.headerLength + (fields?.topic?.count ?? 0)
            + (fields?.collapseID?.count ?? defaultCollapseID.count) + notification.payload.count
    }

    /// Writes the record at the start of `buffer` (at least `length(of:)` bytes).
    @inline(__always)
    func encode(_ notification: SourceNotification, into buffer: UnsafeMutableRawBufferPointer) throws(FrameEncodingError) {
        let fields = notification.request?.pointee ?? RequestFields()
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
}
