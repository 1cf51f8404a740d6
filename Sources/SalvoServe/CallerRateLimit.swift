import Synchronization

/// Notifications per second each caller may post: a token bucket per API key, holding
/// one second's worth, so a caller may burst to its rate and keep it up, no more.
final class CallerRateLimit: Sendable {
    let perSecond: Double
    private let buckets = Mutex<[String: (tokens: Double, at: ContinuousClock.Instant)]>([:])

    init(perSecond: Double) {
        precondition(perSecond > 0)
        self.perSecond = perSecond
    }

    /// Takes `count` from `caller`'s bucket: nil when there were that many, else how long
    /// until there will be (nothing is taken then). A request larger than the bucket can
    /// never pass: the answer says so with the time a full bucket takes.
    func take(_ count: Int, for caller: String) -> Duration? {
        let now = ContinuousClock.now
        let wanted = Double(count)
        return buckets.withLock { buckets in
            var bucket = buckets[caller] ?? (perSecond, now)
            let elapsed = now - bucket.at
            let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) * 1e-18
            bucket = (min(perSecond, bucket.tokens + seconds * perSecond), now)
            defer { buckets[caller] = bucket }
            guard bucket.tokens >= wanted else {
                return .seconds(min(wanted, perSecond) - bucket.tokens) / perSecond
            }
            bucket.tokens -= wanted
            return nil
        }
    }
}
