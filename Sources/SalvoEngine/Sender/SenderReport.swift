import SalvoWire

/// What happened to a campaign: every submitted notification is in exactly one of
/// accepted, rejected or failed once the sender has finished.
public struct SenderReport: Sendable, Hashable, Codable {
    /// Notifications taken from sources and one-by-one sends (bad lines not included).
    public var submitted: Int
    /// Taken by the gateway: answered 200 over HTTP/2; over the binary protocol, presumed
    /// accepted (no error named them within the error wait) and their records released.
    public var accepted: Int
    /// Refused by the gateway, with a status or a reason (`rejectedByReason`): the
    /// notification itself is at fault, mostly its token. Sending it again would not help.
    public var rejected: Int
    /// Not delivered, or not known to be, for a reason of the sender's or the path's
    /// (`failedByReason`): an unreachable gateway, retries used up, `delivery_unknown`.
    /// A resume sends them again.
    public var failed: Int
    /// Frames written again after an error response or a drop (one frame may count several times).
    public var resent: Int
    /// Connections re-established after each connection's first link.
    public var reconnects: Int
    /// Of `reconnects`: those that resumed a TLS session (no certificates, no key exchange).
    /// A gateway that does not resume makes every reconnect a full handshake.
    public var resumedReconnects: Int
    /// Connections in use at the end: the configured ones plus those the sender added
    /// while every connection was full (`SenderConfiguration.maximumConnectionsPerShard`),
    /// less those of a step it gave back.
    public var connections: Int
    /// Why `connections` are as many as they are: the configured ones, and what made the
    /// sender add the others (every connection at its stream limit with work waiting,
    /// every staging ring full), stop adding (the ceiling, slower answers, a step that
    /// brought little) or give a step back (it did not raise the rate).
    public var connectionsReason: String
    /// Resent frames whose first copy may have been delivered (at-least-once after a silent drop).
    public var possibleDuplicates: Int
    /// Error responses naming a notification older than every record kept: what they may
    /// cover was released as accepted and is counted as failed (`delivery_unknown`) instead.
    public var windowOverruns: Int
    /// Error responses that arrived after their notification's error wait while its record
    /// was still kept: handled exactly, and each raised the wait if it was longer than it.
    public var lateErrors: Int
    /// From the start to the end of the run, the final error wait included.
    public var seconds: Double
    /// From the start to the last write: the time the gateway was being fed.
    public var sendingSeconds: Double
    /// The error wait at the end of the run (raised when errors came late).
    public var errorWait: Duration
    /// Each raise of the error wait, in order.
    public var errorWaitRaises: [ErrorWaitRaise]
    /// Error-response latencies; nil when no error response arrived.
    public var errorLatency: ErrorLatencySummary?
    /// Rejections by reason: the binary status's name (`invalid_token`: 12), or Apple's
    /// reason over HTTP/2 (`Unregistered`: 3). See `Rejection.reasonName`.
    public var rejectedByReason: [String: Int]
    /// Failures by reason (`gateway_unreachable`: 3).
    public var failedByReason: [String: Int]
    /// What made notifications fail for the gateway's sake, if anything did: why the
    /// connections gave up (what the gateway did: refused every connection, broke the
    /// protocol, answered nothing in time; or that it refused the credentials), or why the
    /// last connection was lost when notifications failed after their connections' drops.
    public var failureCause: String?
    /// By topic (bundle id), for a run of several apps (`RoutingSender`); empty otherwise.
    public var byTopic: [String: TopicCounts] = [:]

    /// Final notifications per second over the whole run.
    public var ratePerSecond: Double { seconds > 0 ? Double(accepted + rejected + failed) / seconds : 0 }

    /// Submitted notifications per second while sending (the final error wait left out).
    public var sendRatePerSecond: Double { sendingSeconds > 0 ? Double(submitted) / sendingSeconds : 0 }

    /// Whether every submitted notification reached a terminal state.
    public var isComplete: Bool { submitted == accepted + rejected + failed }

