import SalvoWire

/// A snapshot of what an `H2MockGateway` saw, summed over all its loops.
///
/// Accounting: every request stream the client completes is counted once in `requests` and
/// ends as exactly one of: accepted (200), rejected (a 4xx or 5xx, by validation or by the
/// failure plan, in `rejectedByReason`), or the one request each silent drop leaves
/// unanswered (`droppedConnections`). Streams the client resets before finishing them are
/// counted in `resetStreams`, not in `requests`.
public struct H2Statistics: Sendable, Hashable, Codable {
    /// Requests answered 200.
    public var accepted = 0
    /// Requests answered with an error status.
    public var rejected = 0
    /// `rejected` by reason (`"BadDeviceToken"`, …).
    public var rejectedByReason: [String: Int] = [:]
    /// `rejected` by HTTP status (`"400"`, …).
    public var rejectedByStatus: [String: Int] = [:]
    /// Requests complete (END_STREAM received), whatever their answer.
    public var requests = 0
    /// Request streams the clients opened.
    public var streams = 0
    /// Request streams the clients reset (RST_STREAM) or abandoned before finishing them.
    public var resetStreams = 0
    /// TCP connections accepted (handshake failures included).
    public var connections = 0
    /// Connections whose TLS handshake failed (no client certificate when one is
    /// required; an ALPN list without `h2`).
    public var handshakeFailures = 0
    /// Connections refused after the handshake because the client offered no ALPN at all.
    public var refusedWithoutH2 = 0
    /// GOAWAY frames sent by `H2FailurePlan.goawayEvery`.
    public var goaways = 0
    /// Connections closed silently by `H2FailurePlan.dropEvery`.
    public var droppedConnections = 0
    /// Read stalls started by `H2FailurePlan.stallEvery`.
    public var flowControlStalls = 0
    /// Accepted requests whose token and payload had been accepted before. Tracked only
    /// with `recordAccepted` (0 otherwise).
    public var duplicates = 0
    /// With `recordAccepted`: the distinct `MockStatistics.digest(token:payload:)` values
    /// of accepted requests, sorted. Nil otherwise.
    public var acceptedDigests: [UInt64]?

    /// An all-zero snapshot.
    public init() {}

    /// Rejections with `reason`.
    public func rejected(_ reason: APNsReason) -> Int { rejectedByReason[reason.name] ?? 0 }
}
