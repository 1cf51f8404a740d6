/// What became of the events given to a ``WebhookDelivery``, so far.
///
/// Every event enqueued is counted once: `delivered + dropped + abandoned + pending`.
public struct WebhookCounts: Sendable, Hashable {
    /// Events in batches the receiver answered 2xx.
    public var delivered = 0
    /// Events refused because `bufferLimit` were held already, or because delivery had ended.
    public var dropped = 0
    /// Events in batches given up on: out of attempts, refused by the receiver (a 4xx other
    /// than 408 and 429), or still held when shutdown's deadline passed.
    public var abandoned = 0
    /// Events held: buffered, or in a batch being posted.
    public var pending = 0
    /// POSTs made, retries included.
    public var attempts = 0

    public init(delivered: Int = 0, dropped: Int = 0, abandoned: Int = 0, pending: Int = 0, attempts: Int = 0) {
        self.delivered = delivered
        self.dropped = dropped
        self.abandoned = abandoned
        self.pending = pending
        self.attempts = attempts
    }
}
