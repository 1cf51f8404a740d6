import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// What a new user meets: help texts, mistakes told with what to do, nothing sent twice by
/// a resume. Process tests, in the serialized suites that run on threads of their own.
extension SendCommandTests {
    @Test func theHelpTextsPutHTTP2FirstAndShowOnlyWhatApplies() async throws {
        let (_, overview, _) = try await Self.run(["--help"])
        let overviewText = overview.replacingOccurrences(of: "\n", with: " ")
        #expect(overviewText.contains("Apple's HTTP/2 provider API, and the legacy binary protocol"), "\(overview)")
        #expect(!overviewText.contains("sender for the APNs binary provider protocol"))

        let (_, send, _) = try await Self.run(["send", "--help"])
        #expect(send.contains("(default:\n                          alert)") || send.contains("(default: alert)"), "\(send)")
        #expect(!send.contains("(default: 0)"))

        let (_, mock, _) = try await Self.run(["mock", "--help"])
        let mockText = mock.replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "  ", with: " ")
        #expect(mockText.contains("`listening noc=PORT` (--protocol gnp)"), "\(mock)")
        #expect(mockText.contains("BlackBerry Dynamics NOC (--protocol gnp"))
        #expect(mockText.contains("--unknown-code-every N answers code 409"))

        let (_, checkToken, _) = try await Self.run(["check-token", "--help"])
        for sendOnly in ["--max-payload-bytes", "--cert", "--key ", "--passphrase-file", "--shards", "--gateway", "--protocol"] {
            #expect(!checkToken.contains(sendOnly), "check-token --help shows \(sendOnly)")
        }
        #expect(checkToken.contains("--ca <file>") && checkToken.contains("--noc <host:port>"))

        let (_, registryImport, _) = try await Self.run(["registry", "import", "--help"])
        let usage = registryImport.split(separator: "\n").first { $0.hasPrefix("USAGE:") } ?? ""
        #expect(usage.contains(" --topic <bundle-id>") && !usage.contains("[--topic"), "\(registryImport)")

