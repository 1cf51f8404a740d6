import SalvoEngine
import SalvoWire
import Synchronization

/// JSON text owned and never moved: a request's body, which the notifications of a
/// `JSONBatch` point into while a sender reads them (again, to resend).
public final class JSONBody: @unchecked Sendable {  // immutable after init
    /// The text.
    public let bytes: UnsafeRawBufferPointer

    /// A copy of `source`.
    public init(copying source: some Collection<UInt8>) {
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: source.count, alignment: 1)
        storage.copyBytes(from: source)
        bytes = UnsafeRawBufferPointer(storage)
    }

    deinit { bytes.deallocate() }
}

/// One good notification of a batch: where it lies in the body, and the id it is sent
/// with (its own `apns_id`, or one made for it).
public struct JSONBatchItem: Sendable, Hashable {
    /// Its index in the batch (0 for a body of one notification).
    public var index: Int
    /// Where its JSON object lies in the body.
    public var range: Range<Int>
    /// Its `apns-id`.
    public var id: APNsID

    public init(index: Int, range: Range<Int>, id: APNsID) {
        self.index = index
        self.range = range
        self.id = id
    }
}

/// A notification of a batch that was refused, and why.
public struct JSONBatchItemError: Sendable, Hashable {
    /// Its index in the batch.
    public var index: Int
    /// What is wrong with it.
    public var reason: String
}

/// Notifications written as JSON in bodies (`salvo serve`'s requests), as a sender reads
/// them: the bodies as they came, and where each good notification lies in its body.
/// Readers parse a notification when they reach it, by the rules of a campaign line
/// (`NotificationLineParser`), so a batch costs the sender no copy of its payloads, and a
/// resend reads the body again. Every notification is sent with its item's id. Positions
/// and sequences are indices in `items`: a refusal's sequence names its item.
public struct JSONBatch: NotificationSource {
    /// Every body the items lie in.
    public let bodies: [JSONBody]
    /// The notifications, in the order they are sent.
    public let items: [JSONBatchItem]
    /// For each item, its body's index in `bodies`.
    private let bodyOfItem: [Int]
    public let campaignProtocol: CampaignProtocol

    /// The `items` of `body`, read for `campaignProtocol` (as `JSONBatchDecoder` found them).
    public init(body: JSONBody, items: [JSONBatchItem], campaignProtocol: CampaignProtocol) {
        self.init(parts: [(body, items)], campaignProtocol: campaignProtocol)
    }

    /// The items of several bodies, one after the other: several requests sent as one.
    public init(parts: [(body: JSONBody, items: [JSONBatchItem])], campaignProtocol: CampaignProtocol) {
        bodies = parts.map(\.body)
        items = parts.flatMap(\.items)
        bodyOfItem = parts.indices.flatMap { repeatElement($0, count: parts[$0].items.count) }
        self.campaignProtocol = campaignProtocol
    }

    public func makeReader() -> Reader { Reader(self) }

    /// Reads a batch's items in order.
    public final class Reader: NotificationReader {
        private let batch: JSONBatch
        private let parser: NotificationLineParser
        /// The request fields handed out: the line's, with the id it is sent with.
        private let request = UnsafeMutablePointer<RequestFields>.allocate(capacity: 1)
        private var nextIndex = 0

        init(_ batch: JSONBatch) {
            self.batch = batch
            parser = NotificationLineParser(for: batch.campaignProtocol)
            request.initialize(to: RequestFields())
        }

        deinit { request.deallocate() }

        public func next() throws -> SourceNotification? {
            guard nextIndex < batch.items.count else { return nil }
            let item = batch.items[nextIndex]
            let position = SourcePosition(offset: UInt64(nextIndex), sequence: UInt64(nextIndex))
            let line = UnsafeRawBufferPointer(rebasing: batch.bodies[batch.bodyOfItem[nextIndex]].bytes[item.range])
            nextIndex += 1
            // Checked when the request was taken; the same rules give the same answer.
            guard var notification = try parser.parse(line, at: position)?.notification else {
                throw NotificationLineError(reason: "notification \(item.index) of the batch no longer parses")
            }
            request.pointee = notification.request?.pointee ?? RequestFields()
            request.pointee.apnsID = item.id
            notification.request = UnsafePointer(request)
            return notification
        }

        public func seek(to position: SourcePosition) {
            nextIndex = Int(position.offset)
        }
    }
}

