import Foundation
import SalvoTestSupport
import Testing

/// `salvo send --target blackberry --db URL --app-id ID` as a process, against the mock NOC
/// (in-process, on loopback) and a throwaway PostgreSQL cluster: the tokens answered 402
/// are recorded dead in the device registry, and nothing else changes there.
@Suite(.serialized, .timeLimit(.minutes(3))) struct BlackBerryRegistryTests {
    static let app = "com.example.bb"

    @Test func theCampaignsDeadTokensAreInvalidatedInTheRegistryAndNothingElse() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 40, deadEvery: 10)  // tok-10-dead, tok-20-dead, tok-30-dead, tok-40-dead
        // The registry's tables, made by salvo itself (an import of no token).
        let empty = rig.path("empty.txt")
        try "".write(toFile: empty, atomically: true, encoding: .utf8)
        let (imported, _, importErrors) = try await BlackBerryCommandTests.run(
            ["registry", "import", "--db", cluster.url(), "--tokens", empty, "--topic", Self.app])
        try #require(imported == 0, "\(importErrors)")
        try cluster.psql("""
            INSERT INTO devices (token, topic, environment, registered_at, last_seen_at) VALUES
              ('tok-1', '\(Self.app)', 'blackberry', now() - interval '1 day', now() - interval '1 hour'),
              ('tok-10-dead', '\(Self.app)', 'blackberry', now() - interval '1 day', now() - interval '1 hour'),
              ('tok-20-dead', '\(Self.app)', 'blackberry', now() - interval '1 day', now() + interval '1 hour'),
              ('tok-30-dead', '\(Self.app)', 'production', now() - interval '1 day', now() - interval '1 hour'),
              ('tok-30-dead', 'com.example.other', 'blackberry', now() - interval '1 day', now() - interval '1 hour')
            """)
        let before = try cluster.psql("SELECT token, topic, environment, registered_at, last_seen_at FROM devices ORDER BY 1, 2, 3")

        let (status, output, errors) = try await BlackBerryCommandTests.run(BlackBerryCommandTests.send(rig, [
            "--input", file, "--db", cluster.url(), "--app-id", Self.app,
        ]))
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.contains("rejected  4"), "\(output)")
        // tok-20-dead registered again after the NOC's answer (its last-seen time is later).
        #expect(errors.contains("3 dead tokens recorded in the registry"), "stderr: \(errors)")
        #expect(try cluster.psql("""
            SELECT token, topic, environment, invalid_reason FROM devices
            WHERE invalidated_at BETWEEN now() - interval '3 minutes' AND now() ORDER BY 1, 2, 3
            """) == """
            tok-10-dead|\(Self.app)|blackberry|InvalidToken
            tok-30-dead|\(Self.app)|blackberry|InvalidToken
            tok-40-dead|\(Self.app)|blackberry|InvalidToken

            """)
        #expect(try cluster.psql("SELECT count(*) FROM devices WHERE invalidated_at IS NOT NULL") == "3\n")
        // The rows that were there keep their times; the two new ones are the unknown dead tokens.
        let after = try cluster.psql("""
            SELECT token, topic, environment, registered_at, last_seen_at FROM devices
            WHERE NOT (topic = '\(Self.app)' AND environment = 'blackberry' AND token IN ('tok-30-dead', 'tok-40-dead'))
            ORDER BY 1, 2, 3
            """)
        #expect(after == before)
    }

    @Test func anUnreachableRegistryOrAMissingAppIdStopsTheRunBeforeAnythingIsSent() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 10, deadEvery: 5)
        let nobody = try PostgresCluster.freePort()
        let (unreachable, _, unreachableErrors) = try await BlackBerryCommandTests.run(BlackBerryCommandTests.send(rig, [
            "--input", file, "--db", "postgres://salvo:secret@127.0.0.1:\(nobody)/postgres", "--app-id", Self.app,
        ]))
        #expect(unreachable == 2)
        #expect(unreachableErrors.contains("salvo send: cannot reach the database postgres://salvo:***@127.0.0.1:\(nobody)/postgres"),
                "stderr: \(unreachableErrors)")
        #expect(!unreachableErrors.contains("secret"), "the password is never printed")

        let (noApp, _, noAppErrors) = try await BlackBerryCommandTests.run(BlackBerryCommandTests.send(rig, [
            "--input", file, "--db", "postgres://salvo@127.0.0.1:\(nobody)/postgres",
        ]))
        #expect(noApp == 2 && noAppErrors.contains("--db needs the tokens' --app-id"), "stderr: \(noAppErrors)")

        let statistics = rig.noc.statistics()
        #expect(statistics.connections == 0 && statistics.accepted == 0 && statistics.rejected == 0, "nothing was sent")
    }
}
