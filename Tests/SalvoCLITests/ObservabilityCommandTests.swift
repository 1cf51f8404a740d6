import Foundation
import SalvoIO
import SalvoTestSupport
import Testing
@testable import SalvoEngine

/// `--metrics-port`, `--log-level` and SIGTERM end to end: the built `salvo send` against
/// the built `salvo mock`, scraped with curl.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("observability-command-tests")) struct ObservabilityCommandTests {
    typealias Workspace = SendCommandTests.Workspace

    /// `salvo mock` with `arguments`, its gateway port and its metrics port.
    static func startMock(_ workspace: Workspace, _ arguments: [String]) async throws -> (ChildProcess, gateway: Int, metrics: Int) {
        let process = try SendCommandTests.launch(
            ["mock", "--port", "0", "--cert", workspace.path("server.pem"), "--key", workspace.path("server.key"),
             "--loops", "1", "--metrics-port", "0"] + arguments)
        let first = try await process.firstLine(within: .seconds(20))
        let gateway = try #require(first.split(separator: " ").first { $0.hasPrefix("gateway=") }.flatMap { Int($0.dropFirst(8)) },
                                   "first line: \(first)")
        return (process, gateway, try metricsPort(of: process))
    }

    /// The port a process printed as `metrics: http://127.0.0.1:PORT/metrics` (bounded wait).
    static func metricsPort(of process: ChildProcess) throws -> Int {
        let port = eventually({ () -> Int? in
            guard let line = process.errors.split(separator: "\n").first(where: { $0.hasPrefix("metrics: http://127.0.0.1:") })
            else { return nil }
            return Int(line.dropFirst("metrics: http://127.0.0.1:".count).prefix { $0.isNumber })
        }, until: { $0 != nil })
        return try #require(port, "no metrics line; stderr: \(process.errors)")
    }

    /// One scrape of `http://127.0.0.1:port/metrics` with curl.
    static func scrape(_ port: Int) async throws -> PrometheusText {
        let (status, body, errors) = try await MockH2CommandTests.curl(["--silent", "--show-error", "--fail", "http://127.0.0.1:\(port)/metrics"])
        #expect(status == 0, "curl: \(errors)")
        return PrometheusText(body)
    }

    /// What every run checks: the sender's counters at the end are its report's, and the
    /// mock's accepted counter (flushed every second) reaches what the sender reports.
    static func expectMetrics(_ metrics: PrometheusText, agreeWith report: SenderReport) {
        #expect(metrics.value("salvo_sender_submitted_total") == Double(report.submitted))
        #expect(metrics.value("salvo_sender_accepted_total") == Double(report.accepted))
        // The reasons that never happened are there too, at 0.
        #expect(metrics.values("salvo_sender_rejected_total", by: "reason").filter { $0.value > 0 } == report.rejectedByReason)
        #expect(metrics.values("salvo_sender_failed_total", by: "reason").filter { $0.value > 0 } == report.failedByReason)
        #expect(metrics.value("salvo_sender_resent_total") == Double(report.resent))
        #expect(metrics.value("salvo_sender_reconnects_total") == Double(report.reconnects))
        #expect(metrics.value("salvo_sender_in_flight") == 0)
        #expect(metrics.value("salvo_sender_open_connections") == 0)
        #expect((metrics.value("salvo_sender_write_batch_bytes_count") ?? 0) > 0)
    }

    @Test(arguments: ["binary", "h2"])
    func theSendersAndTheMocksCountersAgreeWithTheReportDuringAndAtTheEndOfARun(wireProtocol: String) async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let h2 = wireProtocol == "h2"
        var mockArguments = ["--protocol", wireProtocol, "--reject-every", "97"]
        var senderArguments = ["--protocol", wireProtocol]
        if h2 {
            let key = try DevelopmentPKI.makeSigningKey()
            try key.write(toFile: workspace.path("AuthKey.p8"), atomically: true, encoding: .utf8)
            chmod(workspace.path("AuthKey.p8"), 0o600)
            mockArguments += ["--auth-key", workspace.path("AuthKey.p8"), "--key-id", "KEY0000001", "--team-id", "TEAM000001"]
            senderArguments += ["--auth-key", workspace.path("AuthKey.p8"), "--key-id", "KEY0000001", "--team-id", "TEAM000001",
                                "--topic", "com.example.app", "--ca", workspace.path("ca.pem")]
        } else {
            mockArguments += ["--feedback-port", "0", "--require-client-cert", "--ca", workspace.path("ca.pem")]
            senderArguments += workspace.tlsArguments() + ["--error-wait-ms", "200"]
        }
        let (mock, gatewayPort, mockMetrics) = try await Self.startMock(workspace, mockArguments)
        defer { mock.kill(SIGKILL) }
        let campaign = try workspace.writeCampaign(lines: 20_000)
        let reportPath = workspace.path("report.json")
        let sender = try SendCommandTests.launch(
            ["send", "--gateway", "127.0.0.1:\(gatewayPort)", "--input", campaign, "--report", reportPath,
             "--metrics-port", "0", "--metrics-hold", "120"] + senderArguments)
        defer { sender.kill(SIGKILL) }
        // During the run: the endpoint answers before the report exists (the sender's
        // metrics start with its first flush; the mock's are up from the start).
        let early = try await Self.scrape(try Self.metricsPort(of: sender))
        #expect(early.value("salvo_sender_submitted_total") != nil || !FileManager.default.fileExists(atPath: reportPath))
        #expect(try await Self.scrape(mockMetrics).value("salvo_mock_received_total") != nil)
        // At the end: the report is written, the sender holds its endpoint open for us.
        let written = eventually({ FileManager.default.fileExists(atPath: reportPath) && sender.errors.contains("serving the final") },
                                 within: .seconds(120), until: { $0 })
        #expect(written, "stderr: \(sender.errors)")
        let report = try SendCommandTests.report(reportPath)
        #expect(report.submitted == 20_000 && report.isComplete && report.rejected > 0)
        let final = try await Self.scrape(try Self.metricsPort(of: sender))
        Self.expectMetrics(final, agreeWith: report)
        // One transport's histograms only: an HTTP/2 run has no error-response latencies.
        #expect((final.value("salvo_sender_error_response_latency_seconds_count") != nil) == !h2)
        #expect((final.value("salvo_sender_response_latency_seconds_count") != nil) == h2)
        // SIGTERM ends the hold at once, with the run's exit status.
        sender.kill(SIGTERM)
        #expect(try await sender.exitStatus(within: .seconds(20)) == 0)
        // The mock counted what the sender reports (binary: a resent notification counts again).
        let mockAccepted = await eventuallyYielding({ (try? await Self.scrape(mockMetrics))?.value("salvo_mock_accepted_total") ?? 0 },
                                      until: { $0 >= Double(report.accepted) })
        #expect(mockAccepted == Double(report.accepted))
        let mockRejected = try await Self.scrape(mockMetrics).values("salvo_mock_rejected_total", by: "reason")
        #expect(mockRejected.values.reduce(0, +) == report.rejected)
        mock.kill(SIGTERM)
        #expect(try await mock.exitStatus(within: .seconds(20)) == 0)
    }

    /// Every metric has its `# HELP`, and the series a dashboard watches are there from the
    /// first scrape: the rejection reasons and failure reasons at 0 before any happens.
    @Test(arguments: ["binary", "h2"])
    func everyMetricIsDescribedAndTheRejectedAndFailedSeriesStartAtZero(wireProtocol: String) async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let h2 = wireProtocol == "h2"
        // Answers held 20 ms on one stream: the run lasts long enough to scrape it midway.
        let (mock, gatewayPort, mockMetrics) = try await Self.startMock(
            workspace, h2 ? ["--protocol", "h2", "--response-delay-ms", "20", "--max-streams", "1", "--require-client-cert",
                             "--ca", workspace.path("ca.pem")]
                          : ["--feedback-port", "0", "--require-client-cert", "--ca", workspace.path("ca.pem")])
        defer { mock.kill(SIGKILL) }
        // Until the series asserted below is there (a scrape may come while a report is fed).
        let mockEarly = await eventuallyYielding({ (try? await Self.scrapeText(mockMetrics)) ?? "" }, until: {
            $0.contains(#"salvo_mock_rejected_total{reason="\#(h2 ? "BadDeviceToken" : "invalid_token")"}"#)
        })
        let campaign = try workspace.writeCampaign(lines: h2 ? 300 : 2000)
        let sender = try SendCommandTests.launch(
            ["send", "--protocol", wireProtocol, "--gateway", "127.0.0.1:\(gatewayPort)", "--input", campaign, "--metrics-port", "0",
             "--metrics-hold", "120", "--shards", "1", "--connections", "1", "--max-connections", "1"]
                + workspace.tlsArguments() + (h2 ? ["--topic", "com.example.app"] : ["--error-wait-ms", "100"]))
        defer { sender.kill(SIGKILL) }
        let port = try Self.metricsPort(of: sender)
        // The first report whole: a scrape may come while it is being fed, and its last
        // series is the connections gauge.
        let during = await eventuallyYielding({ (try? await Self.scrapeText(port)) ?? "" },
                                until: { $0.contains("salvo_sender_submitted_total ") && $0.contains("salvo_sender_connections ") })
        let final = await eventuallyYielding({ sender.errors.contains("serving the final") ? (try? await Self.scrapeText(port)) : nil },
                               within: .seconds(120), until: { $0 != nil }) ?? ""
        sender.kill(SIGTERM)
        #expect(try await sender.exitStatus(within: .seconds(20)) == 0, "stderr: \(sender.errors)")
        for text in [during, final, mockEarly] {
            let described = Set(text.split(separator: "\n").filter { $0.hasPrefix("# HELP ") }.map { $0.split(separator: " ")[2] })
            let reported = Set(text.split(separator: "\n").filter { !$0.hasPrefix("#") && !$0.isEmpty }.map { line in
                String(line.prefix { $0 != "{" && $0 != " " }).replacingOccurrences(of: #"_(bucket|sum|count)$"#, with: "",
                                                                                    options: .regularExpression)
            })
            #expect(!reported.isEmpty && reported.isSubset(of: Set(described.map(String.init))),
                    "without # HELP: \(reported.subtracting(described.map(String.init)))")
            #expect(!text.contains("not described"), "a salvo metric without its own description")
        }
        let early = PrometheusText(during)
        let rejections = h2 ? ["BadDeviceToken", "Unregistered", "PayloadTooLarge"] : ["invalid_token", "processing_error"]
        for reason in rejections {
            #expect(early.value("salvo_sender_rejected_total", ["reason": reason]) == 0, "\(reason)")
        }
        for reason in ["gateway_unreachable", "retry_budget_exhausted", "delivery_unknown"] {
            #expect(early.value("salvo_sender_failed_total", ["reason": reason]) == 0, "\(reason)")
        }
        #expect(PrometheusText(mockEarly).value("salvo_mock_rejected_total", ["reason": h2 ? "BadDeviceToken" : "invalid_token"]) == 0)
        #expect(final.contains("salvo_sender_error_response_latency_seconds") == !h2)
        mock.kill(SIGTERM)
        #expect(try await mock.exitStatus(within: .seconds(20)) == 0)
    }

    /// The text of one scrape of `http://127.0.0.1:port/metrics` with curl.
    static func scrapeText(_ port: Int) async throws -> String {
        let (status, body, errors) = try await MockH2CommandTests.curl(["--silent", "--show-error", "--fail", "http://127.0.0.1:\(port)/metrics"])
        #expect(status == 0, "curl: \(errors)")
        return body
    }

    @Test func sigtermStopsTakingNotificationsFinishesWhatWasSentAndSavesTheCheckpointForAResume() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // Certificates, not provider tokens: the mock, like APNs, refuses a second token for the
        // team within 20 minutes, and the resume is a second sender.
        // 20 ms answers, 50 streams, one connection: 2,500/s, so 20,000 lines take 8 s.
        let (mock, gatewayPort, mockMetrics) = try await Self.startMock(
            workspace, ["--protocol", "h2", "--response-delay-ms", "20", "--max-streams", "50", "--record-accepted",
                        "--require-client-cert", "--ca", workspace.path("ca.pem")])
        defer { mock.kill(SIGKILL) }
        let checkpoint = workspace.path("campaign.ckpt")
        let sendArguments = [
            "send", "--protocol", "h2", "--gateway", "127.0.0.1:\(gatewayPort)", "--input", try workspace.writeCampaign(lines: 20_000),
            "--checkpoint", checkpoint, "--topic", "com.example.app", "--shards", "1",
            "--connections", "1", "--max-connections", "1", "--report", workspace.path("report.json"),
        ] + workspace.tlsArguments()
        let sender = try SendCommandTests.launch(sendArguments + ["--metrics-port", "0"])
        defer { sender.kill(SIGKILL) }
        let senderMetrics = try Self.metricsPort(of: sender)
        let accepted = await eventuallyYielding({ (try? await Self.scrape(senderMetrics))?.value("salvo_sender_accepted_total") ?? 0 },
                                  until: { $0 >= 1000 })
        #expect(accepted >= 1000, "the campaign got going")
        sender.kill(SIGTERM)
        #expect(try await sender.exitStatus(within: .seconds(60)) == 3, "stderr: \(sender.errors)")
        #expect(sender.errors.contains("stopped by a signal"))
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.isComplete && report.failed == 0 && report.submitted < 20_000)
        // Every line handed over was answered: the checkpoint records all of them.
        let saved = try String(contentsOfFile: checkpoint, encoding: .utf8)
        #expect(saved.contains("\nline \(report.submitted)\n"), "checkpoint: \(saved)")
        // The resume sends exactly the rest: the mock accepts each line once.
        let (status, _, errors) = try await SendCommandTests.run(sendArguments + ["--resume"])
        #expect(status == 0, "stderr: \(errors)")
        let mockAccepted = await eventuallyYielding({ (try? await Self.scrape(mockMetrics))?.value("salvo_mock_accepted_total") ?? 0 },
                                      until: { $0 >= 20_000 })
        #expect(mockAccepted == 20_000)
        mock.kill(SIGTERM)
        #expect(try await mock.exitStatus(within: .seconds(20)) == 0)
        let statistics = try JSONSerialization.jsonObject(with: Data(mock.output.split(separator: "\n", maxSplits: 1)[1].utf8))
        #expect((statistics as? [String: Any])?["duplicates"] as? Int == 0)
    }

    @Test func logsNeverShowThePrivateKeyThePassphraseOrTheProviderToken() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // Token authentication over HTTP/2, everything logged.
        let signingKey = try DevelopmentPKI.makeSigningKey()
        try signingKey.write(toFile: workspace.path("AuthKey.p8"), atomically: true, encoding: .utf8)
        chmod(workspace.path("AuthKey.p8"), 0o600)
        let auth = ["--auth-key", workspace.path("AuthKey.p8"), "--key-id", "KEY0000001", "--team-id", "TEAM000001"]
        let (h2Mock, h2Port, _) = try await Self.startMock(workspace, ["--protocol", "h2", "--reject-every", "50", "--log-level", "trace"] + auth)
        defer { h2Mock.kill(SIGKILL) }
        let campaign = try workspace.writeCampaign(lines: 2000)
        let (h2Status, _, h2Logs) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(h2Port)", "--input", campaign, "--topic", "com.example.app",
             "--ca", workspace.path("ca.pem"), "--log-level", "trace", "--log-format", "json"] + auth)
        #expect(h2Status == 0, "stderr: \(h2Logs)")

        // A client certificate whose key is encrypted, over the binary protocol.
        let passphrase = "correct horse battery staple 4711"
        try (passphrase + "\n").write(toFile: workspace.path("passphrase.txt"), atomically: true, encoding: .utf8)
        let encrypt = try ChildProcess("/usr/bin/openssl", [
            "pkey", "-in", workspace.path("client.key"), "-aes256", "-passout", "file:" + workspace.path("passphrase.txt"),
            "-out", workspace.path("client-encrypted.key"),
        ])
        #expect(try await encrypt.exitStatus(within: .seconds(20)) == 0, "openssl: \(encrypt.errors)")
        chmod(workspace.path("client-encrypted.key"), 0o600)
        let (binaryMock, binaryPort, _) = try await Self.startMock(
            workspace, ["--feedback-port", "0", "--require-client-cert", "--ca", workspace.path("ca.pem"), "--reject-every", "50",
                        "--log-level", "trace"])
        defer { binaryMock.kill(SIGKILL) }
        let (binaryStatus, _, binaryLogs) = try await SendCommandTests.run(
            ["send", "--gateway", "127.0.0.1:\(binaryPort)", "--input", campaign, "--error-wait-ms", "200",
             "--cert", workspace.path("client.pem"), "--key", workspace.path("client-encrypted.key"),
             "--passphrase-file", workspace.path("passphrase.txt"), "--ca", workspace.path("ca.pem"), "--log-level", "trace"])
        #expect(binaryStatus == 0, "stderr: \(binaryLogs)")

        // The logs say what happened (so the absence below means something)...
        #expect(h2Logs.contains(#""message":"connected""#) && h2Logs.contains(#""message":"rejected""#), "logs: \(h2Logs)")
        #expect(binaryLogs.contains("debug salvo.sender: connected") && binaryLogs.contains("debug salvo.sender: rejected"))
        // ...and none of the secrets: no key material, no passphrase, no JWT (a JWT's header
        // is base64url of `{"`, so it starts with eyJ), no authorization header.
        let keyLines = [signingKey, try String(contentsOfFile: workspace.path("client.key"), encoding: .utf8),
                        try String(contentsOfFile: workspace.path("client-encrypted.key"), encoding: .utf8)]
            .flatMap { $0.split(separator: "\n") }.filter { !$0.hasPrefix("-----") }
        #expect(h2Mock.errors.contains("info salvo.mock: listening"), "mock logs: \(h2Mock.errors)")
        for logs in [h2Logs, binaryLogs, h2Mock.errors, binaryMock.errors] {
            #expect(!logs.contains("PRIVATE KEY"))
            #expect(!keyLines.contains { logs.contains($0) })
            #expect(!logs.contains(passphrase))
            #expect(!logs.contains("eyJ") && !logs.lowercased().contains("bearer"))
        }
    }
}