    enum CodingKeys: String, CodingKey {
        case submitted, accepted, rejected, failed, resent, reconnects, connections, seconds
        case resumedReconnects = "resumed_reconnects"
        case connectionsReason = "connections_reason"
        case possibleDuplicates = "possible_duplicates"
        case windowOverruns = "window_overruns"
        case lateErrors = "late_errors"
        case sendingSeconds = "sending_seconds"
        case errorWaitMilliseconds = "error_wait_ms"
        case errorWaitRaises = "error_wait_raises"
        case errorLatency = "error_latency"
        case ratePerSecond = "rate_per_s"
        case sendRatePerSecond = "send_rate_per_s"
        case rejectedByReason = "rejected_by_reason"
        /// What reports written before HTTP/2 called `rejected_by_reason` (status names only).
        case rejectedByStatus = "rejected_by_status"
        case failedByReason = "failed_by_reason"
        case failureCause = "failure_cause"
        case byTopic = "by_topic"
    }

    /// A report with these counts; what is not given is zero (or its neutral value).
    public init(submitted: Int, accepted: Int, rejected: Int, failed: Int, resent: Int = 0, reconnects: Int = 0,
                resumedReconnects: Int = 0, connections: Int = 1, connectionsReason: String = "", possibleDuplicates: Int = 0, windowOverruns: Int = 0,
                lateErrors: Int = 0, seconds: Double,
                sendingSeconds: Double = 0, errorWait: Duration = .seconds(1), errorWaitRaises: [ErrorWaitRaise] = [],
                errorLatency: ErrorLatencySummary? = nil,
                rejectedByReason: [String: Int] = [:], failedByReason: [String: Int] = [:]) {
        self.submitted = submitted
        self.accepted = accepted
        self.rejected = rejected
        self.failed = failed
        self.resent = resent
        self.reconnects = reconnects
        self.resumedReconnects = resumedReconnects
        self.connections = connections
        self.connectionsReason = connectionsReason
        self.possibleDuplicates = possibleDuplicates
        self.windowOverruns = windowOverruns
        self.lateErrors = lateErrors
        self.seconds = seconds
        self.sendingSeconds = sendingSeconds
        self.errorWait = errorWait
        self.errorWaitRaises = errorWaitRaises
        self.errorLatency = errorLatency
        self.rejectedByReason = rejectedByReason
        self.failedByReason = failedByReason
    }

