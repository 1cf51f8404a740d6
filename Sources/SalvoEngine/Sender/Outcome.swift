import SalvoWire

/// How a notification ended.
public enum Outcome: Sendable, Hashable {
    /// HTTP/2: the gateway answered 200. Binary: no error named it (or anything before it)
    /// while its record was kept; or a later error, or a shutdown naming it, proved it was
    /// processed.
    case accepted
    /// The gateway refused it: named it in an error response (binary), or answered its
    /// stream with an error status (HTTP/2).
    case rejected(Rejection)
    /// Salvo gave up on it.
    case failed(FailureReason)
}
