import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// `salvo send` end to end: the built executable against the in-process mock.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("send-command-tests")) struct SendCommandTests {
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

        /// `salvo send` (binary) of a fresh `lines`-line campaign to the gateway at `port`,
        /// checkpointed, with `options` and the workspace's TLS files; and the checkpoint's path.
        func checkpointedSend(port: Int, lines: Int, badLines: [Int: String] = [:], _ options: [String]) throws
            -> (arguments: [String], checkpoint: String)
        {
            let campaign = try writeCampaign(lines: lines, badLines: badLines)
            let checkpoint = path("campaign.ckpt")
            return (["send", "--gateway", "127.0.0.1:\(port)", "--input", campaign, "--checkpoint", checkpoint] + options
                + tlsArguments(), checkpoint)
        }

        /// A JSONL campaign; line n carries token `first + n - 1` and a payload naming it.
        @discardableResult
        func writeCampaign(lines: Int, first: Int = 1, badLines: [Int: String] = [:], name: String = "campaign.jsonl")
            throws -> String
        {
            var text = ""
            text.reserveCapacity(lines * 140)
            for n in 1...lines {
                if let bad = badLines[n] {
                    text += bad + "\n"
                } else {
                    let number = first + n - 1
                    text += #"{"token":"\#(LoopbackRig.token(number).hex)","payload":\#(String(decoding: LoopbackRig.payload(number), as: UTF8.self))}"# + "\n"
                }
            }
            let file = path(name)
            try text.write(toFile: file, atomically: true, encoding: .utf8)
            return file
        }
    }

    /// Starts `salvo` with `arguments`; both of its pipes are drained as it writes.
    static func launch(_ arguments: [String]) throws -> ChildProcess {
        #expect(FileManager.default.isExecutableFile(atPath: salvo), "build the salvo executable first: \(salvo)")
        return try ChildProcess(salvo, arguments, environment: ["XDG_STATE_HOME": stateHome])
    }

    /// Where the processes of these tests keep their state (the provider-token cache), not
    /// the user's own: made once per test process, mode 0700 as a state directory is.
    static let stateHome: String = {
        let path = NSTemporaryDirectory() + "salvo-tests-state-\(getpid())"
        try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o700])
        return path
    }()

    /// Runs to completion (bounded: killed after `timeout`); returns exit status, stdout and stderr.
    static func run(_ arguments: [String], timeout: Duration = .seconds(100)) async throws -> (Int32, String, String) {
        let process = try launch(arguments)
        let status = try await process.exitStatus(within: timeout)
        return (status, process.output, process.errors)
    }

    static func report(_ path: String) throws -> SenderReport {
        try JSONDecoder().decode(SenderReport.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    @Test func aCampaignIsSentWithAReportAndARejectedList() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig(plan: FailurePlan(invalidTokenSuffix: [0x07]))
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 3000)
        let (status, output, errors) = try await Self.run(
            ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--error-wait-ms", "200",
             "--report", workspace.path("report.json"), "--rejected", workspace.path("rejected.csv")] + workspace.tlsArguments())
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.contains("accounting: complete"))
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: workspace.path("report.json")))) as! [String: Any]
        let invalid = (1...3000).filter { $0 & 0xff == 0x07 }
        #expect(report["submitted"] as? Int == 3000)
        #expect(report["rejected"] as? Int == invalid.count)
        #expect(report["accepted"] as? Int == 3000 - invalid.count)
        #expect((report["rejected_by_reason"] as? [String: Int]) == ["invalid_token": invalid.count])
        for key in ["failed", "resent", "reconnects", "resumed_reconnects", "possible_duplicates", "window_overruns", "seconds", "rate_per_s"] {
            #expect(report[key] != nil, "report lacks \(key)")
        }
        let csv = try String(contentsOfFile: workspace.path("rejected.csv"), encoding: .utf8).split(separator: "\n")
        #expect(csv.first == "token,status,reason,timestamp")
        #expect(Set(csv.dropFirst()) == Set(invalid.map { "\(LoopbackRig.token($0).hex),8,invalid_token," }))
        #expect(rig.statistics { $0.accepted >= 3000 - invalid.count }.accepted == 3000 - invalid.count)
    }

    @Test func aBadLineAbortsWithItsNumberOrIsSkippedAndListed() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 100, badLines: [40: #"{"token":"abc","payload":{}}"#, 70: "{broken"])
        let base = ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--error-wait-ms", "50"]
            + workspace.tlsArguments()

        let (aborted, _, abortErrors) = try await Self.run(base)
        #expect(aborted == 2)
        #expect(abortErrors.contains("line 40"))
        #expect(rig.statistics { $0.accepted >= 39 }.accepted == 39, "the lines before the bad one are sent, none after")

        let (skipped, _, skipErrors) = try await Self.run(base + ["--on-bad-line", "skip", "--report", workspace.path("r.json")])
        #expect(skipped == 0, "stderr: \(skipErrors)")
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: workspace.path("r.json")))) as! [String: Any]
        #expect(report["accepted"] as? Int == 98)
        let bad = (report["bad_lines"] as? [[String: Any]])?.compactMap { $0["line"] as? Int }
        #expect(bad == [40, 70])
    }

    /// kill -9 mid-campaign, then --resume: nothing is lost, and what is sent twice is
    /// bounded by the checkpoint's lag. The checkpoint records a line once its record is
    /// released, the retention after the gateway's TCP acknowledged it (here
    /// max(300, 2 × 200) = 400 ms), and is saved every 500 ms: so it covers every line the
    /// gateway had accepted 0.9 s before the kill (the test allows 2 s more for scheduling
    /// on a loaded machine).
    /// What is sent twice is what the gateway accepted after that: in that last stretch,
    /// and from the socket buffers after the kill (the sender's fixed at 64 KiB here, so
    /// that they hold a small part of the campaign).
    @Test func killedMidCampaignAndResumedNothingIsLostAndOnlyTheLastStretchRepeats() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // Stalls of 100 ms every 100 notifications (and the rest of the TLS record being read)
        // hold the one connection to a few thousand a second: the campaign takes several
        // times the checkpoint's lag, and the kill (4 s after the first acceptance) lands in
        // its middle with seconds to spare for a loaded machine. (A second connection would
        // halve the campaign's time.)
        let rig = try LoopbackRig(plan: FailurePlan(stallEvery: 100, stallDuration: .milliseconds(100)))
        defer { rig.gateway.stop() }
        let lines = 24_000
        let (arguments, checkpoint) = try workspace.checkpointedSend(
            port: rig.gateway.port, lines: lines,
            ["--error-wait-ms", "200", "--retention-ms", "300", "--shards", "1", "--connections", "1", "--max-connections", "1",
             "--socket-buffer-kib", "64"])

        let first = try Self.launch(arguments)
        // What the gateway had accepted when, until it has been accepting for 4 s (bounded),
        // well past the lag; then kill -9.
        var samples: [(at: Instant, accepted: Int)] = []
        let deadline = Instant.now() + .seconds(60)
        while Instant.now() < deadline {
            samples.append((Instant.now(), rig.gateway.accepted))
            if let start = samples.first(where: { $0.accepted > 0 }), Instant.now().since(start.at) >= .seconds(4) { break }
            usleep(5_000)
        }
        let killedAt = Instant.now()
        first.kill(SIGKILL)
        try await first.exitStatus(within: .seconds(10))
        // The checkpoint as the kill left it.
        let resumeAfter = try #require(try Checkpoint(path: checkpoint).load()).line
        let acceptedBeforeTheLastStretch = samples.last(where: { killedAt.since($0.at) >= .milliseconds(2900) })?.accepted ?? 0
        #expect(acceptedBeforeTheLastStretch > 0, "the gateway accepted nothing in time")
        #expect(rig.gateway.accepted < lines, "the campaign finished before the kill; nothing was tested")

        let (status, output, errors) = try await Self.run(arguments + ["--resume"])
        #expect(status == 0, "stderr: \(errors)")
        #expect(errors.contains("resuming after line \(resumeAfter)"), "stderr: \(errors)")
        #expect(output.contains("accounting: complete"))
        let mock = rig.statistics { $0.accepted - $0.duplicates >= lines }
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: lines + 1, excluding: [0]))
        #expect(mock.accepted - lines == mock.duplicates)
        // One connection, no errors: the first run had the gateway accept lines 1…A in order,
        // the resume every line after the checkpoint once. The duplicates, the lines after the
        // checkpoint up to A, are at most what it accepted after the last stretch began.
        let acceptedByTheFirstRun = mock.accepted - (lines - resumeAfter)
        #expect(mock.duplicates <= acceptedByTheFirstRun - acceptedBeforeTheLastStretch,
                "checkpoint at \(resumeAfter), first run accepted \(acceptedByTheFirstRun), of which \(acceptedBeforeTheLastStretch) 2.9 s before the kill")
    }

    /// A bad line stops the run; the checkpoint stops before it. Fixed and resumed, every
    /// line arrives exactly once: the stop waited for everything before the bad line.
    @Test func aRunStoppedAtABadLineResumesAfterTheFixWithNothingLostOrRepeated() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let lines = 3000
        let (arguments, checkpoint) = try workspace.checkpointedSend(
            port: rig.gateway.port, lines: lines, badLines: [2000: #"{"token":"abc","payload":{}}"#], ["--error-wait-ms", "50"])

        let (stopped, _, stopErrors) = try await Self.run(arguments)
        #expect(stopped == 2)
        #expect(stopErrors.contains("line 2000: device token"), "stderr: \(stopErrors)")
        #expect(stopErrors.contains("lines 1–1999 are done; the same command with --resume continues with line 2000"),
                "stderr: \(stopErrors)")
        #expect(try Checkpoint(path: checkpoint).load()?.line == 1999)
        #expect(rig.statistics { $0.accepted >= 1999 }.accepted == 1999)

        try workspace.writeCampaign(lines: lines)
        let (resumed, output, errors) = try await Self.run(arguments + ["--resume"])
        #expect(resumed == 0, "stderr: \(errors)")
        #expect(errors.contains("resuming after line 1999"))
        #expect(output.contains("accounting: complete"))
        #expect(try Checkpoint(path: checkpoint).load()?.line == lines)
        let mock = rig.statistics { $0.accepted >= lines }
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: lines + 1, excluding: [0]))
        #expect(mock.accepted == lines && mock.duplicates == 0)
    }

    /// Nothing listens: every notification fails (exit 1), the checkpoint records none as
    /// done, and once the gateway is there a resume sends them all, once.
    @Test func anUnreachableGatewayFailsWithExitOneAndTheResumeSendsEverything() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let port = try #require(try Socket.listen(host: "127.0.0.1", port: 0).localAddress).port
        let lines = 500
        let (arguments, checkpoint) = try workspace.checkpointedSend(
            port: port, lines: lines, ["--error-wait-ms", "50", "--report", workspace.path("report.json")])

        let (failed, output, errors) = try await Self.run(arguments)
        #expect(failed == 1, "stdout: \(output)\nstderr: \(errors)")
        #expect(errors.contains("gave up on the gateway: connect to 127.0.0.1"), "stderr: \(errors)")
        #expect(errors.contains("no line is done; the same command with --resume continues with line 1"), "stderr: \(errors)")
        let report = try Self.report(workspace.path("report.json"))
        #expect(report.isComplete && report.accepted == 0)
        #expect(report.failedByReason == ["gateway_unreachable": report.submitted])
        #expect(try Checkpoint(path: checkpoint).load()?.line == 0)

        let rig = try LoopbackRig(port: port)
        defer { rig.gateway.stop() }
        let (resumed, _, resumeErrors) = try await Self.run(arguments + ["--resume"])
        #expect(resumed == 0, "stderr: \(resumeErrors)")
        #expect(try Self.report(workspace.path("report.json")).accepted == lines)
        let mock = rig.statistics { $0.accepted >= lines }
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: lines + 1, excluding: [0]))
        #expect(mock.duplicates == 0)
    }

    @Test func resumeWithoutACheckpointIsAUsageError() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let campaign = try workspace.writeCampaign(lines: 3)
        let (status, _, errors) = try await Self.run(["send", "--gateway", "127.0.0.1:9", "--input", campaign, "--resume"]
                                                     + workspace.tlsArguments())
        #expect(status == 2)
        #expect(errors.contains("--resume needs --checkpoint FILE"), "stderr: \(errors)")
    }

    /// A checkpoint written for one campaign is refused for another, and for the same one
    /// cut short; the refusal sends nothing and leaves the checkpoint as it was. Lines
    /// appended to the campaign are fine.
    @Test func aCheckpointIsRefusedForAnotherOrAShorterFile() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 200)
        let checkpoint = workspace.path("campaign.ckpt")
        try CampaignCheckpoint(Checkpoint(path: checkpoint), campaign: campaign).save(completedThroughLine: 150)
        let saved = try Checkpoint(path: checkpoint).load()
        func resume(_ input: String) async throws -> (Int32, String) {
            let (status, _, errors) = try await Self.run(["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", input,
                                                          "--error-wait-ms", "50", "--checkpoint", checkpoint, "--resume"]
                                                         + workspace.tlsArguments())
            return (status, errors)
        }

        let other = try workspace.writeCampaign(lines: 200, first: 1001, name: "other.jsonl")
        let (otherStatus, otherErrors) = try await resume(other)
        #expect(otherStatus == 2)
        #expect(otherErrors.contains("checkpoint \(checkpoint) does not belong to \(other): its lines 1…150"), "\(otherErrors)")
        #expect(otherErrors.contains("it is refused"))

        let shorter = try workspace.writeCampaign(lines: 100, name: "shorter.jsonl")
        let (shorterStatus, shorterErrors) = try await resume(shorter)
        #expect(shorterStatus == 2)
        #expect(shorterErrors.contains("it has 100 lines, fewer than the 150 the checkpoint covers"), "\(shorterErrors)")

        #expect(rig.gateway.statistics().connections == 0, "a refused resume sends nothing")
        #expect(try Checkpoint(path: checkpoint).load() == saved, "and leaves the checkpoint alone")

        try workspace.writeCampaign(lines: 260)
        let (appendedStatus, appendedErrors) = try await resume(campaign)
        #expect(appendedStatus == 0, "\(appendedErrors)")
        let mock = rig.statistics { $0.accepted >= 110 }
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: 261, excluding: Set((0...150).map(UInt64.init))))
    }

    @Test func theReportCarriesTheErrorLatencies() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // Answered at once: every error response arrives within the error wait.
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: 500))
        defer { rig.gateway.stop() }
        let lines = 5000
        let campaign = try workspace.writeCampaign(lines: lines)
        let (status, output, errors) = try await Self.run(
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
