import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// `salvo send --protocol h2` end to end: the built executable against the in-process
/// HTTP/2 mock, with certificate and with token authentication.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("send-command-h2-tests")) struct SendCommandHTTP2Tests {
    typealias Workspace = SendCommandTests.Workspace

    static let keyID = "TESTKEY001"
    static let teamID = "TESTTEAM01"

    /// A mock that takes provider tokens signed by `key` (a fresh P-256 key, written to
    /// the workspace as `AuthKey.p8`, mode 0600).
    static func tokenRig(_ workspace: Workspace, plan: H2FailurePlan = H2FailurePlan(),
                         keyID: String = keyID, teamID: String = teamID) throws -> (H2LoopbackRig, key: String) {
        let pem = try DevelopmentPKI.makeSigningKey()
        let key = workspace.path("AuthKey.p8")
        try pem.write(toFile: key, atomically: true, encoding: .utf8)
        chmod(key, 0o600)
        let rig = try H2LoopbackRig(plan: plan, clientCertificates: false) {
            $0.tokenVerifier = try! ProviderTokenVerifier(authKeyPEM: pem, keyID: keyID, teamID: teamID)
            $0.recordRequests = true
        }
        return (rig, key)
    }

    static func tokenArguments(_ workspace: Workspace, key: String, keyID: String = keyID) -> [String] {
        ["--auth-key", key, "--key-id", keyID, "--team-id", teamID, "--topic", "com.example.app", "--ca", workspace.path("ca.pem")]
    }

    @Test func aCampaignIsSentWithTokenAuthenticationAndEveryLinesHeadersReachTheGateway() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, key) = try Self.tokenRig(workspace)
        defer { rig.gateway.stop() }
        // Line 1: every header of its own; line 2: a background push (priority 5 by its
        // type's rule); line 3: the command's defaults; then 997 plain lines, one of them dead.
        let payload = #"{"aps":{"alert":"hi"}}"#
        let lines = [
            #"{"token":"\#(LoopbackRig.token(1).hex)","payload":\#(payload),"push_type":"voip","topic":"com.example.app.voip","#
                + #""collapse_id":"c-1","apns_id":"123e4567-e89b-12d3-a456-426614174000","expiration":1900000000,"priority":5}"#,
            #"{"token":"\#(LoopbackRig.token(2).hex)","payload":{"aps":{"content-available":1}},"push_type":"background"}"#,
            #"{"token":"\#(LoopbackRig.token(3).hex)","payload":\#(payload)}"#,
        ] + (4...1000).map { n in
            #"{"token":"\#(n == 500 ? H2LoopbackRig.deadToken(n).hex : LoopbackRig.token(n).hex)","payload":\#(payload)}"#
        }
        let campaign = workspace.path("campaign.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: campaign, atomically: true, encoding: .utf8)
        let (status, output, errors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign,
             "--collapse-id", "weekly", "--expiration", "1800000000", "--report", workspace.path("report.json"),
             "--rejected", workspace.path("rejected.csv")] + Self.tokenArguments(workspace, key: key))
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.contains("accounting: complete") && output.contains("(the last answers)"), "stdout: \(output)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.accepted == 999 && report.rejected == 1 && report.rejectedByReason == ["Unregistered": 1])
        let csv = try String(contentsOfFile: workspace.path("rejected.csv"), encoding: .utf8)
        #expect(csv.hasPrefix("token,status,reason,timestamp\n"))
        #expect(csv.contains("\(H2LoopbackRig.deadToken(500).hex),410,Unregistered,1"), "csv: \(csv)")

        let requests = try #require(rig.statistics { $0.accepted >= 999 }.acceptedRequests)
        let byToken = Dictionary(requests.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(byToken[LoopbackRig.token(1).hex] == H2RecordedRequest(
            token: LoopbackRig.token(1).hex, pushType: "voip", topic: "com.example.app.voip",
            apnsID: "123e4567-e89b-12d3-a456-426614174000", expiration: "1900000000", priority: "5", collapseID: "c-1",
            team: Self.teamID))
        #expect(byToken[LoopbackRig.token(2).hex]?.pushType == "background")
        #expect(byToken[LoopbackRig.token(2).hex]?.priority == "5")
        #expect(byToken[LoopbackRig.token(2).hex]?.topic == "com.example.app")
        let plain = try #require(byToken[LoopbackRig.token(3).hex])
        #expect(plain.pushType == "alert" && plain.topic == "com.example.app" && plain.priority == nil)
        #expect(plain.collapseID == "weekly" && plain.expiration == "1800000000")
        #expect(plain.apnsID?.count == 36, "a generated apns-id: \(plain.apnsID ?? "none")")
        #expect(Set(requests.compactMap(\.apnsID)).count == requests.count, "every request has its own apns-id")
    }

    /// A key the gateway does not know: the run stops with an error that names the key id
    /// and team, exits 1, and fails only what it had taken — not the whole campaign row by row.
    @Test func aRefusedProviderTokenStopsTheRunNamingTheKeyAndTeam() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, key) = try Self.tokenRig(workspace, keyID: "OTHERKEY01")
        defer { rig.gateway.stop() }
        let lines = 200_000
        try workspace.writeCampaign(lines: lines)
        let (status, output, errors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", workspace.path("campaign.jsonl"),
             "--report", workspace.path("report.json")] + Self.tokenArguments(workspace, key: key))
        #expect(status == 1, "stdout: \(output)\nstderr: \(errors)")
        #expect(errors.contains("key id \(Self.keyID), team \(Self.teamID)"), "stderr: \(errors)")
        #expect(errors.contains("InvalidProviderToken"), "stderr: \(errors)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.isComplete && report.accepted == 0 && report.rejected == 0)
        #expect(report.submitted < lines / 4, "the run stopped; it did not fail \(report.submitted) of \(lines) one by one")
        #expect(report.failedByReason.keys.allSatisfy { $0 == "authentication_failed" }, "\(report.failedByReason)")
        #expect(rig.gateway.statistics().requests <= 2 * 8, "a request or so per connection, no more")
    }

    @Test func aKeyFileOthersCanReadIsRefusedUnlessAllowed() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, key) = try Self.tokenRig(workspace)
        defer { rig.gateway.stop() }
        chmod(key, 0o644)
        try workspace.writeCampaign(lines: 10)
        let arguments = ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)",
                         "--input", workspace.path("campaign.jsonl")] + Self.tokenArguments(workspace, key: key)
        let (refused, _, errors) = try await SendCommandTests.run(arguments)
        #expect(refused == 2)
        #expect(errors.contains(key) && errors.contains("--allow-world-readable-key"), "stderr: \(errors)")
        #expect(!errors.contains("PRIVATE KEY"), "the key never appears in output")
        #expect(rig.gateway.statistics().requests == 0)

        let (allowed, _, allowedErrors) = try await SendCommandTests.run(arguments + ["--allow-world-readable-key"])
        #expect(allowed == 0, "stderr: \(allowedErrors)")
        #expect(rig.statistics { $0.accepted >= 10 }.accepted == 10)
    }

    /// Certificate authentication, 8 connections, every kind of failure the mock plans at
    /// once: the mock's accepted set is the campaign, and the report adds up.
    @Test func eightConnectionsUnderMixedFailuresAccountExactly() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try H2LoopbackRig(plan: H2FailurePlan(
            rejectEvery: 211, throttleEvery: 173, unavailableEvery: 157, internalErrorEvery: 149, goawayEvery: 997))
        defer { rig.gateway.stop() }
        let lines = 20_000
        try workspace.writeCampaign(lines: lines)
        let (status, output, errors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", workspace.path("campaign.jsonl"),
             "--shards", "2", "--connections", "4", "--max-connections", "4", "--topic", "com.example.app",
             "--report", workspace.path("report.json")] + workspace.tlsArguments())
        #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.isComplete && report.submitted == lines && report.failed == 0 && report.possibleDuplicates == 0)
        let mock = rig.statistics { $0.accepted + $0.rejected(.badDeviceToken) >= lines }
        #expect(mock.connections >= 8)
        #expect(report.rejected == mock.rejected(.badDeviceToken) && report.accepted == mock.accepted)
        #expect(mock.duplicates == 0)
        let accepted = mock.acceptedDigestSet
        #expect(accepted.count == report.accepted)
        #expect(accepted.isSubset(of: Set(LoopbackRig.digests(count: lines + 1, excluding: [0]))))
    }

    /// kill -9 while answers come slowly, then --resume: nothing is lost, and the checkpoint
    /// stood right before the lowest unanswered line, so what is sent twice is only what was
    /// answered after the last checkpoint save.
    @Test func killedMidCampaignAndResumedOverHTTP2NothingIsLost() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // 20 streams per connection answered after 20 ms: about 1,000 a second.
        let rig = try H2LoopbackRig(plan: H2FailurePlan(responseDelay: .milliseconds(20))) {
            $0.maximumConcurrentStreams = 20
        }
        defer { rig.gateway.stop() }
        let lines = 8000
        try workspace.writeCampaign(lines: lines)
        let checkpoint = workspace.path("campaign.ckpt")
        let arguments = ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)",
                         "--input", workspace.path("campaign.jsonl"), "--shards", "1", "--connections", "1",
                         "--max-connections", "1", "--topic", "com.example.app", "--checkpoint", checkpoint]
            + workspace.tlsArguments()
        let first = try SendCommandTests.launch(arguments)
        let started = rig.statistics { $0.accepted >= 2000 }
        #expect(started.accepted >= 2000 && started.accepted < lines, "the kill must land mid-campaign")
        first.kill(SIGKILL)
        try await first.exitStatus(within: .seconds(10))
        let resumeAfter = try #require(try Checkpoint(path: checkpoint).load()).line
        let acceptedByTheFirstRun = rig.gateway.statistics().accepted
        #expect(resumeAfter > 0 && resumeAfter <= acceptedByTheFirstRun)

        let (status, output, errors) = try await SendCommandTests.run(arguments + ["--resume"])
        #expect(status == 0, "stderr: \(errors)")
        #expect(errors.contains("resuming after line \(resumeAfter)"), "stderr: \(errors)")
        #expect(output.contains("accounting: complete"))
        let mock = rig.statistics { $0.accepted - $0.duplicates >= lines }
        #expect(mock.acceptedDigestSet == Set(LoopbackRig.digests(count: lines + 1, excluding: [0])))
        // Sent twice: only lines after the checkpoint that the first run had answered.
        #expect(mock.duplicates <= acceptedByTheFirstRun - resumeAfter)
    }

    @Test func theProtocolFollowsTheGatewayAndHTTP2FlagsNeedIt() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        try workspace.writeCampaign(lines: 3)
        let input = ["--input", workspace.path("campaign.jsonl")]
        let (binaryPreset, _, presetErrors) = try await SendCommandTests.run(
            ["send", "--gateway", "sandbox", "--protocol", "binary"] + input + workspace.tlsArguments())
        #expect(binaryPreset == 2 && presetErrors.contains("retired its binary gateways"), "stderr: \(presetErrors)")
        let (topicOnBinary, _, topicErrors) = try await SendCommandTests.run(
            ["send", "--gateway", "127.0.0.1:9", "--topic", "com.example.app"] + input + workspace.tlsArguments())
        #expect(topicOnBinary == 2 && topicErrors.contains("--topic is for the HTTP/2 provider API"), "stderr: \(topicErrors)")
        let (noCredentials, _, credentialErrors) = try await SendCommandTests.run(["send", "--gateway", "sandbox"] + input)
        #expect(noCredentials == 2 && credentialErrors.contains("HTTP/2 needs credentials"), "stderr: \(credentialErrors)")
        let (noTopic, _, noTopicErrors) = try await SendCommandTests.run(
            ["send", "--gateway", "sandbox", "--auth-key", "k.p8", "--key-id", Self.keyID, "--team-id", Self.teamID] + input)
        #expect(noTopic == 2 && noTopicErrors.contains("needs --topic"), "stderr: \(noTopicErrors)")
    }
}
