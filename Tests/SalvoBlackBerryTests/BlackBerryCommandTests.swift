import Foundation
import SalvoBlackBerry
import SalvoCampaignFiles
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// `salvo send --target blackberry` and `salvo check-token` as processes against the mock NOC
/// (in-process, on loopback), and the proxy route.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("blackberry-command-tests")) struct BlackBerryCommandTests {
    /// The `salvo` executable next to the test bundle (`swift build --build-tests` builds both).
    static var salvo: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("salvo").path
    }

    static func run(_ arguments: [String], timeout: Duration = .seconds(100)) async throws -> (Int32, String, String) {
        let process = try ChildProcess(salvo, arguments)
        let status = try await process.exitStatus(within: timeout)
        return (status, process.output, process.errors)
    }

    static func send(_ rig: NOCRig, _ extra: [String]) -> [String] {
        ["send", "--target", "blackberry", "--noc", "127.0.0.1:\(rig.noc.port)", "--ca", rig.caFile] + extra
    }

    @Test func aCampaignIsSentWithTheReportRejectedListAndCheckpointOfAnAPNsOne() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 40, deadEvery: 10)
        let (report, rejected, checkpoint) = (rig.path("report.json"), rig.path("rejected.csv"), rig.path("checkpoint"))
        let (status, output, errors) = try await Self.run(Self.send(rig, ["--input", file, "--report", report, "--rejected", rejected,
                                                                          "--checkpoint", checkpoint]))
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.contains("accounting: complete"))
        let json = try JSONDecoder().decode(SenderReport.self, from: Data(contentsOf: URL(fileURLWithPath: report)))
        #expect(json.submitted == 40 && json.accepted == 36 && json.rejected == 4 && json.rejectedByReason == ["InvalidToken": 4])
        // In the order the answers came.
        let csv = try String(contentsOfFile: rejected, encoding: .utf8).split(separator: "\n")
        #expect(csv.first == "token,status,reason,timestamp")
        #expect(csv.dropFirst().sorted() == [10, 20, 30, 40].map { "tok-\($0)-dead,402,Invalid Token," }.sorted())
        #expect(try Checkpoint(path: checkpoint).load()?.line == 40)
    }

    @Test func checkTokenSortsALivingListFromADeadOne() async throws {
        let rig = try NOCRig()
        let tokens = rig.path("tokens.txt")
        try "alive-1\nold-dead\nalive-2\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        let dead = rig.path("dead.csv")
        let (status, output, errors) = try await Self.run(["check-token", "--target", "blackberry", "--noc", "127.0.0.1:\(rig.noc.port)",
                                                           "--ca", rig.caFile, "--tokens", tokens, "--rejected", dead])
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.contains("accepted  2") && output.contains("rejected  1"), "\(output)")
        #expect(try String(contentsOfFile: dead, encoding: .utf8) == "token,status,reason,timestamp\nold-dead,402,Invalid Token,\n")
        #expect(rig.noc.statistics().checkedTokens == 3 && rig.noc.statistics().accepted == 0)
    }

    @Test func aBadLineStopsTheRunWithItsNumberAndEverythingBeforeItIsSentAndCheckpointed() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 30, replacing: [21: #"{"token":"","payload":"x"}"#])
        let checkpoint = rig.path("checkpoint")
        let (status, output, errors) = try await Self.run(Self.send(rig, ["--input", file, "--checkpoint", checkpoint]))
        #expect(status == 2)
        #expect(errors.contains("line 21: empty token"), "stderr: \(errors)")
        #expect(errors.contains("lines 1–20 are done; the same command with --resume continues with line 21"), "stderr: \(errors)")
        #expect(output.contains("accepted  20"))
        #expect(try Checkpoint(path: checkpoint).load()?.line == 20)
        #expect(eventually({ rig.noc.statistics().accepted }) { $0 >= 20 } == 20)
    }

    @Test func aPayloadFileThatIsNotUTF8OrOverTheLimitIsRefusedBeforeAnythingIsSent() async throws {
        let rig = try NOCRig()
        let tokens = rig.path("tokens.txt")
        try "t1\nt2\n".write(toFile: tokens, atomically: true, encoding: .utf8)
        let latin1 = rig.path("latin1.txt")
        try Data([0x63, 0x61, 0x66, 0xE9]).write(to: URL(fileURLWithPath: latin1))
        let (status, _, errors) = try await Self.run(Self.send(rig, ["--tokens", tokens, "--payload", latin1]))
        #expect(status == 2 && errors.contains("\(latin1) is not UTF-8 text"), "stderr: \(errors)")
        let large = rig.path("large.txt")
        try String(repeating: "x", count: 4097).write(toFile: large, atomically: true, encoding: .utf8)
        let (tooLarge, _, largeErrors) = try await Self.run(Self.send(rig, ["--tokens", tokens, "--payload", large]))
        #expect(tooLarge == 2 && largeErrors.contains("is 4097 bytes, over the limit of 4096"), "stderr: \(largeErrors)")
        #expect(rig.noc.statistics().connections == 0)
    }

    @Test func anUnreachableNOCExitsOneAndLeavesTheCampaignForTheResume() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 50)
        let port = rig.noc.port
        rig.noc.stop()
        let checkpoint = rig.path("checkpoint")
        let (status, _, errors) = try await Self.run(["send", "--target", "blackberry", "--noc", "127.0.0.1:\(port)", "--ca", rig.caFile,
                                                      "--input", file, "--checkpoint", checkpoint, "--noc-connections", "2"])
        #expect(status == 1)
        #expect(errors.contains("the Push Channel service is out of reach"), "stderr: \(errors)")
        #expect(errors.contains("the same command with --resume continues with line 1"), "stderr: \(errors)")
    }

    /// kill -9 mid-campaign, then --resume: every line reaches the NOC, and only lines
    /// after the checkpoint can arrive twice.
    @Test func killedMidCampaignAndResumedNothingIsLost() async throws {
        var plan = GNPFailurePlan()
        plan.responseDelay = .milliseconds(10)
        let rig = try NOCRig(plan)
        let lines = 400
        let file = try rig.writeCampaign(lines: lines)
        let checkpoint = rig.path("checkpoint")
        let arguments = Self.send(rig, ["--input", file, "--checkpoint", checkpoint, "--noc-connections", "2"])
        let first = try ChildProcess(Self.salvo, arguments)
        // 2 connections at 10 ms an answer: ~2 s in all. Kill once a checkpoint shows progress.
        let saved = eventually({ (try? Checkpoint(path: checkpoint).load())??.line ?? 0 }) { $0 >= 60 }
        first.kill(SIGKILL)
        _ = try await first.exitStatus(within: .seconds(10))
        #expect(saved >= 60)
        let resumeAfter = try #require(try Checkpoint(path: checkpoint).load()).line
        let acceptedByTheFirstRun = rig.noc.statistics().accepted
        #expect(acceptedByTheFirstRun < lines, "the campaign finished before the kill; nothing was tested")

        let report = rig.path("report.json")
        let (status, _, errors) = try await Self.run(arguments + ["--resume", "--report", report])
        #expect(status == 0, "stderr: \(errors)")
        #expect(errors.contains("resuming after line \(resumeAfter)"), "stderr: \(errors)")
        let second = try JSONDecoder().decode(SenderReport.self, from: Data(contentsOf: URL(fileURLWithPath: report)))
        #expect(second.submitted == lines - resumeAfter && second.accepted == second.submitted)
        let mock = eventually({ rig.noc.statistics() }) { $0.accepted - $0.duplicates >= lines }
        #expect(mock.acceptedDigestSet == NOCRig.digests(1...lines))
        #expect(mock.accepted - lines == mock.duplicates)
        // Repeated: what the first run had accepted past the checkpoint, and nothing else
        // (plus up to one answer per connection the mock may still have written after the
        // count above was read).
        #expect(mock.duplicates <= acceptedByTheFirstRun - resumeAfter + 2,
                "checkpoint \(resumeAfter), first run accepted \(acceptedByTheFirstRun)")
    }

    /// `salvo mock --protocol gnp` as a process: its first line, a campaign through it, and
    /// its counts in --report on SIGTERM.
    @Test func theMockNOCProcessWritesItsCountsOnSIGTERM() async throws {
        let rig = try NOCRig()
        let report = rig.path("noc.json")
        let mock = try ChildProcess(Self.salvo, ["mock", "--protocol", "gnp", "--port", "0", "--cert", rig.path("server.pem"),
                                                 "--key", rig.path("server.key"), "--reject-every", "5", "--report", report])
        let first = try await mock.firstLine(within: .seconds(20))
        let port = try #require(Int(first.split(separator: "=").last ?? ""), "first line: \(first)")
        #expect(first.hasPrefix("listening noc="))
        let file = try rig.writeCampaign(lines: 20)
        let (sent, _, _) = try await rig.send(file, client: try rig.client(connections: 1, route: .noc(host: "127.0.0.1", port: port)))
        mock.kill(SIGTERM)
        #expect(try await mock.exitStatus(within: .seconds(20)) == 0)
        let counts = try JSONDecoder().decode(GNPStatistics.self, from: Data(contentsOf: URL(fileURLWithPath: report)))
        #expect(sent.accepted == 16 && sent.rejected == 4)
        #expect(counts.accepted == 16 && counts.rejected == 4 && counts.connections == 1)
    }

    @Test func theMockNOCsFlagsAreItsOwn() async throws {
        let (binary, _, errors) = try await Self.run(["mock", "--busy-every", "2"])
        #expect(binary == 2 && errors.contains("--busy-every is for --protocol gnp"), "stderr: \(errors)")
        let (gnp, _, gnpErrors) = try await Self.run(["mock", "--protocol", "gnp", "--throttle-every", "2"])
        #expect(gnp == 2 && gnpErrors.contains("--throttle-every is not a --protocol gnp rule"), "stderr: \(gnpErrors)")
    }

    /// Through a plain-HTTP proxy (`--proxy` without `--proxy-tls`): requests go to the
    /// proxy, which relays them to the NOC.
    @Test func theProxyRouteCarriesTheCampaign() async throws {
        let rig = try NOCRig()
        let relay = try PlainProxyRelay(nocPort: rig.noc.port, trusting: rig.pki.authority.certificatePEM)
        defer { relay.stop() }
        let file = try rig.writeCampaign(lines: 30, deadEvery: 6)
        let client = try rig.client(connections: 3, route: .proxy(host: "127.0.0.1", port: relay.port, tls: false))
        #expect(client.origin(lineHost: "elsewhere.example") == "http://127.0.0.1:\(relay.port)")
        let (report, ending, _) = try await rig.send(file, client: client)
        #expect(ending == .readToEnd && report.accepted == 25 && report.rejected == 5 && report.isComplete)
        let mock = await eventuallyYielding({ rig.noc.statistics() }) { $0.accepted + $0.rejected >= 30 }
        #expect(mock.accepted == 25 && mock.acceptedDigestSet == NOCRig.digests((1...30).filter { $0 % 6 != 0 }, deadEvery: 6))
        let relayed = relay.relayed.withLock { $0 }
        #expect(relayed >= 1 && relayed <= 3 && mock.connections == relayed, "every NOC connection came through the proxy")
    }

    /// `--proxy` with a scheme is a network proxy for the NOC connections (an HTTP CONNECT
    /// tunnel, TLS end to end), as for APNs; without one, BlackBerry's own relay.
    @Test(.enabled(if: TestProxy.hasTinyproxy, "tinyproxy is not installed (make test installs it)"))
    func theNOCIsReachedThroughAnHTTPProxy() async throws {
        let rig = try NOCRig()
        let proxy = try TestProxy.tinyproxy(in: rig.directory, user: "salvo", password: "pr0xy-s3cret", connectPort: rig.noc.port)
        defer { proxy.stop() }
        let file = try rig.writeCampaign(lines: 40, deadEvery: 10)
        let report = rig.path("report.json")
        let (status, output, errors) = try await Self.run(Self.send(rig, [
            "--input", file, "--report", report, "--proxy", "http://salvo:pr0xy-s3cret@127.0.0.1:\(proxy.port)"]))
        #expect(status == 0, "stderr: \(errors)")
        let json = try JSONDecoder().decode(SenderReport.self, from: Data(contentsOf: URL(fileURLWithPath: report)))
        #expect(json.accepted == 36 && json.rejected == 4 && json.isComplete)
        let log = proxy.process.output + proxy.process.errors
        #expect(log.contains("CONNECT"), "through tinyproxy: \(log)")
        #expect(!(output + errors).contains("pr0xy-s3cret"))

        let (alone, _, aloneErrors) = try await Self.run(["send", "--target", "blackberry", "--input", file,
                                                          "--proxy", "http://127.0.0.1:\(proxy.port)"])
        #expect(alone == 2 && aloneErrors.contains("give --noc HOST:PORT too"), "\(aloneErrors)")
        let (socks, _, socksErrors) = try await Self.run(Self.send(rig, ["--input", file, "--proxy", "socks5://u:hidden@127.0.0.1:9"]))
        #expect(socks == 2 && socksErrors.contains("give an HTTP proxy") && !socksErrors.contains("hidden"), "\(socksErrors)")
    }
}
