import SalvoWire

/// Notifications held in memory: a list of tokens with one payload, or one payload per
/// token, or broadcasts to channels. The sender reads them again by index to resend, so
/// they cost it no extra memory. Sequences are indices, from 0.
///
/// ```swift
/// let digest = try NotificationList(tokens: tokens, payload: payload)
/// try await sender.send(contentsOf: digest)
/// // A Live Activity update to every subscriber of two channels (HTTP/2, iOS 18):
/// try await sender.send(contentsOf: NotificationList(channels: [score, scorers], payload: update))
/// ```
public struct NotificationList: NotificationSource {
    /// One entry of a list with a payload per token.
    public struct Item: Sendable {
        /// The device to notify.
        public var token: DeviceToken
        /// The payload, minified JSON.
        public var payload: [UInt8]
        /// UNIX seconds after which APNs may drop it; nil: the sender's default.
        public var expiry: UInt32?
        /// 10 or 5 (or 1 over HTTP/2); nil: the sender's default.
        public var priority: UInt8?
        /// HTTP/2: `apns-push-type`; nil: the sender's default.
        public var pushType: APNsPushType?
        /// HTTP/2: the whole `apns-topic`; nil: the sender's topic with the push type's suffix.
        public var topic: String?
        /// HTTP/2: `apns-collapse-id`; nil: none.
        public var collapseID: String?
        /// HTTP/2: `apns-id`; nil: the sender makes one.
        public var apnsID: APNsID?
        /// HTTP/2: a broadcast channel's id: the entry is a broadcast to the channel's
        /// subscribers (`token` is then unused; `topic`, if set, is the bare bundle id).
        public var channelID: String?

        /// An entry sending `payload` to `token`, with these headers (over HTTP/2).
        public init(token: DeviceToken, payload: [UInt8], expiry: UInt32? = nil, priority: UInt8? = nil,
                    pushType: APNsPushType? = nil, topic: String? = nil, collapseID: String? = nil, apnsID: APNsID? = nil) {
            self.token = token
            self.payload = payload
            self.expiry = expiry
            self.priority = priority
            self.pushType = pushType
            self.topic = topic
            self.collapseID = collapseID
            self.apnsID = apnsID
        }

        /// A broadcast of `payload` (a Live Activity update or end) to the subscribers of
        /// `channel`; `bundleID` nil: the sender's topic.
        public init(channel: String, payload: [UInt8], expiry: UInt32? = nil, priority: UInt8? = nil, bundleID: String? = nil,
                    apnsID: APNsID? = nil) {
            self.init(token: Self.noToken, payload: payload, expiry: expiry, priority: priority, topic: bundleID, apnsID: apnsID)
            channelID = channel
        }

        /// The token of a broadcast's entry: none.
        private static let noToken = try! DeviceToken(hex: String(repeating: "0", count: 2 * DeviceToken.byteCount))

        /// Whether it sets an HTTP/2 header of its own.
        var setsRequest: Bool { pushType != nil || topic != nil || collapseID != nil || apnsID != nil || channelID != nil }
    }

    private let storage: Storage

    /// Every token gets the same payload.
    public init(tokens: [DeviceToken], payload: [UInt8], expiry: UInt32? = nil, priority: UInt8? = nil) {
        storage = Storage(tokens: tokens, payloads: [payload], details: .shared(expiry: expiry, priority: priority))
    }

    /// One broadcast of `payload` (a Live Activity update or end) per channel.
    public init(channels: [String], payload: [UInt8], expiry: UInt32? = nil, priority: UInt8? = nil) {
        self.init(channels.map { Item(channel: $0, payload: payload, expiry: expiry, priority: priority) })
    }

    /// One payload per token (or channel).
    public init(_ items: [Item]) {
        storage = Storage(tokens: items.map(\.token), payloads: items.map(\.payload),
                          details: .perItem(items.map { ($0.expiry, $0.priority) }),
                          requests: items.contains(where: \.setsRequest) ? items : nil)
    }

    /// The number of notifications.
    public var count: Int { storage.tokens.count }

