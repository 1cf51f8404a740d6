/// A broadcast channel of an app: what `create` made or `read` found.
///
/// APNs chooses the id (base64, of no fixed length) and never reuses a deleted one. The
/// storage policy is fixed when the channel is made.
public struct BroadcastChannel: Sendable, Hashable {
    /// The channel's id, as APNs gave it in `apns-channel-id`.
    public var id: String
    /// Whether APNs keeps the channel's most recent message for devices that were away.
    public var storagePolicy: MessageStoragePolicy
    /// The `apns-request-id` of the request that returned it (as APNs echoed it), to quote
    /// to Apple about this request.
    public var requestID: String

    /// A channel as APNs described it.
    public init(id: String, storagePolicy: MessageStoragePolicy, requestID: String) {
        self.id = id
        self.storagePolicy = storagePolicy
        self.requestID = requestID
    }
}

/// A channel's `message-storage-policy`: whether APNs stores its latest message.
public enum MessageStoragePolicy: Int, Sendable, Hashable, CaseIterable, CustomStringConvertible {
    /// 0: nothing is stored; a device that is offline misses the message. Apple gives such
    /// channels a higher publishing budget, and their broadcasts must expire at 0.
    case noStorage = 0
    /// 1: the most recent message is kept (at most 8 hours) for devices that come back.
    case mostRecent = 1

    /// The policy's name on Salvo's command line and in its JSON: `no-storage`, `most-recent`.
    public var name: String {
        switch self {
        case .noStorage: "no-storage"
        case .mostRecent: "most-recent"
        }
    }

    /// The policy named `name` (`no-storage`, `most-recent`), or nil.
    public init?(name: String) {
        guard let policy = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = policy
    }

    /// `name`.
    public var description: String { name }
}
