import SalvoWire

/// A snapshot of what an `H2MockGateway` saw, summed over all its loops.
///
/// Accounting: every request stream the client completes is counted once in `requests` and
/// ends as exactly one of: accepted (200), rejected (a 4xx or 5xx, by validation or by the
/// failure plan, in `rejectedByReason`), the one request each silent drop leaves
/// unanswered (`droppedConnections`), or an answer the plan held back that never went out
/// (`unsentAnswers`). Answers count when they are sent, not when they are decided. Streams
/// the client resets before finishing them are counted in `resetStreams`, not in `requests`.
///
/// Broadcasts (`/4/broadcasts/apps/…`) count as requests like any other, in `accepted`,
/// `rejected` and `rejectedByReason`, so that a sender's totals equal the gateway's; the
/// accepted ones also by channel in `broadcastsByChannel`. Channel management requests
/// (the management port) count only in `channelOperations` and
/// `rejectedChannelOperations`: they are not notifications.
public struct H2Statistics: Sendable, Hashable, Codable {
    /// Requests answered 200.
    public var accepted = 0
    /// Requests answered with an error status.
    public var rejected = 0
    /// `rejected` by reason (`"BadDeviceToken"`, …).
    public var rejectedByReason: [String: Int] = [:]
    /// `rejected` by HTTP status (`"400"`, …).
    public var rejectedByStatus: [String: Int] = [:]
    /// Requests complete (END_STREAM received), whatever their answer.
    public var requests = 0
    /// Request streams the clients opened.
    public var streams = 0
    /// Request streams the clients reset (RST_STREAM) or abandoned before finishing them.
    public var resetStreams = 0
    /// TCP connections accepted on the push port (handshake failures included); the
    /// channel management port's are not counted.
    public var connections = 0
    /// Connections whose TLS handshake failed (no client certificate when one is
    /// required; an ALPN list without `h2`).
    public var handshakeFailures = 0
    /// Connections whose client offered no ALPN at all, taken as HTTP/2 by prior knowledge
    /// (as Apple takes them); counted in `connections` too.
    public var withoutALPN = 0
    /// Connections closed because their first bytes were not the HTTP/2 connection preface
    /// (an HTTP/1.1 request from a client that offered no ALPN, for one).
    public var refusedWithoutPreface = 0
    /// Provider tokens the team switched to (token authentication): 1 when every sender
    /// shared one token; each further one is a renewal (or a second sender's token
    /// accepted 20 minutes or more after the last).
    public var providerTokensTaken = 0
    /// GOAWAY frames sent by `H2FailurePlan.goawayEvery`.
    public var goaways = 0
    /// Connections closed silently by `H2FailurePlan.dropEvery`.
    public var droppedConnections = 0
    /// Read stalls started by `H2FailurePlan.stallEvery`.
    public var flowControlStalls = 0
    /// Answers held by `H2FailurePlan.responseDelay` or `errorDelay` that were never sent:
    /// their client closed the connection or reset the stream first, or the drop rule
    /// closed the connection.
    public var unsentAnswers = 0
    /// Accepted requests whose token and payload had been accepted before. Tracked only
    /// with `recordAccepted` (0 otherwise).
    public var duplicates = 0
    /// With `recordAccepted`: the distinct `MockStatistics.digest(token:payload:)` values
    /// of accepted requests, sorted. Nil otherwise. A broadcast's digest is
    /// `NotificationDigest` over the bytes of its `apns-channel-id` as sent (the 24
    /// characters of base64 text, not the 16 bytes they encode), then its payload's: what
    /// `H2Statistics.broadcastDigest(channelID:payload:)` computes.
    public var acceptedDigests: [UInt64]?
    /// Accepted broadcasts by channel id (base64, as sent), deleted channels included.
    public var broadcastsByChannel: [String: Int] = [:]
    /// Successful channel management requests by operation: `"create"`, `"read"`,
    /// `"delete"`, `"list"`. Channels made in process (`MockChannelRegistry.create`) are
    /// not counted.
    public var channelOperations: [String: Int] = [:]
    /// Refused channel management requests by reason (`"ChannelNotRegistered"`, …).
    public var rejectedChannelOperations: [String: Int] = [:]
    /// With `recordRequests`: each accepted request's token and APNs headers, in the order
    /// the requests were answered, the first `H2MockGateway.recordedRequestLimit` of them.
    /// Nil otherwise.
    public var acceptedRequests: [H2RecordedRequest]?

    /// An all-zero snapshot.
    public init() {}

    /// Rejections with `reason`.
    public func rejected(_ reason: APNsReason) -> Int { rejectedByReason[reason.name] ?? 0 }

    /// The digest the gateway records for an accepted broadcast to `channelID` carrying
    /// `payload` (see `acceptedDigests`).
    public static func broadcastDigest(channelID: String, payload: some Sequence<UInt8>) -> UInt64 {
        var digest = NotificationDigest()
        Array(channelID.utf8).withUnsafeBytes { digest.add($0) }
        Array(payload).withUnsafeBytes { digest.add($0) }
        return digest.value
    }
}

/// What an accepted request carried: its device token (empty for a broadcast) and its APNs
/// headers as they arrived, nil for those it did not send. What `H2MockGateway.Configuration.recordRequests`
/// keeps, so that a test of a sender can check its per-request headers at the gateway.
public struct H2RecordedRequest: Sendable, Hashable, Codable {
    /// The device token from `:path`, as 64 lowercase hex digits.
    public var token: String
    /// `apns-push-type`.
    public var pushType: String?
    /// `apns-topic`.
    public var topic: String?
    /// `apns-id`.
    public var apnsID: String?
    /// `apns-expiration`.
    public var expiration: String?
    /// `apns-priority`.
    public var priority: String?
    /// `apns-collapse-id`.
    public var collapseID: String?
    /// `apns-channel-id` (broadcasts).
    public var channelID: String?
    /// `apns-request-id` (broadcasts).
    public var requestID: String?
    /// With token authentication: the team (`iss`) of the valid provider token that
    /// authorized it; nil for a request of a certificate's connection.
    public var team: String?

    public init(token: String, pushType: String? = nil, topic: String? = nil, apnsID: String? = nil,
                expiration: String? = nil, priority: String? = nil, collapseID: String? = nil,
                channelID: String? = nil, requestID: String? = nil, team: String? = nil) {
        self.token = token
        self.team = team
        self.channelID = channelID
        self.requestID = requestID
        self.pushType = pushType
        self.topic = topic
        self.apnsID = apnsID
        self.expiration = expiration
        self.priority = priority
        self.collapseID = collapseID
    }

    /// Takes one request header, keeping its value if it is one of these.
    mutating func take(_ header: APNsRequestHeader, _ value: UnsafeRawBufferPointer) {
        let text = String(decoding: value, as: UTF8.self)
        switch header {
        case .pushType: pushType = text
        case .topic: topic = text
        case .id: apnsID = text
        case .expiration: expiration = text
        case .priority: priority = text
        case .collapseId: collapseID = text
        case .channelId: channelID = text
        case .requestId: requestID = text
        case .method, .path, .authorization: break
        }
    }
}
