import Foundation
import SalvoPostgres
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire

/// What the campaign tests share: a real PostgreSQL cluster, the real binary mock gateway
/// with certificates made at test time, tokens and files.
enum CampaignRig {
    static let pki = try! DevelopmentPKI.Bundle()
    static let scope = RegistryScope(topic: "com.example.app", environment: .production)
    static let payload = Array(#"{"aps":{"alert":"campaign"}}"#.utf8)

    /// The binary mock, recording what it accepted; `plan` decides what it rejects.
    static func gateway(plan: FailurePlan = .none) throws -> MockGateway {
        let tls = TLSConfiguration.server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                                          clientCertificateRoots: .certificates(pki.authority.certificate))
        return try MockGateway(.init(port: 0, tls: tls, loops: 2, failurePlan: plan, recordAccepted: true))
    }

    /// A sender configuration for the mock at `port`: binary, a short error wait.
    static func senderConfiguration(port: Int) -> SenderConfiguration {
        var configuration = SenderConfiguration(
            host: "127.0.0.1", port: port,
            tls: .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                         trustRoots: .certificates(pki.authority.certificate)))
        configuration.shards = 1
        configuration.connectionsPerShard = 2
        configuration.errorWait = .milliseconds(100)
        configuration.recordRetention = .milliseconds(200)
        configuration.pinThreads = false
        return configuration
    }

    /// Token n: 0xA5 bytes, then n big-endian in the last eight (its last byte is n's low byte).
    static func token(_ n: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0xA5, count: 32)
        withUnsafeBytes(of: UInt64(n).bigEndian) { bytes.replaceSubrange(24..<32, with: $0) }
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }

    /// The digests of tokens `numbers` with the campaign's payload, as the mock records them.
    static func digests(_ numbers: some Sequence<Int>) -> Set<UInt64> {
        Set(numbers.map { MockStatistics.digest(token: token($0), payload: payload) })
    }

    /// A temporary directory with a token list of 1...count and the payload file.
    struct Files {
        let directory: String
        init(count: Int) throws {
            directory = NSTemporaryDirectory() + "salvo-campaign-\(UUID().uuidString.prefix(8))"
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
            var text = ""
            text.reserveCapacity(count * 65)
            for n in 1...max(1, count) where count > 0 { text += CampaignRig.token(n).hex + "\n" }
            try text.write(toFile: tokens, atomically: true, encoding: .utf8)
            try Data(CampaignRig.payload).write(to: URL(fileURLWithPath: payloadFile))
            try CampaignRig.pki.write(to: directory)
        }
        var tokens: String { directory + "/tokens.txt" }
        /// A campaign `name` of the token list with the campaign's payload.
        func campaign(_ name: String, registry: RegistryScope? = nil, chunkSize: Int = 10_000) -> CampaignDefinition {
            CampaignDefinition(name: name, input: .file(.tokens(tokens, payload: CampaignRig.payload), onBadLine: .abort),
                               registry: registry, chunkSize: chunkSize)
        }
        var payloadFile: String { directory + "/payload.json" }
        func path(_ name: String) -> String { directory + "/" + name }
        func remove() { try? FileManager.default.removeItem(atPath: directory) }
        var tlsArguments: [String] { ["--cert", path("client.pem"), "--key", path("client.key"), "--ca", path("ca.pem")] }
    }

    /// The `salvo` executable next to the test bundle (`swift build --build-tests` builds both).
    static var salvo: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("salvo").path
    }

    /// Runs `salvo` to its end (bounded); returns exit status, stdout and stderr.
    static func run(_ arguments: [String], timeout: Duration = .seconds(120)) async throws -> (Int32, String, String) {
        let process = try ChildProcess(salvo, arguments)
        let status = try await process.exitStatus(within: timeout)
        return (status, process.output, process.errors)
    }
}
