// CampaignReader, and the line parser behind it, on arbitrary files.
//
// The first input byte chooses the setting, the rest is the file: bit 0, JSONL or a token
// list (with the payload {"aps":{"alert":"hi"}}); bit 1, the default limits (lines of
// 4096 bytes here, payloads of 2048) or small ones (lines of 160, payloads of 24), so that
// short inputs reach both length checks; bits 2-4, which item's line to skip through; bit
// 7, the binary protocol or HTTP/2, with bits 5-6 choosing the default push type (alert,
// background, voip, liveactivity). Read for HTTP/2 the payload limits are the push types'
// (4096, 5120 for voip), so default lines are 8192 bytes there (fuzz.sh lets this target's
// inputs grow that long), and small ones still 160.
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - reading with .abort gives the items that .skip gives before its first skipped line,
//   then stops with that line (or with the error that ended the .skip reading);
// - each item's line number and offset are where its line is in the file, and a token
//   line holds exactly the token's digits;
// - each payload is a minified JSON object within the limit (for HTTP/2, its push type's),
//   and for JSONL it means what Foundation reads at the line's "payload" (numbers beyond
//   Double's range aside, see JSONScannerFuzzer); token, expiry (or expiration), priority
//   and id are what Foundation reads too, and so are, read for HTTP/2, push_type, topic,
//   collapse_id (U+FEFF aside, see JSONScannerFuzzer) and apns_id (as Foundation's UUID
//   reads it);
// - priorities are 5 or 10 (binary), or 10, 5 or 1 (HTTP/2), and 5 for a background push;
//   a topic is 1-255 bytes of dot-separated non-empty parts of letters, digits, - and _;
//   a collapse id is 1-64 bytes that an HTTP/2 header value may hold; read for the binary
//   protocol, an item has no request fields;
// - a JSONL file read for HTTP/2 and for the binary protocol gives, for the lines good in
//   both, the same notifications;
// - seeking back to an item's position (what a resend does), latest first, reads it again;
// - skipping through a line (what --resume does) leaves exactly the items after it.

import Foundation
import FuzzSupport
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire

let file = ScratchFile("campaign")
let tokenListPayload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    guard let setting = input.first else { return }
    let contents = UnsafeRawBufferPointer(rebasing: input.dropFirst())
    file.write(contents)
    let source: CampaignSource = setting & 1 == 0 ? .jsonl(file.path) : .tokens(file.path, payload: tokenListPayload)
    let small = setting & 2 != 0
    let defaultPushType = defaultPushTypes[Int(setting >> 5) & 3]
    let campaign = Campaign(source: source, small: small, http2: setting & 0x80 != 0 ? defaultPushType : nil)

    let skipping = campaign.read(.skip)
    let aborting = campaign.read(.abort)
    if let firstBad = skipping.skipped.first {
        require(aborting.items == skipping.items.filter { $0.line < firstBad.line } && aborting.end == .badLine(firstBad),
                "with .abort: \(aborting); with .skip: \(skipping)")
    } else {
        require(aborting.items == skipping.items && aborting.end == skipping.end,
                "with .abort: \(aborting); with .skip: \(skipping)")
    }
    let file = Array(contents)
    for item in skipping.items {
        checkPlace(item, in: file)
        checkPayload(item, campaign)
        checkRequest(item, campaign)
        switch campaign.source {
        case .jsonl: checkAgainstFoundation(item, in: file, campaign)
        case .tokens: checkTokenLine(item, in: file)
        }
    }
    if case .jsonl = source, campaign.http2 != nil {
        let binary = Campaign(source: source, small: small, http2: nil).read(.skip)
        checkSameNotifications(skipping.items, binary.items)
    }
    campaign.checkSeeking(to: skipping.items)
    if !skipping.items.isEmpty {
        let through = skipping.items[Int(setting >> 2 & 7) % skipping.items.count].line
        let rest = campaign.read(.skip, skippingThroughLine: through)
        require(rest.items == skipping.items.filter { $0.line > through },
                "after skipping through line \(through): \(rest.items); all: \(skipping.items)")
    }
}

/// The default push types bits 5-6 choose from: the plain one, the one with a priority
/// rule, the one with a larger payload limit, and one with a topic suffix.
let defaultPushTypes: [APNsPushType] = [.alert, .background, .voip, .liveactivity]

