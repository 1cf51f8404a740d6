import Foundation
import SalvoPostgres
import SalvoIO
import SalvoMock
import SalvoTestSupport
import Testing

extension CampaignCommandTests {
    /// The workers of a campaign share one provider token through its database: started
    /// seconds apart (their own tokens would have different `iat`s, and the gateway would
    /// refuse all but the first for 20 minutes, as APNs does), every one finishes, and the
    /// gateway sees one token. Nested in the serialized suite: one blocking test at a time.
    @Suite struct CampaignTokenSharingTests {
        @Test func threeWorkersStartedSecondsApartSendOneToken() async throws {
            let cluster = try PostgresCluster()
            defer { cluster.stop() }
            let count = 6_000
            let files = try CampaignRig.Files(count: count)
            defer { files.remove() }
            let pem = try DevelopmentPKI.makeSigningKey()
            let key = files.path("AuthKey.p8")
            try pem.write(toFile: key, atomically: true, encoding: .utf8)
            chmod(key, 0o600)
            // Answers held, and few streams, so that the workers overlap (about 300 /s each).
            let gateway = try H2MockGateway(.init(
                tls: .server(certificateChain: CampaignRig.pki.server.certificate, privateKey: CampaignRig.pki.server.privateKey),
                tokenVerifier: try ProviderTokenVerifier(authKeyPEM: pem, keyID: "SHAREKEY01", teamID: "SHARETEAM1"),
                loops: 2, failurePlan: H2FailurePlan(responseDelay: .milliseconds(300)), recordAccepted: true))
            defer { gateway.stop() }
            let db = ["--db", cluster.url(), "--name", "shared"]
            let (created, _, createErrors) = try await CampaignRig.run(
                ["campaign", "create"] + db + ["--tokens", files.tokens, "--payload", files.payloadFile, "--topic", "com.example.app",
                                              "--chunk-size", "500"])
            #expect(created == 0, "\(createErrors)")

            let run = ["campaign", "run"] + db + [
                "--protocol", "h2", "--gateway", "127.0.0.1:\(gateway.port)", "--ca", files.path("ca.pem"), "--shards", "1",
                "--max-connections", "1", "--max-streams", "100",
                "--auth-key", key, "--key-id", "SHAREKEY01", "--team-id", "SHARETEAM1", "--topic", "com.example.app",
            ]
            var workers: [ChildProcess] = []
            defer { workers.forEach { $0.kill(SIGKILL) } }
            for worker in 1...3 {
                // Two seconds apart: what the test is about, not a wait for something to happen.
                if let last = workers.last {
                    let started = ContinuousClock.now
                    _ = eventually({ ContinuousClock.now - started }, until: { $0 >= .seconds(2) })
                    #expect(last.isRunning, "worker \(worker - 1) had finished before the next started")
                }
                workers.append(try ChildProcess(CampaignRig.salvo, run + ["--worker", "w\(worker)"]))
            }
            for (number, worker) in workers.enumerated() {
                #expect(try await worker.exitStatus(within: .seconds(180)) == 0, "worker \(number + 1): \(worker.errors)")
            }
            let statistics = eventually(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= count }
            #expect(Set(statistics.acceptedDigests ?? []) == CampaignRig.digests(1...count))
            #expect(statistics.providerTokensTaken == 1 && statistics.rejected(.tooManyProviderTokenUpdates) == 0,
                    "tokens taken: \(statistics.providerTokensTaken)")
            let stored = try cluster.psql("SELECT count(*), min(length(token)) > 100 FROM salvo_provider_tokens", database: "postgres")
            #expect(stored.trimmingCharacters(in: .whitespacesAndNewlines) == "1|t", "\(stored)")
        }
    }
}
