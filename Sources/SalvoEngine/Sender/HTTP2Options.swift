import SalvoWire

/// How a sender speaks Apple's HTTP/2 provider API.
public struct HTTP2Options: Sendable {
    /// The app's bundle id: each request's `apns-topic` is this with its push type's suffix
    /// (`.voip`, `.push-type.liveactivity`, …) unless the notification gives its own topic.
    /// Needed with token authentication; with a certificate APNs can take the topic from it
    /// (nil: no `apns-topic`).
    public var topic: String?
    /// The push type of notifications that name none.
    public var pushType: APNsPushType = .alert
    /// The `apns-collapse-id` of notifications that give none (at most 64 bytes): the
    /// device shows only the newest of the notifications that share it.
    public var collapseID: String?
    /// How the provider proves who it is: the TLS client certificate in
    /// `SenderConfiguration.tls`, or a provider token signed with a `.p8` key.
    public var authentication: HTTP2Authentication
    /// With token authentication: where the team's provider token is shared with the
    /// team's other processes and later runs (``ProviderTokenCache``, or a PostgreSQL table),
    /// so that they all send one token. Nil: this sender signs its own, and another process
    /// of the team that signed one within 20 minutes makes the gateway refuse it.
    public var tokenStore: (any ProviderTokenStore)?
    /// The most streams one connection keeps open, whatever more the gateway's SETTINGS
    /// allow (APNs: 1000; one until it has seen a valid provider token).
    public var maximumConcurrentStreams = 1000
    /// A PING goes to a connection after this long without a frame from the gateway, so that
    /// a dead path is noticed (and kept open through middleboxes); no answer within
    /// `SenderConfiguration.stallTimeout` drops the connection.
    public var pingInterval: Duration = .seconds(60)
    /// 429 TooManyRequests (too many for one device): a notification is tried again after
    /// this backoff, at most `throttleRetries` times, and then fails as `throttled`.
    public var throttleBackoff = Backoff(initial: .seconds(1), maximum: .seconds(60), jitter: 0.5)
    /// How long a stream may wait for its answer, and work for a stream the gateway does
    /// not allow. A connection with a stream waiting longer, or allowed no stream that long,
    /// has stalled: it is dropped, its open streams follow the drop policy, and it counts as
    /// a failed attempt (a gateway that stalls three connections in a row is given up on).
    /// A retired connection (after GOAWAY or a 503) waits this long for its streams'
    /// answers. Apple answers in milliseconds to seconds.
    public var answerTimeout: Duration = .seconds(15)
    /// How long after the TLS handshake the gateway's SETTINGS may take; later, the
    /// connection counts as a failed connect.
    public var settingsTimeout: Duration = .seconds(3)
    /// How many times a notification answered 429 TooManyRequests is tried again.
    public var throttleRetries = 5
    /// 500 and 503: a notification is tried again at most this many times (after a 503 on
    /// another connection), and then fails as `server_error`.
    public var serverErrorRetries = 3

    /// Options for the app `topic` (its bundle id; nil only with a certificate that names it),
    /// sending `pushType` by default and authenticating with `authentication`.
    public init(topic: String?, pushType: APNsPushType = .alert, authentication: HTTP2Authentication = .certificate) {
        self.topic = topic
        self.pushType = pushType
        self.authentication = authentication
    }
}

extension HTTP2Options {
    /// What APNs would refuse in every request these options make, said for the user.
    func problem(defaultPriority: UInt8?) -> String? {
        if case .token = authentication, topic == nil {
            return "token authentication needs a topic (the app's bundle id): APNs takes it from the certificate only"
        }
        if let collapseID, collapseID.utf8.count > APNsRequestHeader.collapseIdLimit {
            return "the collapse id has \(collapseID.utf8.count) bytes; APNs takes at most \(APNsRequestHeader.collapseIdLimit)"
        }
        if let defaultPriority, ![10, 5, 1].contains(defaultPriority) {
            return "priority \(defaultPriority): APNs takes 10 (at once), 5 (power-considerate) or 1 (low)"
        }
        if pushType == .background, let defaultPriority, defaultPriority != 5 {
            return "background notifications go at priority 5; APNs refuses them at \(defaultPriority)"
        }
        if maximumConcurrentStreams < 1 { return "the stream limit must be at least 1" }
        return nil
    }
}
