import SalvoIO

/// Capped exponential backoff with jitter, deterministic for a given seed.
public struct Backoff: Sendable, Hashable {
    /// The delay after the first failure.
    public var initial: Duration
    /// The longest delay.
    public var maximum: Duration
    /// The fraction of each delay that is randomized (0: none, 1: anywhere from 0 to the delay).
    public var jitter: Double

    /// Delays that start at `initial`, double up to `maximum`, and vary by `jitter`.
    public init(initial: Duration = .milliseconds(100), maximum: Duration = .seconds(10), jitter: Double = 0.5) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The delay before attempt `attempt` (1-based), with jitter drawn from `random`.
    func delay(attempt: Int, random: inout SplitMix64) -> Duration {
        let base = initial.nanosecondsClamped
        let cap = maximum.nanosecondsClamped
        let exponential = attempt >= 40 ? cap : min(cap, base << UInt64(max(0, attempt - 1)))
        let spread = Double(exponential) * min(max(jitter, 0), 1)
        let unit = random.nextUnit()
        return .nanoseconds(Int64(Double(exponential) - spread * unit))
    }
}
