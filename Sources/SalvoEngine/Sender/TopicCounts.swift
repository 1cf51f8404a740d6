/// One topic's share of a report: what a run of several apps (`RoutingSender`) sent to
/// each bundle id, and how it ended.
public struct TopicCounts: Sendable, Hashable, Codable {
    /// Notifications of the topic taken from sources.
    public var submitted: Int
    /// Of those, accepted by the gateway.
    public var accepted: Int
    /// Of those, rejected, by reason name (`Rejection.reasonName`).
    public var rejectedByReason: [String: Int]
    /// Of those, failed, by reason (`FailureReason.rawValue`).
    public var failedByReason: [String: Int]

    /// Rejected by the gateway.
    public var rejected: Int { rejectedByReason.values.reduce(0, +) }
    /// Failed.
    public var failed: Int { failedByReason.values.reduce(0, +) }

    /// Counts with these values.
    public init(submitted: Int = 0, accepted: Int = 0, rejectedByReason: [String: Int] = [:], failedByReason: [String: Int] = [:]) {
        self.submitted = submitted
        self.accepted = accepted
        self.rejectedByReason = rejectedByReason
        self.failedByReason = failedByReason
    }

    enum CodingKeys: String, CodingKey {
        case submitted, accepted, rejected, failed
        case rejectedByReason = "rejected_by_reason"
        case failedByReason = "failed_by_reason"
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        submitted = try container.decode(Int.self, forKey: .submitted)
        accepted = try container.decode(Int.self, forKey: .accepted)
        rejectedByReason = try container.decodeIfPresent([String: Int].self, forKey: .rejectedByReason) ?? [:]
        failedByReason = try container.decodeIfPresent([String: Int].self, forKey: .failedByReason) ?? [:]
    }

    /// Writes the counts with the totals of rejected and failed beside their breakdowns.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(submitted, forKey: .submitted)
        try container.encode(accepted, forKey: .accepted)
        try container.encode(rejected, forKey: .rejected)
        try container.encode(failed, forKey: .failed)
        try container.encode(rejectedByReason, forKey: .rejectedByReason)
        try container.encode(failedByReason, forKey: .failedByReason)
    }
}
