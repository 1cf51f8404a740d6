import ArgumentParser
import Foundation
import SalvoBlackBerry
import SalvoIO
import SalvoMock
import SalvoWire

/// `salvo demo --target blackberry`: a synthetic Push Channel campaign (every 100th token
/// dead) through the real sender to an in-process mock NOC with throwaway certificates, and
/// the mock's counts against the sender's. `--count` as given (a Push Channel sender is
/// bound by round trips: 20000 take a few seconds on loopback).
extension DemoCommand {
    func runBlackBerry() async throws {
        let pki = try DevelopmentPKI.Bundle()
        let directory = NSTemporaryDirectory() + "salvo-demo-bb-\(getpid())"
        try pki.write(to: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let noc = try GNPMockNOC(.init(server: MockServerSettings(
            tls: .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey), loops: mockLoops)))
        defer { noc.stop() }
        let campaign = "\(directory)/campaign.jsonl"
        var text = ""
        for n in 1...count {
            text += #"{"token":"demo-\#(n)\#(n % 100 == 0 ? "-dead" : "")","payload":"Your weekly summary is ready."}"# + "\n"
        }
        try text.write(toFile: campaign, atomically: true, encoding: .utf8)
        var configuration = PushChannelConfiguration(route: .noc(host: "127.0.0.1", port: noc.port))
        configuration.trustedCertificatesFile = "\(directory)/ca.pem"
        let client = try PushChannelClient(configuration)
        printError("mock NOC on 127.0.0.1:\(noc.port); sending \(counted(count, "Push Channel notification")) over "
                   + "\(counted(configuration.connections, "connection")) (every 100th token is dead)")
        let run = PushChannelRun(client: client)
        let ending = await run.send(from: try PushChannelCampaignReader(.jsonl(campaign)))
        try await client.shutdown()
        let report = run.ledger.report(connections: configuration.connections)
        print(CampaignRun.summary(report, http2: true))
        if let path = self.report { try CampaignRun.writeReport(report, badLines: [], badLineCount: 0, resumedAfter: 0, to: path) }
        let mock = noc.statistics()
        let agrees = mock.accepted == report.accepted && mock.rejected == report.rejected
        print("  mock NOC: accepted \(mock.accepted), rejected \(mock.rejected) — "
              + (agrees ? "matches the sender's accounting" : "DOES NOT MATCH the sender's accounting"))
        if !agrees || !report.isComplete || ending != .readToEnd { throw ExitCode(1) }
    }
}
