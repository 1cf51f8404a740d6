import Foundation
import SalvoPostgres
import SalvoTestSupport
import Testing

/// Push Channel tokens the NOC answered 402 for, in the device registry of a real throwaway
/// cluster: batches, the timestamp rule, scopes, and a write that fails.
@Suite(.serialized, .timeLimit(.minutes(3))) struct PushChannelRegistryTests {
    @Test func deadPushChannelTokensAreRecordedInBatchesUnlessRegisteredAfterTheirAnswer() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let database = try await CampaignDatabase.connect(try DatabaseURL(cluster.url()))
        let app = "com.example.bb"
        try cluster.psql("""
            INSERT INTO devices (token, topic, environment, registered_at, last_seen_at, invalidated_at, invalid_reason) VALUES
              ('pc-1', '\(app)', 'blackberry', now() - interval '1 day', now() + interval '1 hour', NULL, NULL),
              ('pc-2', '\(app)', 'blackberry', now() - interval '1 day', now() - interval '2 hours', now() - interval '1 hour', 'Earlier'),
              ('pc-3', '\(app)', 'blackberry', now() - interval '1 day', now() - interval '1 hour', NULL, NULL),
              ('pc-3', '\(app)', 'production', now() - interval '1 day', now() - interval '1 hour', NULL, NULL)
            """)
        // Whole seconds, so that the times read back compare exactly.
        let answered = Date(timeIntervalSince1970: Date().timeIntervalSince1970.rounded(.down))
        let count = DeviceRegistry.pushChannelBatchSize * 2 + 500
        var rejections = (0..<count).map { DeviceRegistry.PushChannelRejection(token: "pc-\($0)", answeredAt: answered) }
        rejections.append(.init(token: "pc-0", answeredAt: answered + 60))  // twice in the campaign: the first answer counts

        let invalidated = try await DeviceRegistry(database).invalidate(pushChannel: rejections, app: app)
        #expect(invalidated == count - 2, "pc-1 registered after its answer, pc-2 was invalid already")
        #expect(try cluster.psql("""
            SELECT count(*) FROM devices WHERE topic = '\(app)' AND environment = 'blackberry' AND invalid_reason = 'InvalidToken'
              AND invalidated_at = to_timestamp(\(Int(answered.timeIntervalSince1970)))
            """) == "\(count - 2)\n")
        #expect(try cluster.psql("SELECT token FROM devices WHERE invalidated_at IS NULL ORDER BY environment") == "pc-1\npc-3\n",
                "pc-1 stays valid, and pc-3 of APNs is another scope")
        #expect(try cluster.psql("SELECT invalid_reason FROM devices WHERE token = 'pc-2'") == "Earlier\n")

        // A write that fails: the tokens are counted, not kept.
        let invalidations = PushChannelInvalidations(registry: DeviceRegistry(database), app: app)
        await database.close()
        invalidations.note("pc-late")
        await invalidations.flush()
        invalidations.note("pc-later")
        let totals = invalidations.totals
        #expect(totals.invalidated == 0 && totals.unrecorded == 2)
        #expect(totals.failure?.contains("lost the connection to the database") == true, "\(totals.failure ?? "")")
    }
}
