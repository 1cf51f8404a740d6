import ArgumentParser
import Foundation
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
        // A loopback gateway answers within microseconds: a short error wait, and rings
        // large enough for what is in flight during it. Flags override both.
        configuration.errorWait = .milliseconds(50)
        configuration.ringCapacity = 16 << 20
        engine.apply(to: &configuration)
        printError("mock gateway on 127.0.0.1:\(gateway.port); sending \(count) notifications over "
                   + "\(configuration.shards) shard(s) x \(configuration.connectionsPerShard) connection(s)")

        let run = try CampaignRun(configuration: configuration, rejectedPath: nil, checkpoint: nil, total: count)
        var payloadBuilder = PayloadBuilder()
        payloadBuilder.alertTitle = "Salvo"
        payloadBuilder.alertBody = "Your weekly summary is ready."
        payloadBuilder.badge = 1
        payloadBuilder.sound = .default
        // One payload buffer for the whole campaign, as a reader's would be.
        let encoded = try payloadBuilder.build()
        let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: encoded.count, alignment: 1)
        defer { payload.deallocate() }
        payload.copyBytes(from: encoded)
        var tokenBytes = [UInt8](repeating: 0x5A, count: 32)
        for n in 1...count {
            withUnsafeBytes(of: UInt64(n).bigEndian) { tokenBytes.replaceSubrange(24..<32, with: $0) }
            let token = try tokenBytes.withUnsafeBytes { try DeviceToken(bytes: $0) }
            if try !run.trySubmit(token: token, payload: UnsafeRawBufferPointer(payload), expiry: nil, priority: 10, line: n) {
                try await run.submit(token: token, payload: UnsafeRawBufferPointer(payload), expiry: nil, priority: 10, line: n)
            }
        }
        let report = await run.finish(badLines: [], badLineCount: 0, lastLine: count, resumedAfter: 0, reportPath: nil)
        let mock = gateway.statistics()
        let agrees = mock.accepted == report.accepted && mock.rejected == report.rejected
        print("  mock gateway: accepted \(mock.accepted), rejected \(mock.rejected) — "
              + (agrees ? "matches the sender's accounting" : "DOES NOT MATCH the sender's accounting"))
        if !agrees || !report.isComplete { throw ExitCode(1) }
    }
}
