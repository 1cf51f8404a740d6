import Foundation
import SalvoBlackBerry
import SalvoCampaignFiles
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoWire

/// A mock NOC on an ephemeral loopback port with certificates made for the test, a scratch
/// directory, and campaigns written into it.
final class NOCRig {
    let pki: DevelopmentPKI.Bundle
    let directory: String
    let noc: GNPMockNOC

    init(_ plan: GNPFailurePlan = GNPFailurePlan(), loops: Int = 1) throws {
        pki = try DevelopmentPKI.Bundle()
        directory = NSTemporaryDirectory() + "salvo-bb-\(UUID().uuidString)"
        try pki.write(to: directory)
        noc = try GNPMockNOC(.init(
            server: MockServerSettings(tls: .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey),
                                       loops: loops, recordAccepted: true),
            failurePlan: plan))
    }

    deinit {
        noc.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    var caFile: String { directory + "/ca.pem" }

    func path(_ name: String) -> String { directory + "/" + name }

    /// A client for the mock (its CA trusted), with fast retries.
    func client(connections: Int = 4, attempts: Int = 3, route: PushChannelConfiguration.Route? = nil) throws
        -> PushChannelClient
    {
        var configuration = PushChannelConfiguration(route: route ?? .noc(host: "127.0.0.1", port: noc.port))
        configuration.connections = connections
        configuration.maximumAttempts = attempts
        configuration.retryBackoff = .milliseconds(1)
        configuration.requestTimeout = .seconds(10)
        configuration.trustedCertificatesFile = caFile
        return try PushChannelClient(configuration)
    }

    /// The token of line n; every `deadEvery`th one ends in `dead`.
    static func token(_ n: Int, deadEvery: Int? = nil) -> String {
        deadEvery.map { n % $0 == 0 } == true ? "tok-\(n)-dead" : "tok-\(n)"
    }

    static func payload(_ n: Int) -> String { "notification \(n) ✓" }

    /// A JSONL campaign of `lines` notifications.
    @discardableResult
    func writeCampaign(lines: Int, deadEvery: Int? = nil, name: String = "campaign.jsonl",
                       replacing: [Int: String] = [:]) throws -> String {
        var text = ""
        for n in 1...lines {
            text += replacing[n] ?? #"{"token":"\#(Self.token(n, deadEvery: deadEvery))","payload":"\#(Self.payload(n))"}"#
            text += "\n"
        }
        let file = path(name)
        try text.write(toFile: file, atomically: true, encoding: .utf8)
        return file
    }

    /// Sends the campaign at `file` and returns the run's report and ending.
    func send(_ file: String, client: PushChannelClient, onBadLine: BadLinePolicy = .abort,
              maximumPayloadBytes: Int = GNP.defaultMaximumPayloadBytes) async throws
        -> (SenderReport, PushChannelRunEnding, PushChannelRun)
    {
        let reader = try PushChannelCampaignReader(.jsonl(file), maximumPayloadBytes: maximumPayloadBytes, onBadLine: onBadLine)
        let run = PushChannelRun(client: client)
        let ending = await run.send(from: reader)
        try await client.shutdown()
        return (run.ledger.report(connections: client.configuration.connections), ending, run)
    }

    /// The digests of lines `numbers` as the mock records them.
    static func digests(_ numbers: some Sequence<Int>, deadEvery: Int? = nil) -> Set<UInt64> {
        Set(numbers.map { GNPStatistics.digest(token: token($0, deadEvery: deadEvery), payload: Array(payload($0).utf8)) })
    }
}