    /// Reads the report JSON that `encode(to:)` writes (`--report`), and those of older
    /// Salvos: fields they lacked take their defaults, `rejected_by_status` stands for
    /// `rejected_by_reason`.
    public init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        submitted = try container.decode(Int.self, forKey: .submitted)
        accepted = try container.decode(Int.self, forKey: .accepted)
        rejected = try container.decode(Int.self, forKey: .rejected)
        failed = try container.decode(Int.self, forKey: .failed)
        resent = try container.decodeIfPresent(Int.self, forKey: .resent) ?? 0
        reconnects = try container.decodeIfPresent(Int.self, forKey: .reconnects) ?? 0
        resumedReconnects = try container.decodeIfPresent(Int.self, forKey: .resumedReconnects) ?? 0
        connections = try container.decodeIfPresent(Int.self, forKey: .connections) ?? 1
        connectionsReason = try container.decodeIfPresent(String.self, forKey: .connectionsReason) ?? ""
        possibleDuplicates = try container.decodeIfPresent(Int.self, forKey: .possibleDuplicates) ?? 0
        windowOverruns = try container.decodeIfPresent(Int.self, forKey: .windowOverruns) ?? 0
        lateErrors = try container.decodeIfPresent(Int.self, forKey: .lateErrors) ?? 0
        seconds = try container.decode(Double.self, forKey: .seconds)
        sendingSeconds = try container.decodeIfPresent(Double.self, forKey: .sendingSeconds) ?? 0
        errorWait = .milliseconds(try container.decodeIfPresent(Double.self, forKey: .errorWaitMilliseconds) ?? 1000)
        errorWaitRaises = try container.decodeIfPresent([ErrorWaitRaise].self, forKey: .errorWaitRaises) ?? []
        errorLatency = try container.decodeIfPresent(ErrorLatencySummary.self, forKey: .errorLatency)
        rejectedByReason = try container.decodeIfPresent([String: Int].self, forKey: .rejectedByReason)
            ?? container.decodeIfPresent([String: Int].self, forKey: .rejectedByStatus) ?? [:]
        failedByReason = try container.decodeIfPresent([String: Int].self, forKey: .failedByReason) ?? [:]
        failureCause = try container.decodeIfPresent(String.self, forKey: .failureCause)
        byTopic = try container.decodeIfPresent([String: TopicCounts].self, forKey: .byTopic) ?? [:]
    }

    /// Writes the report JSON of `--report`: snake_case keys, durations in milliseconds,
    /// and the two rates.
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(submitted, forKey: .submitted)
        try container.encode(accepted, forKey: .accepted)
        try container.encode(rejected, forKey: .rejected)
        try container.encode(failed, forKey: .failed)
        try container.encode(resent, forKey: .resent)
        try container.encode(reconnects, forKey: .reconnects)
        try container.encode(resumedReconnects, forKey: .resumedReconnects)
        try container.encode(connections, forKey: .connections)
        try container.encode(connectionsReason, forKey: .connectionsReason)
        try container.encode(possibleDuplicates, forKey: .possibleDuplicates)
        try container.encode(windowOverruns, forKey: .windowOverruns)
        try container.encode(lateErrors, forKey: .lateErrors)
        try container.encode(seconds, forKey: .seconds)
        try container.encode(sendingSeconds, forKey: .sendingSeconds)
        try container.encode(errorWait.secondsDouble * 1000, forKey: .errorWaitMilliseconds)
        try container.encode(errorWaitRaises, forKey: .errorWaitRaises)
        try container.encodeIfPresent(errorLatency, forKey: .errorLatency)
        try container.encodeIfPresent(failureCause, forKey: .failureCause)
        try container.encode(ratePerSecond, forKey: .ratePerSecond)
        try container.encode(sendRatePerSecond, forKey: .sendRatePerSecond)
        try container.encode(rejectedByReason, forKey: .rejectedByReason)
        try container.encode(failedByReason, forKey: .failedByReason)
        if !byTopic.isEmpty { try container.encode(byTopic, forKey: .byTopic) }
    }

    /// The reports of senders that ran side by side (one per credential of a
    /// `RoutingSender`) as one: counts added, times and the error wait the longest, the
    /// reasons and causes together. The error-latency summary (binary protocol only) is
    /// left out: summaries do not add.
    static func combining(_ reports: [SenderReport]) -> SenderReport {
        guard reports.count != 1 else { return reports[0] }
        func sum(_ value: (SenderReport) -> Int) -> Int { reports.reduce(0) { $0 + value($1) } }
        func merged(_ value: (SenderReport) -> [String: Int]) -> [String: Int] {
            reports.reduce(into: [:]) { total, report in total.merge(value(report), uniquingKeysWith: +) }
        }
        var combined = SenderReport(
            submitted: sum(\.submitted), accepted: sum(\.accepted), rejected: sum(\.rejected), failed: sum(\.failed),
            resent: sum(\.resent), reconnects: sum(\.reconnects), resumedReconnects: sum(\.resumedReconnects),
            connections: sum(\.connections),
            connectionsReason: reports.map(\.connectionsReason).filter { !$0.isEmpty }.joined(separator: "; "),
            possibleDuplicates: sum(\.possibleDuplicates), windowOverruns: sum(\.windowOverruns), lateErrors: sum(\.lateErrors),
            seconds: reports.map(\.seconds).max() ?? 0, sendingSeconds: reports.map(\.sendingSeconds).max() ?? 0,
            errorWait: reports.map(\.errorWait).max() ?? .seconds(1), errorWaitRaises: reports.flatMap(\.errorWaitRaises),
            rejectedByReason: merged(\.rejectedByReason), failedByReason: merged(\.failedByReason))
        let causes = reports.compactMap(\.failureCause)
        combined.failureCause = causes.isEmpty ? nil : causes.joined(separator: "; ")
        return combined
    }
}
