/// The error wait went up because an error response arrived later than it.
public struct ErrorWaitRaise: Sendable, Hashable {
    /// The error wait before.
    public var from: Duration
    /// The error wait after.
    public var to: Duration
    /// How long the late error took; nil when the notification it named was already
    /// released (the error came later than records are kept).
    public var latency: Duration?
}

extension ErrorWaitRaise: Codable {
    enum CodingKeys: String, CodingKey {
        case from = "from_ms"
        case to = "to_ms"
        case latency = "latency_ms"
    }

    /// Reads `from_ms`, `to_ms` and `latency_ms`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        from = .milliseconds(try container.decode(Double.self, forKey: .from))
        to = .milliseconds(try container.decode(Double.self, forKey: .to))
        latency = try container.decodeIfPresent(Double.self, forKey: .latency).map { .milliseconds($0) }
    }

    /// Writes `from_ms`, `to_ms` and `latency_ms` (when known).
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(from.secondsDouble * 1000, forKey: .from)
        try container.encode(to.secondsDouble * 1000, forKey: .to)
        try container.encodeIfPresent(latency.map { $0.secondsDouble * 1000 }, forKey: .latency)
    }
}