    public func makeReader() -> Reader { Reader(storage) }

    /// Reads a `NotificationList` by index.
    public final class Reader: NotificationReader {
        private let storage: Storage
        private var index = 0

        init(_ storage: Storage) { self.storage = storage }

        public func next() -> SourceNotification? {
            guard index < storage.tokens.count else { return nil }
            defer { index += 1 }
            return storage.notification(at: index)
        }

        public func seek(to position: SourcePosition) { index = Int(position.offset) }
    }

    /// The payload bytes of every item in one allocation, so a reader can hand out
    /// pointers that stay valid as long as the list lives.
    ///
    /// Thread rule: any thread; the bytes are written in `init` and only read after.
    final class Storage: @unchecked Sendable {
        enum Details {
            /// One payload (the first), expiry and priority for every token.
            case shared(expiry: UInt32?, priority: UInt8?)
            /// Payload `i` and these for token `i`.
            case perItem([(expiry: UInt32?, priority: UInt8?)])
        }

        let tokens: [DeviceToken]
        private let details: Details
        private let bytes: UnsafeMutableRawBufferPointer
        private let payloadRanges: [Range<Int>]
        /// Item `i`'s HTTP/2 headers, whose texts lie in `bytes` after the payloads; nil
        /// when no item sets one.
        private let requests: UnsafeMutableBufferPointer<RequestFields>?

        /// - Parameter requests: the items whose HTTP/2 headers to keep, one per token.
        init(tokens: [DeviceToken], payloads: [[UInt8]], details: Details, requests items: [Item]? = nil) {
            self.tokens = tokens
            self.details = details
            let texts = items?.reduce(0) {
                $0 + ($1.topic?.utf8.count ?? 0) + ($1.collapseID?.utf8.count ?? 0) + ($1.channelID?.utf8.count ?? 0)
            } ?? 0
            let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(1, payloads.reduce(0) { $0 + $1.count } + texts),
                                                               alignment: 16)
            self.bytes = bytes
            var ranges: [Range<Int>] = []
            var cursor = 0
            func store(_ text: some Collection<UInt8>) -> UnsafeRawBufferPointer {
                let room = UnsafeMutableRawBufferPointer(rebasing: bytes[cursor..<cursor + text.count])
                room.copyBytes(from: text)
                cursor += text.count
                return UnsafeRawBufferPointer(room)
            }
            for payload in payloads {
                ranges.append(cursor..<cursor + payload.count)
                _ = store(payload)
            }
            var requests: UnsafeMutableBufferPointer<RequestFields>?
            if let items {
                let fields = UnsafeMutableBufferPointer<RequestFields>.allocate(capacity: items.count)
                for (index, item) in items.enumerated() {
                    let topic = item.topic.map { store($0.utf8) }
                    let collapseID = item.collapseID.map { store($0.utf8) }
                    let channelID = item.channelID.map { store($0.utf8) }
                    (fields.baseAddress! + index).initialize(to: RequestFields(
                        pushType: item.pushType, topic: topic, collapseID: collapseID, apnsID: item.apnsID, channelID: channelID))
                }
                requests = fields
            }
            payloadRanges = ranges
            self.requests = requests
        }

        deinit {
            bytes.deallocate()
            requests?.deallocate()
        }

        func notification(at index: Int) -> SourceNotification {
            let position = SourcePosition(offset: UInt64(index), sequence: UInt64(index))
            switch details {
            case .shared(let expiry, let priority):
                return SourceNotification(token: tokens[index], payload: UnsafeRawBufferPointer(rebasing: bytes[payloadRanges[0]]),
                                          expiry: expiry, priority: priority, position: position)
            case .perItem(let items):
                let request = requests.flatMap { $0[index].isEmpty ? nil : UnsafePointer($0.baseAddress! + index) }
                return SourceNotification(token: tokens[index], payload: UnsafeRawBufferPointer(rebasing: bytes[payloadRanges[index]]),
                                          expiry: items[index].expiry, priority: items[index].priority, position: position,
                                          request: request)
            }
        }
    }
}
