import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// Other teams' HTTP/2 senders against `salvo mock --protocol h2` with token authentication,
/// each at its own defaults, signing its own provider tokens with a fresh key the mock
/// verifies: aioapns (its default TLS setup offers no ALPN, so it speaks HTTP/2 by prior
/// knowledge, and it sends `host` instead of `:authority`) and pyapns-client (its `iat` is
/// `time.time()`, with a fraction). Apple takes both, so the mock must. `make test` installs
/// them (scripts/h2-python-clients.sh); without them the tests are skipped and say why.
///
/// Nested in `LegacyClientTests`, whose tests run one at a time, so that no two of these
/// senders (each keeps a core busy while it runs) run at once: the suites running
/// meanwhile have time limits to keep.
extension LegacyClientTests {
    @Suite(.timeLimit(.minutes(3)))
    struct HTTP2ClientTests {
        static let clients = LegacyClientTests.repository + "/.build/legacy-clients/h2-python"
        static let clientsMissing: String? = {
            if FileManager.default.fileExists(atPath: clients + "/ready") { return nil }
            if let failed = try? String(contentsOfFile: clients + "/failed", encoding: .utf8) {
                return "aioapns and pyapns-client could not be installed: \(failed.trimmingCharacters(in: .whitespacesAndNewlines))"
            }
            return "aioapns and pyapns-client are not installed in \(clients) (`make test` installs them with scripts/h2-python-clients.sh)"
        }()

        /// What `scripts/aioapns-sender.py` and `scripts/pyapns-client-sender.py` print.
        struct ClientOutcome: Decodable {
            var sent: Int
            /// The library's answer for notification n at n - 1: `200` or `STATUS REASON`.
            var results: [String]
            /// The 410 answers' timestamps (ms), as the library handed them over.
            var timestamps: [Int64?]
            /// The library's own warnings and errors, and exceptions it raised.
            var faults: [String]
        }

        /// Where the tests wait for the clients, as long as they run: on a thread of its own,
        /// not on the cooperative pool (as many threads as cores), which the suites running
        /// meanwhile need to make progress within their time limits.
        static let waitingThread = try! ThreadExecutor(name: "h2-clients")

        @Test(.disabled(if: clientsMissing != nil, Comment(rawValue: clientsMissing ?? "")))
        func aioapnsAtItsDefaultsGetsEveryAnswer() async throws {
            let statistics = try await withTaskExecutorPreference(Self.waitingThread) { try await Self.send(with: "aioapns-sender.py") }
            #expect(statistics.withoutALPN == statistics.connections, "aioapns offers no ALPN")
            #expect(statistics.refusedWithoutPreface == 0 && statistics.handshakeFailures == 0)
        }

        @Test(.disabled(if: clientsMissing != nil, Comment(rawValue: clientsMissing ?? "")))
        func pyapnsClientAtItsDefaultsGetsEveryAnswer() async throws {
            let statistics = try await withTaskExecutorPreference(Self.waitingThread) { try await Self.send(with: "pyapns-client-sender.py") }
            #expect(statistics.withoutALPN == 0, "httpx offers h2 in ALPN")
            #expect(statistics.handshakeFailures == 0)
        }

        // MARK: Helpers

        /// Runs `script` against a fresh `salvo mock --protocol h2` with token authentication,
        /// `count` notifications of which every `deadEvery`th goes to a token the mock answers
        /// 410 Unregistered; checks the client's answer to each against what it should be and
        /// its counts against the mock's, and returns the mock's statistics.
        static func send(with script: String, count: Int = 2000, deadEvery: Int = 50) async throws -> H2Statistics {
            let directory = NSTemporaryDirectory() + "salvo-h2-clients-\(UUID().uuidString)"
            try DevelopmentPKI.Bundle().write(to: directory)
            defer { try? FileManager.default.removeItem(atPath: directory) }
            let (keyID, teamID, authKey) = ("KEY0000001", "TEAM000001", directory + "/AuthKey_KEY0000001.p8")
            try DevelopmentPKI.makeSigningKey().write(toFile: authKey, atomically: true, encoding: .utf8)
            let report = directory + "/report.json"
            let mock = try ChildProcess(DelayLineTests.salvo, [
                "mock", "--protocol", "h2", "--port", "0", "--loops", "1", "--cert", directory + "/server.pem",
                "--key", directory + "/server.key", "--auth-key", authKey, "--key-id", keyID, "--team-id", teamID,
                "--report", report,
            ])
            defer { mock.kill(SIGKILL) }
            let listening = try await mock.firstLine(within: .seconds(30))
            let port = try #require(listening.split(separator: " ").first { $0.hasPrefix("gateway=") }?.dropFirst("gateway=".count),
                                    "salvo mock said '\(listening)'")

            let client = try ChildProcess(clients + "/venv/bin/python", [
                "-W", "ignore::DeprecationWarning", LegacyClientTests.repository + "/scripts/" + script,
                "127.0.0.1", String(port), directory + "/ca.pem", authKey, keyID, teamID, String(count), String(deadEvery),
            ])
            let status = try await client.exitStatus(within: .seconds(150))
            #expect(status == 0, "\(script): \(client.errors.suffix(2000))")
            // Every answer the client got was counted before it went out: the report is complete.
            mock.kill(SIGINT)
            #expect(try await mock.exitStatus(within: .seconds(15)) == 0, "salvo mock: \(mock.errors.suffix(2000))")
            let statistics = try JSONDecoder().decode(H2Statistics.self, from: Data(contentsOf: URL(fileURLWithPath: report)))

            let line = client.output.split(separator: "\n").last { $0.hasPrefix("{") }
            let outcome = try #require(try line.map { try JSONDecoder().decode(ClientOutcome.self, from: Data($0.utf8)) },
                                       "no result line from \(script): \(client.output.suffix(2000)) \(client.errors.suffix(2000))")
            let dead = count / deadEvery
            #expect(outcome.sent == count && outcome.results.count == count)
            let wrong = outcome.results.enumerated().filter { index, result in
                result != ((index + 1) % deadEvery == 0 ? "410 Unregistered" : "200")
            }
            #expect(wrong.isEmpty, "\(wrong.count) answers not as sent, the first: \(wrong.prefix(5).map { "\($0.offset + 1): \($0.element)" })")
            #expect(outcome.timestamps.count == dead && outcome.timestamps.allSatisfy { ($0 ?? 0) > 0 }, "each 410 with its timestamp")
            #expect(outcome.faults.isEmpty, "\(script) reported faults: \(outcome.faults.prefix(5))")

            // The client's view, outcome by outcome, is the mock's.
            #expect(statistics.accepted == outcome.results.count { $0 == "200" })
            #expect(statistics.rejectedByReason == ["Unregistered": outcome.results.count { $0 == "410 Unregistered" }])
            #expect(statistics.accepted == count - dead && statistics.rejected(.unregistered) == dead)
            #expect(statistics.requests == count && statistics.resetStreams == 0)
            return statistics
        }
    }
}
