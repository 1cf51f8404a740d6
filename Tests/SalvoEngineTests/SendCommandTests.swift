import Foundation
import SalvoIO
import SalvoMock
import SalvoWire
import Testing
@testable import SalvoEngine

/// `salvo send` end to end: the built executable against the in-process mock.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SendCommandTests {
    /// The `salvo` executable next to the test bundle (`swift build --build-tests` builds both).
    static var salvo: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("salvo").path
    }

    struct Workspace {
        let directory: String
        init() throws {
            directory = NSTemporaryDirectory() + "salvo-send-\(UUID().uuidString)"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            try LoopbackRig.pki.write(to: directory)
        }
        func path(_ name: String) -> String { "\(directory)/\(name)" }
        func remove() { try? FileManager.default.removeItem(atPath: directory) }

        func tlsArguments() -> [String] {
            ["--cert", path("client.pem"), "--key", path("client.key"), "--ca", path("ca.pem")]
        }

        /// A JSONL campaign; line n carries token n and a payload naming n.
        func writeCampaign(lines: Int, badLines: [Int: String] = [:]) throws -> String {
            var text = ""
            text.reserveCapacity(lines * 140)
            for n in 1...lines {
                if let bad = badLines[n] {
                    text += bad + "\n"
                } else {
                    text += #"{"token":"\#(LoopbackRig.token(n).hex)","payload":\#(String(decoding: LoopbackRig.payload(n), as: UTF8.self))}"# + "\n"
                }
            }
            let file = path("campaign.jsonl")
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }
    }

    static func launch(_ arguments: [String]) throws -> (Process, Pipe, Pipe) {
        #expect(FileManager.default.isExecutableFile(atPath: salvo), "build the salvo executable first: \(salvo)")
        let process = Process()
        process.executableURL = URL(fileURLWithPath: salvo)
        process.arguments = arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        return (process, out, err)
    }

    /// Runs to completion (bounded); returns exit status, stdout and stderr.
    static func run(_ arguments: [String], timeout: Duration = .seconds(120)) throws -> (Int32, String, String) {
        let (process, out, err) = try launch(arguments)
        let output = out.fileHandleForReading.readDataToEndOfFile()
        let errors = err.fileHandleForReading.readDataToEndOfFile()
        let deadline = Instant.now() + timeout
        while process.isRunning && Instant.now() < deadline { usleep(10_000) }
        if process.isRunning { process.terminate(); Issue.record("salvo did not finish in time") }
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: errors, as: UTF8.self))
    }

    @Test func aCampaignIsSentWithAReportAndARejectedList() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig(plan: FailurePlan(invalidTokenSuffix: [0x07]))
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 3000)
        let (status, output, errors) = try Self.run(
            ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--error-wait-ms", "200",
             "--report", workspace.path("report.json"), "--rejected", workspace.path("rejected.csv")] + workspace.tlsArguments())
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.contains("accounting: complete"))
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: workspace.path("report.json")))) as! [String: Any]
        let invalid = (1...3000).filter { $0 & 0xff == 0x07 }
        #expect(report["submitted"] as? Int == 3000)
        #expect(report["rejected"] as? Int == invalid.count)
        #expect(report["accepted"] as? Int == 3000 - invalid.count)
        #expect((report["rejected_by_status"] as? [String: Int]) == ["invalid_token": invalid.count])
        for key in ["failed", "resent", "reconnects", "possible_duplicates", "window_overruns", "seconds", "rate_per_s"] {
            #expect(report[key] != nil, "report lacks \(key)")
        }
        let csv = try String(contentsOfFile: workspace.path("rejected.csv"), encoding: .utf8).split(separator: "\n")
        #expect(csv.first == "token,status,status_name")
        #expect(Set(csv.dropFirst()) == Set(invalid.map { "\(LoopbackRig.token($0).hex),8,invalid_token" }))
        #expect(rig.statistics { $0.accepted >= 3000 - invalid.count }.accepted == 3000 - invalid.count)
    }

    @Test func aBadLineAbortsWithItsNumberOrIsSkippedAndListed() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 100, badLines: [40: #"{"token":"abc","payload":{}}"#, 70: "{broken"])
        let base = ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--error-wait-ms", "50"]
            + workspace.tlsArguments()

        let (aborted, _, abortErrors) = try Self.run(base)
        #expect(aborted == 2)
        #expect(abortErrors.contains("line 40"))
        #expect(rig.statistics { $0.accepted >= 39 }.accepted == 39, "the lines before the bad one are sent, none after")

        let (skipped, _, skipErrors) = try Self.run(base + ["--on-bad-line", "skip", "--report", workspace.path("r.json")])
        #expect(skipped == 0, "stderr: \(skipErrors)")
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: workspace.path("r.json")))) as! [String: Any]
        #expect(report["accepted"] as? Int == 98)
        let bad = (report["bad_lines"] as? [[String: Any]])?.compactMap { $0["line"] as? Int }
        #expect(bad == [40, 70])
    }

    @Test func killedMidCampaignAndResumedNothingIsLost() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // Stalls slow the gateway down so that the kill lands mid-campaign, after the
        // checkpoint moved: it moves once records are released (the retention, 400 ms here).
        let rig = try LoopbackRig(plan: FailurePlan(stallEvery: 2000, stallDuration: .milliseconds(50)))
        defer { rig.gateway.stop() }
        let lines = 60_000
        let campaign = try workspace.writeCampaign(lines: lines)
        let checkpoint = workspace.path("campaign.ckpt")
        let arguments = ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--error-wait-ms", "200",
                         "--retention-ms", "300", "--shards", "1", "--checkpoint", checkpoint] + workspace.tlsArguments()

        let (first, _, _) = try Self.launch(arguments)
        // Wait (bounded) until the checkpoint shows progress, then kill -9.
        let deadline = Instant.now() + .seconds(60)
        var recorded = 0
        while Instant.now() < deadline {
            recorded = (try? Checkpoint(path: checkpoint).load() ?? 0) ?? 0
            if recorded > 0 { break }
            usleep(5_000)
        }
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        #expect(recorded > 0, "the checkpoint never advanced")
        let acceptedBeforeResume = rig.gateway.statistics().accepted
        #expect(acceptedBeforeResume < lines, "the campaign finished before the kill; nothing was tested")

        let (status, output, errors) = try Self.run(arguments + ["--resume"])
        #expect(status == 0, "stderr: \(errors)")
        #expect(errors.contains("resuming after line"))
        #expect(output.contains("accounting: complete"))
        let mock = rig.statistics { $0.accepted - $0.duplicates >= lines }
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: lines + 1, excluding: [0]))
        // Duplicates are bounded by what was not final at the checkpoint.
        #expect(mock.accepted - lines == mock.duplicates)
        #expect(mock.duplicates <= lines - recorded)
    }

    @Test func theReportCarriesTheErrorLatencies() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // Answered at once: every error response arrives within the error wait.
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: 500))
        defer { rig.gateway.stop() }
        let lines = 5000
        let campaign = try workspace.writeCampaign(lines: lines)
        let (status, output, errors) = try Self.run(
            ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--error-wait-ms", "400",
             "--report", workspace.path("report.json")] + workspace.tlsArguments())
        #expect(status == 0, "stderr: \(errors)")
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: workspace.path("report.json")))) as! [String: Any]
        let mock = rig.statistics { $0.accepted + $0.rejected >= lines }
        #expect(mock.rejected > 0)
        #expect(report["rejected"] as? Int == mock.rejected)

        let latency = try #require(report["error_latency"] as? [String: Any], "report: \(report)")
        let count = latency["count"] as? Int
        #expect(count == mock.rejected, "one latency per error response")
        let p50 = try #require((latency["p50_ms"] as? NSNumber)?.doubleValue)
        let p99 = try #require((latency["p99_ms"] as? NSNumber)?.doubleValue)
        let maximum = try #require((latency["max_ms"] as? NSNumber)?.doubleValue)
        #expect(0 < p50 && p50 <= p99 && p99 <= maximum, "p50 \(p50), p99 \(p99), max \(maximum)")
        #expect(report["late_errors"] as? Int == 0)
        #expect(report["window_overruns"] as? Int == 0)
        #expect((report["error_wait_ms"] as? NSNumber)?.doubleValue == 400, "the configured wait, never raised")
        #expect((report["error_wait_raises"] as? [Any])?.isEmpty == true)
        #expect(output.contains("error responses: \(count ?? -1),"), "stdout: \(output)")
        #expect(!output.contains("arrived after the error wait"))
    }
}
