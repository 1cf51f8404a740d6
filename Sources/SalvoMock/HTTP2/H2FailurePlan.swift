/// What the HTTP/2 mock does wrong on purpose, and when, with the statuses and reasons
/// Apple documents for each. Every rule is a pure function of the requests the gateway
/// receives and their order, so the same traffic fails in the same places; `seed` makes
/// the identifiers the gateway invents (`apns-id` when the request has none,
/// `apns-unique-id`) the same from run to run.
///
/// Counting terms:
/// - A request is *valid* when it passes every check (`RequestValidation`); invalid ones
///   get their 4xx and are not counted by the rules below.
/// - The gateway-wide rules (`rejectEvery`, `throttleEvery`, `unavailableEvery`) count
///   valid requests across all connections, 1-based; the per-connection rules
///   (`dropEvery`, `goawayEvery`, `stallEvery`) count valid requests on their connection.
/// - Each valid request is judged by the rules in this order: `dropEvery`, `rejectEvery`,
///   `throttleEvery`, `unavailableEvery`, then tokens ending in `dead` (hex, either case:
///   410 Unregistered, always on, as a token Apple knows is gone). The first that fires
///   decides; if none does, the request is accepted (200).
/// - `goawayEvery` and `stallEvery` act after the request is answered.
public struct H2FailurePlan: Sendable, Hashable {
    /// Seeds the identifiers the gateway makes up.
    public var seed: UInt64
    /// Every Nth valid request, gateway-wide: 400 BadDeviceToken.
    public var rejectEvery: Int?
    /// Every Nth valid request, gateway-wide: 429 TooManyRequests.
    public var throttleEvery: Int?
    /// Every Nth valid request, gateway-wide: 503 ServiceUnavailable.
    public var unavailableEvery: Int?
    /// Once the Nth valid request on a connection is answered: GOAWAY (NO_ERROR) naming
    /// the last stream the gateway took up, with `{"reason":"Shutdown"}` as debug data.
    /// Streams up to it are still answered; later ones never were processed (the client
    /// resends them). The connection closes when the last of them is answered.
    public var goawayEvery: Int?
    /// The Nth valid request on a connection is not answered: the answers already due are
    /// written, then the connection is closed with a TCP FIN, without GOAWAY or TLS
    /// close_notify. Counted in `H2Statistics.droppedConnections`.
    public var dropEvery: Int?
    /// Each time the count of valid requests on a connection reaches a multiple of N, the
    /// gateway stops reading it for `stallDuration`: it sends no WINDOW_UPDATE meanwhile,
    /// so the client's flow-control windows run dry. Counted in `flowControlStalls`.
    public var stallEvery: Int?
    /// How long each stall lasts.
    public var stallDuration: Duration

    /// A plan; by default nothing fails (but tokens ending in `dead`).
    public init(
        seed: UInt64 = 0, rejectEvery: Int? = nil, throttleEvery: Int? = nil, unavailableEvery: Int? = nil,
        goawayEvery: Int? = nil, dropEvery: Int? = nil, stallEvery: Int? = nil, stallDuration: Duration = .milliseconds(100)
    ) {
        self.seed = seed
        self.rejectEvery = rejectEvery
        self.throttleEvery = throttleEvery
        self.unavailableEvery = unavailableEvery
        self.goawayEvery = goawayEvery
        self.dropEvery = dropEvery
        self.stallEvery = stallEvery
        self.stallDuration = stallDuration
    }

    /// Checks that the counts are positive and the stall not negative.
    public func validate() throws(FailurePlanError) {
        for (name, value) in [("rejectEvery", rejectEvery), ("throttleEvery", throttleEvery),
                              ("unavailableEvery", unavailableEvery), ("goawayEvery", goawayEvery),
                              ("dropEvery", dropEvery), ("stallEvery", stallEvery)] {
            if let value, value < 1 { throw .invalid("\(name) must be at least 1, got \(value)") }
        }
        if stallDuration < .zero { throw .invalid("stallDuration must not be negative") }
    }
}
