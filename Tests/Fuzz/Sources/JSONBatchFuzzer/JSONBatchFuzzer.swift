// JSONBatchDecoder, the decoder of `salvo serve`'s request bodies, and JSONBatch's reader
// behind it (what the sender reads), on arbitrary bodies.
//
// The first input byte chooses the setting, the rest is the body: bits 0-1, the batch
// limit (1, 2, 4 or 16), so that short inputs reach the limit; bit 2, a TopicRouting of two
// bundle ids (com.example.app, com.example.other) or none (any topic); bit 3, with a
// routing, whether com.example.app is the default topic of notifications that name none;
// bits 4-5, the default push type (alert, background, voip, liveactivity). Bodies are read
// for HTTP/2, as `salvo serve` reads them.
//
// Properties:
// - no trap, no hang, and no out-of-bounds access (AddressSanitizer);
// - a body is refused whole only for a reason: .tooMany when it is an array of more than
//   the limit (and its count is the array's), .malformed when it is no JSON object nor a
//   non-empty array of at most JSONScanner.maximumDepth levels (as Foundation reads it);
// - otherwise items and errors together name each element once: their indices increase,
//   are disjoint, and make up 0..<count (count: 1 for an object, the array's length), at
//   most the limit; every error has a reason;
// - every item's range lies in the body, after the previous item's; it holds a JSON object
//   (`{` ... `}` once blanks are trimmed), a dictionary for Foundation, and an element that
//   is no object is an error; the ids are all different, and an item with an `apns_id`
//   Foundation reads as a UUID has that id;
// - JSONBatch's reader, as the sender reads a batch, gives one notification per item in
//   order, each sent with its item's id and at its index, then nil; with a routing, each
//   goes to one of its topics; seeking back to each, latest first, reads it again (a
//   resend) with the same id, token and payload.

import Foundation
import FuzzSupport
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    guard let setting = input.first else { return }
    let bytes = Array(input.dropFirst())
    let batchLimit = [1, 2, 4, 16][Int(setting & 3)]
    let routing: TopicRouting? = setting & 4 == 0 ? nil
        : TopicRouting(topics: ["com.example.app", "com.example.other"], defaultTopic: setting & 8 != 0 ? "com.example.app" : nil)
    let defaultPushType = defaultPushTypes[Int(setting >> 4) & 3]
    let campaignProtocol = CampaignProtocol.http2(defaultPushType: defaultPushType)
    let body = JSONBody(copying: bytes)
    let decoder = JSONBatchDecoder(campaignProtocol: campaignProtocol, routing: routing, batchLimit: batchLimit)

    // Foundation's reading, where it can be compared (see FoundationJSON.swift): of valid
    // JSON only, which the comparable form needs, and JSONScannerFuzzer compares the rest.
    let valid = bytes.withUnsafeBytes { (try? JSONScanner.validate($0)) != nil }
    let foundation = valid && !foundationReadsAsAnotherEncoding(bytes) ? foundationJSON(foundationComparable(bytes)) : nil
    let decoded: (items: [JSONBatchItem], errors: [JSONBatchItemError])
    do throws(JSONBatchDecoder.Refusal) {
        decoded = try decoder.decode(body)
    } catch {
        checkRefusal(error, of: bytes, foundation: foundation, batchLimit: batchLimit)
        return
    }
    let elements = checkNaming(decoded, of: bytes, foundation: foundation, batchLimit: batchLimit)
    checkItems(decoded.items, of: bytes, elements: elements)
    checkReading(JSONBatch(body: body, items: decoded.items, campaignProtocol: campaignProtocol), routing: routing)
}

/// The default push types bits 4-5 choose from: the plain one, the one with a priority
/// rule, the one with a larger payload limit, and one with a topic suffix.
let defaultPushTypes: [APNsPushType] = [.alert, .background, .voip, .liveactivity]

/// A refused body is refused for its reason.
func checkRefusal(_ refusal: JSONBatchDecoder.Refusal, of body: [UInt8], foundation: Any?, batchLimit: Int) {
    switch refusal {
    case .tooMany(let count, let limit):
        require(limit == batchLimit && count > limit, "refused as \(count) notifications over \(limit), the limit being \(batchLimit)")
        if let array = foundation as? [Any] {
            require(array.count == count, "refused as \(count) notifications; Foundation reads \(array.count): \(show(body))")
        }
    case .malformed(let reason):
        require(!reason.isEmpty, "refused with no reason: \(show(body))")
        // Foundation goes deeper than the scanner (512 levels, not 64), by design.
        guard let foundation, depth(of: foundation) <= JSONScanner.maximumDepth else { return }
        let isBatch = (foundation as? [Any]).map { !$0.isEmpty } ?? false
        require(!(foundation is [String: Any]) && !isBatch,
                "refused as malformed (\(reason)), yet Foundation reads a notification or a batch: \(show(body))")
    }
}

/// How deeply `value` nests, as JSONScanner counts it (a top-level value is 1).
func depth(of value: Any) -> Int {
    if let array = value as? [Any] { return 1 + (array.map(depth).max() ?? 0) }
    if let object = value as? [String: Any] { return 1 + (object.values.map(depth).max() ?? 0) }
    return 1
}

