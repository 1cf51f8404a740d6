import Foundation
import SalvoPostgres
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// What a user of database campaigns meets: lines with their own headers, an empty
/// campaign, a takeover's duplicates counted alike by the worker and the status, the rate
/// over the active time, HTTP/2 words for HTTP/2 campaigns. The built executable against a
/// real PostgreSQL cluster and the real mocks.
extension CampaignCommandTests {
    /// The HTTP/2 mock, recording every accepted request's headers; client certificates.
    static func h2Gateway() throws -> H2MockGateway {
        var tls = TLSConfiguration.server(certificateChain: CampaignRig.pki.server.certificate,
                                          privateKey: CampaignRig.pki.server.privateKey,
                                          clientCertificateRoots: .certificates(CampaignRig.pki.authority.certificate))
        tls.requireClientCertificate = true
        return try H2MockGateway(.init(tls: tls, loops: 1, recordAccepted: true, recordRequests: true))
    }

    /// A JSONL campaign whose lines name their own push type, topic, collapse id and
    /// apns-id is stored with them, and its worker sends them as written: the headers
    /// arrive at the gateway. Its status speaks HTTP/2, and its rate is over the time it was
    /// active, not the time since.
    @Test func aJSONLCampaignsOwnHeadersReachTheGatewayAndItsStatusSpeaksHTTP2() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 1)
        defer { files.remove() }
        let gateway = try Self.h2Gateway()
        defer { gateway.stop() }
        let payload = #"{"aps":{"alert":"hi"}}"#
        let uuid = "123e4567-e89b-12d3-a456-426614174000"
        let lines = [
            #"{"token":"\#(CampaignRig.token(1).hex)","payload":\#(payload),"push_type":"voip","topic":"com.example.app.voip","#
                + #""collapse_id":"tab\tand\\slash","apns_id":"\#(uuid)","expiration":1900000000,"priority":5}"#,
            #"{"token":"\#(CampaignRig.token(2).hex)","payload":{"aps":{"content-available":1}},"push_type":"background"}"#,
            #"{"token":"\#(CampaignRig.token(3).hex)","payload":\#(payload),"topic":"com.example.other"}"#,
            #"{"token":"\#(CampaignRig.token(4).hex)","payload":\#(payload)}"#,
        ]
        let input = files.path("campaign.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: input, atomically: true, encoding: .utf8)
        let db = ["--db", cluster.url(), "--name", "h2"]
        let (created, createOutput, createErrors) = try await CampaignRig.run(
            ["campaign", "create"] + db + ["--input", input, "--no-registry", "--chunk-size", "2"])
        #expect(created == 0, "\(createErrors)")
        #expect(createOutput.contains("4 notifications in 2 chunks"), "\(createOutput)")

        let (ran, runOutput, runErrors) = try await CampaignRig.run(
            ["campaign", "run"] + db + ["--gateway", "127.0.0.1:\(gateway.port)", "--protocol", "h2", "--topic", "com.example.app",
                                        "--shards", "1", "--lease-seconds", "3"] + files.tlsArguments)
        #expect(ran == 0, "\(runErrors)")
        #expect(runOutput.contains("accepted 4"), "\(runOutput)")
        let requests = try #require(eventually(gateway.statistics) { $0.accepted >= 4 }.acceptedRequests)
        let byToken = Dictionary(requests.map { ($0.token, $0) }, uniquingKeysWith: { first, _ in first })
        #expect(byToken[CampaignRig.token(1).hex] == H2RecordedRequest(
            token: CampaignRig.token(1).hex, pushType: "voip", topic: "com.example.app.voip", apnsID: uuid,
            expiration: "1900000000", priority: "5", collapseID: "tab\tand\\slash"))
        #expect(byToken[CampaignRig.token(2).hex]?.pushType == "background" && byToken[CampaignRig.token(2).hex]?.priority == "5")
        #expect(byToken[CampaignRig.token(3).hex]?.topic == "com.example.other" && byToken[CampaignRig.token(3).hex]?.pushType == "alert")
        #expect(byToken[CampaignRig.token(4).hex]?.topic == "com.example.app" && byToken[CampaignRig.token(4).hex]?.collapseID == nil)

        // The campaign was active 10 s, long ago: its rate is 4 / 10 s, whenever it is asked.
        try cluster.psql("UPDATE campaign_chunks SET started_at = now() - interval '100 s', written_at = now() - interval '90 s'")
        let (statusCode, status, statusErrors) = try await CampaignRig.run(["campaign", "status"] + db)
        #expect(statusCode == 0, "\(statusErrors)")
        #expect(status.contains("campaign h2 (finished, HTTP/2): 4 notifications, 4 final"), "\(status)")
        #expect(status.contains("0.4 /s over 10.00 s active (from the first lease to the last write-back)"), "\(status)")
        #expect(!status.contains("close_notify") && !status.contains("error wait"), "\(status)")
        #expect(status.contains("worker ") && status.contains(": 2 chunks, 4 final (4 accepted)"), "\(status)")
    }

    /// A chunk whose worker died is taken over: the new worker's last line counts its
    /// possible duplicates as `campaign status` does, and both say where they come from.
    @Test func aTakeoversDuplicatesAreCountedAlikeByTheWorkerAndTheStatus() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 30)
        defer { files.remove() }
        let gateway = try CampaignRig.gateway()
        defer { gateway.stop() }
        let db = ["--db", cluster.url(), "--name", "t"]
        let (created, _, createErrors) = try await CampaignRig.run(
            ["campaign", "create"] + db + ["--tokens", files.tokens, "--payload", files.payloadFile, "--no-registry",
                                          "--chunk-size", "10"])
        #expect(created == 0, "\(createErrors)")
        // A worker that leased the first chunk and died: its lease has expired.
        try cluster.psql("""
            UPDATE campaign_chunks SET lease_owner = 'ghost', lease_generation = lease_generation + 1,
                lease_expires_at = now() - interval '1 s', started_at = now() WHERE first_seq = 1
            """)
        let (ran, runOutput, runErrors) = try await CampaignRig.run(
            ["campaign", "run"] + db + ["--gateway", "127.0.0.1:\(gateway.port)", "--error-wait-ms", "50", "--shards", "1",
                                        "--worker", "w"] + files.tlsArguments)
        #expect(ran == 0, "\(runErrors)")
        #expect(runOutput.contains("worker w: 3 chunks (1 taken over, 0 lost); accepted 30, rejected 0, failed 0, possible "
                                   + "duplicates 10 (10 in the chunks it took over: what the workers before it may have sent "
                                   + "after their last write-back; 0 resent after silent drops)"), "\(runOutput)")
        let (_, status, _) = try await CampaignRig.run(["campaign", "status"] + db)
        #expect(status.contains("resent 0, possible duplicates 10 (10 in chunks taken over: what workers whose leases expired "
                                + "may have sent after their last write-back; 0 resent after silent drops)"), "\(status)")
        #expect(status.contains("(finished, binary protocol)"), "\(status)")
    }

    /// A campaign with nothing to send is refused (exit 2) and nothing is created: an empty
    /// file, a registry without a valid token of the topic.
    @Test func anEmptyCampaignIsRefusedAndNothingIsCreated() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let files = try CampaignRig.Files(count: 1)
        defer { files.remove() }
        let empty = files.path("empty.txt")
        try "# no tokens yet\n\n".write(toFile: empty, atomically: true, encoding: .utf8)
        let (status, _, errors) = try await CampaignRig.run(
            ["campaign", "create", "--db", cluster.url(), "--name", "e", "--tokens", empty, "--payload", files.payloadFile,
             "--no-registry"])
        #expect(status == 2)
        #expect(errors.contains("salvo campaign create: campaign e would have no notifications: \(empty) has no notification lines; "
                                + "nothing was created"), "\(errors)")
        let (registry, _, registryErrors) = try await CampaignRig.run(
            ["campaign", "create", "--db", cluster.url(), "--name", "r", "--from-registry", "--topic", "com.example.none",
             "--payload", files.payloadFile])
        #expect(registry == 2)
        #expect(registryErrors.contains("the device registry has no valid token of com.example.none (production)"), "\(registryErrors)")
        #expect(try cluster.psql("SELECT count(*) FROM campaigns").hasPrefix("0"), "nothing is left behind")
        let (directory, _, directoryErrors) = try await CampaignRig.run(
            ["campaign", "create", "--db", cluster.url(), "--name", "d", "--input", files.directory, "--no-registry"])
        #expect(directory == 2 && directoryErrors.contains("--input \(files.directory) is a directory; give a file"), "\(directoryErrors)")
    }
}
