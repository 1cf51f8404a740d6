import Foundation
import SalvoIO
import Testing
import SalvoTestSupport

/// `salvo mock --protocol h2` as a process: the same first line as the binary mock, the
/// report on a signal, exit 2 on bad flags.
@Suite(.serialized, .timeLimit(.minutes(2)), .ownThread("mock-h2-command-tests")) struct MockH2CommandTests {
    @Test func itAnnouncesItsPortAnswersCurlAndReportsOnSIGTERM() async throws {
        let json = try await Self.runMock([]) { post in
            let (status, output, errors) = try await post(String(repeating: "ab", count: 32))
            #expect(status == 0 && output == "200", "curl: \(errors)")
        }
        #expect(json?["accepted"] as? Int == 1)
        #expect(json?["requests"] as? Int == 1)
        #expect(json?["connections"] as? Int == 1)
    }

    @Test func theNewRulesAndTheRequestRecordReachTheReport() async throws {
        let json = try await Self.runMock(["--internal-error-every", "2", "--response-delay-ms", "20:10", "--error-delay-ms", "0",
                                           "--record-requests"]) { post in
            var statuses: [String] = []
            for token in [String(repeating: "ab", count: 32), String(repeating: "ab", count: 32),
                          String(repeating: "ab", count: 30) + "fade"] {
                statuses.append(try await post(token).1)
            }
            #expect(statuses == ["200", "500", "410"])
        }
        #expect(json?["accepted"] as? Int == 1)
        #expect(json?["rejectedByReason"] as? [String: Int] == ["InternalServerError": 1, "ExpiredToken": 1])
        let recorded = json?["acceptedRequests"] as? [[String: String]]
        #expect(recorded == [["token": String(repeating: "ab", count: 32), "topic": "com.example.app", "pushType": "alert"]])
    }

    /// The channel management port is announced on the first line, after the gateway's,
    /// and serves a create; a broadcast to the new channel is counted by channel.
    @Test func itAnnouncesTheChannelsPortAndACreateWorksThere() async throws {
        let json = try await Self.runMock(["--channel-limit", "1"]) { post, curl, first in
            let fields = first.split(separator: " ")
            #expect(fields.count == 3 && fields[1].hasPrefix("gateway=") && fields[2].hasPrefix("channels="), "first line: \(first)")
            let channels = try #require(fields.last.flatMap { Int($0.dropFirst("channels=".count)) })
            let gateway = try #require(Int(fields[1].dropFirst("gateway=".count)))
            #expect(channels > 0 && channels != gateway)
            let create = ["--dump-header", "-", "--data-binary", #"{"message-storage-policy":0,"push-type":"LiveActivity"}"#,
                          "https://127.0.0.1:\(channels)/1/apps/com.example.app/channels"]
            let (status, head, errors) = try await curl(create)
            #expect(status == 0 && head.hasPrefix("HTTP/2 201"), "curl: \(head) \(errors)")
            let id = try #require(head.split(separator: "\r\n").first { $0.hasPrefix("apns-channel-id: ") }?.dropFirst(17))
            #expect(try await curl(create).1.contains(#"{"reason":"CannotCreateChannelConfig"}"#), "--channel-limit 1")
            let (_, answer, _) = try await curl(["--write-out", "%{http_code}", "--output", "/dev/null", "--header", "apns-channel-id: \(id)",
                                                 "--header", "apns-push-type: liveactivity", "--header", "apns-expiration: 0",
                                                 "--data-binary", #"{"aps":{"event":"update"}}"#,
                                                 "https://127.0.0.1:\(gateway)/4/broadcasts/apps/com.example.app"])
            #expect(answer == "200")
            _ = post
        }
        #expect(json?["channelOperations"] as? [String: Int] == ["create": 1])
        #expect(json?["rejectedChannelOperations"] as? [String: Int] == ["CannotCreateChannelConfig": 1])
        #expect(json?["accepted"] as? Int == 1)
        #expect((json?["broadcastsByChannel"] as? [String: Int])?.values.sorted() == [1])
    }

    /// Runs `salvo mock --protocol h2` with `arguments` and throwaway certificates, has
    /// `exercise` post to it (a well-formed alert to the token given: curl's exit status,
    /// the HTTP status, its errors), stops it with SIGTERM and returns its JSON report.
    static func runMock(_ arguments: [String],
                        _ exercise: (_ post: (String) async throws -> (Int32, String, String)) async throws -> Void) async throws -> [String: Any]? {
        try await runMock(arguments) { post, _, _ in try await exercise(post) }
    }

    /// `runMock`, with `exercise` given as well curl with the test CA trusted (its
    /// arguments after those) and the mock's first line.
    static func runMock(_ arguments: [String],
                        _ exercise: (_ post: @escaping (String) async throws -> (Int32, String, String),
                                     _ curl: @escaping ([String]) async throws -> (Int32, String, String), _ first: String) async throws -> Void)
        async throws -> [String: Any]? {
        let workspace = try SendCommandTests.Workspace()
        defer { workspace.remove() }
        let report = workspace.path("report.json")
        let process = try SendCommandTests.launch(
            ["mock", "--protocol", "h2", "--port", "0", "--cert", workspace.path("server.pem"),
             "--key", workspace.path("server.key"), "--report", report] + arguments)
        defer { process.kill(SIGKILL) }
        let first = try await process.firstLine(within: .seconds(20)).trimmingCharacters(in: .whitespacesAndNewlines)
        let port = try #require(first.split(separator: " ").first { $0.hasPrefix("gateway=") }.flatMap { Int($0.dropFirst(8)) },
                                "first line: \(first)")
        let curl = { (arguments: [String]) in
            try await Self.curl(["--silent", "--show-error", "--http2", "--cacert", workspace.path("ca.pem")] + arguments)
        }
        try await exercise({ token in
            try await curl(["--write-out", "%{http_code}",
                            "--output", "/dev/null", "--header", "apns-topic: com.example.app", "--header", "apns-push-type: alert",
                            "--data-binary", #"{"aps":{"alert":"hi"}}"#, "https://127.0.0.1:\(port)/3/device/\(token)"])
        }, curl, first)
        process.kill(SIGTERM)
        #expect(try await MockCommandTests.waitForExit(process) == 0)
        return try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
    }

    @Test(arguments: [
        (["--protocol", "h2", "--shutdown-every", "3"], "--shutdown-every is for the binary protocol"),
        (["--protocol", "h2", "--feedback-port", "0"], "--feedback-port is for the binary protocol"),
        (["--protocol", "h2", "--throttle-every", "0"], "--throttle-every must be at least 1"),
        (["--protocol", "h2", "--max-streams", "0"], "--max-streams must be"),
        (["--protocol", "h2", "--key-id", "K"], "--auth-key, --key-id and --team-id go together"),
        (["--protocol", "h2", "--auth-key", "/nonexistent/AuthKey.p8", "--key-id", "K", "--team-id", "T"], "/nonexistent/AuthKey.p8"),
        (["--goaway-every", "2"], "--goaway-every is for --protocol h2"),
        (["--response-delay-ms", "100"], "--response-delay-ms is for --protocol h2"),
        (["--record-requests"], "--record-requests is for --protocol h2"),
        (["--channels-port", "0"], "--channels-port is for --protocol h2"),
        (["--no-broadcast-capability"], "--no-broadcast-capability is for --protocol h2"),
        (["--protocol", "h2", "--channels-port", "70000"], "--channels-port must be 0...65535"),
        (["--protocol", "h2", "--channel-limit=-1"], "--channel-limit must not be negative"),
        (["--protocol", "h2", "--internal-error-every", "0"], "--internal-error-every must be at least 1"),
        (["--protocol", "h2", "--response-delay-ms", "200:x"], "--response-delay-ms wants D or D:JITTER"),
        (["--protocol", "h2", "--response-delay-ms", "-5"], "got '-5'"),
        (["--protocol", "h2", "--error-delay-ms", "600001"], "--error-delay-ms must be 0...600000"),
        (["--protocol", "h3"], "h3"),
    ])
    func badFlagsExitWithTwo(_ arguments: [String], _ message: String) async throws {
        let (status, _, errors) = try await SendCommandTests.run(["mock"] + arguments)
        #expect(status == 2, "\(arguments)")
        #expect(errors.contains(message), "stderr: \(errors)")
    }

    /// Runs curl to completion (its --max-time bounds it), both pipes drained at once; the
    /// waits are on a thread of their own, off the cooperative pool.
    static func curl(_ arguments: [String]) async throws -> (Int32, String, String) {
        try await onOwnThread { try blockingCurl(arguments) }
    }

    private static func blockingCurl(_ arguments: [String]) throws -> (Int32, String, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["--max-time", "10"] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        nonisolated(unsafe) var errors = Data()
        let drained = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            errors = err.fileHandleForReading.readDataToEndOfFile()
            drained.signal()
        }
        let output = out.fileHandleForReading.readDataToEndOfFile()
        drained.wait()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: errors, as: UTF8.self))
    }
}