/// A notification copied out of the reader's buffers.
struct Item: Equatable {
    var line: Int
    var offset: UInt64
    var token: DeviceToken
    var payload: [UInt8]
    var expiry: UInt32?
    var priority: UInt8?
    var id: [UInt8]?
    var pushType: APNsPushType?
    var topic: [UInt8]?
    var collapseID: [UInt8]?
    var apnsID: APNsID?

    init(_ item: CampaignItem) {
        line = item.line
        offset = item.offset
        token = item.token
        payload = Array(item.payload)
        expiry = item.expiry
        priority = item.priority
        id = item.id.map { Array($0) }
        pushType = item.request.pushType
        topic = item.request.topic.map { Array($0) }
        collapseID = item.request.collapseID.map { Array($0) }
        apnsID = item.request.apnsID
    }
}

/// What one reading of the file gave.
struct Reading: Equatable {
    var items: [Item] = []
    var skipped: [BadLine] = []
    var end: CampaignError?
}

struct Campaign {
    var source: CampaignSource
    /// Read for HTTP/2 with this default push type; nil: for the binary protocol.
    var http2: APNsPushType?
    var campaignProtocol: CampaignProtocol
    var maximumLineLength: Int

    init(source: CampaignSource, small: Bool, http2: APNsPushType?) {
        self.source = source
        self.http2 = http2
        if let http2 {
            campaignProtocol = .http2(defaultPushType: http2)
            maximumLineLength = small ? 160 : 8192
        } else {
            campaignProtocol = .binary(maximumPayloadLength: small ? 24 : 2048)
            maximumLineLength = small ? 160 : 4096
        }
    }

    /// The largest payload `item` may have.
    func payloadLimit(of item: Item) -> Int {
        switch campaignProtocol {
        case .binary(let maximumPayloadLength): maximumPayloadLength
        case .http2(let defaultPushType): (item.pushType ?? defaultPushType).payloadLimit
        }
    }

    func open(_ policy: BadLinePolicy) -> CampaignReader {
        do {
            let reader = try CampaignReader(source, for: campaignProtocol, onBadLine: policy, maximumLineLength: maximumLineLength)
            let largest = switch (campaignProtocol, source) {
            case (.http2(let defaultPushType), .tokens): defaultPushType.payloadLimit
            default: campaignProtocol.largestPayloadLength
            }
            require(reader.maximumPayloadLength == largest,
                    "a reader for \(campaignProtocol) says it yields payloads up to \(reader.maximumPayloadLength)")
            return reader
        } catch {
            fatalError("cannot open the campaign: \(error)")
        }
    }

    func read(_ policy: BadLinePolicy, skippingThroughLine skipped: Int = 0) -> Reading {
        let reader = open(policy)
        var reading = Reading()
        do {
            try reader.skip(throughLine: skipped)
            while let item = try reader.nextItem() {
                require(reading.items.last.map { $0.line < item.line && $0.offset < item.offset } ?? true,
                        "line \(item.line) at offset \(item.offset) came after \(reading.items.last!)")
                reading.items.append(Item(item))
            }
        } catch {
            reading.end = error
        }
        reading.skipped = reader.skippedLines
        require(reader.skippedLineCount == reader.skippedLines.count,
                "\(reader.skippedLineCount) lines counted as skipped, \(reader.skippedLines.count) listed")
        return reading
    }

    /// Seeks back to every item, the latest first, and reads it again.
    func checkSeeking(to items: [Item]) {
        let reader = open(.skip)
        for item in items.reversed() {
            do {
                try reader.seek(to: SourcePosition(offset: item.offset, sequence: UInt64(item.line)))
                let again = try reader.nextItem().map(Item.init)
                require(again == item, "after seeking to \(item), the reader read \(String(describing: again))")
            } catch {
                require(false, "seeking to \(item) failed: \(error)")
            }
        }
    }
}

/// The item's offset starts its line, and the lines before it are its line number less one.
func checkPlace(_ item: Item, in file: [UInt8]) {
    let offset = Int(item.offset)
    require(offset < file.count && (offset == 0 || file[offset - 1] == 0x0A),
            "\(item) does not start a line of the \(file.count)-byte file")
    let newlines = file[..<offset].count(where: { $0 == 0x0A })
    require(newlines == item.line - 1, "\(item) starts after \(newlines) line endings")
}

