import Foundation
import SalvoBlackBerry
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire
import Testing

/// Campaign lines: what is sent, and bad input named by its line, with nothing else lost.
@Suite(.timeLimit(.minutes(2))) struct PushChannelCampaignTests {
    static func write(_ bytes: [UInt8]) throws -> String {
        let path = NSTemporaryDirectory() + "salvo-bb-lines-\(UUID().uuidString)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    static func lines(_ lines: [String]) -> [UInt8] { Array(lines.joined(separator: "\n").utf8) }

    static func all(_ reader: PushChannelCampaignReader) throws -> [PushChannelItem] {
        var items: [PushChannelItem] = []
        while let item = try reader.next() { items.append(item) }
        return items
    }

    @Test func jsonlLinesCarryTokenTextPayloadAndAnOptionalHost() throws {
        let path = try Self.write(Self.lines([
            #"{"token":"A1","payload":"hello ✓"}"#,
            "",
            #"{"token":"B2","payload":"","host":"eu.noc.example:443"}"#,
        ]))
        defer { unlink(path) }
        let items = try Self.all(try PushChannelCampaignReader(.jsonl(path)))
        #expect(items == [PushChannelItem(line: 1, token: "A1", payload: Array("hello ✓".utf8)),
                          PushChannelItem(line: 3, token: "B2", payload: [], host: "eu.noc.example:443")])
    }

    @Test func aTokenListSendsOnePayloadToEveryToken() throws {
        let path = try Self.write(Self.lines(["t1", " t2 ", "t3"]))
        defer { unlink(path) }
        let items = try Self.all(try PushChannelCampaignReader(.tokens(path, payload: Array("hi".utf8))))
        #expect(items.map(\.token) == ["t1", "t2", "t3"] && items.allSatisfy { $0.payload == Array("hi".utf8) })
    }

    static let badLines: [([UInt8], String)] = [
        (Array(#"{"token":"x","payload":"caf"#.utf8) + [0xE9] + Array(#""}"#.utf8), "line 2: not UTF-8 text (byte 28)"),
        (Array(#"{"token":"","payload":"p"}"#.utf8), "line 2: empty token"),
        (Array(#"{"token":"x","payload":"\#(String(repeating: "é", count: 2049))"}"#.utf8),
         "line 2: payload is 4098 bytes (UTF-8), over the limit of 4096"),
        (Array(#"{"token":"x","payload":{"a":1}}"#.utf8), "line 2: \"payload\" is not a string"),
        (Array(#"{"token":"x\r","payload":"p"}"#.utf8), "line 2: control character in the token"),
        (Array("not json".utf8), "line 2: not a JSON object"),
    ]

    @Test(arguments: badLines)
    func aBadLineIsNamedAndTheLinesAroundItAreKept(bad: [UInt8], message: String) throws {
        let good1 = Array(#"{"token":"a","payload":"1"}"#.utf8), good3 = Array(#"{"token":"c","payload":"3"}"#.utf8)
        let path = try Self.write(good1 + [0x0A] + bad + [0x0A] + good3)
        defer { unlink(path) }
        let aborting = try PushChannelCampaignReader(.jsonl(path))
        #expect(try aborting.next()?.token == "a")
        do {
            _ = try aborting.next()
            Issue.record("line 2 was taken")
        } catch {
            #expect(error.description.hasPrefix(message), "\(error.description)")
        }
        let skipping = try PushChannelCampaignReader(.jsonl(path), onBadLine: .skip)
        #expect(try Self.all(skipping).map(\.line) == [1, 3])
        #expect(skipping.skippedLineCount == 1 && skipping.skippedLines.first?.line == 2)
    }

    @Test func aTokenListPayloadOverTheLimitIsRefusedBeforeAnythingIsRead() throws {
        let path = try Self.write(Self.lines(["t1"]))
        defer { unlink(path) }
        #expect(throws: CampaignError.invalidPayload(reason: "is 11 bytes, over the limit of 10")) {
            try PushChannelCampaignReader(.tokens(path, payload: Array("hello world".utf8)), maximumPayloadBytes: 10)
        }
    }
}