/// Reads a body of JSON notifications: one (a JSON object) or a batch (an array of them),
/// each checked by the rules of a campaign line and against the topics the sender serves.
/// Bad notifications are refused one by one; the body as a whole only when it is no JSON
/// object or array, or holds more than `batchLimit`.
public struct JSONBatchDecoder {
    /// Why a whole body is refused.
    public enum Refusal: Error, Equatable {
        /// Not a JSON object, nor an array of them; an empty array.
        case malformed(String)
        /// More notifications than a batch may hold.
        case tooMany(count: Int, limit: Int)
    }

    public let campaignProtocol: CampaignProtocol
    /// The topics the sender serves (several apps); nil: any.
    public let routing: TopicRouting?
    public let batchLimit: Int
    private let parser: NotificationLineParser

    public init(campaignProtocol: CampaignProtocol, routing: TopicRouting?, batchLimit: Int) {
        self.campaignProtocol = campaignProtocol
        self.routing = routing
        self.batchLimit = batchLimit
        parser = NotificationLineParser(for: campaignProtocol)
    }

    /// The good notifications of `body` with their ids, and the refused ones with why. An
    /// item's `apns_id` is its id; an item without one gets a fresh random id; an id given
    /// twice in one body refuses the second.
    public func decode(_ body: JSONBody) throws(Refusal) -> (items: [JSONBatchItem], errors: [JSONBatchItemError]) {
        let json = body.bytes
        var items: [JSONBatchItem] = []
        var errors: [JSONBatchItemError] = []
        var seen: Set<APNsID> = []
        func take(_ range: Range<Int>, index: Int) {
            let line = UnsafeRawBufferPointer(rebasing: json[range])
            do throws(NotificationLineError) {
                guard let (notification, _) = try parser.parse(line, at: SourcePosition(offset: 0, sequence: 0)) else {
                    return errors.append(JSONBatchItemError(index: index, reason: "empty"))
                }
                if let routing, routing.topic(of: notification) == nil {
                    return errors.append(JSONBatchItemError(index: index, reason: routing.problem(with: notification)))
                }
                let id = notification.request?.pointee.apnsID ?? FreshIDs.next()
                guard seen.insert(id).inserted else {
                    return errors.append(JSONBatchItemError(index: index, reason: "\"apns_id\" \(id) is given to an earlier notification of the batch"))
                }
                items.append(JSONBatchItem(index: index, range: range, id: id))
            } catch {
                errors.append(JSONBatchItemError(index: index, reason: error.reason))
            }
        }
        let kind: JSONKind
        do throws(JSONScanError) {
            kind = try JSONScanner.validate(json).kind
        } catch {
            throw .malformed("the body is not JSON: \(error)")
        }
        switch kind {
        case .object:
            take(0..<json.count, index: 0)
        case .array:
            var elements = JSONArrayElements(json)
            var index = 0
            // Validated above: the iterator cannot fail.
            while let element = try? elements.next() {
                guard index < batchLimit else { throw .tooMany(count: Self.count(json), limit: batchLimit) }
                if element.kind == .object {
                    take(element.range, index: index)
                } else {
                    errors.append(JSONBatchItemError(index: index, reason: "a notification is a JSON object, not \(element.kind.phrase)"))
                }
                index += 1
            }
            if index == 0 { throw .malformed("the batch is empty") }
        default:
            throw .malformed("the body is a notification (a JSON object) or a batch (an array of them), not \(kind.phrase)")
        }
        return (items, errors)
    }

    private static func count(_ json: UnsafeRawBufferPointer) -> Int {
        var elements = JSONArrayElements(json)
        var count = 0
        while (try? elements.next()) != nil { count += 1 }
        return count
    }

}

/// Fresh apns-ids for notifications that bring none: a random prefix per process and a
/// counter mixed into the rest, so that making one is an atomic add rather than a system
/// call for randomness. Unique within the process (the mix is a bijection; the variant bits
/// it loses leave odds of a clash far below any other failure), and across processes as
/// random 64-bit prefixes are.
enum FreshIDs {
    private static let prefix = UInt64.random(in: .min ... .max)
    private static let counter = Atomic<UInt64>(.random(in: .min ... .max))

    static func next() -> APNsID {
        var mixed = counter.wrappingAdd(1, ordering: .relaxed).oldValue &+ 0x9E37_79B9_7F4A_7C15
        mixed = (mixed ^ (mixed >> 30)) &* 0xBF58_476D_1CE4_E5B9
        mixed = (mixed ^ (mixed >> 27)) &* 0x94D0_49BB_1331_11EB
        return APNsID(random: prefix, mixed ^ (mixed >> 31))
    }
}