func checkPayload(_ item: Item, _ campaign: Campaign) {
    let limit = campaign.payloadLimit(of: item)
    require(item.payload.count <= limit, "a \(item.payload.count)-byte payload passed a limit of \(limit)")
    item.payload.withUnsafeBytes { payload in
        let kind = try? JSONScanner.validate(payload).kind
        require(kind == .object, "the payload \(show(item.payload)) is not a JSON object")
        require(JSONScanner.minifiedCount(payload) == payload.count, "the payload \(show(item.payload)) is not minified")
    }
    if case .tokens = campaign.source {
        require(item.payload == tokenListPayload, "a token line got the payload \(show(item.payload))")
    }
}

/// The priority and the request fields follow the protocol's rules.
func checkRequest(_ item: Item, _ campaign: Campaign) {
    guard let defaultPushType = campaign.http2 else {
        require(item.priority.map { $0 == 5 || $0 == 10 } ?? true, "read for the binary protocol, \(item) has priority 1")
        require(item.pushType == nil && item.topic == nil && item.collapseID == nil && item.apnsID == nil,
                "read for the binary protocol, \(item) has request fields")
        return
    }
    require(item.priority.map { $0 == 10 || $0 == 5 || $0 == 1 } ?? true, "\(item) has a priority APNs does not take")
    if (item.pushType ?? defaultPushType) == .background {
        require(item.priority.map { $0 == 5 } ?? true, "the background push \(item) does not have priority 5")
    }
    if case .tokens = campaign.source {
        require(item.pushType == nil && item.topic == nil && item.collapseID == nil && item.apnsID == nil,
                "a token line got request fields: \(item)")
    }
    if let topic = item.topic {
        let parts = topic.split(separator: UInt8(ascii: "."), omittingEmptySubsequences: false)
        let allowed = Set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_".utf8)
        require((1...255).contains(topic.count) && parts.allSatisfy { !$0.isEmpty && $0.allSatisfy(allowed.contains) },
                "the topic \(show(topic)) is not one APNs takes")
    }
    if let collapseID = item.collapseID {
        let blanks: [UInt8] = [0x20, 0x09]
        require((1...64).contains(collapseID.count) && !collapseID.contains { $0 == 0 || $0 == 0x0A || $0 == 0x0D }
                    && !blanks.contains(collapseID.first!) && !blanks.contains(collapseID.last!),
                "the collapse id \(show(collapseID)) is not one an HTTP/2 header can carry, within 64 bytes")
    }
}

/// The same file read for HTTP/2 and for the binary protocol: lines good in both are the
/// same notifications (what the binary protocol has no place for aside).
func checkSameNotifications(_ http2: [Item], _ binary: [Item]) {
    let byLine = Dictionary(uniqueKeysWithValues: binary.map { ($0.line, $0) })
    for item in http2 {
        guard let other = byLine[item.line] else { continue }
        require(item.offset == other.offset && item.token == other.token && item.payload == other.payload
                    && item.expiry == other.expiry && item.priority == other.priority && item.id == other.id,
                "line \(item.line) read for HTTP/2: \(item); for the binary protocol: \(other)")
    }
}

