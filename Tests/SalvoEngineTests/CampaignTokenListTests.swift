import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

@Suite struct CampaignTokenListTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    func tokens(_ text: String, payload: String = #"{ "aps": { "alert": "Sale" } }"#, onBadLine: BadLinePolicy = .abort)
        throws -> CampaignReader
    {
        let path = try directory.write("tokens.txt", text)
        return try CampaignReader(.tokens(path, payload: Array(payload.utf8)), onBadLine: onBadLine)
    }

    func payloadError(_ payload: String, maximumPayloadLength: Int = 2048) throws -> String? {
        let path = try directory.write("tokens.txt", campaignToken(1))
        do {
            _ = try CampaignReader(.tokens(path, payload: Array(payload.utf8)), maximumPayloadLength: maximumPayloadLength)
            return nil
        } catch {
            return error.description
        }
    }

    @Test func everyTokenGetsTheMinifiedSharedPayload() throws {
        let reader = try tokens("""
            # spring campaign
            \(campaignToken(1))
              \(campaignToken(2).uppercased())\t

               # indented comment
            \(campaignToken(4))\r
            \(campaignToken(5))
            """)
        let items = try readAll(reader)
        #expect(items.map(\.line) == [2, 3, 6, 7])
        #expect(items.map(\.token) == [1, 2, 4, 5].map(campaignToken))
        #expect(Set(items.map(\.payload)) == [#"{"aps":{"alert":"Sale"}}"#])
        #expect(items.allSatisfy { $0.expiry == nil && $0.priority == nil && $0.id == nil })
    }

    @Test func badTokensAreBadLines() throws {
        let reader = try tokens("\(campaignToken(1))\nzz\(campaignToken(2).dropFirst(2))\n\(campaignToken(3))1\n", onBadLine: .skip)
        #expect(try readAll(reader).map(\.line) == [1])
        #expect(reader.skippedLines == [
            BadLine(line: 2, reason: "non-hex character 'z' at position 1 of the device token"),
            BadLine(line: 3, reason: "device token has 65 hex characters, an odd number; APNs tokens are 32 bytes (64 hex characters)"),
        ])
        let aborting = try tokens("\(campaignToken(1))\n\(campaignToken(2)) trailing\n")
        _ = try aborting.nextItem()
        #expect(throws: CampaignError.badLine(BadLine(line: 2, reason: "non-hex character U+20 at position 65 of the device token")
            )) { try aborting.nextItem() }
    }

    @Test func thePayloadMustBeAJSONObjectWithinTheLimit() throws {
        #expect(try payloadError("[1, 2]") == "the payload for the token list must be a JSON object, not an array")
        #expect(try payloadError(#"{"aps": {"alert": "x"}"#)
            == "the payload for the token list is not valid JSON: expected ',' or '}' at column 23")
        #expect(try payloadError("{\n  \"aps\": {\n    \"alert\" \"x\"\n  }\n}\n")
            == "the payload for the token list is not valid JSON: line 3: expected ':' at column 13")
        #expect(try payloadError(#"{ "a" : "0123456789" }"#, maximumPayloadLength: 16)
            == "the payload for the token list is 18 bytes after minifying; the limit is 16")
        #expect(try payloadError(#"{ "a" : "0123456789" }"#, maximumPayloadLength: 18) == nil)
    }

    @Test func skipThroughLineWorksForTokenLists() throws {
        let reader = try tokens((1...10).map(campaignToken).joined(separator: "\n"))
        try reader.skip(throughLine: 7)
        #expect(try readAll(reader).map(\.line) == [8, 9, 10])
    }
}
