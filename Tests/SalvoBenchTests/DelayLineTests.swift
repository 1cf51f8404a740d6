import Foundation
import SalvoBench
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// The sender over a real round trip: `salvo mock` at the far end of a delay line (10 ms
/// each way), reached through TUN devices and a network namespace. Needs root and
/// /dev/net/tun; elsewhere the suite is skipped and says why.
@Suite(.serialized, .timeLimit(.minutes(5)), .ownThread("delay-line-tests"),
       .disabled(if: DelayLine.unavailableReason != nil,
                 Comment(rawValue: "skipped: \(DelayLine.unavailableReason ?? "")")))
struct DelayLineTests {
    /// The `salvo` executable next to the test bundle (`swift build --build-tests` builds both).
    static var salvo: String {
        URL(fileURLWithPath: CommandLine.arguments[0]).deletingLastPathComponent().appendingPathComponent("salvo").path
    }

    static func token(_ n: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0x3C, count: 32)
        withUnsafeBytes(of: UInt64(n).bigEndian) { bytes.replaceSubrange(24..<32, with: $0) }
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }

    @Test func aCampaignOverARoundTripIsAccountedForExactly() async throws {
        let line = try DelayLine(delay: .milliseconds(10))
        defer { line.stop() }
        let directory = NSTemporaryDirectory() + "salvo-wan-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let pki = try DevelopmentPKI.Bundle(serverNames: [DelayLine.farAddress])
        try pki.write(to: directory)

        // The gateway at the far end: rejects every 997th, answers 5 ms late.
        let report = directory + "/mock.json"
        let command = line.command([Self.salvo, "mock", "--host", DelayLine.farAddress, "--port", "0", "--feedback-port", "0",
                                    "--loops", "1", "--cert", directory + "/server.pem", "--key", directory + "/server.key",
                                    "--ca", directory + "/ca.pem", "--require-client-cert", "--reject-every", "997",
                                    "--error-delay-ms", "5", "--receive-buffer-kib", "0", "--record-accepted", "--report", report])
        let mock = try ChildProcess("/usr/bin/env", command)
        defer {
            mock.kill(SIGKILL)
            _ = try? mock.exitStatus(within: .seconds(10))
        }
        let first = try await mock.firstLine(within: .seconds(20))
        let port = try #require(first.split(separator: " ").first { $0.hasPrefix("gateway=") }.flatMap { Int($0.dropFirst(8)) },
                                "the mock said: \(first)")

        var configuration = SenderConfiguration(
            host: DelayLine.farAddress, port: port,
            tls: .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                         trustRoots: .certificates(pki.authority.certificate)))
        configuration.errorWait = .milliseconds(200)
        configuration.pinThreads = false
        let count = 20_000
        let rejected = RejectedSequences()
        let sender = try Sender(configuration) { _, _, sequence in rejected.insert(sequence) }
        let payload = Array(#"{"aps":{"alert":"far away"}}"#.utf8)
        try await sender.send(contentsOf: NotificationList(tokens: (0..<count).map(Self.token), payload: payload))
        let result = await sender.finish()

        mock.kill(SIGTERM)
        #expect(try await mock.exitStatus(within: .seconds(20)) == 0)
        let statistics = try JSONDecoder().decode(MockStatistics.self, from: Data(contentsOf: URL(fileURLWithPath: report)))
        #expect(result.isComplete && result.failed == 0)
        #expect(result.rejected > 0 && result.rejected == statistics.rejected && rejected.count == result.rejected)
        #expect(result.accepted == statistics.accepted, "sender \(result.accepted), mock \(statistics.accepted)")
        #expect(statistics.duplicates == 0)
        // Errors came back over the path: at least a round trip (20 ms) plus the gateway's delay.
        let latency = try #require(result.errorLatency)
        #expect(latency.p50Milliseconds >= 20, "p50 \(latency.p50Milliseconds) ms")
    }
}

/// The rejection callback's sequences, from the sender's threads.
private final class RejectedSequences: Sendable {
    private let sequences = Locked<Set<UInt64>>([])
    func insert(_ sequence: UInt64) { sequences.withLock { _ = $0.insert(sequence) } }
    var count: Int { sequences.withLock { $0.count } }
}
