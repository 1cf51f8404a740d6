import Synchronization

/// Notifications per second each caller may post: a token bucket per API key, holding
/// one second's worth (at least one notification), so a caller may burst to its rate and
/// keep it up, no more.
final class CallerRateLimit: Sendable {
    let perSecond: Double
    /// What a bucket holds when full.
    private let capacity: Double
    private let buckets = Mutex<[String: (tokens: Double, at: ContinuousClock.Instant)]>([:])

    init(perSecond: Double) {
        precondition(perSecond > 0)
        self.perSecond = perSecond
        capacity = max(1, perSecond)
    }

    /// Takes `count` from `caller`'s bucket: nil when there were that many, else how long
    /// until there will be (nothing is taken then). A request larger than the bucket passes
    /// when the bucket is full and leaves it in debt, so a caller's batches keep to its rate
    /// on average whatever their size.
    func take(_ count: Int, for caller: String) -> Duration? {
        let now = ContinuousClock.now
        let wanted = Double(count)
        return buckets.withLock { buckets in
            var bucket = buckets[caller] ?? (capacity, now)
            let elapsed = now - bucket.at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            bucket = (min(capacity, bucket.tokens + seconds * perSecond), now)
            defer { buckets[caller] = bucket }
            let needed = min(wanted, capacity)
            guard bucket.tokens >= needed else { return .seconds((needed - bucket.tokens) / perSecond) }
            bucket.tokens -= wanted
            return nil
        }
    }
}