        let (_, payload, _) = try await Self.run(["payload", "--help"])
        #expect(payload.contains("--expiration <seconds>") && !payload.contains("--expiry"), "\(payload)")
    }

    /// `payload --expiry`, the old spelling, still works: scripts written for it do not break.
    @Test func payloadTakesExpirationAndItsOldSpelling() async throws {
        let (status, output, errors) = try await Self.run(["payload", "--body", "hi", "--expiration", "1800000000"])
        #expect(status == 0, "\(errors)")
        let (oldStatus, oldOutput, _) = try await Self.run(["payload", "--body", "hi", "--expiry", "1800000000"])
        #expect(oldStatus == 0 && oldOutput == output && output.contains("expiry 1800000000"))
        let (both, _, bothErrors) = try await Self.run(["payload", "--body", "hi", "--expiry", "1", "--expiration", "1"])
        #expect(both == 2 && bothErrors.contains("--expiry is the old name of --expiration"), "\(bothErrors)")
    }

    /// Every usage error reads `salvo <command>: …`, ArgumentParser's own ones too.
    @Test func errorsNameTheCommandTheyCameFrom() async throws {
        let (missing, _, missingErrors) = try await Self.run(["send", "--gateway", "127.0.0.1:9"])
        #expect(missing == 2)
        #expect(missingErrors.hasPrefix("salvo send: nothing to send"), "\(missingErrors)")
        #expect(!missingErrors.contains("Error:"))
        let (unknown, _, unknownErrors) = try await Self.run(["campaign", "create", "--bogus"])
        #expect(unknown == 2 && unknownErrors.hasPrefix("salvo campaign create: "), "\(unknownErrors)")
        let (mock, _, mockErrors) = try await Self.run(["mock", "--protocol", "gnp", "--feedback-port", "0"])
        #expect(mock == 2 && mockErrors.hasPrefix("salvo mock: --feedback-port is for the binary protocol"), "\(mockErrors)")
    }

    /// The binary protocol sent to an HTTP/2 gateway (`--protocol h2` forgotten): the first
    /// answer is an HTTP/2 SETTINGS frame; the run gives up at once, says what the gateway
    /// speaks and what to add, and fails what it holds.
    @Test func aBinarySendToAnHTTP2GatewaySaysToAddProtocolH2() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try H2LoopbackRig()
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 20)
        let (status, output, errors) = try await Self.run(
            ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--report", workspace.path("report.json")]
                + workspace.tlsArguments())
        #expect(status == 1)
        #expect(errors.contains("salvo send: gave up on the gateway: the gateway answered with an HTTP/2 SETTINGS frame: it speaks HTTP/2"),
                "stderr: \(errors)")
        #expect(output.contains("what to do: the gateway speaks HTTP/2: add --protocol h2"), "stdout: \(output)")
        let report = try Self.report(workspace.path("report.json"))
        // What was written before the SETTINGS frame was read may count as unknown rather than
        // unreachable, by timing; none of it was accepted.
        #expect(report.isComplete && report.accepted == 0 && report.failed == 20, "\(report.failedByReason)")
        #expect(Set(report.failedByReason.keys).isSubset(of: ["gateway_unreachable", "delivery_unknown"]), "\(report.failedByReason)\n\(errors)")
        #expect(report.failureCause?.contains("it speaks HTTP/2") == true)
        #expect(rig.gateway.statistics().accepted == 0)
    }

    /// A server certificate no trusted CA issued: the message says to give --ca.
    @Test func anUntrustedServerCertificateSaysToGiveTheCA() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 5)
        let (status, output, errors) = try await Self.run(
            ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--cert", workspace.path("client.pem"),
             "--key", workspace.path("client.key")])
        #expect(status == 1)
        #expect(errors.contains("certificate verify failed") && errors.contains("give --ca FILE"), "stderr: \(errors)")
        #expect(output.contains("what to do: the server's certificate does not chain to a CA this machine trusts: give --ca FILE"))
        #expect(!errors.contains("retrying with backoff"), "a certificate no retry can fix is not retried")
    }

    /// Nothing to send is an input error (exit 2), told before anything connects: an empty
    /// campaign, one of blank lines, one whose every line is bad, a directory.
    @Test func aCampaignWithNothingToSendIsAnInputErrorBeforeAnythingConnects() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        func send(_ input: String, _ extra: [String] = []) async throws -> (Int32, String) {
            let (status, _, errors) = try await Self.run(["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", input]
                                                         + extra + workspace.tlsArguments())
            return (status, errors)
        }
        let empty = workspace.path("empty.jsonl")
        try "".write(toFile: empty, atomically: true, encoding: .utf8)
        let (emptyStatus, emptyErrors) = try await send(empty)
        #expect(emptyStatus == 2)
        #expect(emptyErrors.contains("salvo send: the campaign \(empty) has no notifications (0 lines, none of them a notification): nothing was sent"),
                "\(emptyErrors)")

        let blank = workspace.path("blank.jsonl")
        try "\n  \r\n\n".write(toFile: blank, atomically: true, encoding: .utf8)
        let (blankStatus, blankErrors) = try await send(blank)
        #expect(blankStatus == 2 && blankErrors.contains("(3 lines, none of them a notification): nothing was sent"), "\(blankErrors)")

        let bad = try workspace.writeCampaign(lines: 2, badLines: [1: "{", 2: #"{"token":"ab"}"#], name: "bad.jsonl")
        let (badStatus, badErrors) = try await send(bad, ["--on-bad-line", "skip"])
        #expect(badStatus == 2 && badErrors.contains("none of the 2 notification lines of \(bad) can be sent (the first, line 1:"),
                "\(badErrors)")

        let (directoryStatus, directoryErrors) = try await send(workspace.directory)
        #expect(directoryStatus == 2 && directoryErrors.contains("salvo send: --input \(workspace.directory) is a directory; give a file"),
                "\(directoryErrors)")
        #expect(rig.gateway.statistics().connections == 0, "nothing connected")
    }

    /// The binary-only flags are refused over HTTP/2 (exit 2, naming the flag), as `payload`
    /// and `demo` do, instead of being silently ignored.
    @Test(arguments: [["--format", "enhanced"], ["--error-wait-ms", "50"], ["--retention-ms", "100"]])
    func binaryOnlyFlagsAreRefusedOverHTTP2(flag: [String]) async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let campaign = try workspace.writeCampaign(lines: 1)
        let (status, _, errors) = try await Self.run(["send", "--protocol", "h2", "--gateway", "127.0.0.1:9", "--input", campaign]
                                                     + flag + workspace.tlsArguments())
        #expect(status == 2)
        #expect(errors.contains("salvo send: \(flag[0]) is for the binary protocol; HTTP/2 (--protocol h2) has no use for it"),
                "\(errors)")
        let (demo, _, demoErrors) = try await Self.run(["demo", "--protocol", "h2", "--count", "1"] + flag)
        #expect(demo == 2 && demoErrors.contains("\(flag[0]) is for the binary protocol, not --protocol h2"), "\(demoErrors)")
    }

    /// `--target blackberry` uses no APNs engine: its flags are refused rather than ignored.
    @Test func engineFlagsAreRefusedForBlackBerry() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let campaign = try workspace.writeCampaign(lines: 1)
        let (status, _, errors) = try await Self.run(["send", "--target", "blackberry", "--noc", "127.0.0.1:9", "--input", campaign,
                                                      "--shards", "2"])
        #expect(status == 2 && errors.contains("--shards is for APNs, not --target blackberry"), "\(errors)")
    }
}

