/// The request header fields the HTTP/2 provider API reads, with their names on the wire
/// (HTTP/2 names are lowercase). Apple's rules for their values:
///
/// | header | value |
/// |---|---|
/// | `:method` | `POST` |
/// | `:path` | `/3/device/<64 hex digits>` |
/// | `authorization` | `bearer <provider token>` (token authentication only) |
/// | `apns-push-type` | one of `APNsPushType`; the topic carries its suffix |
/// | `apns-topic` | the bundle id (with the push type's suffix) |
/// | `apns-id` | a canonical UUID, 8-4-4-4-12 hex digits; echoed in the response |
/// | `apns-expiration` | UNIX seconds, an integer; 0: deliver once or never |
/// | `apns-priority` | 10, 5 or 1 |
/// | `apns-collapse-id` | at most 64 bytes |
/// | `apns-channel-id` | a broadcast channel's id, base64 (broadcasts, channel read and delete) |
/// | `apns-request-id` | a canonical UUID naming a broadcast or channel request; echoed |
public enum APNsRequestHeader: UInt8, CaseIterable, Sendable, Hashable {
    /// `:method`, always `POST`.
    case method
    /// `:path`, `/3/device/` and the token in hex.
    case path
    /// `authorization`, `bearer` and the provider token (token authentication only).
    case authorization
    /// `apns-push-type`.
    case pushType
    /// `apns-topic`, the bundle id with the push type's suffix.
    case topic
    /// `apns-id`, the notification's UUID.
    case id
    /// `apns-expiration`, UNIX seconds.
    case expiration
    /// `apns-priority`, 10, 5 or 1.
    case priority
    /// `apns-collapse-id`, at most 64 bytes.
    case collapseId
    /// `apns-channel-id`, a broadcast channel's id (base64).
    case channelId
    /// `apns-request-id`, a broadcast's or channel request's UUID.
    case requestId

    /// The field name on the wire.
    public var name: StaticString {
        switch self {
        case .method: ":method"
        case .path: ":path"
        case .authorization: "authorization"
        case .pushType: "apns-push-type"
        case .topic: "apns-topic"
        case .id: "apns-id"
        case .expiration: "apns-expiration"
        case .priority: "apns-priority"
        case .collapseId: "apns-collapse-id"
        case .channelId: "apns-channel-id"
        case .requestId: "apns-request-id"
        }
    }

    /// The field named `bytes`, if it is one of these.
    @inlinable
    public init?(name bytes: UnsafeRawBufferPointer) {
        // The length alone tells most of them apart; one compare confirms.
        let candidate: APNsRequestHeader
        switch bytes.count {
        case 5: candidate = .path
        case 7: candidate = bytes[0] == UInt8(ascii: ":") ? .method : .id
        case 10: candidate = .topic
        case 13: candidate = bytes[5] == UInt8(ascii: "p") ? .priority : .authorization
        case 14: candidate = .pushType
        case 15:
            switch bytes[5] {
            case UInt8(ascii: "c"): candidate = .channelId
            case UInt8(ascii: "r"): candidate = .requestId
            default: candidate = .expiration
            }
        case 16: candidate = .collapseId
        default: return nil
        }
        guard candidate.name.isSpelled(by: bytes) else { return nil }
        self = candidate
    }

    /// The path prefix before the device token.
    public static let devicePathPrefix: StaticString = "/3/device/"
    /// The path prefix before the bundle id of a broadcast (`POST`, on the push hosts).
    public static let broadcastPathPrefix: StaticString = "/4/broadcasts/apps/"
    /// The most bytes `apns-collapse-id` may have.
    public static let collapseIdLimit = 64
    /// The `apns-priority` values APNs takes.
    public static let priorities: [StaticString] = ["10", "5", "1"]

    /// The response header naming the notification (echoed from the request, or made up).
    public static let responseID: StaticString = "apns-id"
    /// The response header a development server adds to a successful response.
    public static let responseUniqueID: StaticString = "apns-unique-id"
}
