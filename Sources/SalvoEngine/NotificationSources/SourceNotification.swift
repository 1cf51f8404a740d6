import SalvoWire

/// Where a notification sits in its source: enough to read it again.
public struct SourcePosition: Sendable, Hashable {
    /// Opaque to the sender, meaningful to the source: a byte offset in a file, an index in
    /// an array, a row key.
    public var offset: UInt64
    /// The number reported with the notification (rejections, failures) and used for
    /// checkpoints: a line number, an index.
    public var sequence: UInt64

    /// The position at `offset` in the source, reported as `sequence`.
    public init(offset: UInt64, sequence: UInt64) {
        self.offset = offset
        self.sequence = sequence
    }
}

/// One notification as a reader yields it.
///
/// `payload` and `request` point into the reader's storage: valid until the reader's next
/// call.
public struct SourceNotification {
    // Small on purpose (79 bytes, 80 as an optional): the send path copies each
    // notification a few times between the reader and the ring, so the HTTP/2 fields most
    // notifications never set are behind a pointer rather than inline, and the small
    // optionals come last, where the optional's tag finds room. A test holds the size.
    /// The device to notify; ignored (all zeros by convention) for a broadcast, whose
    /// target is `request.channelID`.
    public var token: DeviceToken
    /// The payload bytes (minified JSON), at most the sender's `maximumPayloadLength`.
    public var payload: UnsafeRawBufferPointer
    /// The HTTP/2 headers it sets for itself; nil: all of them from the sender's
    /// configuration. The binary protocol ignores them.
    public var request: UnsafePointer<RequestFields>?
    /// Where it is, for reading it again.
    public var position: SourcePosition
    /// UNIX seconds after which APNs may drop it (`apns-expiration` over HTTP/2); nil: the
    /// sender's default.
    public var expiry: UInt32?
    /// 10 or 5 (and 1 over HTTP/2); nil: the sender's default.
    public var priority: UInt8?

    /// A notification at `position`; `payload` (and `request`) must stay valid until the
    /// reader's next call.
    @inlinable
    public init(token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32? = nil, priority: UInt8? = nil,
                position: SourcePosition, request: UnsafePointer<RequestFields>? = nil) {
        self.token = token
        self.payload = payload
        self.request = request
        self.expiry = expiry
        self.priority = priority
        self.position = position
    }
}

/// The HTTP/2 request headers a notification may set for itself (a JSONL line's
/// `push_type`, `topic`, `collapse_id` and `apns_id`); what it leaves nil, the sender's
/// configuration decides. The binary protocol has no place for them.
///
/// `topic` and `collapseID` point into their reader's storage, like the payload.
public struct RequestFields {
    /// `apns-push-type`; nil: the sender's default push type.
    public var pushType: APNsPushType?
    /// The whole `apns-topic` as sent (a bundle id, with the push type's suffix if it has
    /// one); nil: the sender's topic with the push type's suffix.
    public var topic: UnsafeRawBufferPointer?
    /// `apns-collapse-id`, at most 64 bytes; nil: none.
    public var collapseID: UnsafeRawBufferPointer?
    /// `apns-id` (for a broadcast, `apns-request-id`); nil: the sender makes one.
    public var apnsID: APNsID?
    /// A broadcast channel's id (`apns-channel-id`, base64 as Apple made it): the
    /// notification is then a broadcast (`POST /4/broadcasts/apps/<bundle id>`) to every
    /// device subscribed to the channel, not a push to `token`. `topic`, when set, is the
    /// bundle id. Nil: a push to a device.
    public var channelID: UnsafeRawBufferPointer?

    /// Fields that set these headers; nil leaves one to the sender's configuration.
    public init(pushType: APNsPushType? = nil, topic: UnsafeRawBufferPointer? = nil,
                collapseID: UnsafeRawBufferPointer? = nil, apnsID: APNsID? = nil, channelID: UnsafeRawBufferPointer? = nil) {
        self.pushType = pushType
        self.topic = topic
        self.collapseID = collapseID
        self.apnsID = apnsID
        self.channelID = channelID
    }

    /// Whether it sets nothing: every header from the sender's configuration.
    public var isEmpty: Bool { pushType == nil && topic == nil && collapseID == nil && apnsID == nil && channelID == nil }
}

extension SourceNotification {
    /// What it goes to: its device, or the broadcast channel its request names.
    public var target: PushTarget {
        if let channel = request?.pointee.channelID { return .channel(String(decoding: channel, as: UTF8.self)) }
        return .device(token)
    }
}
