import Histogram

/// How long error responses took to arrive, from the write of the notification they named.
public struct ErrorLatencySummary: Sendable, Hashable, Codable {
    /// How many error responses were timed.
    public var count: Int
    /// The median latency, in milliseconds.
    public var p50Milliseconds: Double
    /// The 99th percentile, in milliseconds: what an error wait must cover to catch 99 of 100.
    public var p99Milliseconds: Double
    /// The longest, in milliseconds.
    public var maximumMilliseconds: Double

    enum CodingKeys: String, CodingKey {
        case count
        case p50Milliseconds = "p50_ms"
        case p99Milliseconds = "p99_ms"
        case maximumMilliseconds = "max_ms"
    }

    init(_ histogram: Histogram<UInt64>) {
        count = Int(histogram.totalCount)
        p50Milliseconds = Double(histogram.valueAtPercentile(50)) / 1000
        p99Milliseconds = Double(histogram.valueAtPercentile(99)) / 1000
        maximumMilliseconds = Double(histogram.max) / 1000
    }
}
