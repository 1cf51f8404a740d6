import SalvoWire

/// Why one notification was not taken.
public enum SendError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The payload of the notification with this sequence is empty or too long; nothing
    /// else is affected.
    case invalidPayload(FrameEncodingError, sequence: UInt64)
    /// `finish()` was called.
    case finished
    /// Every connection gave up on the gateway; the reason says why (e.g. a certificate
    /// the gateway refuses).
    case gatewayUnreachable(String)
    /// The gateway refused the sender's credentials (the provider token's key, key id or
    /// team, or the client certificate); the reason names them. Every connection shares
    /// them, so nothing more can be sent.
    case credentialsRefused(String)
    /// No credentials of a `RoutingSender` serve the topic of the notification with this
    /// sequence (the reason says which topic); nothing after it is sent.
    case unservedTopic(String, sequence: UInt64)

    /// The problem in a sentence, for error messages.
    public var description: String {
        switch self {
        case .invalidPayload(let error, let sequence): "notification \(sequence): invalid payload: \(error)"
        case .finished: "the sender has finished; create a new one"
        case .gatewayUnreachable(let reason): "gave up on the gateway: \(reason)"
        case .credentialsRefused(let reason): reason
        case .unservedTopic(let reason, let sequence): "notification \(sequence): \(reason)"
        }
    }
}
