/// What a sender does with notifications in flight when a connection drops without an
/// error response (their fate is unknown).
public enum DropPolicy: String, Sendable, Hashable, CaseIterable {
    /// Resend them on a new connection and count them as possible duplicates. The default:
    /// a duplicate push is better than a lost one for most campaigns.
    case atLeastOnce = "resend"
    /// Report them as failed with `deliveryUnknown`: never a duplicate, possibly a loss.
    case atMostOnce = "report"
}
