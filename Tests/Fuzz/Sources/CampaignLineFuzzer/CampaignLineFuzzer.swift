// CampaignReader, and the line parser behind it, on arbitrary files.
//
// The first input byte chooses the setting, the rest is the file: bit 0, JSONL or a token
// list (with the payload {"aps":{"alert":"hi"}}); bit 1, the default limits (lines of
// 4096 bytes here, payloads of 2048) or small ones (lines of 160, payloads of 24), so that
// short inputs reach both length checks.
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - reading with .abort gives the items that .skip gives before its first skipped line,
//   then stops with that line (or with the error that ended the .skip reading);
// - each item's line number and offset are where its line is in the file, and a token
//   line holds exactly the token's digits;
// - each payload is a minified JSON object within the limit, and for JSONL it means what
//   Foundation reads at the line's "payload" (numbers beyond Double's range aside, see
//   JSONScannerFuzzer); token, expiry, priority and id are what Foundation reads too;
// - seeking back to an item's position (what a resend does), latest first, reads it again;
// - skipping through a line (what --resume does) leaves exactly the items after it.

import Foundation
import FuzzSupport
import SalvoEngine
import SalvoWire

let file = ScratchFile("campaign")
let tokenListPayload = Array(#"{"aps":{"alert":"hi"}}"#.utf8)

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    guard let setting = input.first else { return }
    let contents = UnsafeRawBufferPointer(rebasing: input.dropFirst())
    file.write(contents)
    let campaign = Campaign(
        source: setting & 1 == 0 ? .jsonl(file.path) : .tokens(file.path, payload: tokenListPayload),
        small: setting & 2 != 0)

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
        switch campaign.source {
        case .jsonl: checkAgainstFoundation(item, in: file)
        case .tokens: checkTokenLine(item, in: file)
        }
    }
    campaign.checkSeeking(to: skipping.items)
    if !skipping.items.isEmpty {
        let through = skipping.items[Int(setting >> 2) % skipping.items.count].line
        let rest = campaign.read(.skip, skippingThroughLine: through)
        require(rest.items == skipping.items.filter { $0.line > through },
                "after skipping through line \(through): \(rest.items); all: \(skipping.items)")
    }
}

/// A notification copied out of the reader's buffers.
struct Item: Equatable {
    var line: Int
    var offset: UInt64
    var token: DeviceToken
    var payload: [UInt8]
    var expiry: UInt32?
    var priority: UInt8?
    var id: [UInt8]?

    init(_ item: CampaignItem) {
        line = item.line
        offset = item.offset
        token = item.token
        payload = Array(item.payload)
        expiry = item.expiry
        priority = item.priority
        id = item.id.map { Array($0) }
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
    var maximumPayloadLength: Int
    var maximumLineLength: Int

    init(source: CampaignSource, small: Bool) {
        self.source = source
        maximumPayloadLength = small ? 24 : 2048
        maximumLineLength = small ? 160 : 4096
    }

    func open(_ policy: BadLinePolicy) -> CampaignReader {
        do {
            return try CampaignReader(source, maximumPayloadLength: maximumPayloadLength, onBadLine: policy,
                                      maximumLineLength: maximumLineLength)
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
    require(item.payload.count <= campaign.maximumPayloadLength,
            "a \(item.payload.count)-byte payload passed a limit of \(campaign.maximumPayloadLength)")
    item.payload.withUnsafeBytes { payload in
        let kind = try? JSONScanner.validate(payload).kind
        require(kind == .object, "the payload \(show(item.payload)) is not a JSON object")
        require(JSONScanner.minifiedCount(payload) == payload.count, "the payload \(show(item.payload)) is not minified")
    }
    if case .tokens = campaign.source {
        require(item.payload == tokenListPayload, "a token line got the payload \(show(item.payload))")
    }
}

/// What the reader took from a JSONL line is what Foundation reads there.
func checkAgainstFoundation(_ item: Item, in file: [UInt8]) {
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
    require(item.expiry.map(Int64.init) == integer(fields["expiry"]),
            "the reader read the expiry \(String(describing: item.expiry)), Foundation \(String(describing: fields["expiry"]))")
    require(item.priority.map(Int64.init) == integer(fields["priority"]),
            "the reader read the priority \(String(describing: item.priority)), Foundation \(String(describing: fields["priority"]))")
    let id = fields["id"].flatMap { $0 is NSNull ? nil : canonicalJSON($0) }
    let itemID = item.id.flatMap { foundationJSON(foundationComparable($0)) }.flatMap(canonicalJSON)
    require(itemID == id, "the reader read the id \(item.id.map(show) ?? "nil"), Foundation \(String(describing: fields["id"]))")
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