extension SendCommandHTTP2Tests {
    /// Two lines fail for good in the middle of a run (503 every time); the rest is
    /// accepted. The checkpoint lists the two apart from the final lines, and a resume
    /// sends those two and nothing else.
    @Test func aResumeAfterFailuresInTheMiddleSendsOnlyTheLinesThatFailed() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        var plan = H2FailurePlan()
        plan.unavailableTokens = [LoopbackRig.token(50), LoopbackRig.token(120)]
        let failing = try H2LoopbackRig(plan: plan)
        defer { failing.gateway.stop() }
        let lines = 200
        let campaign = try workspace.writeCampaign(lines: lines)
        let checkpoint = workspace.path("campaign.ckpt")
        func arguments(_ port: Int) -> [String] {
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(port)", "--input", campaign, "--checkpoint", checkpoint,
             "--topic", "com.example.app", "--report", workspace.path("report.json")] + workspace.tlsArguments()
        }
        let (failed, _, errors) = try await SendCommandTests.run(arguments(failing.gateway.port))
        #expect(failed == 1, "stderr: \(errors)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.accepted == lines - 2 && report.failedByReason == ["server_error": 2])
        #expect(errors.contains("lines 1–200 are final, 2 of them failed (lines 50, 120); the same command with --resume "
                                + "sends the failed lines again, and nothing else"), "stderr: \(errors)")
        let saved = try #require(try Checkpoint(path: checkpoint).load())
        #expect(saved.line == lines && saved.retry == [50...50, 120...120])
        #expect(try String(contentsOfFile: checkpoint, encoding: .utf8).hasSuffix("\nretry 50 120\n"))

        let healthy = try H2LoopbackRig()
        defer { healthy.gateway.stop() }
        let (resumed, output, resumeErrors) = try await SendCommandTests.run(arguments(healthy.gateway.port) + ["--resume"])
        #expect(resumed == 0, "stderr: \(resumeErrors)")
        #expect(resumeErrors.contains("resuming after line 200 (from \(checkpoint)); first sending again the 2 lines that failed: 50, 120"),
                "stderr: \(resumeErrors)")
        #expect(output.contains("handed 2 notifications to the gateway"))
        let statistics = healthy.statistics { $0.accepted >= 2 }
        #expect(statistics.accepted == 2 && statistics.requests == 2, "only the failed lines are sent again")
        #expect(Set(statistics.acceptedDigests ?? []) == Set(H2LoopbackRig.digests([50, 120])))
        #expect(try Checkpoint(path: checkpoint).load() == ResumePoint(line: lines, prefix: saved.prefix))
        // Nothing is left: a third run says so and connects nowhere.
        let (again, againOutput, _) = try await SendCommandTests.run(arguments(9) + ["--resume"])
        #expect(again == 0 && againOutput.contains("nothing left to send"), "\(againOutput)")
    }

    /// A key id or team id that is not Apple's 10 characters is told before anything is
    /// sent (the gateway would answer InvalidProviderToken); the run goes on.
    @Test func aKeyIDOfTheWrongLengthIsToldUpFront() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, key) = try Self.tokenRig(workspace, keyID: "KEY1")
        defer { rig.gateway.stop() }
        let campaign = try workspace.writeCampaign(lines: 3)
        let (status, _, errors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--no-token-cache"]
                + Self.tokenArguments(workspace, key: key, keyID: "KEY1"))
        #expect(status == 0, "stderr: \(errors)")
        #expect(errors.contains("salvo send: warning: key id 'KEY1' has 4 characters; Apple's key ids are 10 letters and digits"),
                "stderr: \(errors)")
        #expect(!errors.contains("team id"), "the team id is Apple's shape")
    }
}