/// What the reader took from a JSONL line is what Foundation reads there.
func checkAgainstFoundation(_ item: Item, in file: [UInt8], _ campaign: Campaign) {
    var line = file[Int(item.offset)...].prefix { $0 != 0x0A }
    if line.last == 0x0D { line = line.dropLast() }
    if item.line == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line = line.dropFirst(3) }
    // Numbers beyond Double's range are JSON that Foundation refuses, and it loses some
    // U+FEFF: compare without them (JSONScannerFuzzer lists both differences).
    let comparable = foundationComparable(line)
    guard let fields = foundationJSON(comparable) as? [String: Any] else {
        require(false, "the reader took \(item) from a line Foundation does not read as an object: \(show(line))")
        return
    }
    // The reader ignores blanks around a token, in a JSONL string as on a token line.
    let token = (fields["token"] as? String)?.trimmingCharacters(in: CharacterSet(charactersIn: " \t\r\n"))
    require(token?.lowercased() == item.token.hex,
            "the reader read the token \(item.token.hex), Foundation \(String(describing: fields["token"]))")
    let payload = foundationJSON(foundationComparable(item.payload))
    require(payload.flatMap(canonicalJSON) == fields["payload"].flatMap(canonicalJSON),
            "the reader read the payload \(show(item.payload)), Foundation \(String(describing: fields["payload"]))")
    require(item.expiry.map(Int64.init) == integer(fields["expiry"]) ?? integer(fields["expiration"]),
            "the reader read the expiry \(String(describing: item.expiry)), Foundation \(String(describing: fields["expiry"])) "
                + "and expiration \(String(describing: fields["expiration"]))")
    require(item.priority.map(Int64.init) == integer(fields["priority"]),
            "the reader read the priority \(String(describing: item.priority)), Foundation \(String(describing: fields["priority"]))")
    let id = fields["id"].flatMap { $0 is NSNull ? nil : canonicalJSON($0) }
    let itemID = item.id.flatMap { foundationJSON(foundationComparable($0)) }.flatMap(canonicalJSON)
    require(itemID == id, "the reader read the id \(item.id.map(show) ?? "nil"), Foundation \(String(describing: fields["id"]))")
    guard campaign.http2 != nil else { return }
    require(item.pushType?.name == string(fields["push_type"]),
            "the reader read the push type \(String(describing: item.pushType)), Foundation \(String(describing: fields["push_type"]))")
    require(item.topic.map { String(decoding: $0, as: UTF8.self) } == string(fields["topic"]),
            "the reader read the topic \(item.topic.map(show) ?? "nil"), Foundation \(String(describing: fields["topic"]))")
    require(item.collapseID.map { withoutBOMs(String(decoding: $0, as: UTF8.self)) } == string(fields["collapse_id"]).map(withoutBOMs),
            "the reader read the collapse id \(item.collapseID.map(show) ?? "nil"), Foundation \(String(describing: fields["collapse_id"]))")
    let uuid = string(fields["apns_id"]).flatMap(UUID.init(uuidString:))
    require(item.apnsID == uuid.map(apnsID),
            "the reader read the apns-id \(String(describing: item.apnsID)), Foundation \(String(describing: fields["apns_id"]))")
}

/// A Foundation string; nil for null or absent.
func string(_ value: Any?) -> String? { value as? String }

/// `text` without U+FEFF, which Foundation sometimes drops, nor U+2060, which stands in for
/// it in the line Foundation reads (see foundationComparable).
func withoutBOMs(_ text: String) -> String {
    String(text.unicodeScalars.filter { $0 != "\u{FEFF}" && $0 != "\u{2060}" }.map(Character.init))
}

/// Foundation's UUID as an apns-id.
func apnsID(_ uuid: UUID) -> APNsID {
    withUnsafeBytes(of: uuid.uuid) { bytes in
        APNsID(high: bytes.prefix(8).reduce(0) { $0 << 8 | UInt64($1) }, low: bytes.suffix(8).reduce(0) { $0 << 8 | UInt64($1) })
    }
}

/// Valid JSON as Foundation can compare it: numbers beyond Double's range zeroed, U+FEFF
/// replaced.
func foundationComparable(_ json: some Collection<UInt8>) -> [UInt8] {
    let bytes = withBOMsReplaced(json)
    return withOverflowingNumbersZeroed(bytes) ?? bytes
}

/// A token line is the token's hex digits, in either case, between blanks.
func checkTokenLine(_ item: Item, in file: [UInt8]) {
    let blanks: [UInt8] = [0x20, 0x09, 0x0D]
    var line = file[Int(item.offset)...].prefix { $0 != 0x0A }
    if item.line == 1, line.starts(with: [0xEF, 0xBB, 0xBF]) { line = line.dropFirst(3) }
    let digits = line.drop { blanks.contains($0) }.reversed().drop { blanks.contains($0) }.reversed()
    require(String(decoding: digits, as: UTF8.self).lowercased() == item.token.hex,
            "the reader read the token \(item.token.hex) from the line \(show(line))")
}

/// A Foundation number that is an integer, as Int64; nil for null or absent.
func integer(_ value: Any?) -> Int64? {
    guard let number = value as? NSNumber else { return nil }
    return number.int64Value
}
