import SalvoWire

/// Notifications held in memory: a list of tokens with one payload, or one payload per
/// token. The sender reads them again by index to resend, so they cost it no extra
/// memory. Sequences are indices, from 0.
///
/// ```swift
/// let digest = try NotificationList(tokens: tokens, payload: payload)
/// try await sender.send(contentsOf: digest)
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

        /// An entry sending `payload` to `token`.
        public init(token: DeviceToken, payload: [UInt8], expiry: UInt32? = nil, priority: UInt8? = nil) {
            self.token = token
            self.payload = payload
            self.expiry = expiry
            self.priority = priority
        }
    }

    private let storage: Storage

    /// Every token gets the same payload.
    public init(tokens: [DeviceToken], payload: [UInt8], expiry: UInt32? = nil, priority: UInt8? = nil) {
        storage = Storage(tokens: tokens, payloads: [payload], details: .shared(expiry: expiry, priority: priority))
    }

    /// One payload per token.
    public init(_ items: [Item]) {
        storage = Storage(tokens: items.map(\.token), payloads: items.map(\.payload),
                          details: .perItem(items.map { ($0.expiry, $0.priority) }))
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

        init(tokens: [DeviceToken], payloads: [[UInt8]], details: Details) {
            self.tokens = tokens
            self.details = details
            bytes = .allocate(byteCount: max(1, payloads.reduce(0) { $0 + $1.count }), alignment: 16)
            var ranges: [Range<Int>] = []
            var cursor = 0
            for payload in payloads {
                UnsafeMutableRawBufferPointer(rebasing: bytes[cursor..<cursor + payload.count]).copyBytes(from: payload)
                ranges.append(cursor..<cursor + payload.count)
                cursor += payload.count
            }
            payloadRanges = ranges
        }

        deinit { bytes.deallocate() }

        func notification(at index: Int) -> SourceNotification {
            let position = SourcePosition(offset: UInt64(index), sequence: UInt64(index))
            switch details {
            case .shared(let expiry, let priority):
                return SourceNotification(token: tokens[index], payload: UnsafeRawBufferPointer(rebasing: bytes[payloadRanges[0]]),
                                          expiry: expiry, priority: priority, position: position)
            case .perItem(let items):
                return SourceNotification(token: tokens[index], payload: UnsafeRawBufferPointer(rebasing: bytes[payloadRanges[index]]),
                                          expiry: items[index].expiry, priority: items[index].priority, position: position)
            }
        }
    }
}
