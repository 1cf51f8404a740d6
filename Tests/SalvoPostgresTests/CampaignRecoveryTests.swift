import Foundation
import SalvoPostgres
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// Losing the database, cancelling, and the registry pruned by 410s: workers in this
/// process, a real PostgreSQL cluster, the real mock gateways.
@Suite(.serialized, .timeLimit(.minutes(3))) struct CampaignRecoveryTests {
    /// A worker whose database connections are cut mid-campaign stops with a clear error,
    /// after what it sent is final; another worker takes its chunk over (its clock moved past
    /// the lease) and finishes: nothing is lost, and what went twice is counted.
    @Test func aWorkerThatLosesTheDatabaseStopsAndItsChunkIsResumedByAnother() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let count = 6000
        let files = try CampaignRig.Files(count: count)
        defer { files.remove() }
        // Stalls of 50 ms every 100 notifications: the campaign takes a few seconds.
        let gateway = try CampaignRig.gateway(plan: FailurePlan(stallEvery: 100, stallDuration: .milliseconds(50)))
        defer { gateway.stop() }
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        defer { Task { await database.close() } }
        let store = CampaignStore(database)
        _ = try await store.create(files.campaign("c", chunkSize: 1000))
        let configuration = CampaignRig.senderConfiguration(port: gateway.port)
        let doomed = try await CampaignWorker(database: url, campaign: "c", configuration: configuration,
                                              settings: .init(name: "doomed", leaseDuration: .seconds(1)))
        let running = Task { try await doomed.run() }
        // Suspending, not blocking, while the worker's task gets going on the same threads.
        let midway = await eventuallyYielding({ (try? cluster.psql("SELECT bool_or(lease_owner = 'doomed') FROM campaign_chunks")) ?? "" },
                                              within: .seconds(60)) { $0.hasPrefix("t") }
        #expect(midway.hasPrefix("t"))
        // Cut every connection of the worker's (its producer's, its writer's, its renewals').
        let cut = try cluster.psql("""
            SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = 'salvo worker doomed'
            """)
        #expect(cut == "\(CampaignWorker.lookAhead + 2)\n")
        await #expect(throws: CampaignStoreError.self) { _ = try await running.value }

        let rescuer = try await CampaignWorker(database: url, campaign: "c", configuration: configuration,
                                               settings: .init(name: "rescuer", clockOffset: .seconds(5)))
        let rescued = try await rescuer.run()
        #expect(rescued.takeovers >= 1 || rescued.chunks >= 1)
        let status = try await store.status(of: "c")
        #expect(status.isFinished)
        #expect(status.report.accepted == count)
        let statistics = await eventuallyYielding(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= count }
        #expect(Set(statistics.acceptedDigests ?? []) == CampaignRig.digests(1...count), "nothing is lost")
        #expect(statistics.duplicates <= status.report.possibleDuplicates)
    }

    /// A worker that cannot reach the gateway (it does not trust its certificate) stops
    /// with the TLS error and marks nothing failed: the chunks it held are left to expire,
    /// and a worker that can reach the gateway sends every notification of them.
    @Test func aWorkerThatCannotReachTheGatewayLeavesItsChunksToAnother() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let count = 3000
        let files = try CampaignRig.Files(count: count)
        defer { files.remove() }
        let gateway = try CampaignRig.gateway()
        defer { gateway.stop() }
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        defer { Task { await database.close() } }
        let store = CampaignStore(database)
        _ = try await store.create(files.campaign("c", chunkSize: 500))
        let configuration = CampaignRig.senderConfiguration(port: gateway.port)
        var untrusting = configuration
        let stranger = try DevelopmentPKI.makeAuthority(commonName: "Stranger CA")
        untrusting.tls = .client(certificateChain: CampaignRig.pki.client.certificate, privateKey: CampaignRig.pki.client.privateKey,
                                 trustRoots: .certificates(stranger.certificate))
        let stranded = try await CampaignWorker(database: url, campaign: "c", configuration: untrusting,
                                                settings: .init(name: "stranded")).run
        await #expect { _ = try await stranded() } throws: { "\($0)".contains("certificate verify failed") }
        let left = try await store.status(of: "c")
        #expect(left.report.failed == 0 && left.report.accepted == 0 && left.doneChunks == 0,
                "nothing was written back as failed")

        let rescuer = try await CampaignWorker(database: url, campaign: "c", configuration: configuration,
                                               settings: .init(name: "rescuer", clockOffset: .seconds(11)))
        let rescued = try await rescuer.run()
        let status = try await store.status(of: "c")
        #expect(rescued.chunks == 6)
        #expect(status.isFinished && status.report.accepted == count && status.report.failed == 0)
        let statistics = await eventuallyYielding(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= count }
        let accepted = Set(statistics.acceptedDigests ?? [])
        #expect(accepted.count == count && accepted == CampaignRig.digests(1...count), "nothing is lost")
    }

    /// A worker whose lease is taken over while it sends (the other worker's clock is past
    /// the lease) stops that chunk at its next renewal and writes nothing over the new
    /// holder; it goes on with other chunks. Nothing is lost, duplicates are counted.
    @Test func aWorkerThatLosesItsLeaseStopsThatChunkAndWritesNothingOverTheNewHolder() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let count = 8000
        let files = try CampaignRig.Files(count: count)
        defer { files.remove() }
        // Stalls of 100 ms every 50 notifications: the campaign takes seconds, and the slow
        // worker holds its lowest chunks (the ones any worker leases first) all along.
        let gateway = try CampaignRig.gateway(plan: FailurePlan(stallEvery: 50, stallDuration: .milliseconds(100)))
        defer { gateway.stop() }
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        let store = CampaignStore(database)
        _ = try await store.create(files.campaign("c", chunkSize: 1000))
        let configuration = CampaignRig.senderConfiguration(port: gateway.port)
        // Connected before the slow worker starts, so that it leases while the other sends.
        let thief = try await CampaignWorker(database: url, campaign: "c", configuration: configuration,
                                             settings: .init(name: "thief", leaseDuration: .seconds(30), clockOffset: .seconds(5)))
        let slow = Task {
            try await CampaignWorker(database: url, campaign: "c", configuration: configuration,
                                     settings: .init(name: "slow", leaseDuration: .milliseconds(600))).run()
        }
        let holding = await eventuallyYielding({ (try? cluster.psql("SELECT bool_or(lease_owner = 'slow') FROM campaign_chunks")) ?? "" }) {
            $0.hasPrefix("t")
        }
        #expect(holding.hasPrefix("t"))
        let stolen = try await thief.run()
        let robbed = try await slow.value
        #expect(stolen.takeovers >= 1)
        #expect(robbed.lostLeases >= 1, "the slow worker noticed")
        let status = try await store.status(of: "c")
        #expect(status.isFinished)
        #expect(status.report.accepted == count, "each chunk counted once, by the holder that finished it")
        let statistics = await eventuallyYielding(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= count }
        #expect(Set(statistics.acceptedDigests ?? []) == CampaignRig.digests(1...count))
        #expect(statistics.duplicates <= status.report.possibleDuplicates)
        await database.close()
    }

    /// A cancelled campaign is not sent; cancelling twice says so.
    @Test func aCancelledCampaignIsNotSent() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 100)
        defer { files.remove() }
        let gateway = try CampaignRig.gateway()
        defer { gateway.stop() }
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        let store = CampaignStore(database)
        _ = try await store.create(files.campaign("c"))
        #expect(try await store.cancel("c"))
        #expect(try await store.cancel("c") == false)
        let summary = try await CampaignWorker(database: url, campaign: "c",
                                               configuration: CampaignRig.senderConfiguration(port: gateway.port),
                                               settings: .init(name: "w")).run()
        #expect(summary.chunks == 0 && summary.accepted == 0)
        let status = try await store.status(of: "c")
        #expect(status.isCancelled && status.report.submitted == 0)
        #expect(gateway.statistics().accepted == 0)
        await database.close()
    }

    /// Over HTTP/2, 410 Unregistered invalidates a token in the registry, unless it was
    /// registered again after Apple's timestamp; the next campaign skips the invalidated one.
    @Test func a410InvalidatesTheTokenUnlessItRegisteredAgainAfterApplesTimestamp() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        var tls = TLSConfiguration.server(certificateChain: CampaignRig.pki.server.certificate,
                                          privateKey: CampaignRig.pki.server.privateKey,
                                          clientCertificateRoots: .certificates(CampaignRig.pki.authority.certificate))
        tls.requireClientCertificate = true
        let gateway = try H2MockGateway(.init(tls: tls, loops: 1, recordAccepted: true))
        defer { gateway.stop() }
        let files = try CampaignRig.Files(count: 0)
        defer { files.remove() }
        // The mock answers 410 Unregistered to tokens ending in dead.
        func dead(_ n: Int) -> DeviceToken {
            var bytes = [UInt8](repeating: 0x5A, count: 32)
            bytes[29] = UInt8(n)
            (bytes[30], bytes[31]) = (0xDE, 0xAD)
            return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
        }
        let (gone, back) = (dead(1), dead(2))
        let tokens = [gone, back] + (1...50).map(CampaignRig.token)
        try tokens.map { $0.hex + "\n" }.joined().write(toFile: files.tokens, atomically: true, encoding: .utf8)
        let url = try DatabaseURL(cluster.url())
        let database = try await CampaignDatabase.connect(url)
        let store = CampaignStore(database)
        _ = try await store.create(files.campaign("one", registry: CampaignRig.scope))
        // `gone` was last seen an hour before its 410; `back` registered again an hour after it.
        try cluster.psql("UPDATE devices SET last_seen_at = now() - interval '1 hour' WHERE token = '\(gone.hex)'")
        try cluster.psql("UPDATE devices SET last_seen_at = now() + interval '1 hour' WHERE token = '\(back.hex)'")

        var configuration = CampaignRig.senderConfiguration(port: gateway.port)
        configuration.transport = .http2(HTTP2Options(topic: CampaignRig.scope.topic))
        let summary = try await CampaignWorker(database: url, campaign: "one", configuration: configuration,
                                               settings: .init(name: "w")).run()
        #expect(summary.rejected == 2 && summary.accepted == 50)
        var csv = ""
        _ = try await store.writeRejected(of: "one") { csv += $0 }
        #expect(csv.contains("\(gone.hex),410,Unregistered,") && csv.contains("\(back.hex),410,Unregistered,"))
        let registry = DeviceRegistry(database)
        #expect(try await registry.state(of: gone, in: CampaignRig.scope)?.reason == "Unregistered")
        #expect(try await registry.state(of: back, in: CampaignRig.scope)?.invalidatedAt == nil,
                "registered again after Apple's timestamp: still valid")
        let next = try await store.create(CampaignDefinition(
            name: "two", input: .registry(seenSince: nil, payload: CampaignRig.payload), registry: CampaignRig.scope))
        #expect(next.total == 51, "the next campaign skips the invalidated token")
        await database.close()
    }
}
