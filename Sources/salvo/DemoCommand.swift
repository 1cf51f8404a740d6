import ArgumentParser
import Foundation
import SalvoBench
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoWire

/// `salvo demo`: the whole pipeline on one machine with no setup — an in-process mock
/// gateway on loopback with throwaway certificates, and a synthetic campaign through the
/// real sender. What `make run` shows.
struct DemoCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "demo",
        abstract: "Send a synthetic campaign to an in-process mock gateway and print the accounting.")

    @Option(help: "Notifications to send.")
    var count: Int = 1_000_000

    @Option(help: ArgumentHelp("Mock event-loop threads.", valueName: "n"))
    var mockLoops: Int = 1

    @OptionGroup(title: "Mock failure plan")
    var failures: FailurePlanOptions

    @Option(help: ArgumentHelp("Write the sender's JSON report here.", valueName: "file"))
    var report: String?

    @OptionGroup(title: "Engine")
    var engine: EngineOptions

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
        do { _ = try failures.plan() } catch { throw ValidationError(error.message) }
        if let flag = failures.h2OnlyFlag { throw ValidationError("\(flag) is for the HTTP/2 mock (salvo mock --protocol h2)") }
    }

    func run() async throws {
        let pki = try DevelopmentPKI.Bundle()
        var serverTLS = TLSConfiguration.server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                                                clientCertificateRoots: .certificates(pki.authority.certificate))
        serverTLS.maximumVersion = .v1_2  // as `salvo mock` speaks the binary protocol
        let gateway = try MockGateway(.init(tls: serverTLS, loops: mockLoops, failurePlan: try failures.plan()))
        defer { gateway.stop() }

        var configuration = SenderConfiguration(
            host: "127.0.0.1", port: gateway.port,
            tls: .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                         trustRoots: .certificates(pki.authority.certificate)))
        engine.apply(to: &configuration)
        printError("mock gateway on 127.0.0.1:\(gateway.port); sending \(count) notifications over "
                   + "\(configuration.shards) shard(s) x \(configuration.connectionsPerShard) connection(s)")

        let run = try CampaignRun(command: "demo", configuration: configuration, rejectedPath: nil, checkpoint: nil,
                                  total: count)
        var payload = PayloadBuilder()
        payload.alertTitle = "Salvo"
        payload.alertBody = "Your weekly summary is ready."
        payload.badge = 1
        payload.sound = .default
        let campaign = SyntheticCampaign(count: count, payload: try payload.build(), priority: 10)
        let ending = await run.send(campaign, from: campaign.makeReader())
        let report = await run.finish(badLines: [], badLineCount: 0, ending: ending, lastLine: count, resumedAfter: 0,
                                      reportPath: report)
        let mock = gateway.statistics()
        // After a silent drop the sender resends what may have arrived (at-least-once): the
        // mock may count those twice, never more than the duplicates the sender reports.
        let duplicates = mock.accepted - report.accepted
        let agrees = mock.rejected == report.rejected && (0...report.possibleDuplicates).contains(duplicates)
        print("  mock gateway: accepted \(mock.accepted), rejected \(mock.rejected) — "
              + (agrees ? "matches the sender's accounting" : "DOES NOT MATCH the sender's accounting")
              + (duplicates > 0 ? " (\(duplicates) resent after silent drops counted twice)" : ""))
        if !agrees || !report.isComplete { throw ExitCode(1) }
    }
}
