import Foundation
import SalvoPostgres
import SalvoMock
import SalvoTestSupport
import Testing

/// `salvo campaign` and `salvo registry` end to end: the built executable, a real
/// PostgreSQL cluster, the real mock gateway.
@Suite(.serialized, .timeLimit(.minutes(5)), .ownThread("campaign-command-tests")) struct CampaignCommandTests {
    /// The number of notifications of the kill -9 test: 1M by hand (SALVO_KILL_TEST_COUNT),
    /// fewer in `make test` to keep the suite's time (see results/campaigns.md).
    static let killTestCount = Int(ProcessInfo.processInfo.environment["SALVO_KILL_TEST_COUNT"] ?? "") ?? 200_000

    /// Three workers on one campaign; one is killed with SIGKILL in the middle. Its chunks
    /// are taken over when their leases expire: the mock's accepted set is the campaign's,
    /// and what was sent twice is at most what the database counts as possible duplicates
    /// (the chunks the dead worker held, after their checkpoints).
    @Test func threeWorkersOneKilledNothingIsLostAndDuplicatesAreCounted() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let count = Self.killTestCount
        let files = try CampaignRig.Files(count: count)
        defer { files.remove() }
        let gateway = try CampaignRig.gateway()
        defer { gateway.stop() }
        let db = ["--db", cluster.url(), "--name", "big"]
        let (created, createOutput, createErrors) = try await CampaignRig.run(
            ["campaign", "create"] + db + ["--tokens", files.tokens, "--payload", files.payloadFile, "--topic", "com.example.app",
                                          "--chunk-size", "5000"])
        #expect(created == 0, "\(createErrors)")
        #expect(createOutput.contains("\(count.formatted(.number.grouping(.automatic))) notifications in \(count / 5000) chunks"))

        let run = ["campaign", "run"] + db + ["--gateway", "127.0.0.1:\(gateway.port)", "--error-wait-ms", "100",
                                              "--retention-ms", "200", "--shards", "1", "--lease-seconds", "3"] + files.tlsArguments
        let workers = try (1...3).map { try ChildProcess(CampaignRig.salvo, run + ["--worker", "w\($0)"]) }
        defer { workers.forEach { $0.kill(SIGKILL) } }
        // Kill w1 once a fifth of the chunks are done and it holds one.
        let chunks = count / 5000
        let killable = eventually({ (try? cluster.psql("""
            SELECT (SELECT count(*) FROM campaign_chunks WHERE done) >= \(chunks / 5)
               AND EXISTS (SELECT 1 FROM campaign_chunks WHERE lease_owner = 'w1')
            """)) ?? "" }, within: .seconds(60)) { $0.hasPrefix("t") }
        #expect(killable.hasPrefix("t"), "w1 never held a chunk mid-campaign")
        workers[0].kill(SIGKILL)
        #expect(try await workers[0].exitStatus(within: .seconds(10)) == SIGKILL + 128 || !workers[0].isRunning)
        // What it can have sent twice: the chunks it held when it died (in flight, being
        // read, leased next), read before any of them can expire.
        let held = Int(try cluster.psql("SELECT count(*) FROM campaign_chunks WHERE lease_owner = 'w1' AND NOT done")
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(held >= 1)
        for worker in workers.dropFirst() {
            let status = try await worker.exitStatus(within: .seconds(180))
            #expect(status == 0, "\(worker.errors)")
        }

        let (statusCode, statusOutput, _) = try await CampaignRig.run(["campaign", "status"] + db + ["--report", files.path("report.json")])
        #expect(statusCode == 0)
        #expect(statusOutput.contains("(finished, binary protocol)"))
        let report = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: files.path("report.json")))) as! [String: Any]
        #expect(report["accepted"] as? Int == count)
        #expect(report["failed"] as? Int == 0)
        let possibleDuplicates = try #require(report["possible_duplicates"] as? Int)
        let statistics = eventually(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= count }
        #expect(Set(statistics.acceptedDigests ?? []) == CampaignRig.digests(1...count), "the mock's accepted set is the campaign's")
        #expect(statistics.duplicates <= possibleDuplicates, "sent twice: \(statistics.duplicates), counted: \(possibleDuplicates)")
        // Each takeover counts the rest of its chunk after the checkpoint: at most a chunk.
        // The dead worker's chunks are taken over; a live worker whose renewal came late on
        // this loaded machine loses its chunk the same way, and that is counted too.
        let takeovers = Int(try cluster.psql("SELECT sum(takeovers) FROM campaign_chunks")
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(takeovers >= held, "every chunk the dead worker held was taken over")
        #expect(possibleDuplicates <= 5000 * takeovers, "at most the taken-over chunks after their checkpoints")
    }

    /// An unreachable database, wrong credentials, a newer schema, a name taken: each a
    /// clear error and exit 2; a name full of SQL is just a name.
    @Test func badInputIsRefusedClearlyWithExitTwo() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 10)
        defer { files.remove() }
        let create = ["campaign", "create", "--tokens", files.tokens, "--payload", files.payloadFile, "--no-registry"]

        let nobody = try PostgresCluster.freePort()
        let (unreachable, _, unreachableErrors) = try await CampaignRig.run(
            create + ["--db", "postgres://salvo:x@127.0.0.1:\(nobody)/postgres", "--name", "n"])
        #expect(unreachable == 2)
        #expect(unreachableErrors.contains("cannot reach the database postgres://salvo:***@127.0.0.1:\(nobody)/postgres: nothing "
                                           + "listens on 127.0.0.1 port \(nobody) (connection refused); is PostgreSQL running there"),
                "\(unreachableErrors)")

        let (refused, _, refusedErrors) = try await CampaignRig.run(create + ["--db", cluster.url(password: "wrong"), "--name", "n"])
        #expect(refused == 2)
        #expect(refusedErrors.contains("refused the credentials of user salvo"), "\(refusedErrors)")
        #expect(!refusedErrors.contains("wrong"), "the password is never printed")

        let sneaky = "x'); DROP TABLE campaigns; --"
        let (first, _, firstErrors) = try await CampaignRig.run(create + ["--db", cluster.url(), "--name", sneaky])
        #expect(first == 0, "\(firstErrors)")
        #expect(try cluster.psql("SELECT name FROM campaigns").contains(sneaky))
        let (again, _, againErrors) = try await CampaignRig.run(create + ["--db", cluster.url(), "--name", sneaky])
        #expect(again == 2)
        #expect(againErrors.contains("exists already: give --replace"))
        let (replaced, _, _) = try await CampaignRig.run(create + ["--db", cluster.url(), "--name", sneaky, "--replace"])
        #expect(replaced == 0)

        let (badToken, _, badTokenErrors) = try await CampaignRig.run(
            ["campaign", "create", "--db", cluster.url(), "--name", "bad", "--input", files.tokens, "--no-registry"])
        #expect(badToken == 2)
        #expect(badTokenErrors.contains("line 1"), "\(badTokenErrors)")
        #expect(try cluster.psql("SELECT count(*) FROM campaigns WHERE name = 'bad'").hasPrefix("0"), "nothing is left behind")

        try cluster.psql("UPDATE salvo_schema_version SET version = 99")
        let (newer, _, newerErrors) = try await CampaignRig.run(["campaign", "status", "--db", cluster.url(), "--name", sneaky])
        #expect(newer == 2)
        #expect(newerErrors.contains("schema version 99"))
    }

    /// `salvo registry serve`: a POST registers a token, again is idempotent, bad requests
    /// get 400 with the reason; `registry import` loads a file.
    @Test func theRegistrationEndpointValidatesAndIsIdempotent() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 100)
        defer { files.remove() }
        let server = try ChildProcess(CampaignRig.salvo, ["registry", "serve", "--db", cluster.url(), "--port", "0"])
        defer { server.kill(SIGTERM) }
        let line = try await server.firstLine(within: .seconds(30))
        let port = try #require(line.split(separator: ":").last.map(String.init))
        func post(_ body: String, path: String = "/devices") async throws -> String {
            let curl = try ChildProcess("/usr/bin/curl", ["-s", "-o", "/dev/stdout", "-w", " %{http_code}", "-X", "POST",
                                                          "-H", "content-type: application/json", "--data", body,
                                                          "http://127.0.0.1:\(port)\(path)"])
            _ = try await curl.exitStatus(within: .seconds(30))
            return curl.output
        }
        let token = CampaignRig.token(1).hex
        #expect(try await post(#"{"token":"\#(token)","topic":"com.example.app"}"#).hasSuffix(" 201"))
        #expect(try await post(#"{"token":"\#(token)","topic":"com.example.app"}"#).hasSuffix(" 200"))
        let bad = try await post(#"{"token":"abc","topic":"com.example.app"}"#)
        #expect(bad.hasSuffix(" 400") && bad.contains("token"))
        #expect(try await post(#"{"token":"\#(token)","topic":"com.example.app","environment":"moon"}"#).hasSuffix(" 400"))
        #expect(try await post(#"{"token":"\#(token)","topic":"x'; DROP TABLE devices; --"}"#).hasSuffix(" 400"))
        #expect(try await post("{}", path: "/elsewhere").hasSuffix(" 404"))
        #expect(try cluster.psql("SELECT count(*) FROM devices") == "1\n")

        let (imported, importOutput, importErrors) = try await CampaignRig.run(
            ["registry", "import", "--db", cluster.url(), "--tokens", files.tokens, "--topic", "com.example.app"])
        #expect(imported == 0, "\(importErrors)")
        #expect(importOutput.contains("imported 100 tokens"))
        #expect(try cluster.psql("SELECT count(*) FROM devices") == "100\n")
    }

    /// `salvo feedback --db`: the feedback service's tokens are invalidated in the registry,
    /// except one registered again after the time APNs gave for it.
    @Test func feedbackInvalidatesTokensNotRegisteredAgainSince() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 2)
        defer { files.remove() }
        let (imported, _, importErrors) = try await CampaignRig.run(
            ["registry", "import", "--db", cluster.url(), "--tokens", files.tokens, "--topic", "com.example.app"])
        #expect(imported == 0, "\(importErrors)")
        let now = Int(Date().timeIntervalSince1970)
        let mock = try ChildProcess(CampaignRig.salvo, [
            "mock", "--port", "0", "--feedback-port", "0", "--cert", files.path("server.pem"), "--key", files.path("server.key"),
            "--ca", files.path("ca.pem"), "--require-client-cert",
            "--feedback-tuple", "\(now + 3600):\(CampaignRig.token(1).hex)",  // gone after it registered
            "--feedback-tuple", "\(now - 3600):\(CampaignRig.token(2).hex)",  // registered after it was gone
        ])
        defer { mock.kill(SIGTERM) }
        let line = try await mock.firstLine(within: .seconds(30))
        let feedbackPort = try #require(line.split(separator: "=").last.map(String.init))
        let (status, output, errors) = try await CampaignRig.run(
            ["feedback", "--host", "127.0.0.1:\(feedbackPort)", "--db", cluster.url(), "--topic", "com.example.app"]
                + files.tlsArguments)
        #expect(status == 0, "\(errors)")
        #expect(output.contains(CampaignRig.token(1).hex) && output.contains(CampaignRig.token(2).hex))
        #expect(errors.contains("1 invalidated in the registry"))
        #expect(try cluster.psql("SELECT token, invalid_reason FROM devices WHERE invalidated_at IS NOT NULL")
                == "\(CampaignRig.token(1).hex)|Feedback\n")
    }
}
