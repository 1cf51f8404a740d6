import Foundation
import SalvoPostgres
import SalvoEngine
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// Workers in this process against a real PostgreSQL cluster and the real mock gateway.
@Suite(.serialized, .timeLimit(.minutes(3))) struct CampaignWorkerTests {
    /// Two workers share a campaign; the database's totals are the mock's, the rejected
    /// tokens (binary status 8) are listed and invalidated in the registry, and the next
    /// campaign from the registry leaves them out.
    @Test func twoWorkersShareACampaignAndItsRejectionsPruneTheRegistry() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let count = 8_000
        let files = try CampaignRig.Files(count: count)
        defer { files.remove() }
        let gateway = try CampaignRig.gateway(plan: FailurePlan(invalidTokenSuffix: [0x07]))
        defer { gateway.stop() }
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        // A failure closes the connection before it is reported: PostgresNIO traps on a
        // connection dropped open.
        do {
            let store = CampaignStore(database)
            let created = try await store.create(files.campaign("spring", registry: CampaignRig.scope, chunkSize: 400))
            #expect(created.total == count && created.chunks == 20 && created.skippedInvalidated == 0 && created.badLineCount == 0)

            let configuration = CampaignRig.senderConfiguration(port: gateway.port)
            async let first = CampaignWorker(database: url, campaign: "spring", configuration: configuration,
                                             settings: .init(name: "a")).run()
            async let second = CampaignWorker(database: url, campaign: "spring", configuration: configuration,
                                              settings: .init(name: "b")).run()
            let (a, b) = try await (first, second)
            #expect(a.chunks + b.chunks == 20)

            let invalid = (1...count).filter { $0 & 0xff == 0x07 }
            let status = try await store.status(of: "spring")
            #expect(status.isFinished)
            #expect(status.report.accepted == count - invalid.count)
            #expect(status.report.rejected == invalid.count)
            #expect(status.report.rejectedByReason == ["invalid_token": invalid.count])
            #expect(status.report.failed == 0)
            #expect(Set(status.workers.map(\.name)) == ["a", "b"] || a.chunks == 0 || b.chunks == 0)
            #expect(status.workers.reduce(0) { $0 + $1.final } == count)
            let expected = CampaignRig.digests((1...count).filter { $0 & 0xff != 0x07 })
            let seen = await eventuallyYielding(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= expected.count }
            #expect(Set(seen.acceptedDigests ?? []) == expected, "the mock's accepted set is the campaign's")

            var csv = ""
            #expect(try await store.writeRejected(of: "spring") { csv += $0 } == invalid.count)
            #expect(Set(csv.split(separator: "\n").dropFirst()) == Set(invalid.map { "\(CampaignRig.token($0).hex),8,invalid_token," }))

            let registry = DeviceRegistry(database)
            #expect(try await registry.state(of: CampaignRig.token(invalid[0]), in: CampaignRig.scope)?.reason == "invalid_token")
            #expect(try await registry.state(of: CampaignRig.token(1), in: CampaignRig.scope)?.invalidatedAt == nil)
            let next = try await store.create(CampaignDefinition(
                name: "summer", input: .registry(seenSince: nil, payload: CampaignRig.payload), registry: CampaignRig.scope))
            #expect(next.total == count - invalid.count, "the next campaign skips the invalidated tokens")
            // No token was seen in the last hour's future: such a campaign is refused, not made empty.
            let unseen = CampaignDefinition(
                name: "winter", input: .registry(seenSince: Date().addingTimeInterval(3600), payload: CampaignRig.payload),
                registry: CampaignRig.scope)
            let refusal = await #expect(throws: CampaignStoreError.self) { try await store.create(unseen) }
            #expect(refusal?.description.contains("would have no notifications") == true)
            let again = try await store.create(files.campaign("autumn", registry: CampaignRig.scope))
            #expect(again.total == count - invalid.count && again.skippedInvalidated == invalid.count)
            // Its invalidated tokens are left out of its packed chunks: each of the others goes once.
            let autumn = try await CampaignWorker(database: url, campaign: "autumn", configuration: configuration,
                                                  settings: .init(name: "c")).run()
            #expect(autumn.accepted == expected.count && autumn.rejected == 0 && autumn.chunks == again.chunks)
            #expect(try await store.status(of: "autumn").report.accepted == expected.count)
            // The mock took each notification once per campaign, and once more only where a
            // worker said it might have (a connection lost unjudged, a lease taken over).
            let mayRepeat = try await status.report.possibleDuplicates + store.status(of: "autumn").report.possibleDuplicates
            let twice = await eventuallyYielding(gateway.statistics) { $0.accepted >= 2 * expected.count }
            #expect((2 * expected.count...2 * expected.count + mayRepeat).contains(twice.accepted),
                    "the mock accepted \(twice.accepted); expected \(2 * expected.count) and at most \(mayRepeat) possible duplicates")
            #expect(Set(twice.acceptedDigests ?? []) == expected)
        } catch {
            await database.close()
            throw error
        }
        await database.close()
    }

    /// A JSONL campaign keeps each line's payload (backslashes and quotes through COPY's
    /// text format intact), expiry and priority; a line with per-line HTTP/2 fields is
    /// refused with its number, and nothing is left behind.
    @Test func aJSONLCampaignKeepsEveryLinesPayload() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 0)
        defer { files.remove() }
        let gateway = try CampaignRig.gateway()
        defer { gateway.stop() }
        let payloads = (1...300).map { #"{"aps":{"alert":"line \#($0): a \"quote\", a \\ and\ttab"},"n":\#($0)}"# }
        let lines = payloads.enumerated().map { #"{"token":"\#(CampaignRig.token($0.offset + 1).hex)","payload":\#($0.element),"priority":5,"expiry":2000000000}"# }
        try (lines.joined(separator: "\n") + "\n").write(toFile: files.path("c.jsonl"), atomically: true, encoding: .utf8)
        try (lines[0] + "\n" + #"{"token":"\#(CampaignRig.token(2).hex)","payload":{},"push_type":"background"}"# + "\n")
            .write(toFile: files.path("h2.jsonl"), atomically: true, encoding: .utf8)
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        let store = CampaignStore(database)
        // A line's own HTTP/2 headers go with it, as a file campaign's do.
        let h2 = try await store.create(CampaignDefinition(name: "h2", input: .file(.jsonl(files.path("h2.jsonl")), onBadLine: .abort),
                                                           registry: nil))
        #expect(h2.total == 2)
        #expect(try cluster.psql("SELECT coalesce(push_type, '-') FROM campaign_items ORDER BY seq") == "-\nbackground\n")
        let created = try await store.create(CampaignDefinition(name: "c", input: .file(.jsonl(files.path("c.jsonl")), onBadLine: .abort),
                                                                registry: nil, chunkSize: 100))
        #expect(created.total == 300)
        let summary = try await CampaignWorker(database: url, campaign: "c",
                                               configuration: CampaignRig.senderConfiguration(port: gateway.port),
                                               settings: .init(name: "w")).run()
        #expect(summary.accepted == 300)
        // The payloads as sent: each line's JSON, minified already.
        let expected = Set(payloads.enumerated().map {
            MockStatistics.digest(token: CampaignRig.token($0.offset + 1), payload: Array($0.element.utf8))
        })
        let seen = await eventuallyYielding(gateway.statistics) { ($0.acceptedDigests ?? []).count >= 300 }
        #expect(Set(seen.acceptedDigests ?? []) == expected)
        #expect(try cluster.psql("SELECT DISTINCT i.priority || ' ' || i.expiry FROM campaign_items i JOIN campaigns c "
                                 + "ON c.id = i.campaign_id WHERE c.name = 'c'") == "5 2000000000\n")
        await database.close()
    }

    /// Leases judged at a clock the test moves: a lease that expired is taken over (what
    /// its holder may have sent is counted as possible duplicates), and the old holder can
    /// neither renew it nor write over the new one.
    @Test func anExpiredLeaseIsTakenOverAndItsFormerHolderCannotWriteBack() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 30)
        defer { files.remove() }
        let url = try DatabaseURL(cluster.url())
        let (one, two) = (try await CampaignDatabase.connect(url), try await CampaignDatabase.connect(url))
        let a = CampaignStore(one)
        var b = CampaignStore(two)
        _ = try await a.create(files.campaign("c", chunkSize: 10))
        let campaign = try await a.campaign(named: "c")

        let held = try #require(try await a.lease(campaign.id, worker: "a", for: .seconds(60)))
        #expect(held.firstSequence == 1 && !held.isTakeover)
        #expect(try await b.lease(campaign.id, worker: "b", for: .seconds(60))?.firstSequence == 11)
        #expect(try await b.lease(campaign.id, worker: "b", for: .seconds(60))?.firstSequence == 21)
        #expect(try await b.lease(campaign.id, worker: "b", for: .seconds(60)) == nil, "every chunk is validly leased")

        b.clockOffset = .seconds(61)  // a's lease has expired at b's time
        let taken = try #require(try await b.lease(campaign.id, worker: "b", for: .seconds(60)))
        #expect(taken.firstSequence == 1 && taken.isTakeover && taken.generation == held.generation + 1)
        #expect(try await a.renew(held, worker: "a", for: .seconds(60)) == .lost)

        var stale = CampaignStore.ChunkOutcome(completedThrough: 10, isDone: true)
        stale.accepted = 10
        #expect(try await a.writeBack(stale, for: held, of: campaign, worker: "a") == false)
        var outcome = CampaignStore.ChunkOutcome(completedThrough: 10, isDone: true)
        outcome.accepted = 9
        outcome.rejected = 1
        outcome.rejectedByReason = ["Unregistered": 1]
        #expect(try await b.writeBack(outcome, for: taken, of: campaign, worker: "b"))

        let status = try await a.status(of: "c")
        #expect(status.doneChunks == 1 && status.takeovers == 1)
        #expect(status.report.accepted == 9 && status.report.rejected == 1, "the old holder's counts were not written")
        #expect(status.report.possibleDuplicates == 10, "everything after the checkpoint may have been sent by a")
        #expect(status.report.rejectedByReason == ["Unregistered": 1])
        await one.close()
        await two.close()
    }

    /// A campaign with one payload is stored packed, no row per item; a chunk resumed after
    /// a checkpoint in its middle reads exactly the items after it.
    @Test func aPackedChunkResumesAfterItsCheckpoint() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 25)
        defer { files.remove() }
        let database = try await CampaignDatabase.connect(try DatabaseURL(cluster.url()))
        let store = CampaignStore(database)
        let created = try await store.create(files.campaign("c", chunkSize: 10))
        #expect(created.total == 25 && created.chunks == 3)
        #expect(try cluster.psql("SELECT count(*) FROM campaign_items") == "0\n")
        #expect(try cluster.psql("SELECT string_agg(first_seq || '-' || last_seq || ':' || length(tokens), ' ' ORDER BY first_seq) "
                                 + "FROM campaign_chunks") == "1-10:320 11-20:320 21-25:160\n")
        let campaign = try await store.campaign(named: "c")

        let lease = try #require(try await store.lease(campaign.id, worker: "w", for: .seconds(60)))
        let whole = try await store.items(of: lease, in: campaign)
        #expect(whole.sequences == Array(1...10))
        #expect(tokens(of: whole.list) == (1...10).map(CampaignRig.token))
        var outcome = CampaignStore.ChunkOutcome(completedThrough: 4, isDone: false)
        outcome.accepted = 4
        #expect(try await store.writeBack(outcome, for: lease, of: campaign, worker: "w"))

        let resumed = try #require(try await store.lease(campaign.id, worker: "w", for: .seconds(60)))
        #expect(resumed.firstSequence == 1 && resumed.completedThrough == 4)
        let rest = try await store.items(of: resumed, in: campaign)
        #expect(rest.sequences == Array(5...10))
        #expect(tokens(of: rest.list) == (5...10).map(CampaignRig.token))
        await database.close()
    }

    private func tokens(of list: NotificationList) -> [DeviceToken] {
        let reader = list.makeReader()
        return Array(sequence(state: reader) { $0.next()?.token })
    }

    /// A database at schema version 1 (tokens as rows, chunks not packed) is brought to
    /// version 2, and the campaigns it holds are still sent, row by row, each token once.
    @Test func aVersionOneDatabaseIsUpgradedAndItsCampaignsStillRun() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 30)
        defer { files.remove() }
        let gateway = try CampaignRig.gateway()
        defer { gateway.stop() }
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        _ = try await CampaignStore(database).create(files.campaign("old", chunkSize: 10))
        await database.close()
        // As version 1 stored it: a row per token, no packed chunks.
        _ = try cluster.psql("""
            INSERT INTO campaign_items (campaign_id, seq, token)
            SELECT k.campaign_id, k.first_seq + i, encode(substring(k.tokens FROM i::integer * 32 + 1 FOR 32), 'hex')
            FROM campaign_chunks k, generate_series(0, k.last_seq - k.first_seq) AS i;
            ALTER TABLE campaign_chunks DROP COLUMN tokens;
            UPDATE salvo_schema_version SET version = 1;
            """)

        let summary = try await CampaignWorker(database: url, campaign: "old",
                                               configuration: CampaignRig.senderConfiguration(port: gateway.port),
                                               settings: .init(name: "w")).run()
        #expect(summary.accepted == 30 && summary.chunks == 3)
        #expect(try cluster.psql("SELECT version FROM salvo_schema_version") == "4\n", "upgraded to the current version")
        #expect(try cluster.psql("SELECT attstorage FROM pg_attribute WHERE attrelid = 'campaign_chunks'::regclass "
                                 + "AND attname = 'tokens'") == "e\n", "stored out of line, uncompressed")
        let expected = CampaignRig.digests(1...30)
        let seen = await eventuallyYielding(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= expected.count }
        #expect(Set(seen.acceptedDigests ?? []) == expected)
    }

    /// The registry's timestamp rule: a token reported dead at T is invalidated unless it
    /// was registered again after T; registering makes it valid again.
    @Test func aTokenRegisteredAgainAfterItsDeathStaysValid() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let database = try await CampaignDatabase.connect(try DatabaseURL(cluster.url()))
        let registry = DeviceRegistry(database)
        let (old, renewed) = (CampaignRig.token(1), CampaignRig.token(2))
        #expect(try await registry.register(old, in: CampaignRig.scope))
        #expect(try await registry.register(renewed, in: CampaignRig.scope))
        #expect(try await registry.register(renewed, in: CampaignRig.scope) == false, "registering is idempotent")
        let now = UInt32(Date().timeIntervalSince1970)
        let invalidated = try await registry.invalidate(feedback: [
            FeedbackTuple(timestamp: now + 3600, token: old),  // died after it registered
            FeedbackTuple(timestamp: now - 3600, token: renewed),  // registered after it died
        ], in: CampaignRig.scope)
        #expect(invalidated == 1)
        #expect(try await registry.state(of: old, in: CampaignRig.scope)?.reason == "Feedback")
        #expect(try await registry.state(of: renewed, in: CampaignRig.scope)?.invalidatedAt == nil)
        try await registry.register(old, in: CampaignRig.scope)
        #expect(try await registry.state(of: old, in: CampaignRig.scope)?.invalidatedAt == nil, "registered again: valid")
        await database.close()
    }
}
