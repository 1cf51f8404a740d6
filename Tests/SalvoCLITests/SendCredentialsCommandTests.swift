import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoEngine

/// `salvo send --credentials FILE`: several apps and teams in one run, the built executable
/// against the in-process HTTP/2 mock that knows both teams' keys and the client certificate.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("send-credentials-tests")) struct SendCredentialsCommandTests {
    typealias Workspace = SendCommandTests.Workspace

    static let teamA = "TEAMAAAAA1", keyA = "KEYAAAAAA1"
    static let teamB = "TEAMBBBBB2", keyB = "KEYBBBBBB2"
    static let news = "com.example.news", weather = "com.example.weather", games = "com.example.games"
    static let legacy = "com.example.legacy"

    /// The mock, with both keys written to the workspace (mode 0600) and a credentials
    /// file naming them by relative paths: team A serves news and weather, team B games,
    /// the client certificate legacy.
    static func rig(_ workspace: Workspace) throws -> H2LoopbackRig {
        let (pemA, pemB) = try writeKeys(workspace)
        return try gateway(pemA, pemB)
    }

    /// Both teams' keys, written to the workspace with the credentials file.
    static func writeKeys(_ workspace: Workspace) throws -> (String, String) {
        let pemA = try DevelopmentPKI.makeSigningKey(), pemB = try DevelopmentPKI.makeSigningKey()
        for (name, pem) in [("AuthKey_\(keyA).p8", pemA), ("AuthKey_\(keyB).p8", pemB)] {
            try pem.write(toFile: workspace.path(name), atomically: true, encoding: .utf8)
            chmod(workspace.path(name), 0o600)
        }
        try writeCredentials(workspace)
        return (pemA, pemB)
    }

    /// A mock that knows team A's key, team B's when given, and the client certificate.
    static func gateway(_ pemA: String, _ pemB: String?) throws -> H2LoopbackRig {
        try H2LoopbackRig(clientCertificates: true) {
            $0.server.tls.requireClientCertificate = false
            $0.tokenVerifiers = [try! ProviderTokenVerifier(authKeyPEM: pemA, keyID: keyA, teamID: teamA)]
                + (pemB.map { [try! ProviderTokenVerifier(authKeyPEM: $0, keyID: keyB, teamID: teamB)] } ?? [])
            $0.recordRequests = true
        }
    }

    static func writeCredentials(_ workspace: Workspace, keyB key: String = "AuthKey_\(keyB).p8") throws {
        let json = """
            {"credentials": [
              {"team_id": "\(teamA)", "key_id": "\(keyA)", "key": "AuthKey_\(keyA).p8",
               "topics": ["\(news)", "\(weather)"], "environment": "production"},
              {"team_id": "\(teamB)", "key_id": "\(keyB)", "key": "\(key)", "topics": ["\(games)"]},
              {"certificate": "client.pem", "private_key": "client.key", "topics": ["\(legacy)"], "environment": "production"}
            ]}
            """
        try json.write(toFile: workspace.path("credentials.json"), atomically: true, encoding: .utf8)
    }

    /// Line n's topic: news (named, or by --topic, or as VoIP), weather, games, legacy.
    static func line(_ n: Int, topic override: String? = nil) -> String {
        let token = n % 97 == 13 ? H2LoopbackRig.deadToken(n).hex : LoopbackRig.token(n).hex
        let payload = String(decoding: LoopbackRig.payload(n), as: UTF8.self)
        let fields = switch n % 5 {
        case 0: ""
        case 1: #","push_type":"voip","topic":"\#(news).voip""#
        case 2: #","topic":"\#(weather)""#
        case 3: #","topic":"\#(games)""#
        default: #","topic":"\#(legacy)""#
        }
        if let override { return #"{"token":"\#(token)","payload":\#(payload),"topic":"\#(override)"}"# }
        return #"{"token":"\#(token)","payload":\#(payload)\#(fields)}"#
    }

    static func topic(of n: Int) -> String { [news, news, weather, games, legacy][n % 5] }

    static func arguments(_ workspace: Workspace, port: Int) -> [String] {
        ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(port)", "--input", workspace.path("campaign.jsonl"),
         "--credentials", workspace.path("credentials.json"), "--topic", news, "--ca", workspace.path("ca.pem"),
         "--no-token-cache", "--report", workspace.path("report.json")]
    }

    static func writeCampaign(_ workspace: Workspace, lines: Int, overrides: [Int: String] = [:]) throws {
        let text = (1...lines).map { line($0, topic: overrides[$0]) }.joined(separator: "\n") + "\n"
        try text.write(toFile: workspace.path("campaign.jsonl"), atomically: true, encoding: .utf8)
    }

    @Test func oneCampaignOfThreeAppsFromTwoTeamsAndOneByCertificateIsExactPerTopic() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try Self.rig(workspace)
        defer { rig.gateway.stop() }
        let lines = 2000
        try Self.writeCampaign(workspace, lines: lines)
        let checkpoint = workspace.path("campaign.ckpt")
        let arguments = Self.arguments(workspace, port: rig.gateway.port) + ["--checkpoint", checkpoint]
        let (status, output, errors) = try await SendCommandTests.run(arguments)
        #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")

        var expected: [String: TopicCounts] = [:]
        for n in 1...lines {
            expected[Self.topic(of: n), default: TopicCounts()].submitted += 1
            if n % 97 == 13 {
                expected[Self.topic(of: n)]!.rejectedByReason["Unregistered", default: 0] += 1
            } else {
                expected[Self.topic(of: n)]!.accepted += 1
            }
        }
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.isComplete && report.submitted == lines && report.failed == 0)
        #expect(report.byTopic == expected, "\(report.byTopic)")
        let games = try #require(expected[Self.games])
        #expect(output.contains("  \(Self.games): submitted \(games.submitted), accepted \(games.accepted), rejected \(games.rejected)"),
                "stdout: \(output)")

        let live = (1...lines).filter { $0 % 97 != 13 }
        let mock = rig.statistics { $0.accepted >= live.count }
        #expect(mock.accepted == live.count && mock.acceptedDigests == H2LoopbackRig.digests(live))
        let teamOf = [Self.news: Self.teamA, Self.weather: Self.teamA, Self.games: Self.teamB]
        for request in try #require(mock.acceptedRequests) {
            let topic = request.topic ?? ""
            let bundleID = topic.hasSuffix(".voip") ? String(topic.dropLast(".voip".count)) : topic
            #expect(request.team == teamOf[bundleID], "\(topic) carried the token of \(request.team ?? "no team")")
        }

        // The checkpoint records every line: a resume has nothing left to send.
        let (again, resumed, _) = try await SendCommandTests.run(arguments + ["--resume"])
        #expect(again == 0 && resumed.contains("nothing left to send"), "stdout: \(resumed)")
        #expect(rig.gateway.statistics().accepted == live.count)
    }

    @Test func aLineWhoseTopicNoEntryServesStopsTheRunBeforeAnythingIsSentOrIsSkipped() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try Self.rig(workspace)
        defer { rig.gateway.stop() }
        try Self.writeCampaign(workspace, lines: 300, overrides: [250: "com.example.unknown"])
        let arguments = Self.arguments(workspace, port: rig.gateway.port)
        let (refused, _, errors) = try await SendCommandTests.run(arguments)
        #expect(refused == 2, "stderr: \(errors)")
        #expect(errors.contains("line 250") && errors.contains("com.example.unknown") && errors.contains("nothing was sent"),
                "stderr: \(errors)")
        #expect(rig.gateway.statistics().requests == 0, "nothing was sent")

        let (status, output, skipErrors) = try await SendCommandTests.run(arguments + ["--on-bad-line", "skip"])
        #expect(status == 0, "stdout: \(output)\nstderr: \(skipErrors)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.submitted == 299 && report.isComplete)
        let json = try String(contentsOfFile: workspace.path("report.json"), encoding: .utf8)
        #expect(json.contains(#""line" : 250"#) && json.contains("com.example.unknown"), "\(json)")
    }

    @Test func aBadKeyFileInTheCredentialsIsRefusedNamingTheFileAndTheEntry() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try Self.rig(workspace)
        defer { rig.gateway.stop() }
        try Self.writeCampaign(workspace, lines: 20)
        let arguments = Self.arguments(workspace, port: rig.gateway.port)

        // Team B's key readable by every user: refused, unless allowed.
        chmod(workspace.path("AuthKey_\(Self.keyB).p8"), 0o644)
        let (readable, _, readableErrors) = try await SendCommandTests.run(arguments)
        #expect(readable == 2)
        #expect(readableErrors.contains("entry 2 (team \(Self.teamB))") && readableErrors.contains("AuthKey_\(Self.keyB).p8")
                    && readableErrors.contains("--allow-world-readable-key"), "stderr: \(readableErrors)")
        let (allowed, _, allowedErrors) = try await SendCommandTests.run(arguments + ["--allow-world-readable-key"])
        #expect(allowed == 0, "stderr: \(allowedErrors)")
        let accepted = rig.gateway.statistics().accepted

        // Team B's key is not a key at all.
        try "not a key\n".write(toFile: workspace.path("broken.p8"), atomically: true, encoding: .utf8)
        chmod(workspace.path("broken.p8"), 0o600)
        try Self.writeCredentials(workspace, keyB: "broken.p8")
        let (broken, _, brokenErrors) = try await SendCommandTests.run(arguments)
        #expect(broken == 2)
        #expect(brokenErrors.contains("entry 2 (team \(Self.teamB))") && brokenErrors.contains("broken.p8"), "stderr: \(brokenErrors)")

        // A key file that is not there.
        try Self.writeCredentials(workspace, keyB: "missing.p8")
        let (missing, _, missingErrors) = try await SendCommandTests.run(arguments)
        #expect(missing == 2)
        #expect(missingErrors.contains("entry 2 (team \(Self.teamB))") && missingErrors.contains("missing.p8"), "stderr: \(missingErrors)")
        #expect(rig.gateway.statistics().accepted == accepted, "the refused runs sent nothing")
    }

    /// The gateway refuses team B's key: the run stops, having sent team A's and the
    /// certificate's lines until then, and its checkpoint holds. The resume, against a
    /// gateway that knows both keys, sends the rest: every line is accepted, and none the
    /// checkpoint records as done goes twice.
    @Test func aRunStoppedByOneTeamsRefusedKeyResumesWithNothingLostAndNothingDoneSentTwice() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (pemA, pemB) = try Self.writeKeys(workspace)
        let lines = 3000
        // No dead tokens here: every line ends accepted.
        let text = (1...lines).map { n in
            Self.line(n, topic: Self.topic(of: n)).replacingOccurrences(of: H2LoopbackRig.deadToken(n).hex, with: LoopbackRig.token(n).hex)
        }.joined(separator: "\n") + "\n"
        try text.write(toFile: workspace.path("campaign.jsonl"), atomically: true, encoding: .utf8)
        let checkpoint = workspace.path("campaign.ckpt")

        let first = try Self.gateway(pemA, nil)
        defer { first.gateway.stop() }
        let (stopped, _, stoppedErrors) = try await SendCommandTests.run(
            Self.arguments(workspace, port: first.gateway.port) + ["--checkpoint", checkpoint])
        #expect(stopped == 1, "stderr: \(stoppedErrors)")
        #expect(stoppedErrors.contains(Self.teamB) && stoppedErrors.contains("InvalidProviderToken"), "stderr: \(stoppedErrors)")
        let done = try #require(Self.doneThrough(stoppedErrors), "stderr: \(stoppedErrors)")
        let firstAccepted = Set(first.gateway.statistics().acceptedDigests ?? [])
        #expect(done > 0 && firstAccepted.count == (1...done).filter { Self.topic(of: $0) != Self.games }.count,
                "the checkpoint covers exactly what the first run accepted: \(done), \(firstAccepted.count)")

        let second = try Self.gateway(pemA, pemB)
        defer { second.gateway.stop() }
        let (resumed, output, resumedErrors) = try await SendCommandTests.run(
            Self.arguments(workspace, port: second.gateway.port) + ["--checkpoint", checkpoint, "--resume"])
        #expect(resumed == 0, "stdout: \(output)\nstderr: \(resumedErrors)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.isComplete && report.failed == 0)
        let secondAccepted = Set(second.statistics { $0.accepted >= report.accepted }.acceptedDigests ?? [])

        #expect(firstAccepted.union(secondAccepted) == Set(H2LoopbackRig.digests(1...lines)), "every line accepted")
        // Team A's and the certificate's lines up to the checkpoint were done in the first run.
        let doneElsewhere = Set(H2LoopbackRig.digests((1..<(done + 1)).filter { Self.topic(of: $0) != Self.games }))
        #expect(secondAccepted.isDisjoint(with: doneElsewhere), "a line the checkpoint records as done was sent again")
        #expect(firstAccepted.isDisjoint(with: Set(H2LoopbackRig.digests((1...lines).filter { Self.topic(of: $0) == Self.games }))),
                "the refused team's lines went nowhere in the first run")
    }

    /// N of the checkpoint note's "lines 1–N".
    static func doneThrough(_ errors: String) -> Int? {
        guard let range = errors.range(of: #"lines 1–(\d+)"#, options: .regularExpression) else {
            return errors.contains("no line is done") ? 0 : nil
        }
        return Int(errors[range].dropFirst("lines 1–".count))
    }

    /// Both teams' tokens go to the token cache and the next run takes them from there: the
    /// gateway sees one token per team over both runs (a second token of a team within 20
    /// minutes would be refused).
    @Test func eachTeamsTokenIsSharedWithTheNextRunThroughTheTokenCache() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try Self.rig(workspace)
        defer { rig.gateway.stop() }
        try Self.writeCampaign(workspace, lines: 200)
        let cache = workspace.path("provider-tokens")
        let arguments = Self.arguments(workspace, port: rig.gateway.port).filter { $0 != "--no-token-cache" } + ["--token-cache", cache]
        for run in 1...2 {
            let (status, _, errors) = try await SendCommandTests.run(arguments)
            #expect(status == 0, "run \(run): \(errors)")
        }
        let lines = try String(contentsOfFile: cache, encoding: .utf8).split(separator: "\n")
        #expect(lines.filter { $0.hasPrefix(Self.teamA + "\t") }.count == 1 && lines.filter { $0.hasPrefix(Self.teamB + "\t") }.count == 1)
        let statistics = rig.gateway.statistics()
        #expect(statistics.providerTokensTaken == 2 && statistics.rejected(.tooManyProviderTokenUpdates) == 0,
                "tokens taken: \(statistics.providerTokensTaken)")
    }
}
