import Foundation
import SalvoIO
import SalvoTestSupport
import Testing

/// `salvo serve` as a process, in front of `salvo mock --protocol h2` as a process: what a
/// deployment runs. curl is the caller; HTTPS, HTTP/2 and client certificates are curl's
/// own, so that the server is checked against a client it did not write.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("serve-command-tests")) struct ServeCommandTests {
    typealias Workspace = SendCommandTests.Workspace

    @Test func aBatchPostedWithWaitIsAnsweredWithEveryNotificationAccepted() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let mock = try await Mock(workspace, [])
        defer { mock.process.kill(SIGKILL) }
        let serve = try await Serve(workspace, gateway: mock.port, [])
        defer { serve.process.kill(SIGKILL) }

        let (status, output, errors) = try await MockH2CommandTests.curl(
            ["--silent", "--show-error", "--write-out", "\n%{http_code}", "--data-binary", Self.batch(0..<5),
             "\(serve.url)/v1/notifications?wait=30"])
        #expect(status == 0, "curl: \(errors)")
        #expect(output.hasSuffix("\n200"), "answer: \(output)")
        let answer = try Self.json(output)
        #expect(answer["taken"] as? Int == 5)
        #expect(answer["refused"] as? Int == 0)
        let notifications = answer["notifications"] as? [[String: Any]] ?? []
        #expect(notifications.map { $0["index"] as? Int } == Array(0..<5))
        #expect(notifications.allSatisfy { $0["state"] as? String == "accepted" }, "answer: \(output)")

        serve.process.kill(SIGTERM)
        #expect(try await serve.process.exitStatus(within: .seconds(180)) == 0, "stderr: \(serve.process.errors)")
        #expect(serve.process.errors.contains("stopped; accepted 5, rejected 0, failed 0"), "stderr: \(serve.process.errors)")
        let report = try await mock.stop()
        #expect(report["accepted"] as? Int == 5)
    }

    /// The drain SIGTERM promises: every notification answered 202 reaches the gateway and
    /// is accepted there, though each answer takes 300 ms and the signal comes before any.
    @Test func sigtermWithHundredsInFlightExitsZeroOnceEveryTakenNotificationIsAccepted() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let mock = try await Mock(workspace, ["--response-delay-ms", "300"])
        defer { mock.process.kill(SIGKILL) }
        let serve = try await Serve(workspace, gateway: mock.port, [])
        defer { serve.process.kill(SIGKILL) }

        var taken = 0
        for start in stride(from: 0, to: 400, by: 100) {
            let (status, output, errors) = try await MockH2CommandTests.curl(
                ["--silent", "--show-error", "--write-out", "\n%{http_code}", "--data-binary", Self.batch(start..<start + 100),
                 "\(serve.url)/v1/notifications"])
            #expect(status == 0 && output.hasSuffix("\n202"), "curl: \(output) \(errors)")
            taken += try Self.json(output)["taken"] as? Int ?? 0
        }
        #expect(taken == 400)
        serve.process.kill(SIGTERM)
        #expect(try await serve.process.exitStatus(within: .seconds(180)) == 0, "stderr: \(serve.process.errors)")
        #expect(serve.process.errors.contains("stopped; accepted \(taken),"), "stderr: \(serve.process.errors)")
        let report = try await mock.stop()
        #expect(report["accepted"] as? Int == taken, "mock report: \(report)")
        #expect(report["unsentAnswers"] as? Int == 0, "serve left before the gateway answered: \(report)")
    }

    @Test func httpsServesHTTP2() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let api = try Self.apiPKI(workspace)
        let mock = try await Mock(workspace, [])
        defer { mock.process.kill(SIGKILL) }
        let serve = try await Serve(workspace, gateway: mock.port, ["--tls-cert", api("server.pem"), "--tls-key", api("server.key")])
        defer { serve.process.kill(SIGKILL) }
        #expect(serve.url.hasPrefix("https://"))

        let (status, output, errors) = try await Self.post(serve, ["--cacert", api("ca.pem")])
        #expect(status == 0 && output == "2 202", "curl: \(output) \(errors)")
        serve.process.kill(SIGTERM)
        #expect(try await serve.process.exitStatus(within: .seconds(180)) == 0, "stderr: \(serve.process.errors)")
    }

    @Test func aClientCARefusesCallersWithoutACertificateItIssued() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let api = try Self.apiPKI(workspace)
        let mock = try await Mock(workspace, [])
        defer { mock.process.kill(SIGKILL) }
        let serve = try await Serve(workspace, gateway: mock.port, [
            "--tls-cert", api("server.pem"), "--tls-key", api("server.key"), "--client-ca", api("ca.pem"),
        ])
        defer { serve.process.kill(SIGKILL) }

        let trusting = ["--cacert", api("ca.pem")]
        let anonymous = try await Self.post(serve, trusting)
        // The handshake fails (TLS 1.3 may report it as the first read failing): curl gets
        // no HTTP answer at all.
        #expect(anonymous.0 != 0 && anonymous.1.hasSuffix("000"), "curl without a certificate: \(anonymous)")
        // A certificate of another CA (the gateway's) is no better than none.
        let stranger = try await Self.post(serve, trusting + ["--cert", workspace.path("client.pem"), "--key", workspace.path("client.key")])
        #expect(stranger.0 != 0 && stranger.1.hasSuffix("000"), "curl with another CA's certificate: \(stranger)")
        let member = try await Self.post(serve, trusting + ["--cert", api("client.pem"), "--key", api("client.key")])
        #expect(member.0 == 0 && member.1 == "2 202", "curl with the CA's certificate: \(member)")
        serve.process.kill(SIGTERM)
        #expect(try await serve.process.exitStatus(within: .seconds(180)) == 0, "stderr: \(serve.process.errors)")
        #expect(try await mock.stop()["accepted"] as? Int == 1)
    }

    /// Each bad setting stops `salvo serve` before it listens, with exit 2 and a message
    /// naming what is wrong. `W/` stands for the workspace, which holds `keys` (its line 2
    /// is no key) and `secret` (mode 0644).
    @Test(arguments: [
        (["--listen", "0.0.0.0:0"], "listening on 0.0.0.0 lets anyone who reaches it send: give --api-keys FILE or --client-ca FILE"),
        (["--tls-cert", "W/server.pem"], "--tls-cert and --tls-key go together"),
        (["--webhook", "http://127.0.0.1:9/hook"], "--webhook and --webhook-secret-file go together"),
        (["--api-keys", "W/keys"], "--api-keys W/keys line 2: expected NAME SHA256-HEX"),
        (["--webhook", "http://127.0.0.1:9/hook", "--webhook-secret-file", "W/secret"],
         "--webhook-secret-file W/secret is readable by every user; run `chmod 600 W/secret`"),
        (["--queue-limit", "0"], "--queue-limit must be at least 1, got 0"),
    ])
    func badSettingsExitWithTwo(_ arguments: [String], _ message: String) async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let key = String(repeating: "ab", count: 32)  // a SHA-256 in hex: the shape is what is read
        try "billing \(key)\nbilling-without-a-hash\n".write(toFile: workspace.path("keys"), atomically: true, encoding: .utf8)
        try "webhook secret".write(toFile: workspace.path("secret"), atomically: true, encoding: .utf8)
        chmod(workspace.path("secret"), 0o644)
        let place = { (text: String) in text.replacingOccurrences(of: "W/", with: workspace.directory + "/") }
        // Port 1 of loopback: nothing is sent, so no gateway need listen.
        let (status, _, errors) = try await SendCommandTests.run(
            ["serve", "--listen", "127.0.0.1:0", "--protocol", "h2", "--gateway", "127.0.0.1:1"]
                + Serve.credentials(workspace) + arguments.map(place), timeout: .seconds(180))
        #expect(status == 2, "\(arguments): stderr: \(errors)")
        #expect(errors.contains(place(message)), "stderr: \(errors)")
    }

    // MARK: Helpers

    /// `salvo mock --protocol h2` with the workspace's certificates (no client certificate
    /// required), reporting to `report.json` on SIGTERM.
    struct Mock {
        let process: ChildProcess
        let port: Int
        let report: String

        init(_ workspace: Workspace, _ arguments: [String]) async throws {
            report = workspace.path("mock-report.json")
            process = try SendCommandTests.launch(
                ["mock", "--protocol", "h2", "--port", "0", "--cert", workspace.path("server.pem"), "--key", workspace.path("server.key"),
                 "--report", report] + arguments)
            let first = try await process.firstLine(within: .seconds(120))
            port = try #require(first.split(separator: " ").first { $0.hasPrefix("gateway=") }.flatMap { Int($0.dropFirst(8)) },
                                "first line: \(first)")
        }

        /// SIGTERM, then its report.
        func stop() async throws -> [String: Any] {
            process.kill(SIGTERM)
            #expect(try await process.exitStatus(within: .seconds(180)) == 0, "mock stderr: \(process.errors)")
            return try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any] ?? [:]
        }
    }

    /// `salvo serve` on a free loopback port, sending to the mock at `gateway` with the
    /// workspace's client certificate.
    struct Serve {
        let process: ChildProcess
        /// `http://127.0.0.1:PORT` (or https), as its listening line says.
        let url: String

        init(_ workspace: Workspace, gateway: Int, _ arguments: [String]) async throws {
            process = try SendCommandTests.launch(
                ["serve", "--listen", "127.0.0.1:0", "--protocol", "h2", "--gateway", "127.0.0.1:\(gateway)"]
                    + Self.credentials(workspace) + arguments)
            // The one line it writes once it listens (the port it was given is in it); a
            // process that stopped instead ends the wait too.
            let process = self.process
            let errors = await eventuallyYielding({ process.errors }, within: .seconds(180)) { $0.contains("/v1/notifications\n") || !process.isRunning }
            let line = try #require(errors.split(separator: "\n").first { $0.hasPrefix("salvo serve: listening on ") }, "stderr: \(errors)")
            url = String(line.dropFirst("salvo serve: listening on ".count).dropLast("/v1/notifications".count))
        }

        static func credentials(_ workspace: Workspace) -> [String] {
            ["--topic", "com.example.app", "--cert", workspace.path("client.pem"), "--key", workspace.path("client.key"),
             "--ca", workspace.path("ca.pem")]
        }
    }

    /// The API's own CA, server and client identities, made for this test (not the
    /// gateway's): `api/ca.pem`, `api/server.pem`, `api/server.key`, `api/client.pem`, ...
    /// Returns the path of one of them by name.
    static func apiPKI(_ workspace: Workspace) throws -> (String) -> String {
        let directory = workspace.path("api")
        try DevelopmentPKI.Bundle().write(to: directory)
        return { "\(directory)/\($0)" }
    }

    /// One notification POSTed over HTTP/2 with curl and `arguments` (its TLS files):
    /// curl's exit status, `HTTP-VERSION STATUS`, its errors.
    static func post(_ serve: Serve, _ arguments: [String]) async throws -> (Int32, String, String) {
        try await MockH2CommandTests.curl(
            ["--silent", "--show-error", "--http2", "--output", "/dev/null", "--write-out", "%{http_version} %{http_code}",
             "--data-binary", notification(7)] + arguments + ["\(serve.url)/v1/notifications"])
    }

    /// A notification's JSON: device token `n`, a payload naming it.
    static func notification(_ n: Int) -> String {
        #"{"token":"\#(LoopbackRig.token(n).hex)","payload":{"aps":{"alert":"campaign"},"n":\#(n)}}"#
    }

    static func batch(_ numbers: Range<Int>) -> String { "[" + numbers.map(notification).joined(separator: ",") + "]" }

    /// The JSON answer curl wrote before its `--write-out` line.
    static func json(_ output: String) throws -> [String: Any] {
        let body = output.split(separator: "\n", omittingEmptySubsequences: false).dropLast().joined(separator: "\n")
        return try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any], "answer: \(output)")
    }
}
