import SalvoWire

/// Something a sender reports while it runs.
public enum SenderEvent: Sendable, Hashable {
    /// The gateway rejected a notification. Drop a device's token from your database when
    /// `rejection.isTokenProblem`.
    case rejected(target: PushTarget, rejection: Rejection, sequence: UInt64)
    /// Salvo gave up on a notification.
    case failed(target: PushTarget, reason: FailureReason, sequence: UInt64)
    /// Notifications Salvo cannot name failed together: a source could not be read again
    /// (`sourceUnreadable`), or an error response named a notification older than every
    /// record kept, so what it covers was released as accepted too early (`deliveryUnknown`;
    /// `firstSequence` is then nil).
    case failedUnnamed(count: Int, reason: FailureReason, firstSequence: UInt64?, detail: String)
    /// An error response arrived later than the error wait; the wait was raised for the
    /// rest of the run. Nothing was lost: the notification was still in the window.
    case errorWaitRaised(ErrorWaitRaise)
    /// A connection opened (shard, connection); `resumed` when it resumed the connection's previous TLS
    /// session (no certificate work), `kernelTLS` when the kernel encrypts its records
    /// (asked for with `TLSConfiguration.kernelTLS`).
    case connected(shard: Int, connection: Int, resumed: Bool, kernelTLS: Bool)
    /// A connection closed; `reason` says why (error response, drop, ...).
    case disconnected(shard: Int, connection: Int, reason: String)
    /// A connection attempt failed; it will be retried after a backoff unless it gave up.
    case connectionFailed(shard: Int, connection: Int, reason: String)
    /// A connection gave up: the gateway is out of reach, or refuses the credentials.
    case unreachable(reason: String)
    /// A connection gave up because the gateway refused the sender's credentials (a 403
    /// other than ExpiredProviderToken): the provider token's key, key id or team, or the
    /// client certificate. Every connection shares them, so the run cannot go on.
    case credentialsRefused(reason: String)
    /// HTTP/2: the gateway's SETTINGS allow this many open streams on a connection (APNs:
    /// one until it has seen a valid provider token, then 1000).
    case streamLimit(shard: Int, connection: Int, limit: Int)
}
