import Foundation

/// The JSON body of a webhook POST: `{"events":[…],"sent_at":1700000000000}`.
///
/// A batch that had to be retried may reach the receiver twice (when an answer was lost):
/// an event's `id` tells the copies apart.
public struct WebhookPayload: Sendable, Hashable, Codable {
    /// The notifications that ended rejected or failed, oldest first.
    public var events: [NotificationStatus]
    /// When this POST was made, in milliseconds since 1970 (each attempt has its own).
    public var sentAt: Int64

    enum CodingKeys: String, CodingKey {
        case events
        case sentAt = "sent_at"
    }

    public init(events: [NotificationStatus], sentAt: Int64) {
        self.events = events
        self.sentAt = sentAt
    }

    /// The body bytes, as signed and sent.
    func encoded() -> [UInt8] {
        // JSONEncoder refuses only non-finite floating-point values, which a status has none of.
        Array(try! JSONEncoder().encode(self))
    }
}
