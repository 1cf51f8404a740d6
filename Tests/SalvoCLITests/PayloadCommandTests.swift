import SalvoWire
import Testing

/// `salvo payload` end to end: the built executable's output for the HTTP/2 provider API.
@Suite(.timeLimit(.minutes(2))) struct PayloadCommandTests {
    static let token = "8899aabbccddeeff00112233445566778899aabbccddeeff0011223344556677"
    static let liveActivity = ["payload", "--protocol", "h2", "--push-type", "liveactivity", "--timestamp", "1767225600"]

    /// Runs `salvo payload`, expecting success; returns stdout.
    static func output(_ arguments: [String]) async throws -> String {
        let (status, output, errors) = try await SendCommandTests.run(arguments, timeout: .seconds(30))
        #expect(status == 0, "stderr: \(errors)")
        return output
    }

    /// The lines after the line starting with `heading`, up to a blank line.
    static func section(_ heading: String, of output: String) -> [Substring] {
        let lines = output.split(separator: "\n", omittingEmptySubsequences: false)
        guard let start = lines.firstIndex(where: { $0.hasPrefix(heading) }) else { return [] }
        return Array(lines[(start + 1)...].prefix { !$0.isEmpty })
    }

    @Test func anHTTP2RequestShowsItsHeaderFieldsWithThePushTypesTopic() async throws {
        let output = try await Self.output(
            ["payload", "--protocol", "h2", "--push-type", "voip", "--topic", "com.example.app", "--token", Self.token,
             "--priority", "10", "--expiry", "1767225600", "--collapse-id", "call-7",
             "--apns-id", "123E4567-E89B-12D3-A456-426614174000", "--body", "Ring"])
        #expect(Self.section("Request header fields", of: output) == [
            ":method: POST",
            ":scheme: https",
            ":path: /3/device/\(Self.token)",
            "apns-push-type: voip",
            "apns-topic: com.example.app.voip",
            "apns-priority: 10",
            "apns-expiration: 1767225600",
            "apns-collapse-id: call-7",
            "apns-id: 123e4567-e89b-12d3-a456-426614174000",
            "content-length: 24",
        ])
        #expect(Self.section("Body, 24 bytes (voip limit 5120)", of: output) == [#"{"aps":{"alert":"Ring"}}"#])
        #expect(!output.contains("Frame"))
    }

    @Test func aBackgroundPushGoesAtPriorityFiveAndABareTopicStaysBare() async throws {
        let output = try await Self.output(
            ["payload", "--protocol", "h2", "--push-type", "background", "--topic", "com.example.app",
             "--custom", #"sync={"since":42}"#])
        let fields = Self.section("Request header fields", of: output)
        #expect(fields.contains("apns-topic: com.example.app"))
        #expect(fields.contains("apns-priority: 5"))
        #expect(fields.last == "content-length: 30")
        #expect(Self.section("Body", of: output) == [#"{"aps":{},"sync":{"since":42}}"#])
    }

    @Test func theBinaryFrameStaysTheDefault() async throws {
        let output = try await Self.output(["payload", "--body", "Hi"])
        #expect(output.contains("Payload, 22 bytes (limit 2048):"))
        #expect(output.contains("command 2 (frame)"))
        #expect(!output.contains("Request header fields"))
    }

    @Test func aLiveActivityStartUpdateAndEnd() async throws {
        let start = try await Self.output(Self.liveActivity + [
            "--event", "start", "--content-state", #"{"home":1,"away":0}"#, "--attributes-type", "MatchAttributes",
            "--attributes", #"{"teams":["A","B"]}"#, "--input-push-token", "--topic", "com.example.app"])
        #expect(Self.section("Body", of: start) == [
            #"{"aps":{"timestamp":1767225600,"event":"start","content-state":{"home":1,"away":0},"#
                + #""attributes-type":"MatchAttributes","attributes":{"teams":["A","B"]},"input-push-token":1}}"#,
        ])
        #expect(Self.section("Request header fields", of: start).contains("apns-topic: com.example.app.push-type.liveactivity"))

        let update = try await Self.output(Self.liveActivity + [
            "--event", "update", "--content-state", #"{"home":2,"away":0}"#, "--stale-date", "1767229200",
            "--relevance-score", "0.5"])
        #expect(Self.section("Body", of: update) == [
            #"{"aps":{"relevance-score":0.5,"timestamp":1767225600,"event":"update","content-state":{"home":2,"away":0},"stale-date":1767229200}}"#,
        ])

        let end = try await Self.output(Self.liveActivity + ["--event", "end", "--dismissal-date", "1767236400"])
        #expect(Self.section("Body", of: end) == [#"{"aps":{"timestamp":1767225600,"event":"end","dismissal-date":1767236400}}"#])
    }

    @Test(arguments: [(APNsPushType.voip, 5120), (.alert, 4096), (.liveactivity, 4096)])
    func theBodyIsShortenedToThePushTypesLimit(_ pushType: APNsPushType, _ limit: Int) async throws {
        var arguments = ["payload", "--protocol", "h2", "--push-type", pushType.name,
                         "--body", String(repeating: "a", count: 6000)]
        if pushType == .liveactivity {
            arguments += ["--timestamp", "1", "--event", "update", "--content-state", "{}"]
        }
        let output = try await Self.output(arguments)
        #expect(Self.section("Request header fields", of: output).last == "content-length: \(limit)")
        let body = Self.section("Body, \(limit) bytes (\(pushType) limit \(limit))", of: output)
        #expect(body.first?.utf8.count == limit)
        #expect(body.first?.contains("a…\"") == true)
    }

    @Test func maxLengthShortensBelowThePushTypesLimit() async throws {
        let output = try await Self.output(["payload", "--protocol", "h2", "--max-length", "3000",
                                            "--body", String(repeating: "a", count: 6000)])
        #expect(Self.section("Body, 3000 bytes (alert limit 4096, shortened to --max-length 3000)", of: output).count == 1)
    }

    @Test(arguments: [
        (["payload", "--push-type", "voip"], "--push-type is for the HTTP/2 provider API (--protocol h2)"),
        (["payload", "--topic", "com.example.app"], "--topic is for the HTTP/2 provider API (--protocol h2)"),
        (["payload", "--content-state", "{}"],
         "--content-state is for Live Activities: it needs --protocol h2 --push-type liveactivity"),
        (["payload", "--protocol", "h2", "--event", "end"], "--event is for Live Activities: it needs --push-type liveactivity"),
        (["payload", "--protocol", "h2", "--format", "simple"],
         "--format and --identifier describe binary frames; leave them out with --protocol h2"),
        (["payload", "--protocol", "h2", "--priority", "7"], "--priority must be 10, 5 or 1"),
        (["payload", "--protocol", "h2", "--push-type", "background", "--priority", "10"],
         "--priority must be 5 for --push-type background (APNs refuses it at 10)"),
        (["payload", "--protocol", "h2", "--push-type", "alert", "--max-length", "5120"],
         "--max-length 5120 is over the 4096 bytes APNs takes for --push-type alert"),
        (["payload", "--protocol", "h2", "--collapse-id", String(repeating: "c", count: 65)],
         "--collapse-id is 65 bytes; APNs takes at most 64"),
        (["payload", "--protocol", "h2", "--apns-id", "not-a-uuid"], "--apns-id 'not-a-uuid' is not a UUID (8-4-4-4-12 hex digits)"),
        (["payload", "--protocol", "h2", "--push-type", "liveactivity", "--timestamp", "1"],
         "--push-type liveactivity needs --event start|update|end"),
        (["payload", "--protocol", "h2", "--push-type", "liveactivity", "--event", "end"],
         "--push-type liveactivity needs --timestamp (UNIX seconds)"),
        (liveActivity + ["--event", "start", "--content-state", "{}", "--attributes", "{}"],
         "--event start needs --attributes-type"),
        (liveActivity + ["--event", "start", "--content-state", "{}", "--attributes-type", "T"], "--event start needs --attributes"),
        (liveActivity + ["--event", "start", "--attributes-type", "T", "--attributes", "{}"], "--event start needs --content-state"),
        (liveActivity + ["--event", "update"], "--event update needs --content-state"),
        (liveActivity + ["--event", "update", "--content-state", "{}", "--dismissal-date", "2"],
         "--dismissal-date goes only with --event end, not update"),
        (liveActivity + ["--event", "end", "--attributes-type", "T"], "--attributes-type goes only with --event start, not end"),
        (liveActivity + ["--event", "end", "--attributes", "{}"], "--attributes goes only with --event start, not end"),
        (liveActivity + ["--event", "end", "--input-push-token"], "--input-push-token goes only with --event start, not end"),
        (liveActivity + ["--event", "update", "--content-state", "{}", "--input-push-channel", "c"],
         "--input-push-channel goes only with --event start, not update"),
        (liveActivity + ["--event", "update", "--content-state", "[1]"], #"--content-state must be a JSON object, e.g. --content-state '{"score":2}'"#),
        (liveActivity + ["--event", "update", "--content-state", "{nope"], "--content-state: the value is not JSON"),
    ])
    func aRefusedFlagIsNamed(_ arguments: [String], _ message: String) async throws {
        let (status, output, errors) = try await SendCommandTests.run(arguments, timeout: .seconds(30))
        #expect(status == 2, "stdout: \(output)")
        #expect(errors.contains("salvo payload: \(message)"), "stderr: \(errors)")
    }
}
