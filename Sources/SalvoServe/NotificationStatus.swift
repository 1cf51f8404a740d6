import SalvoEngine
import SalvoWire

/// What became of one notification `salvo serve` took: the body of
/// `GET /v1/notifications/{id}`, an item of a `?wait` answer, an event of a webhook.
public struct NotificationStatus: Sendable, Hashable, Codable {
    /// Where a notification is.
    public enum State: String, Sendable, Hashable, Codable {
        /// Taken, not yet answered.
        case pending
        /// The gateway answered 200.
        case accepted
        /// The gateway refused it: `status_code`, `reason` (Apple's), and for 410 `timestamp`.
        case rejected
        /// Salvo gave up on it: `reason` says why (`FailureReason`'s names).
        case failed
    }

    /// Its `apns-id`, canonical (8-4-4-4-12 lower-case hex digits; either case is read).
    public var id: String
    public var state: State
    /// The HTTP status the gateway answered a rejected notification with.
    public var statusCode: Int?
    /// Apple's reason for a rejection (`Unregistered`), or why it failed (`server_error`).
    public var reason: String?
    /// For a 410: since when the token has been invalid, in milliseconds since 1970.
    public var timestamp: Int64?
    /// Whether the device token itself is at fault (`Rejection.isTokenProblem`): drop it.
    public var tokenProblem: Bool?

    enum CodingKeys: String, CodingKey {
        case id, state, reason, timestamp
        case statusCode = "status_code"
        case tokenProblem = "token_problem"
    }

    public init(id: String, state: State, statusCode: Int? = nil, reason: String? = nil, timestamp: Int64? = nil,
                tokenProblem: Bool? = nil) {
        self.id = id
        self.state = state
        self.statusCode = statusCode
        self.reason = reason
        self.timestamp = timestamp
        self.tokenProblem = tokenProblem
    }

    /// A notification the gateway refused.
    public init(id: APNsID, rejection: Rejection) {
        self.init(id: id.description, state: .rejected, statusCode: rejection.statusCode, reason: rejection.reasonName,
                  timestamp: rejection.timestamp, tokenProblem: rejection.isTokenProblem)
    }

    /// A notification Salvo gave up on.
    public init(id: APNsID, failure: FailureReason) {
        self.init(id: id.description, state: .failed, reason: failure.rawValue)
    }

    /// Whether it will change no more.
    public var isFinal: Bool { state != .pending }
}