/// Items and errors name each element once, in order; returns the elements as Foundation
/// reads them (nil when it reads the body otherwise, see FoundationJSON.swift).
func checkNaming(_ decoded: (items: [JSONBatchItem], errors: [JSONBatchItemError]), of body: [UInt8], foundation: Any?,
                 batchLimit: Int) -> [Any]? {
    let (items, errors) = decoded
    require(!items.isEmpty || !errors.isEmpty, "a body taken with neither items nor errors: \(show(body))")
    require(isIncreasing(items.map(\.index)), "item indices do not increase: \(items.map(\.index))")
    require(isIncreasing(errors.map(\.index)), "error indices do not increase: \(errors.map(\.index))")
    let named = (items.map(\.index) + errors.map(\.index)).sorted()
    require(named == Array(0..<named.count), "items \(items.map(\.index)) and errors \(errors.map(\.index)) do not name 0..<n once each")
    require(named.count <= batchLimit, "\(named.count) elements taken, over the limit \(batchLimit)")
    require(errors.allSatisfy { !$0.reason.isEmpty }, "an error without a reason: \(errors)")
    let elements: [Any]? = switch foundation {
    case let array as [Any]: array
    case let object as [String: Any]: [object]
    default: nil
    }
    if let elements {
        require(elements.count == named.count, "\(named.count) elements named, Foundation reads \(elements.count): \(show(body))")
        for item in items {
            require(elements[item.index] is [String: Any], "item \(item.index) is no object for Foundation: \(elements[item.index])")
        }
    }
    return elements
}

/// Every item lies in the body after the previous one, holds an object, and has its own id:
/// its `apns_id` when it names one.
func checkItems(_ items: [JSONBatchItem], of body: [UInt8], elements: [Any]?) {
    var end = 0
    for item in items {
        require(item.range.lowerBound >= end && item.range.upperBound <= body.count && !item.range.isEmpty,
                "item \(item.index) at \(item.range): not within the body (\(body.count) bytes) after the previous item (ending at \(end))")
        end = item.range.upperBound
        let blanks: [UInt8] = [0x20, 0x09, 0x0A, 0x0D]
        let text = Array(body[item.range].drop { blanks.contains($0) }.reversed().drop { blanks.contains($0) }.reversed())
        require(text.first == UInt8(ascii: "{") && text.last == UInt8(ascii: "}"),
                "item \(item.index) at \(item.range) is not an object: \(show(body[item.range]))")
        let fields = elements?[item.index] as? [String: Any]
        if let text = fields?["apns_id"] as? String, let uuid = UUID(uuidString: text) {
            require(item.id == apnsID(uuid), "item \(item.index) names the apns_id \(text) and is sent as \(item.id)")
        }
    }
    require(Set(items.map(\.id)).count == items.count, "two items share an id: \(items.map(\.id))")
}

/// The reader gives each item with its id, once, in order; a seek back reads it again.
func checkReading(_ batch: JSONBatch, routing: TopicRouting?) {
    let reader = batch.makeReader()
    var read: [Read] = []
    do {
        while let notification = try reader.next() {
            let index = read.count
            require(index < batch.items.count, "the reader gives more notifications than the \(batch.items.count) items")
            let item = batch.items[index]
            require(notification.position == SourcePosition(offset: UInt64(index), sequence: UInt64(index)),
                    "item \(index) read at \(notification.position)")
            require(notification.request?.pointee.apnsID == item.id,
                    "item \(index) read with the apns-id \(String(describing: notification.request?.pointee.apnsID)), taken as \(item.id)")
            if let routing {
                require(routing.topic(of: notification) != nil, "item \(index) was taken, yet it goes to no topic of \(routing.topics)")
            }
            read.append(Read(notification))
        }
        require(read.count == batch.items.count, "the reader gives \(read.count) notifications of \(batch.items.count) items")
        require(try reader.next() == nil, "the reader goes on after its end")
        for index in read.indices.reversed() {
            reader.seek(to: SourcePosition(offset: UInt64(index), sequence: UInt64(index)))
            let again = try reader.next().map(Read.init)
            require(again == read[index], "item \(index) read again after a seek: \(String(describing: again)); first: \(read[index])")
        }
    } catch {
        require(false, "the reader fails on a batch the decoder took: \(error)")
    }
}

/// A notification copied out of the reader's buffers.
struct Read: Equatable {
    var token: DeviceToken
    var payload: [UInt8]
    var id: APNsID?
    var topic: [UInt8]?

    init(_ notification: SourceNotification) {
        token = notification.token
        payload = Array(notification.payload)
        id = notification.request?.pointee.apnsID
        topic = notification.request?.pointee.topic.map { Array($0) }
    }
}

/// Valid JSON as Foundation can compare it: numbers beyond Double's range zeroed, U+FEFF
/// replaced (as CampaignLineFuzzer compares lines).
func foundationComparable(_ json: [UInt8]) -> [UInt8] {
    let bytes = withBOMsReplaced(json)
    return withOverflowingNumbersZeroed(bytes) ?? bytes
}

func isIncreasing(_ values: [Int]) -> Bool { zip(values, values.dropFirst()).allSatisfy { $0 < $1 } }

/// Foundation's UUID as an apns-id.
func apnsID(_ uuid: UUID) -> APNsID {
    withUnsafeBytes(of: uuid.uuid) { bytes in
        APNsID(high: bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }, low: bytes.suffix(8).reduce(0) { $0 << 8 | UInt64($1) })
    }
}
