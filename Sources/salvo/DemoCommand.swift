import ArgumentParser
import Foundation
import SalvoBench
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoWire
import Logging
import ServiceLifecycle

/// `salvo demo`: the whole pipeline on one machine with no setup — an in-process mock
/// gateway on loopback with throwaway certificates, and a synthetic campaign through the
/// real sender. What `make run` shows.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Send a synthetic campaign to an in-process mock gateway and print the accounting.")

    @Option(help: "Notifications to send.")
    var count: Int = 1_000_000

    @Option(name: .customLong("protocol"),
            help: "binary (the legacy protocol, default) or h2 (the HTTP/2 provider API, with token authentication).")
    var wireProtocol: WireProtocol = .binary

    @Option(help: ArgumentHelp("Mock event-loop threads.", valueName: "n"))
    var mockLoops: Int = 1

    @Option(help: "apns (default) or blackberry: a Push Channel campaign to an in-process mock NOC (see BlackBerryDemo).")
    var target: PushService = .apns

    @OptionGroup(title: "Mock failure plan")
    var failures: FailurePlanOptions

    @Option(help: ArgumentHelp("Write the sender's JSON report here.", valueName: "file"))
    var report: String?

    @OptionGroup(title: "Engine")
    var engine: EngineOptions

    @OptionGroup(title: "Logs and metrics")
    var observability: ObservabilityOptions

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        switch wireProtocol {
        case .binary:
            do { _ = try failures.plan() } catch { throw ValidationError(error.message) }
            if let flag = failures.h2OnlyFlag { throw ValidationError("\(flag) is for --protocol h2") }
        case .h2:
            do { _ = try failures.h2Plan() } catch { throw ValidationError(error.message) }
            if let flag = failures.binaryOnlyFlag ?? engine.binaryOnlyFlag {
                throw ValidationError("\(flag) is for the binary protocol, not --protocol h2")
            }
        }
    }

    func run() async throws {
        if target == .blackberry { return try await runBlackBerry() }
        let observability = try await observability.start(watchingSignals: true)
        let pki = try DevelopmentPKI.Bundle()
        let gateway: any DemoGateway
        var configuration: SenderConfiguration
        switch wireProtocol {
        case .binary:
            var serverTLS = TLSConfiguration.server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                                                    clientCertificateRoots: .certificates(pki.authority.certificate))
            serverTLS.maximumVersion = .v1_2  // as `salvo mock` speaks the binary protocol
            gateway = try MockGateway(.init(tls: serverTLS, loops: mockLoops, failurePlan: try failures.plan()),
                                      logger: Logger(label: "salvo.mock"))
            configuration = SenderConfiguration(
                host: "127.0.0.1", port: gateway.port,
                tls: .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                             trustRoots: .certificates(pki.authority.certificate)))
            engine.apply(to: &configuration)
            configuration.transport = .binary(engine.frameFormat)
        case .h2:
            // Token authentication, as most providers use it: a throwaway signing key that the
            // mock verifies every request's provider token against.
            let key = try DevelopmentPKI.makeSigningKey()
            let (keyID, teamID) = ("DEMOKEY001", "DEMOTEAM01")
            let serverTLS = TLSConfiguration.server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey)
            gateway = try H2MockGateway(.init(
                tls: serverTLS, tokenVerifier: try ProviderTokenVerifier(authKeyPEM: key, keyID: keyID, teamID: teamID),
                loops: mockLoops, failurePlan: try failures.h2Plan()), logger: Logger(label: "salvo.mock"))
            configuration = SenderConfiguration(host: "127.0.0.1", port: gateway.port,
                                                tls: .client(trustRoots: .certificates(pki.authority.certificate)))
            engine.apply(to: &configuration)
            let credentials = try ProviderCredentials(pem: key, keyID: keyID, teamID: teamID)
            configuration.transport = .http2(HTTP2Options(topic: "com.example.demo", authentication: .token(credentials)))
        }
        defer { gateway.stop() }
        printError("mock \(wireProtocol == .h2 ? "HTTP/2 " : "")gateway on 127.0.0.1:\(gateway.port); sending "
                   + "\(counted(count, "notification")) over \(counted(configuration.shards, "shard")), "
                   + Self.connectionPlan(configuration))

        let run = try CampaignRun(command: "demo", configuration: configuration, rejectedPath: nil, checkpoint: nil,
                                  total: count, services: [gateway])
        var payload = PayloadBuilder()
        payload.alertTitle = "Salvo"
        payload.alertBody = "Your weekly summary is ready."
        payload.badge = 1
        payload.sound = .default
        let campaign = SyntheticCampaign(count: count, payload: try payload.build(), priority: 10)
        let ending = await run.send(campaign, from: campaign.makeReader())
        let report = await run.finish(badLines: [], badLineCount: 0, ending: ending, lastLine: count, resumedAfter: 0,
                                      reportPath: report)
        let mock = gateway.counts()
        // After a silent drop the sender resends what may have arrived (at-least-once): the
        // mock may count those twice, never more than the duplicates the sender reports.
        let duplicates = mock.accepted - report.accepted
        let agrees = mock.rejected == report.rejected && (0...report.possibleDuplicates).contains(duplicates)
        print("  mock gateway: accepted \(mock.accepted), rejected \(mock.rejected) — "
              + (agrees ? "matches the sender's accounting" : "DOES NOT MATCH the sender's accounting")
              + (duplicates > 0 ? " (\(duplicates) resent after silent drops counted twice)" : ""))
        await observability.finish()
        if !agrees || !report.isComplete { throw ExitCode(1) }
    }
}

extension DemoCommand {
    /// How many connections a run starts with per shard, and how far they may grow: the
    /// report's count is the most that were open.
    static func connectionPlan(_ configuration: SenderConfiguration) -> String {
        let start = configuration.connectionsPerShard, most = configuration.maximumConnectionsPerShard
        let starting = "starting with \(counted(start, "connection")) each"
        guard most > start else { return starting + " (a fixed number: --max-connections)" }
        return starting + "; more are added while every one is full, up to \(most) per shard (--max-connections)"
    }
}

/// What the demo reads from either mock gateway.
protocol DemoGateway: Service {
    var port: Int { get }
    func counts() -> any AcceptedCounts
    func stop()
}

extension MockGateway: DemoGateway {
    func counts() -> any AcceptedCounts { statistics() }
}

extension H2MockGateway: DemoGateway {
    func counts() -> any AcceptedCounts { statistics() }
}
