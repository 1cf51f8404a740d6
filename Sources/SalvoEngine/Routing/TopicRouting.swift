import SalvoWire

/// Which of a run's topics (bundle ids) a notification belongs to: its own `apns-topic`
/// without the push type's suffix (`com.example.app.voip` is `com.example.app`'s), or the
/// run's default topic when it names none.
///
/// A linear scan of a few byte strings: no allocation per notification, and a run serves
/// a handful of apps.
public struct TopicRouting: Sendable {
    /// The bundle ids, in the order their indexes count.
    public let topics: [String]
    /// The index of the topic of notifications that name none; nil: such a notification has none.
    public let defaultTopic: Int?
    private let bytes: [[UInt8]]

    /// Routing for `topics` (bundle ids, each once), with `defaultTopic` for notifications
    /// that name none (nil, or one of `topics`).
    public init(topics: [String], defaultTopic: String?) {
        self.topics = topics
        bytes = topics.map { Array($0.utf8) }
        self.defaultTopic = defaultTopic.flatMap { topics.firstIndex(of: $0) }
    }

    /// The index of the topic `notification` goes to, or nil when none of `topics` is it.
    @inline(__always)
    public func topic(of notification: SourceNotification) -> Int? {
        guard let topic = notification.request?.pointee.topic else { return defaultTopic }
        return index(ofTopic: topic)
    }

    /// The index of the bundle id of `topic`, a whole `apns-topic` (its push type's suffix,
    /// if any, is not part of the bundle id).
    public func index(ofTopic topic: UnsafeRawBufferPointer) -> Int? {
        var length = topic.count
        if let owner = APNsPushType.owningSuffix(of: topic), let suffix = owner.topicSuffix { length -= suffix.utf8.count }
        let bundleID = UnsafeRawBufferPointer(rebasing: topic[..<length])
        return bytes.firstIndex { $0.elementsEqual(bundleID) }
    }

    /// Why `notification` has no topic here, for a bad line.
    public func problem(with notification: SourceNotification) -> String {
        let served = topics.joined(separator: ", ")
        guard let topic = notification.request?.pointee.topic else {
            return "it names no \"topic\" and the run has no default topic (--topic) its credentials serve (they serve \(served))"
        }
        return "no credentials serve the topic \(String(decoding: topic, as: UTF8.self)) (they serve \(served))"
    }
}
