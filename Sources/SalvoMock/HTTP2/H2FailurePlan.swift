import SalvoWire

/// What the HTTP/2 mock does wrong on purpose, and when, with the statuses and reasons
/// Apple documents for each. Every rule is a pure function of the requests the gateway
/// receives and their order, so the same traffic fails in the same places; `seed` makes
/// the identifiers the gateway invents (`apns-id` when the request has none,
/// `apns-unique-id`) and the response jitter the same from run to run.
///
/// Counting terms:
/// - A request is *valid* when it passes every check (`RequestValidation`); invalid ones
///   get their 4xx and are not counted by the rules below. Broadcasts are requests like
///   device notifications: the same counters, the same rules, but the token rules.
/// - The gateway-wide rules (`rejectEvery`, `throttleEvery`, `unavailableEvery`,
///   `internalErrorEvery`, `goawayEvery`) count valid requests across all connections,
///   1-based, on one counter; the per-connection rules (`dropEvery`, `stallEvery`) count
///   valid requests on their connection.
/// - Each valid request is judged by the rules in this order: `dropEvery`, `rejectEvery`,
///   `throttleEvery`, `unavailableEvery`, `internalErrorEvery`, `unavailableTokens`, then
///   the token rules, which are always on, as tokens Apple knows to be gone: a token whose hex ends in `dead`
///   (either case) gets 410 Unregistered, one ending in `fade` 410 ExpiredToken, both with
///   a `timestamp` (ms). The first that fires decides; if none does, the request is
///   accepted (200).
/// - `goawayEvery` and `stallEvery` act once the request is judged.
/// - Every answer is held by `responseDelay` (+ jitter), an error answer by `errorDelay`
///   when there is one; an answer counts in the statistics when it is sent.
public struct H2FailurePlan: Sendable, Hashable {
    /// Seeds the identifiers the gateway makes up, and the response jitter.
    public var seed: UInt64
    /// Every Nth valid request, gateway-wide: 400 BadDeviceToken (a broadcast: 400
    /// ChannelNotRegistered, its counterpart).
    public var rejectEvery: Int?
    /// Every Nth valid request, gateway-wide: 429 TooManyRequests.
    public var throttleEvery: Int?
    /// Every Nth valid request, gateway-wide: 503 ServiceUnavailable.
    public var unavailableEvery: Int?
    /// Every Nth valid request, gateway-wide: 500 InternalServerError.
    public var internalErrorEvery: Int?
    /// The connection that takes the Nth, 2Nth, … valid request, gateway-wide, goes away
    /// once it has judged it: GOAWAY (NO_ERROR) naming the last stream it took up, with
    /// `{"reason":"Shutdown"}` as debug data. Streams up to it are still answered (held
    /// answers when their time comes); later ones never were processed (the client resends
    /// them). The connection closes when the last of them is answered. A multiple that
    /// falls on a connection already going away sends no second GOAWAY.
    public var goawayEvery: Int?
    /// The Nth valid request on a connection is not answered: the answers already sent
    /// stay sent, those still held are dropped (`H2Statistics.unsentAnswers`), and the
    /// connection is closed with a TCP FIN, without GOAWAY or TLS close_notify. Counted in
    /// `H2Statistics.droppedConnections`.
    public var dropEvery: Int?
    /// Each time the count of valid requests on a connection reaches a multiple of N, the
    /// gateway stops reading it for `stallDuration`: it sends no WINDOW_UPDATE meanwhile,
    /// so the client's flow-control windows run dry. Counted in `flowControlStalls`.
    public var stallEvery: Int?
    /// How long each stall lasts.
    public var stallDuration: Duration
    /// How long each answer (its headers and body) is held before it is sent, as Apple
    /// answers only once it has processed a request (tens to hundreds of milliseconds).
    /// Held answers hold up nothing else: other streams, reading, other connections.
    public var responseDelay: Duration
    /// Up to this much is added to each `responseDelay`, uniformly: SplitMix64(seed,
    /// connection ordinal, stream id), so the same connection order gives the same delays.
    public var responseJitter: Duration
    /// Error answers (any status but 200) are held this long instead of `responseDelay`
    /// and its jitter: zero answers them at once. Nil: they are held as every answer is.
    public var errorDelay: Duration?
    /// Once the client sends GOAWAY, the connection answers nothing more: answers still
    /// held are never sent (`H2Statistics.unsentAnswers`), requests still coming are not
    /// answered, and the connection stays open until the client closes it. Some servers
    /// behave so (those built on python's `h2`, some proxies): a client that says GOAWAY
    /// before its streams are answered loses their answers.
    public var silentAfterClientGoAway: Bool
    /// A protocol fault committed on every connection, beside (or instead of) the rules
    /// above; nil: none.
    public var misbehaviour: H2Misbehaviour?
    /// These tokens get 503 ServiceUnavailable every time they are sent, after the rules
    /// above: notifications that fail whatever the sender does (for resume tests).
    public var unavailableTokens: Set<DeviceToken> = []

    /// A plan; by default nothing fails (but tokens ending in `dead` or `fade`).
    public init(
        seed: UInt64 = 0, rejectEvery: Int? = nil, throttleEvery: Int? = nil, unavailableEvery: Int? = nil,
        internalErrorEvery: Int? = nil, goawayEvery: Int? = nil, dropEvery: Int? = nil, stallEvery: Int? = nil,
        stallDuration: Duration = .milliseconds(100), responseDelay: Duration = .zero, responseJitter: Duration = .zero,
        errorDelay: Duration? = nil, silentAfterClientGoAway: Bool = false, misbehaviour: H2Misbehaviour? = nil
    ) {
        self.seed = seed
        self.rejectEvery = rejectEvery
        self.throttleEvery = throttleEvery
        self.unavailableEvery = unavailableEvery
        self.internalErrorEvery = internalErrorEvery
        self.goawayEvery = goawayEvery
        self.dropEvery = dropEvery
        self.stallEvery = stallEvery
        self.stallDuration = stallDuration
        self.responseDelay = responseDelay
        self.responseJitter = responseJitter
        self.errorDelay = errorDelay
        self.silentAfterClientGoAway = silentAfterClientGoAway
        self.misbehaviour = misbehaviour
    }

    /// Checks that the counts are positive and the durations not negative.
    public func validate() throws(FailurePlanError) {
        for (name, value) in [("rejectEvery", rejectEvery), ("throttleEvery", throttleEvery),
                              ("unavailableEvery", unavailableEvery), ("internalErrorEvery", internalErrorEvery),
                              ("goawayEvery", goawayEvery), ("dropEvery", dropEvery), ("stallEvery", stallEvery)] {
            if let value, value < 1 { throw .invalid("\(name) must be at least 1, got \(value)") }
        }
        for (name, value) in [("stallDuration", stallDuration), ("responseDelay", responseDelay),
                              ("responseJitter", responseJitter), ("errorDelay", errorDelay ?? .zero)] where value < .zero {
            throw .invalid("\(name) must not be negative")
        }
    }
}
