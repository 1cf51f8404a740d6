import SalvoWire

/// How a notification ended.
public enum Outcome: Sendable, Hashable {
    /// No error named it (or anything before it) while its record was kept; or a later
    /// error, or a shutdown naming it, proved it was processed.
    case accepted
    /// The gateway named it in an error response.
    case rejected(Status)
    /// Salvo gave up on it.
    case failed(FailureReason)
}

/// Why a notification ended as failed.
public enum FailureReason: String, Sendable, Hashable, CaseIterable {
    /// Its fate is unknown: the connection dropped without an error response while it was
    /// in flight and the drop policy is at-most-once; or an error response arrived after
    /// its record was released, naming a notification written before it.
    case deliveryUnknown = "delivery_unknown"
    /// It was in flight on more dropped connections than the retry budget allows.
    case retryBudgetExhausted = "retry_budget_exhausted"
    /// No connection to the gateway could be made (refused, TLS verification failed, ...).
    case gatewayUnreachable = "gateway_unreachable"
    /// It had to be sent again, and its source could not be read again (the file changed
    /// or went away, the reader failed).
    case sourceUnreadable = "source_unreadable"
    /// The sender was shut down before it was settled.
    case cancelled
}
