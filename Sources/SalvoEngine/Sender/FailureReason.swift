/// Why a notification ended as failed.
public enum FailureReason: String, Sendable, Hashable, CaseIterable {
    /// Its fate is unknown: the connection dropped without an error response while it was
    /// in flight and the drop policy is at-most-once; or an error response arrived after
    /// its record was released, naming a notification written before it.
    case deliveryUnknown = "delivery_unknown"
    /// It was in flight on more dropped connections than the retry budget allows (or, over
    /// HTTP/2, the gateway refused its stream more often than a working gateway would).
    case retryBudgetExhausted = "retry_budget_exhausted"
    /// HTTP/2: the gateway answered 429 TooManyRequests (too many notifications for its
    /// device token) every time it was tried, with backoff, up to the retry limit.
    case throttled
    /// HTTP/2: the gateway answered 500 or 503 every time it was tried, each time on another
    /// connection, up to the retry limit.
    case serverError = "server_error"
    /// The gateway refused the provider's credentials (HTTP/2 403: an invalid or missing
    /// provider token, a certificate it does not accept): the run stopped, and what was not
    /// sent fails with this. Fix the key, key id, team or certificate and resume.
    case authenticationFailed = "authentication_failed"
    /// No connection to the gateway could be made (refused, TLS verification failed, ...).
    case gatewayUnreachable = "gateway_unreachable"
    /// It had to be sent again, and its source could not be read again (the file changed
    /// or went away, the reader failed).
    case sourceUnreadable = "source_unreadable"
    /// The sender was shut down before it was settled.
    case cancelled
}
