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

    @Option(name: .customLong("reject-every"), help: ArgumentHelp("Have the mock reject every Nth notification.", valueName: "n"))
    var rejectEvery: Int?

    @OptionGroup(title: "Engine")
    var engine: EngineOptions

    func validate() throws {
        guard count >= 1 else { throw ValidationError("--count must be at least 1") }
    }

    func run() async throws {
        let pki = try DevelopmentPKI.Bundle()
        let gateway = try MockGateway(.init(
            tls: .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                         clientCertificateRoots: .certificates(pki.authority.certificate)),
            loops: mockLoops, failurePlan: FailurePlan(rejectEvery: rejectEvery)))
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
                                      reportPath: nil)
        let mock = gateway.statistics()
        let agrees = mock.accepted == report.accepted && mock.rejected == report.rejected
        print("  mock gateway: accepted \(mock.accepted), rejected \(mock.rejected) — "
              + (agrees ? "matches the sender's accounting" : "DOES NOT MATCH the sender's accounting"))
        if !agrees || !report.isComplete { throw ExitCode(1) }
    }
}
