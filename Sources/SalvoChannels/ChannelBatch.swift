/// What `BroadcastChannels.create(count:storagePolicy:)` made: every channel created, and
/// the error that stopped it early, if one did.
public struct ChannelBatch: Sendable {
    /// The channels created, in the order APNs answered.
    public var channels: [BroadcastChannel]
    /// The first refusal or failure; nil when all were created. The requests already in
    /// flight when it came were let finish, and their channels are in `channels`.
    public var error: BroadcastChannelError?

    /// A batch of `channels`, stopped by `error` if not nil.
    public init(channels: [BroadcastChannel], error: BroadcastChannelError?) {
        self.channels = channels
        self.error = error
    }
}
