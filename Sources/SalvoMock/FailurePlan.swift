import SalvoWire

/// What the mock gateway does wrong on purpose, and when. Every rule is a pure function of
/// the stream the gateway receives, its connection order and `seed`, so a run with the same
/// plan and the same traffic fails in the same places.
///
/// Counting terms used below:
/// - A notification is *received* when the decoder hands it over whole and well formed
///   (malformed frames are answered by the protocol rules, not by the plan).
/// - Each received notification is judged once, by the rules in this order: `dropEvery`,
///   then the gateway-wide rules (`rejectEvery`, `rejectProbability`), then the token rules
///   (`invalidTokens`, `invalidTokenSuffix`). The first rule that fires decides; if none
///   does, the notification is *accepted*, and then `shutdownEvery` is checked.
/// - A rejection writes `08 status identifier` (identifier 0 for command 0), sends TLS
///   close_notify and closes; everything received after the rejected notification on that
///   connection is discarded unread, as Apple's gateway does.
/// - Every error response (a rejection by the plan, status 10, and the answer to a
///   malformed frame) is held back by `errorDelay`; a silent drop is not an error response
///   and is never delayed.
public struct FailurePlan: Sendable, Hashable {
    /// Seeds the rules that use randomness (`rejectProbability`, `stallJitter`).
    public var seed: UInt64

    /// Tokens rejected with status 8 (invalid token), wherever they arrive.
    public var invalidTokens: Set<DeviceToken>

    /// Rejects with status 8 every token whose last bytes equal these (e.g. `[0xde, 0xad]`
    /// matches tokens ending in hex `dead`). Lets a campaign seed bad tokens without the
    /// gateway knowing the list. Empty or nil: no rule.
    public var invalidTokenSuffix: [UInt8]?

    /// Rejects every Nth notification received by the whole gateway (a gateway-wide
    /// counter, 1-based, across all connections and loops) with `rejectStatus`.
    /// Notifications dropped by `dropEvery` do not advance the counter.
    public var rejectEvery: Int?

    /// The status `rejectEvery` and `rejectProbability` reject with. Default 8.
    public var rejectStatus: Status

    /// Rejects each received notification with probability 0...1, with `rejectStatus`.
    /// The draw is SplitMix64(seed, gateway-wide ordinal), so it depends only on the seed
    /// and the notification's place in the gateway-wide order, not on timing.
    public var rejectProbability: Double?

    /// On each connection, once N notifications have been accepted on it, writes status 10
    /// (shutdown) naming the identifier of the last accepted notification (the Nth), then
    /// closes. Anything received after it on the connection is discarded.
    public var shutdownEvery: Int?

    /// On each connection, the Nth notification received on it, and everything after it,
    /// are discarded, and the connection is closed without an error response and without
    /// TLS close_notify (a TCP FIN: the client sees an unclean close). The sender cannot
    /// know what happened to its in-flight window. Counted in `droppedConnections`.
    public var dropEvery: Int?

    /// On each connection, each time the number of notifications received on it reaches a
    /// multiple of N, the gateway stops reading it for `stallDuration` (+ jitter): the read
    /// interest is removed and a timer restores it. The stall starts once the current read
    /// (at most one TLS record, 16 KiB) is decoded, so a few notifications past the Nth are
    /// taken first. The client sees its writes block (WANT_WRITE) while buffers fill.
    public var stallEvery: Int?

    /// How long each stall lasts.
    public var stallDuration: Duration

    /// Up to this much is added to each stall: SplitMix64(seed, connection ordinal, stall
    /// number) modulo the jitter, so the same connection order gives the same stalls.
    public var stallJitter: Duration

    /// How long the gateway holds back each error response, as a slow gateway does (Apple's
    /// answered 0.1–0.8 s after the bad notification). From the moment it decides to answer
    /// it judges nothing more on that connection: it keeps reading, so the client's writes
    /// keep flowing, and discards what it reads from then on (counted nowhere, not even in
    /// `bytesReceived`). When the delay has passed it writes the response, TLS close_notify,
    /// and closes (lingering as usual). A client that closes meanwhile gets nothing, but its notification still
    /// counts as rejected (or the shutdown as a shutdown): the gateway had decided.
    /// Counted in `MockStatistics.delayedResponses`. Zero (the default): answer at once.
    public var errorDelay: Duration

    /// A plan; by default nothing fails.
    public init(
        seed: UInt64 = 0,
        invalidTokens: Set<DeviceToken> = [],
        invalidTokenSuffix: [UInt8]? = nil,
        rejectEvery: Int? = nil,
        rejectStatus: Status = .invalidToken,
        rejectProbability: Double? = nil,
        shutdownEvery: Int? = nil,
        dropEvery: Int? = nil,
        stallEvery: Int? = nil,
        stallDuration: Duration = .milliseconds(100),
        stallJitter: Duration = .zero,
        errorDelay: Duration = .zero
    ) {
        self.seed = seed
        self.invalidTokens = invalidTokens
        self.invalidTokenSuffix = invalidTokenSuffix
        self.rejectEvery = rejectEvery
        self.rejectStatus = rejectStatus
        self.rejectProbability = rejectProbability
        self.shutdownEvery = shutdownEvery
        self.dropEvery = dropEvery
        self.stallEvery = stallEvery
        self.stallDuration = stallDuration
        self.stallJitter = stallJitter
        self.errorDelay = errorDelay
    }

    /// A plan under which the gateway accepts every well-formed notification.
    public static let none = FailurePlan()

    /// Checks the counts are positive, the suffix at most 32 bytes, the probability in 0...1
    /// and the durations not negative.
    public func validate() throws(FailurePlanError) {
        for (name, value) in [("rejectEvery", rejectEvery), ("shutdownEvery", shutdownEvery),
                              ("dropEvery", dropEvery), ("stallEvery", stallEvery)] {
            if let value, value < 1 { throw .invalid("\(name) must be at least 1, got \(value)") }
        }
        if let suffix = invalidTokenSuffix, suffix.count > DeviceToken.byteCount {
            throw .invalid("invalidTokenSuffix is \(suffix.count) bytes; a token has \(DeviceToken.byteCount)")
        }
        if let p = rejectProbability, !(0...1).contains(p) {
            throw .invalid("rejectProbability must be within 0...1, got \(p)")
        }
        if stallDuration < .zero || stallJitter < .zero {
            throw .invalid("stallDuration and stallJitter must not be negative")
        }
        if errorDelay < .zero { throw .invalid("errorDelay must not be negative") }
    }
}

/// A failure plan that cannot be run.
public enum FailurePlanError: Error, Hashable, Sendable, CustomStringConvertible {
    case invalid(String)

    public var description: String {
        switch self {
        case .invalid(let reason): "invalid failure plan: \(reason)"
        }
    }
}
