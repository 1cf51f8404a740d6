import Foundation
import SalvoWire
import SystemPackage
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// A fresh directory under the system temp dir, removed when the test is done with it.
final class CampaignScratchDirectory {
    let path: String

    init() throws {
        let base = FileManager.default.temporaryDirectory.path
        path = "\(base)/salvo-campaign-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
    }

    deinit { try? FileManager.default.removeItem(atPath: path) }

    /// Writes `text` to `name` in the directory and returns the file's path.
    @discardableResult
    func write(_ name: String, _ text: String) throws -> String {
        let file = "\(path)/\(name)"
        try Data(text.utf8).write(to: URL(fileURLWithPath: file))
        return file
    }
}

/// Test tokens: distinct, recognisable.
func campaignToken(_ n: Int) -> String {
    String(repeating: String(format: "%02x", n & 0xFF), count: 32)
}

/// Everything the reader returns, copied out (the item's buffers are only valid until the next call).
struct ReadItem: Equatable {
    var line: Int
    var token: String
    var payload: String
    var expiry: UInt32? = nil
    var priority: UInt8? = nil
    var id: String? = nil
    var request = ReadRequest()
}

extension ReadItem {
    // In an extension, so that the memberwise initializer stays.
    init(_ item: CampaignItem) {
        line = item.line
        token = item.token.hex
        payload = String(decoding: item.payload, as: UTF8.self)
        expiry = item.expiry
        priority = item.priority
        id = item.id.map { String(decoding: $0, as: UTF8.self) }
        request = ReadRequest(item.request)
    }
}

/// A line's HTTP/2 request fields, copied out of the reader's buffers.
struct ReadRequest: Equatable {
    var pushType: APNsPushType? = nil
    var topic: String? = nil
    var collapseID: String? = nil
    var apnsID: APNsID? = nil
    var channelID: String? = nil
}

extension ReadRequest {
    // In an extension, so that the memberwise initializer stays.
    init(_ fields: RequestFields) {
        pushType = fields.pushType
        topic = fields.topic.map { String(decoding: $0, as: UTF8.self) }
        collapseID = fields.collapseID.map { String(decoding: $0, as: UTF8.self) }
        apnsID = fields.apnsID
        channelID = fields.channelID.map { String(decoding: $0, as: UTF8.self) }
    }
}

func readAll(_ reader: CampaignReader) throws(CampaignError) -> [ReadItem] {
    var items: [ReadItem] = []
    while let item = try reader.nextItem() { items.append(ReadItem(item)) }
    return items
}

