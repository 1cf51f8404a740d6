import SalvoWire
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

@Suite struct CampaignHTTP2LinesTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    static let uuid = "1f0ecb9c-0d7a-4b5e-9c53-2a0d3e7c8b41"

    func reader(_ text: String, for campaignProtocol: CampaignProtocol = .http2(defaultPushType: .alert),
                onBadLine: BadLinePolicy = .abort) throws -> CampaignReader {
        let path = try directory.write("campaign.jsonl", text)
        return try CampaignReader(.jsonl(path), for: campaignProtocol, onBadLine: onBadLine)
    }

    /// The error that stops reading `text` under `.abort`, as the user sees it; nil when every line is good.
    func firstError(_ text: String, for campaignProtocol: CampaignProtocol = .http2(defaultPushType: .alert)) throws -> String? {
        let reader = try reader(text, for: campaignProtocol)
        do {
            while try reader.nextItem() != nil {}
            return nil
        } catch {
            return error.description
        }
    }

    /// A line for token `n` with `payload` and then `rest` (`, "key": value` pairs, or nothing).
    func line(_ n: Int = 1, payload: String = #"{"aps":{}}"#, _ rest: String = "") -> String {
        #"{"token": "\#(campaignToken(n))", "payload": \#(payload)\#(rest)}"#
    }

    /// A payload `{"a":"xx…"}` of exactly `length` bytes minified.
    func payload(length: Int) -> String {
        #"{"a": "\#(String(repeating: "x", count: length - 8))"}"#
    }

    // MARK: - Good lines

    @Test func aChannelIDInsteadOfATokenMakesABroadcast() throws {
        let channel = "dHN0LXNyY2gtY2hubA=="
        let reader = try reader("""
            {"channel_id": "\(channel)", "payload": {"aps": {"event": "update"}}, "priority": 5, "expiration": 0, "topic": "com.example.app"}
            \(line(2))
            {"channel_id": "\(channel)", "token": null, "push_type": "liveactivity", "payload": \(payload(length: BroadcastRules.payloadLimit))}
            """)
        let items = try readAll(reader)
        try #require(items.count == 3)
        #expect(items[0].request == ReadRequest(topic: "com.example.app", channelID: channel))
        #expect(items[0].expiry == 0 && items[0].priority == 5 && items[0].token == String(repeating: "0", count: 64))
        #expect(items[1].request == ReadRequest())
        #expect(items[2].request == ReadRequest(pushType: .liveactivity, channelID: channel))
    }

    @Test func aBroadcastLineThatCouldOnlyBeRefusedSaysWhy() throws {
        let channel = #""channel_id": "dHN0LXNyY2gtY2hubA==""#
        let cases: [(String, String)] = [
            (#"{\#(channel), "token": "\#(campaignToken(1))", "payload": {}}"#, #"give "token" (a device) or "channel_id" (a broadcast), not both"#),
            (#"{\#(channel), "push_type": "alert", "payload": {}}"#, #""push_type" must be liveactivity (or absent), not alert"#),
            (#"{\#(channel), "collapse_id": "x", "payload": {}}"#, #""collapse_id" does not apply to a broadcast"#),
            (#"{\#(channel), "topic": "com.example.app.push-type.liveactivity", "payload": {}}"#, "the bare bundle id"),
            (#"{"channel_id": "not base64!", "payload": {}}"#, #""channel_id" must be 1 to 255 base64 characters"#),
            (#"{"channel_id": "", "payload": {}}"#, #""channel_id" must be 1 to 255 base64 characters"#),
            (#"{"channel_id": 7, "payload": {}}"#, #""channel_id" must be a string"#),
            (#"{\#(channel), "payload": \#(payload(length: BroadcastRules.payloadLimit + 1))}"#, "payload is 5121 bytes; the limit for a broadcast is 5120"),
            (#"{"payload": {}}"#, #"missing "token" (or "channel_id" for a broadcast)"#),
        ]
        for (text, expected) in cases {
            let error = try firstError(text)
            #expect(error?.contains(expected) == true, "\(text): \(error ?? "no error")")
        }
        let binary = try firstError(#"{\#(channel), "payload": {}}"#, for: .binary(maximumPayloadLength: 2048))
        #expect(binary?.contains("only the HTTP/2 provider API has (--protocol h2)") == true, "\(binary ?? "no error")")
    }

    @Test func everyRequestFieldIsRead() throws {
        let reader = try reader("""
            \(line(1, #", "push_type": "voip", "topic": "com.example.app.voip", "collapse_id": "score-1", "apns_id": "\#(Self.uuid)", "expiration": 1767225600, "priority": 1, "id": 7"#))
            \(line(2, #", "push_type": "background", "priority": 5, "expiry": 0"#))
            \(line(3, #", "push_type": null, "topic": null, "collapse_id": null, "apns_id": null, "expiration": null, "priority": null"#))
            \(line(4, #", "apns_id": "\#(Self.uuid.uppercased())", "topic": "A-b_9.c""#))
            """)
        let id = try #require(APNsID(Self.uuid))
        #expect(try readAll(reader) == [
            ReadItem(line: 1, token: campaignToken(1), payload: #"{"aps":{}}"#, expiry: 1_767_225_600, priority: 1, id: "7",
                     request: ReadRequest(pushType: .voip, topic: "com.example.app.voip", collapseID: "score-1", apnsID: id)),
            ReadItem(line: 2, token: campaignToken(2), payload: #"{"aps":{}}"#, expiry: 0, priority: 5,
                     request: ReadRequest(pushType: .background)),
            ReadItem(line: 3, token: campaignToken(3), payload: #"{"aps":{}}"#),
            ReadItem(line: 4, token: campaignToken(4), payload: #"{"aps":{}}"#, request: ReadRequest(topic: "A-b_9.c", apnsID: id)),
        ])
        #expect(reader.skippedLineCount == 0)
    }

    @Test func everyPushTypeNameIsRead() throws {
        let text = APNsPushType.allCases.enumerated().map { index, type in
            // A background push may only have priority 5; the others take 10.
            line(index, #", "push_type": "\#(type.name)", "priority": \#(type == .background ? 5 : 10)"#)
        }.joined(separator: "\n")
        #expect(try readAll(try reader(text)).map(\.request.pushType) == APNsPushType.allCases)
    }

    @Test func escapedStringsAreDecoded() throws {
        // \u00e9 is é, two bytes: 32 of them are a collapse id of exactly 64 bytes.
        let fullCollapseID = String(repeating: #"\u00e9"#, count: 32)
        // 255 bytes of topic, written with escapes as 1 + 127 × 6 + … bytes of JSON.
        let fullTopic = "a" + String(repeating: #"\u002ea"#, count: 127)
        let reader = try reader("""
            \(line(1, #", "push_type": "\u0076oip", "topic": "com.example\u002eapp\u002evoip", "collapse_id": "\u00e9t\u00e9 \"1\"", "apns_id": "\#(Self.uuid.replacingOccurrences(of: "-", with: #"\u002d"#))""#))
            \(line(2, #", "topic": "\#(fullTopic)", "collapse_id": "\#(fullCollapseID)""#))
            \(line(3, #", "topic": "plain.topic", "collapse_id": "plain\/slash""#))
            """)
        let items = try readAll(reader)
        #expect(items.map(\.request) == [
            ReadRequest(pushType: .voip, topic: "com.example.app.voip", collapseID: #"été "1""#, apnsID: APNsID(Self.uuid)),
            ReadRequest(topic: "a" + String(repeating: ".a", count: 127), collapseID: String(repeating: "é", count: 32)),
            ReadRequest(topic: "plain.topic", collapseID: "plain/slash"),
        ])
        #expect(items[1].request.topic?.utf8.count == 255)
        #expect(items[1].request.collapseID?.utf8.count == 64)
    }

    @Test func expirationIsExpiryByItsHTTP2NameInBothProtocols() throws {
        let text = line(1, #", "expiration": 1767225600"#)
        for campaignProtocol in [CampaignProtocol.http2(defaultPushType: .alert), .binary(maximumPayloadLength: 2048)] {
            #expect(try readAll(try reader(text, for: campaignProtocol)).map(\.expiry) == [1_767_225_600])
            // null means absent, so one of the two given is no conflict.
            #expect(try readAll(try reader(line(1, #", "expiry": null, "expiration": 5"#), for: campaignProtocol))
                .map(\.expiry) == [5])
            #expect(try firstError(line(1, #", "expiry": 1, "expiration": 1"#), for: campaignProtocol)
                == #"line 1: "expiry" and "expiration" are the same field; give one of them"#)
        }
    }

    @Test func theBinaryProtocolIgnoresTheHTTP2Keys() throws {
        // Keys the binary protocol does not know, however wrong for HTTP/2, repeated too.
        let reader = try reader("""
            \(line(1, #", "push_type": "bogus", "topic": 5, "topic": "..", "collapse_id": "\#(String(repeating: "c", count: 100))", "apns_id": "x", "priority": 10"#))
            """, for: .binary(maximumPayloadLength: 2048))
        #expect(try readAll(reader) == [ReadItem(line: 1, token: campaignToken(1), payload: #"{"aps":{}}"#, priority: 10)])
        // Its rules stay: priority 5 or 10, its own payload limit.
        #expect(try firstError(line(1, #", "priority": 1"#), for: .binary(maximumPayloadLength: 2048))
            == #"line 1: "priority" must be 5 or 10, not 1"#)
        #expect(try firstError(line(1, payload: payload(length: 2049)), for: .binary(maximumPayloadLength: 2048))
            == "line 1: payload is 2049 bytes; the limit is 2048")
    }

    // MARK: - Bad lines

    /// A line's topic is the whole apns-topic: it must end in its push type's suffix, and
    /// in no other type's (APNs answers 400 InvalidPushType). Such a line is a bad line,
    /// before anything is sent, whichever type and suffix.
    @Test func aTopicThatCannotCarryItsPushTypeIsABadLine() throws {
        for type in APNsPushType.allCases {
            let priority = type == .background ? #", "priority": 5"# : ""
            let named = #", "push_type": "\#(type.name)""# + priority
            if let suffix = type.topicSuffix {
                #expect(try firstError(line(1, named + #", "topic": "com.example.app\#(suffix)""#)) == nil, "\(type)")
                #expect(try firstError(line(1, named + #", "topic": "com.example.app""#))
                    == #"line 1: "topic" com.example.app does not end in "\#(suffix)": a \#(type) push goes to the app's bundle id followed by "\#(suffix)""#)
            } else {
                #expect(try firstError(line(1, named + #", "topic": "com.example.app""#)) == nil, "\(type)")
                #expect(try firstError(line(1, named + #", "topic": "com.example.app.voip""#))
                    == #"line 1: "topic" com.example.app.voip ends in ".voip", the suffix of voip pushes, but the line's "push_type" is \#(type): give "push_type": "voip", or the bare bundle id"#)
            }
        }
        // A line without a push type is the default's: --push-type's.
        #expect(try firstError(line(1, #", "topic": "com.example.app.push-type.widgets""#))
            == #"line 1: "topic" com.example.app.push-type.widgets ends in ".push-type.widgets", the suffix of widgets pushes, but the line names no "push_type" (the default is alert): give "push_type": "widgets", or the bare bundle id"#)
        #expect(try firstError(line(1, #", "topic": "com.example.app.voip""#), for: .http2(defaultPushType: .voip)) == nil)
        // .voip-ptt is push to talk's, not voip's with something after it.
        #expect(try firstError(line(1, #", "push_type": "voip", "topic": "com.example.app.voip-ptt""#))
            == #"line 1: "topic" com.example.app.voip-ptt does not end in ".voip": a voip push goes to the app's bundle id followed by ".voip""#)
        // Under --on-bad-line skip it is listed and the rest is read.
        let reader = try reader("\(line(1, #", "push_type": "voip", "topic": "com.example.app""#))\n\(line(2))\n", onBadLine: .skip)
        #expect(try readAll(reader).map(\.token) == [campaignToken(2)])
        #expect(reader.skippedLines.map(\.line) == [1])
    }

    @Test func badLinesAreNamedWithTheirLineAndReason() throws {
        let pushTypes = "alert, background, voip, complication, fileprovider, mdm, location, liveactivity, pushtotalk, widgets, controls"
        let cases: [(rest: String, reason: String)] = [
            (#", "push_type": "Alert""#, #""push_type" must be one of \#(pushTypes); not "Alert""#),
            (#", "push_type": "voip ""#, #""push_type" must be one of \#(pushTypes); not "voip ""#),
            (#", "push_type": 2"#, #""push_type" must be one of \#(pushTypes); not 2"#),
            (#", "push_type": "\#(String(repeating: "v", count: 50))""#,
             #""push_type" must be one of \#(pushTypes); not "\#(String(repeating: "v", count: 39))…"#),
            (#", "topic": 5"#, #""topic" must be a string, not a number"#),
            (#", "topic": """#, #""topic" is empty"#),
            (#", "topic": "\#(String(repeating: "t", count: 256))""#, #""topic" is 256 bytes; the limit is 255"#),
            (#", "topic": "com..app""#, #""topic" must be a bundle id: dot-separated parts of letters, digits, '-' and '_'; not "com..app""#),
            (#", "topic": ".com.app""#, #""topic" must be a bundle id: dot-separated parts of letters, digits, '-' and '_'; not ".com.app""#),
            (#", "topic": "com.app.""#, #""topic" must be a bundle id: dot-separated parts of letters, digits, '-' and '_'; not "com.app.""#),
            (#", "topic": "com.my app""#, #""topic" must be a bundle id: dot-separated parts of letters, digits, '-' and '_'; not "com.my app""#),
            (#", "topic": "com.exämple""#, #""topic" must be a bundle id: dot-separated parts of letters, digits, '-' and '_'; not "com.exämple""#),
            (#", "collapse_id": ["a"]"#, #""collapse_id" must be a string, not an array"#),
            (#", "collapse_id": """#, #""collapse_id" is empty"#),
            (#", "collapse_id": "\#(String(repeating: "c", count: 65))""#, #""collapse_id" is 65 bytes; the limit is 64"#),
            (#", "collapse_id": "\#(String(repeating: "é", count: 33))""#, #""collapse_id" is 66 bytes; the limit is 64"#),
            (#", "collapse_id": "a\nb""#, #""collapse_id" must not contain NUL, CR or LF (an HTTP/2 header value cannot)"#),
            (#", "collapse_id": "a\u0000""#, #""collapse_id" must not contain NUL, CR or LF (an HTTP/2 header value cannot)"#),
            (#", "collapse_id": " a""#, #""collapse_id" must not start or end with a space or tab (an HTTP/2 header value cannot)"#),
            (#", "collapse_id": "a\t""#, #""collapse_id" must not start or end with a space or tab (an HTTP/2 header value cannot)"#),
            (#", "apns_id": "abc""#, #""apns_id" must be a UUID (8-4-4-4-12 hex digits); not "abc""#),
            (#", "apns_id": "\#(Self.uuid.replacingOccurrences(of: "-", with: ""))""#,
             #""apns_id" must be a UUID (8-4-4-4-12 hex digits); not "1f0ecb9c0d7a4b5e9c532a0d3e7c8b41""#),
            (#", "apns_id": 12"#, #""apns_id" must be a UUID (8-4-4-4-12 hex digits); not 12"#),
            (#", "priority": 7"#, #""priority" must be 10, 5 or 1, not 7"#),
            (#", "priority": "1""#, #""priority" must be 10, 5 or 1, not "1""#),
            (#", "push_type": "background", "priority": 10"#, #""priority" must be 5 for a background push, not 10"#),
            (#", "priority": 1, "push_type": "background""#, #""priority" must be 5 for a background push, not 1"#),
            (#", "expiry": 1, "expiration": 2"#, #""expiry" and "expiration" are the same field; give one of them"#),
            (#", "expiration": -1"#, #""expiration" must be an integer from 0 to 4294967295 (UNIX seconds), not -1"#),
            (#", "expiration": "soon""#, #""expiration" must be an integer from 0 to 4294967295 (UNIX seconds), not "soon""#),
            (#", "push_type": "alert", "push_type": "alert""#, #""push_type" is given more than once"#),
            (#", "topic": "a", "topic": null"#, #""topic" is given more than once"#),
            (#", "collapse_id": "a", "collapse_id": "b""#, #""collapse_id" is given more than once"#),
            (#", "apns_id": null, "apns_id": null"#, #""apns_id" is given more than once"#),
            (#", "expiration": 1, "expiration": 1"#, #""expiration" is given more than once"#),
        ]
        let good = line(1)
        for (rest, reason) in cases {
            // The bad line is line 3, after a good line and a blank one.
            let error = try firstError("\(good)\n\n\(line(3, rest))\n\(good)\n")
            #expect(error == "line 3: \(reason)", "for \(rest)")
        }
    }

    @Test func aBackgroundPushMustHavePriorityFive() throws {
        let background = CampaignProtocol.http2(defaultPushType: .background)
        // Without a priority the sender sends 5; 5 itself is fine.
        let reader = try reader("\(line(1))\n\(line(2, #", "priority": 5"#))\n\(line(3, #", "push_type": "alert", "priority": 10"#))",
                                for: background)
        #expect(try readAll(reader).map(\.priority) == [nil, 5, 10])
        // The default push type counts as the line's when it names none.
        #expect(try firstError(line(1, #", "priority": 10"#), for: background)
            == #"line 1: "priority" must be 5 for a background push, not 10"#)
        #expect(try firstError(line(1, #", "priority": 1"#), for: background)
            == #"line 1: "priority" must be 5 for a background push, not 1"#)
        #expect(try firstError(line(1, #", "push_type": "background", "priority": 1"#)) == #"line 1: "priority" must be 5 for a background push, not 1"#)
    }

    @Test func thePayloadLimitIsThePushTypes() throws {
        #expect(try firstError(line(1, payload: payload(length: 4096))) == nil)
        #expect(try firstError(line(1, payload: payload(length: 4200))) == "line 1: payload is 4200 bytes; the limit for alert is 4096")
        #expect(try firstError(line(1, payload: payload(length: 5120), #", "push_type": "voip""#)) == nil)
        #expect(try firstError(line(1, payload: payload(length: 5121), #", "push_type": "voip""#))
            == "line 1: payload is 5121 bytes; the limit for voip is 5120")
        let voip = CampaignProtocol.http2(defaultPushType: .voip)
        #expect(try firstError(line(1, payload: payload(length: 5120)), for: voip) == nil)
        #expect(try firstError(line(1, payload: payload(length: 4097), #", "push_type": "mdm""#), for: voip)
            == "line 1: payload is 4097 bytes; the limit for mdm is 4096")
        // Any line may be a voip push, so the reader holds voip's limit.
        #expect(try reader(line(1)).maximumPayloadLength == 5120)
        #expect(CampaignProtocol.http2(defaultPushType: .alert).largestPayloadLength == 5120)
        #expect(CampaignProtocol.binary(maximumPayloadLength: 2048).largestPayloadLength == 2048)
    }

    @Test func aTokenListTakesTheDefaultPushTypesPayloadLimit() throws {
        let path = try directory.write("tokens.txt", "\(campaignToken(1))\n\(campaignToken(2))\n")
        func open(_ payload: String, _ pushType: APNsPushType = .alert) throws(CampaignError) -> CampaignReader {
            try CampaignReader(.tokens(path, payload: Array(payload.utf8)), for: .http2(defaultPushType: pushType))
        }
        let reader = try open(payload(length: 4096))
        #expect(reader.maximumPayloadLength == 4096)
        var payloads: [Int] = []
        while let item = try reader.nextItem() {
            payloads.append(item.payload.count)
            #expect(ReadRequest(item.request) == ReadRequest())
        }
        #expect(payloads == [4096, 4096])
        #expect(throws: CampaignError.invalidPayload(reason: "is 4097 bytes after minifying; the limit for alert is 4096")) {
            try open(payload(length: 4097))
        }
        #expect(try open(payload(length: 5120), .voip).maximumPayloadLength == 5120)
        #expect(CampaignFile(.tokens(path, payload: []), for: .http2(defaultPushType: .alert)).maximumPayloadLength == 4096)
    }

    @Test func theSkipPolicyRecordsHTTP2BadLinesOnceEach() throws {
        let reader = try reader("""
            \(line(1, #", "push_type": "voip""#))
            \(line(2, #", "push_type": "VOIP""#))
            \(line(3, #", "collapse_id": "\#(String(repeating: "c", count: 65))""#))

            \(line(5, payload: payload(length: 4097)))
            \(line(6, #", "topic": "com.example.app""#))
            \(line(7, #", "push_type": "background", "priority": 10"#))
            """, onBadLine: .skip)
        let items = try readAll(reader)
        #expect(items.map(\.line) == [1, 6])
        #expect(items.map(\.request) == [ReadRequest(pushType: .voip), ReadRequest(topic: "com.example.app")])
        #expect(reader.skippedLines.map(\.line) == [2, 3, 5, 7])
        #expect(reader.skippedLines[1] == BadLine(line: 3, reason: #""collapse_id" is 65 bytes; the limit is 64"#))
        #expect(reader.skippedLines[2].description == "line 5: payload is 4097 bytes; the limit for alert is 4096")
        #expect(reader.skippedLineCount == 4)
    }

    @Test func everySkippedLineIsListedOnce() throws {
        let reader = try reader((1...50).map { n in n % 3 == 0 ? line(n) : "bad \(n)" }.joined(separator: "\n"), onBadLine: .skip)
        #expect(try readAll(reader).count == 16)
        let bad = (1...50).filter { $0 % 3 != 0 }
        #expect(reader.skippedLines.map(\.line) == bad)
        #expect(reader.skippedLineCount == bad.count)
    }

    // MARK: - As a notification source

    @Test func aCampaignFileReadForHTTP2YieldsTheRequestFields() throws {
        let path = try directory.write("campaign.jsonl", """
            \(line(1, #", "push_type": "liveactivity", "topic": "com.example.app.push-type.liveactivity", "collapse_id": "c", "apns_id": "\#(Self.uuid)""#))
            \(line(2))
            """)
        let file = CampaignFile(.jsonl(path), for: .http2(defaultPushType: .alert))
        #expect(file.campaignProtocol == .http2(defaultPushType: .alert))
        #expect(file.maximumPayloadLength == 5120)
        let reader = try file.makeReader()
        let first = try #require(try reader.next())
        #expect(ReadRequest(try #require(first.request).pointee)
            == ReadRequest(pushType: .liveactivity, topic: "com.example.app.push-type.liveactivity", collapseID: "c",
                           apnsID: APNsID(Self.uuid)))
        #expect(first.position == SourcePosition(offset: 0, sequence: 1))
        let second = try #require(try reader.next())
        // A line that sets no header of its own leaves every one to the sender.
        #expect(second.request == nil)
        // Read again from its position (a resend), it has the same fields.
        try reader.seek(to: first.position)
        #expect(try #require(try reader.next()).request.map { ReadRequest($0.pointee) }?.topic
                == "com.example.app.push-type.liveactivity")
        // The binary initialiser still reads for the binary protocol.
        #expect(CampaignFile(.jsonl(path)).campaignProtocol == .binary(maximumPayloadLength: 2048))
        #expect(try CampaignFile(.jsonl(path)).makeReader().next()?.request == nil)
    }
}
