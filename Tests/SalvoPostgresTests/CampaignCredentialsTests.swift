import Foundation
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoPostgres
import SalvoTestSupport
import SalvoWire
import Testing

extension CampaignCommandTests {
    /// `salvo campaign run --credentials`: one campaign in the database of three apps from
    /// two teams and one by certificate, sent by one worker; and a campaign with a topic no
    /// entry serves, refused before anything is sent. Nested in the serialized suite.
    @Suite struct CampaignCredentialsTests {
        static let teamA = "TEAMAAAAA1", keyA = "KEYAAAAAA1"
        static let teamB = "TEAMBBBBB2", keyB = "KEYBBBBBB2"
        static let topics = ["com.example.news", "com.example.weather", "com.example.games", "com.example.legacy"]
        static let teamOf = ["com.example.news": teamA, "com.example.weather": teamA, "com.example.games": teamB]

        /// The mock (both teams' keys; the client certificate on a connection that presents
        /// one), with the keys and a credentials file written to `files`.
        static func gateway(_ files: CampaignRig.Files) throws -> H2MockGateway {
            let pemA = try DevelopmentPKI.makeSigningKey(), pemB = try DevelopmentPKI.makeSigningKey()
            for (name, pem) in [("A.p8", pemA), ("B.p8", pemB)] {
                try pem.write(toFile: files.path(name), atomically: true, encoding: .utf8)
                chmod(files.path(name), 0o600)
            }
            let json = """
                [{"team_id": "\(teamA)", "key_id": "\(keyA)", "key": "A.p8", "topics": ["\(topics[0])", "\(topics[1])"]},
                 {"team_id": "\(teamB)", "key_id": "\(keyB)", "key": "B.p8", "topics": ["\(topics[2])"]},
                 {"certificate": "client.pem", "private_key": "client.key", "topics": ["\(topics[3])"]}]
                """
            try json.write(toFile: files.path("credentials.json"), atomically: true, encoding: .utf8)
            var tls = TLSConfiguration.server(certificateChain: CampaignRig.pki.server.certificate,
                                              privateKey: CampaignRig.pki.server.privateKey,
                                              clientCertificateRoots: .certificates(CampaignRig.pki.authority.certificate))
            tls.requireClientCertificate = false
            var configuration = H2MockGateway.Configuration(tls: tls, loops: 2, recordAccepted: true, recordRequests: true)
            configuration.tokenVerifiers = [try ProviderTokenVerifier(authKeyPEM: pemA, keyID: keyA, teamID: teamA),
                                            try ProviderTokenVerifier(authKeyPEM: pemB, keyID: keyB, teamID: teamB)]
            return try H2MockGateway(configuration)
        }

        /// Line n: token n, its topic `topics[n % 4]` (the first by the run's --topic when n
        /// is a multiple of 8), the campaign's payload.
        static func campaign(_ files: CampaignRig.Files, count: Int, topic override: [Int: String] = [:]) throws -> String {
            let payload = String(decoding: CampaignRig.payload, as: UTF8.self)
            let lines = (1...count).map { n in
                let topic = override[n] ?? topics[n % 4]
                let field = n % 8 == 0 && override[n] == nil ? "" : #","topic":"\#(topic)""#
                return #"{"token":"\#(CampaignRig.token(n).hex)","payload":\#(payload)\#(field)}"#
            }
            let path = files.path("campaign.jsonl")
            try (lines.joined(separator: "\n") + "\n").write(toFile: path, atomically: true, encoding: .utf8)
            return path
        }

        static func run(_ files: CampaignRig.Files, _ db: [String], port: Int) -> [String] {
            ["campaign", "run"] + db + ["--protocol", "h2", "--gateway", "127.0.0.1:\(port)", "--ca", files.path("ca.pem"),
                                        "--shards", "1", "--credentials", files.path("credentials.json"), "--topic", topics[0]]
        }

        @Test func aCampaignOfThreeAppsFromTwoTeamsAndACertificateIsSentByOneWorker() async throws {
            let cluster = try PostgresCluster()
            defer { cluster.stop() }
            let count = 2000
            let files = try CampaignRig.Files(count: 1)
            defer { files.remove() }
            let gateway = try Self.gateway(files)
            defer { gateway.stop() }
            let db = ["--db", cluster.url(), "--name", "apps"]
            let (created, _, createErrors) = try await CampaignRig.run(
                ["campaign", "create"] + db + ["--input", try Self.campaign(files, count: count), "--no-registry", "--chunk-size", "300"])
            #expect(created == 0, "\(createErrors)")

            let (status, output, errors) = try await CampaignRig.run(Self.run(files, db, port: gateway.port))
            #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
            for topic in Self.topics {
                let expected = (1...count).filter { Self.topics[$0 % 4] == topic }.count
                #expect(output.contains("  \(topic): accepted \(expected.formatted(.number.grouping(.automatic))), rejected 0, failed 0"),
                        "stdout: \(output)")
            }
            let statistics = eventually(gateway.statistics) { Set($0.acceptedDigests ?? []).count >= count }
            #expect(Set(statistics.acceptedDigests ?? []) == CampaignRig.digests(1...count))
            for request in try #require(statistics.acceptedRequests) {
                #expect(request.team == Self.teamOf[request.topic ?? ""], "\(request.topic ?? "") carried \(request.team ?? "no team")")
            }
            #expect(statistics.providerTokensTaken == 2, "one token per team")

            // The campaign's report, from the chunks' rows: exact per topic.
            let (statusCode, statusOutput, statusErrors) = try await CampaignRig.run(
                ["campaign", "status"] + db + ["--report", files.path("report.json")])
            #expect(statusCode == 0, "\(statusErrors)")
            let report = try JSONDecoder().decode(SenderReport.self, from: Data(contentsOf: URL(fileURLWithPath: files.path("report.json"))))
            #expect(report.accepted == count && report.byTopic.count == 4)
            for topic in Self.topics {
                let expected = (1...count).filter { Self.topics[$0 % 4] == topic }.count
                #expect(report.byTopic[topic] == TopicCounts(submitted: expected, accepted: expected), "\(topic): \(report.byTopic)")
                #expect(statusOutput.contains("  \(topic): accepted \(expected), rejected 0, failed 0"), "\(statusOutput)")
            }
            let stored = try cluster.psql("SELECT count(*) FROM salvo_provider_tokens", database: "postgres")
            #expect(stored.trimmingCharacters(in: .whitespacesAndNewlines) == "2", "one stored token per team: \(stored)")
        }

        @Test func aCampaignWithATopicNoEntryServesIsRefusedBeforeAnythingIsSent() async throws {
            let cluster = try PostgresCluster()
            defer { cluster.stop() }
            let files = try CampaignRig.Files(count: 1)
            defer { files.remove() }
            let gateway = try Self.gateway(files)
            defer { gateway.stop() }
            let db = ["--db", cluster.url(), "--name", "unknown"]
            let campaign = try Self.campaign(files, count: 500, topic: [321: "com.example.unknown"])
            let (created, _, createErrors) = try await CampaignRig.run(["campaign", "create"] + db + ["--input", campaign, "--no-registry"])
            #expect(created == 0, "\(createErrors)")
            let (status, _, errors) = try await CampaignRig.run(Self.run(files, db, port: gateway.port))
            #expect(status == 2, "stderr: \(errors)")
            #expect(errors.contains("com.example.unknown") && errors.contains("item 321") && errors.contains("nothing was sent"),
                    "stderr: \(errors)")
            #expect(gateway.statistics().requests == 0)
        }
    }
}