@Suite struct CampaignReaderTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    func reader(_ text: String, onBadLine: BadLinePolicy = .abort, maximumLineLength: Int? = nil) throws -> CampaignReader {
        let path = try directory.write("campaign.jsonl", text)
        return try CampaignReader(
            .jsonl(path), onBadLine: onBadLine,
            maximumLineLength: maximumLineLength ?? CampaignReader.defaultMaximumLineLength)
    }

    /// The first line's error under `.abort`, as the user sees it.
    func firstError(_ text: String, maximumPayloadLength: Int = 2048) throws -> String? {
        let path = try directory.write("bad.jsonl", text)
        let reader = try CampaignReader(.jsonl(path), maximumPayloadLength: maximumPayloadLength)
        do {
            while try reader.nextItem() != nil {}
            return nil
        } catch {
            return error.description
        }
    }

    @Test func goodLinesCarryEveryFieldWithMinifiedPayloads() throws {
        let reader = try reader("""
            {"token": "\(campaignToken(1))", "payload": { "aps" : { "alert" : "Hi there" } }, "expiry": 1735689600, "priority": 10, "id": "user-1"}
            {"payload":{"aps":{}},"token":"\(campaignToken(2).uppercased())","priority":5,"id":42,"extra":[1,2]}
            {"token": "\(campaignToken(3))", "payload": {"a": "x y\\" z"}, "expiry": null, "priority": null, "id": null}

            """)
        let items = try readAll(reader)
        #expect(items == [
            ReadItem(line: 1, token: campaignToken(1), payload: #"{"aps":{"alert":"Hi there"}}"#,
                     expiry: 1_735_689_600, priority: 10, id: "\"user-1\""),
            ReadItem(line: 2, token: campaignToken(2), payload: #"{"aps":{}}"#, priority: 5, id: "42"),
            ReadItem(line: 3, token: campaignToken(3), payload: #"{"a":"x y\" z"}"#),
        ])
        #expect(reader.linesRead == 3)
        #expect(reader.skippedLineCount == 0)
    }

    /// Cases the fuzzer (Tests/Fuzz, CampaignLineFuzzer) met: blanks around a token inside
    /// its JSON string are ignored, as on a token line; a key that starts with U+FEFF is
    /// another key (Foundation drops the U+FEFF and reads it as the known one).
    @Test func blanksAroundATokenAreIgnoredAndAByteOrderMarkMakesAnotherKey() throws {
        let reader = try reader(#"""
            {"token": "\n\#(campaignToken(1)) ", "payload": {"aps": {}}, "\#u{FEFF}id": 7}

            """#)
        #expect(try readAll(reader) == [ReadItem(line: 1, token: campaignToken(1), payload: #"{"aps":{}}"#)])
    }

    @Test func badLinesAreNamedWithTheirLineAndReason() throws {
        let good = #"{"token": "\#(campaignToken(1))", "payload": {"aps": {}}}"#
        let cases: [(line: String, reason: String)] = [
            (#"{"token" "abc"}"#, "expected ':' at column 10"),
            (#"{"token": "abc", "payload": {"#, "expected a string key at column 30"),
            (#"not json"#, "expected '{' at column 1"),
            (#"{"payload": {}}"#, "missing \"token\" (or \"channel_id\" for a broadcast)"),
            (#"{"token": 12, "payload": {}}"#, "\"token\" must be a string of 64 hex characters, not a number"),
            (#"{"token": "\#(String(repeating: "ab", count: 31))", "payload": {}}"#,
             "device token has 31 bytes; APNs tokens are 32 bytes (64 hex characters)"),
            (#"{"token": "\#(String(repeating: "a", count: 63))x", "payload": {}}"#,
             "non-hex character 'x' at position 64 of the device token"),
            (#"{"token": "\#(campaignToken(1))"}"#, "missing \"payload\""),
            (#"{"token": "\#(campaignToken(1))", "payload": "{}"}"#, "\"payload\" must be a JSON object, not a string"),
            (#"{"token": "\#(campaignToken(1))", "payload": [1]}"#, "\"payload\" must be a JSON object, not an array"),
            (#"{"token": "\#(campaignToken(1))", "payload": {}, "priority": 7}"#, "\"priority\" must be 5 or 10, not 7"),
            (#"{"token": "\#(campaignToken(1))", "payload": {}, "priority": "10"}"#, "\"priority\" must be 5 or 10, not \"10\""),
            (#"{"token": "\#(campaignToken(1))", "payload": {}, "expiry": -1}"#,
             "\"expiry\" must be an integer from 0 to 4294967295 (UNIX seconds), not -1"),
            (#"{"token": "\#(campaignToken(1))", "payload": {}, "expiry": 4294967296}"#,
             "\"expiry\" must be an integer from 0 to 4294967295 (UNIX seconds), not 4294967296"),
            (#"{"token": "\#(campaignToken(1))", "payload": {}, "expiry": 1.5}"#,
             "\"expiry\" must be an integer from 0 to 4294967295 (UNIX seconds), not 1.5"),
            (#"{"token": "\#(campaignToken(1))", "payload": {}, "token": "\#(campaignToken(2))"}"#,
             "\"token\" is given more than once"),
        ]
        for (line, reason) in cases {
            // The bad line is line 3, after a good line and a blank one.
            let error = try firstError("\(good)\n\n\(line)\n\(good)\n")
            #expect(error == "line 3: \(reason)", "for \(line)")
        }
    }

    @Test func payloadsOverTheLimitSayHowLongTheyAre() throws {
        // {"a":"<n x's>"} is n + 8 bytes minified; the spaces around it do not count.
        let big = String(repeating: "x", count: 2092)
        let line = #"{"token": "\#(campaignToken(1))", "payload": { "a" : "\#(big)" }}"#
        #expect(try firstError(line) == "line 1: payload is 2100 bytes; the limit is 2048")
        let fits = String(repeating: "x", count: 2040)
        #expect(try firstError(#"{"token": "\#(campaignToken(1))", "payload": { "a" : "\#(fits)" }}"#) == nil)
        #expect(try firstError(#"{"token": "\#(campaignToken(1))", "payload": {"a":"xyz"}}"#, maximumPayloadLength: 10)
            == "line 1: payload is 11 bytes; the limit is 10")
    }

    @Test func skipPolicyRecordsBadLinesAndKeepsGoing() throws {
        let reader = try reader("""
            {"token": "\(campaignToken(1))", "payload": {"n": 1}}
            {"token": "\(campaignToken(2))", "payload": {"n": 2}, "priority": 1}
            {"token": "abc", "payload": {}}
            {"token": "\(campaignToken(4))", "payload": {"n": 4}}
            {broken
            """, onBadLine: .skip)
        let items = try readAll(reader)
        #expect(items.map(\.line) == [1, 4])
        #expect(items.map(\.payload) == [#"{"n":1}"#, #"{"n":4}"#])
        #expect(reader.skippedLines == [
            BadLine(line: 2, reason: "\"priority\" must be 5 or 10, not 1"),
            BadLine(line: 3, reason: "device token has 3 hex characters, an odd number; APNs tokens are 32 bytes (64 hex characters)"),
            BadLine(line: 5, reason: "expected a string key at column 2"),
        ])
        #expect(reader.skippedLineCount == 3)
        #expect(reader.skippedLines[0].description == "line 2: \"priority\" must be 5 or 10, not 1")
    }

    @Test func abortPolicyStopsAtTheFirstBadLine() throws {
        let reader = try reader("""
            {"token": "\(campaignToken(1))", "payload": {}}
            {"token": "\(campaignToken(2))", "payload": 5}
            {"token": "\(campaignToken(3))", "payload": {}}
            """)
        #expect(try reader.nextItem()?.line == 1)
        #expect(throws: CampaignError.badLine(BadLine(line: 2, reason: "\"payload\" must be a JSON object, not a number"))) {
            try reader.nextItem()
        }
        // The caller may choose to go on; the reader continues after the bad line.
        #expect(try reader.nextItem()?.line == 3)
        #expect(reader.skippedLineCount == 0)
    }

    @Test func skippedLinesKeepsTheFirstTenThousandButCountsAll() throws {
        let text = String(repeating: "nope\n", count: CampaignReader.skippedLinesKept + 5)
        let reader = try reader(text, onBadLine: .skip)
        #expect(try reader.nextItem() == nil)
        #expect(reader.skippedLines.count == CampaignReader.skippedLinesKept)
        #expect(reader.skippedLineCount == CampaignReader.skippedLinesKept + 5)
        #expect(reader.skippedLines.last?.line == CampaignReader.skippedLinesKept)
    }

    @Test func crlfLastLineWithoutNewlineAndByteOrderMark() throws {
        let reader = try reader(
            "\u{FEFF}{\"token\": \"\(campaignToken(1))\", \"payload\": {}}\r\n\r\n"
                + "{\"token\": \"\(campaignToken(2))\", \"payload\": {\"k\": \"v\"}}\r\n"
                + "{\"token\": \"\(campaignToken(3))\", \"payload\": {}}")
        let items = try readAll(reader)
        #expect(items.map(\.line) == [1, 3, 4])
        #expect(items.map(\.token) == [campaignToken(1), campaignToken(2), campaignToken(3)])
        #expect(items[1].payload == #"{"k":"v"}"#)
        #expect(try reader.nextItem() == nil)  // stays at the end
    }

    @Test func emptyAndBlankFilesHaveNoItems() throws {
        #expect(try readAll(try reader("")).isEmpty)
        let blank = try reader("\n  \n\r\n\t\n")
        #expect(try readAll(blank).isEmpty)
        #expect(blank.linesRead == 4)
    }

    @Test func aMissingFileIsAnIOErrorNamingIt() throws {
        let path = "\(directory.path)/absent.jsonl"
        #expect(throws: CampaignError.io(.init("open", errno: .noSuchFileOrDirectory, target: path))) {
            try CampaignReader(.jsonl(path))
        }
        do {
            _ = try CampaignReader(.jsonl(path))
        } catch {
            #expect(error.description.hasPrefix("cannot read the campaign file: open \(path) failed: ENOENT"))
        }
    }

    @Test func aLineLongerThanTheBufferIsAnErrorNotGrowth() throws {
        let good = #"{"token": "\#(campaignToken(1))", "payload": {}}"#
        let long = #"{"token": "\#(campaignToken(1))", "payload": {"a": "\#(String(repeating: "x", count: 200))"}}"#
        for policy in [BadLinePolicy.abort, .skip] {
            let reader = try reader("\(good)\n\(good)\n\(long)\n\(good)\n", onBadLine: policy, maximumLineLength: 128)
            let capacity = reader.readBufferCapacity
            #expect(try reader.nextItem()?.line == 1)
            #expect(try reader.nextItem()?.line == 2)
            #expect(throws: CampaignError.lineTooLong(line: 3, limit: 128)) { try reader.nextItem() }
            #expect(reader.readBufferCapacity == capacity)
        }
        // A last line without a newline that is too long by one byte.
        let exact = String(repeating: "a", count: 128)
        let edge = try reader("\(exact)\n\(exact)a", onBadLine: .skip, maximumLineLength: 128)
        // Line 1 is exactly the limit: read, then skipped as bad JSON; line 2 is one byte over.
        #expect(throws: CampaignError.lineTooLong(line: 2, limit: 128)) { try edge.nextItem() }
        #expect(edge.skippedLines == [BadLine(line: 1, reason: "expected '{' at column 1")])
    }

    @Test func theDefaultLimitIsOneMebibyte() throws {
        let long = #"{"token": "\#(campaignToken(1))", "payload": {"a": "\#(String(repeating: "x", count: 1 << 20))"}}"#
        let reader = try reader("\(long)\n")
        #expect(throws: CampaignError.lineTooLong(line: 1, limit: 1 << 20)) { try reader.nextItem() }
        #expect(CampaignError.lineTooLong(line: 1, limit: 1 << 20).description
            == "line 1 is longer than 1048576 bytes; each line must hold one notification (is the file JSONL?)")
    }

    @Test func skipThroughLineResumesAfterTheCheckpointWithoutParsing() throws {
        let reader = try reader("""
            {"token": "\(campaignToken(1))", "payload": {}}
            this line is not JSON, but it is before the checkpoint
            {"token": "\(campaignToken(3))", "payload": {}}
            {"token": "\(campaignToken(4))", "payload": {}}
            {"token": "\(campaignToken(5))", "payload": {}}
            """)
        try reader.skip(throughLine: 3)
        #expect(reader.linesRead == 3)
        #expect(try reader.nextItem()?.line == 4)
        try reader.skip(throughLine: 2)  // already past: nothing happens
        #expect(try reader.nextItem()?.line == 5)
        try reader.skip(throughLine: 100)
        #expect(try reader.nextItem() == nil)
    }

    @Test func memoryDoesNotDependOnTheFileSize() throws {
        let count = 200_000
        var text = ""
        text.reserveCapacity(count * 110)
        for n in 1...count {
            text += #"{"token":"\#(campaignToken(n))","payload":{"n":\#(n)},"priority":10}"#
            text += n % 3 == 0 ? "\r\n" : "\n"
        }
        // A small buffer makes the reader refill (and move partial lines) thousands of times.
        let reader = try reader(text, maximumLineLength: 4096)
        let capacity = reader.readBufferCapacity
        #expect(capacity == 4098)
        var seen = 0
        var lastPayload = ""
        while let item = try reader.nextItem() {
            seen += 1
            #expect(item.line == seen)
            if seen == count { lastPayload = String(decoding: item.payload, as: UTF8.self) }
        }
        #expect(seen == count)
        #expect(lastPayload == #"{"n":200000}"#)
        #expect(reader.readBufferCapacity == capacity)
    }
}
