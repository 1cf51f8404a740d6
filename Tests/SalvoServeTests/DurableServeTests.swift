import AsyncHTTPClient
import Foundation
import Logging
import NIOCore
import SalvoMock
import SalvoPostgres
@testable import SalvoServe
import SalvoTestSupport
import Testing

/// `salvo serve --db`: notifications journaled in a real throwaway PostgreSQL cluster before
/// they are answered, their ends written back, and what a killed serve held sent by the next.
@Suite(.serialized, .timeLimit(.minutes(5)), .ownThread("durable-serve-tests")) struct DurableServeTests {
    /// A request's notifications are in the journal when the 202 comes, their ends after the
    /// drain, and the 410's token invalidated in the registry; another instance (fresh
    /// memory) knows them through the journal: a repeated apns_id sends nothing, and GET
    /// answers their status.
    @Test func notificationsAreJournaledBeforeTheAnswerAndTheirEndsWrittenBack() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let url = try DatabaseURL(cluster.url())
        let log = LogRecorder()
        let logger = log.logger
        let journal = try await NotificationJournal.connect(url, instance: "first", leaseDuration: .seconds(10),
                                                            registry: .init(environment: .production, defaultTopic: "com.example.app"),
                                                            logger: logger)
        // Both registered an hour before the 410's timestamp.
        let (dead, alive) = (H2LoopbackRig.deadToken(1).hex, LoopbackRig.token(0).hex)
        try cluster.psql("""
            INSERT INTO devices (token, topic, environment, last_seen_at)
            VALUES ('\(dead)', 'com.example.app', 'production', now() - interval '1 hour'),
                   ('\(alive)', 'com.example.app', 'production', now() - interval '1 hour')
            """)
        // Answers held 300 ms: the notifications are pending when the 202 comes.
        let rig = try await ServeRig(mockPlan: H2FailurePlan(responseDelay: .milliseconds(300)), journal: journal, logger: logger)
        let id = "5E0C2E6B-4C9B-4E1A-9A41-0E0F7C6D5B4A"
        let answer = try await rig.post(ServeRig.batch([
            ServeRig.notification(0, extra: #","apns_id":"\#(id)""#), ServeRig.notification(1, token: H2LoopbackRig.deadToken(1)),
            ServeRig.notification(2),
        ]))
        let journaled = try cluster.psql("SELECT apns_id, lease_owner FROM serve_notifications ORDER BY apns_id")
        #expect(answer.status == 202)
        #expect(answer.json["durability"] as? String == "database")
        let ids = answer.json.notifications.compactMap { $0["id"] as? String }
        #expect(ids.count == 3)
        #expect(journaled == ids.sorted().map { "\($0)|first\n" }.joined(), "in the journal, leased, before the answer")
        try await rig.stop()  // drains, writes the ends back, closes the journal

        let ends = try cluster.psql("""
            SELECT apns_id, state, coalesce(status_code::text, ''), coalesce(reason, ''), lease_owner IS NULL
            FROM serve_notifications ORDER BY apns_id
            """)
        let expected = [(ids[0], "accepted||"), (ids[1], "rejected|410|Unregistered"), (ids[2], "accepted||")]
        #expect(ends == expected.sorted { $0.0 < $1.0 }.map { "\($0.0)|\($0.1)|t\n" }.joined(), "serve's log:\n\(log.lines)")
        let registry = try cluster.psql("SELECT token, coalesce(invalid_reason, 'valid') FROM devices ORDER BY token")
        #expect(registry == [(dead, "Unregistered"), (alive, "valid")].sorted { $0.0 < $1.0 }.map { "\($0.0)|\($0.1)\n" }.joined(),
                "the 410 invalidated its token, and only it; serve's log:\n\(log.lines)")

        let again = try await ServeRig(journal: try await NotificationJournal.connect(url, instance: "second", leaseDuration: .seconds(10),
                                                                                        logger: logger), logger: logger)
        let repeated = try await again.post(ServeRig.notification(0, extra: #","apns_id":"\#(id)""#))
        let rejected = try await again.get("/v1/notifications/\(ids[1])")
        try await again.stop()
        #expect(repeated.status == 202)
        #expect(repeated.json["taken"] as? Int == 0 && repeated.json["duplicates"] as? Int == 1)
        #expect(repeated.json.notifications.first?["state"] as? String == "accepted")
        #expect(rejected.status == 200)
        #expect(rejected.json["state"] as? String == "rejected" && rejected.json["status_code"] as? Int == 410)
        #expect(again.mock.gateway.statistics().requests == 0, "nothing sent again; serve's log:\n\(log.lines)")

        // Past the retention, final statuses go; what is pending stays.
        try cluster.psql("INSERT INTO serve_notifications (apns_id, body) VALUES ('pending', '{}')")
        let database = try await CampaignDatabase.connect(url)
        let forgotten = try await ServeJournal(database).forget(finalFor: .zero, limit: 10)
        await database.close()
        #expect(forgotten == 3)
        #expect(try cluster.psql("SELECT apns_id FROM serve_notifications") == "pending\n")
    }

    /// `kill -9` while notifications are in flight, then a new serve on the same database:
    /// every notification answered 202 reaches the mock, none is missing, and what went
    /// twice is no more than the takeovers counted.
    @Test func afterKill9ARestartedServeSendsEverythingAnswered202() async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        // The first serve's gateway holds its answers past the test's end: every notification
        // is in flight at the kill, however slowly the test runs. The second's answers at once.
        let stuck = try H2LoopbackRig(plan: H2FailurePlan(responseDelay: .seconds(600)))
        defer { stuck.gateway.stop() }
        let mock = try H2LoopbackRig()
        defer { mock.gateway.stop() }
        let directory = NSTemporaryDirectory() + "salvo-serve-db-\(UUID().uuidString.prefix(8))"
        try H2LoopbackRig.pki.write(to: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        func arguments(gateway: Int) -> [String] {
            ["serve", "--gateway", "127.0.0.1:\(gateway)", "--protocol", "h2", "--topic", "com.example.app",
             "--cert", directory + "/client.pem", "--key", directory + "/client.key", "--ca", directory + "/ca.pem",
             "--listen", "127.0.0.1:0", "--db", cluster.url(), "--lease-seconds", "1"]
        }
        let client = HTTPClient(eventLoopGroupProvider: .singleton)

        let first = try ChildProcess(Self.salvo, arguments(gateway: stuck.gateway.port))
        let firstURL = try await Self.listening(first)
        var answered: [Int] = []
        for start in stride(from: 0, to: 400, by: 100) {
            let (status, durability) = try await Self.post(client, firstURL, ServeRig.batch((start..<start + 100).map { ServeRig.notification($0) }))
            #expect(status == 202 && durability == "database")
            if status == 202 { answered += start..<start + 100 }
        }
        first.kill(SIGKILL)
        _ = try await first.exitStatus(within: .seconds(180))
        let pending = try cluster.psql("SELECT count(*) FROM serve_notifications WHERE state = 'pending'")
        #expect(pending == "\(answered.count)\n", "every notification was in flight at the kill")

        let second = try ChildProcess(Self.salvo, arguments(gateway: mock.gateway.port))
        let secondURL = try await Self.listening(second)
        let left = await eventuallyYielding({ (try? cluster.psql("SELECT count(*) FROM serve_notifications WHERE state = 'pending'")) ?? "" }) {
            $0 == "0\n"
        }
        #expect(left == "0\n", "every notification final; serve's errors: \(second.errors)")
        let firstID = try cluster.psql("SELECT apns_id FROM serve_notifications ORDER BY taken_at LIMIT 1")
            .trimmingCharacters(in: .whitespacesAndNewlines)
        let status = try await client.execute(HTTPClientRequest(url: "\(secondURL)/\(firstID)"), timeout: .seconds(180))
        #expect(status.status.code == 200, "a status the first run wrote, answered by the second")
        let metrics = try await client.execute(HTTPClientRequest(url: secondURL.replacingOccurrences(of: "/v1/notifications", with: "/metrics")),
                                               timeout: .seconds(180)).body.collect(upTo: 1 << 22)
        let counted = String(buffer: metrics).split(separator: "\n")
            .first { $0.hasPrefix("salvo_serve_possible_duplicates_total ") }?.split(separator: " ").last.flatMap { Int($0) }
        try await client.shutdown()
        second.kill(SIGTERM)
        #expect(try await second.exitStatus(within: .seconds(180)) == 0, "\(second.errors)")

        #expect(try cluster.psql("SELECT state, count(*) FROM serve_notifications GROUP BY state") == "accepted|\(answered.count)\n")
        let takeovers = Int(try cluster.psql("SELECT sum(takeovers) FROM serve_notifications")
            .trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        #expect(takeovers == answered.count, "each taken over once")
        #expect(counted == takeovers, "/metrics counts each takeover as a possible duplicate")
        #expect(second.errors.contains("possible duplicates"), "the takeover is logged")
        let statistics = await eventuallyYielding(mock.gateway.statistics) { Set($0.acceptedDigests ?? []).count >= answered.count }
        #expect(Set(statistics.acceptedDigests ?? []) == Set(H2LoopbackRig.digests(answered)), "nothing missing, nothing else")
        #expect(statistics.duplicates <= takeovers, "what went twice was counted")
    }

    /// The `salvo` executable next to the test bundle (`swift build --build-tests` builds both).
    static var salvo: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("salvo").path
    }

    /// The notifications URL a `salvo serve` child prints once it listens (bounded wait).
    static func listening(_ serve: ChildProcess) async throws -> String {
        let errors = await eventuallyYielding({ serve.errors }, within: .seconds(180)) { $0.contains("/v1/notifications\n") || !serve.isRunning }
        guard let line = errors.split(separator: "\n").first(where: { $0.contains("listening on ") }),
              let start = line.range(of: "http://") else {
            throw NotListening(description: "salvo serve did not say where it listens: \(errors)")
        }
        return String(line[start.lowerBound...])
    }

    struct NotListening: Error, CustomStringConvertible {
        var description: String
    }

    /// POSTs `body` to `url`: the status and the answer's `durability`.
    static func post(_ client: HTTPClient, _ url: String, _ body: String) async throws -> (Int, String?) {
        var request = HTTPClientRequest(url: url)
        request.method = .POST
        request.body = .bytes(ByteBuffer(string: body))
        let response = try await client.execute(request, timeout: .seconds(180))
        let answer = try await response.body.collect(upTo: 1 << 20)
        let json = (try? JSONSerialization.jsonObject(with: Data(buffer: answer))) as? [String: Any]
        return (Int(response.status.code), json?["durability"] as? String)
    }
}
