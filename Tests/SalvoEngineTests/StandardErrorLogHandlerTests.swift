import Foundation
import Logging
import Testing
@testable import SalvoTelemetry

/// The CLI's log lines: text for people, one JSON object per line for log shippers.
@Suite struct StandardErrorLogHandlerTests {
    @Test func aTextLineHasTimeLevelLabelMessageAndSortedMetadata() {
        let line = StandardErrorLogHandler.line(format: .text, time: "2026-11-26T01:02:03.456Z", level: .warning,
                                                label: "salvo.sender", message: "connection attempt failed",
                                                metadata: ["shard": "0", "cause": "refused"])
        #expect(line == "2026-11-26T01:02:03.456Z warning salvo.sender: connection attempt failed cause=refused shard=0")
    }

    @Test func aJSONLineIsOneObjectThatParsesBackWithEveryFieldEscaped() throws {
        let message = "quote \" backslash \\ newline \n tab \t bell \u{7} é"
        let line = StandardErrorLogHandler.line(format: .json, time: "t", level: .error, label: "salvo.mock",
                                                message: message, metadata: ["cause": "\"x\"\n"])
        #expect(!line.contains("\n"), "one line per message")
        let object = try #require(try JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: String])
        #expect(object == ["time": "t", "level": "error", "label": "salvo.mock", "message": message, "cause": "\"x\"\n"])
    }

    @Test func aTimestampIsUTCWithMilliseconds() {
        let stamp = StandardErrorLogHandler.timestamp()
        #expect(stamp.count == 24 && stamp.hasSuffix("Z") && stamp.dropFirst(10).hasPrefix("T"), "\(stamp)")
    }
}
