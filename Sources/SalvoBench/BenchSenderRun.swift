import Foundation
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoWire

/// One measured run: `count` notifications through a fresh `Sender` in this process, timed,
/// with the process's CPU time and allocation requests before and after.
package enum BenchSenderRun {
    /// The bundle id HTTP/2 runs send to.
    static let topic = "com.example.bench"

    /// A JSON payload of exactly `bytes` bytes: `{"aps":{"alert":"xxx…"}}`.
    package static func payload(bytes: Int) -> [UInt8] {
        let prefix = Array(#"{"aps":{"alert":""#.utf8), suffix = Array(#""}}"#.utf8)
        precondition(bytes >= prefix.count + suffix.count + 1, "payloads start at 21 bytes")
        return prefix + [UInt8](repeating: UInt8(ascii: "x"), count: bytes - prefix.count - suffix.count) + suffix
    }

    /// The rate is the sender's own measure: notifications per second from its start to
    /// its last write, so the final error wait (a fixed latency, not throughput) is left
    /// out however long it is.
    ///
    /// - Parameters:
    ///   - allocationRequests: the process's allocation requests so far, when known.
    static func run(count: Int, cell: BenchMatrix.CellSpec, configuration: SenderConfiguration,
                    progress: BenchProgress?, allocationRequests: (@Sendable () -> Int?)?) async throws -> BenchResults.Run {
        let channels = (0..<cell.broadcastChannels).map(MockChannelRegistry.presetID)
        let campaign = SyntheticCampaign(count: count, payload: payload(bytes: cell.payloadBytes), channels: channels)
        let allocationsBefore = allocationRequests?()
        let cpuBefore = BenchSystem.cpuSeconds()
        let sender: Sender
        do { sender = try Sender(configuration) } catch { throw BenchError("cannot start the sender: \(error)") }
        let watcher = progress.map { progress in
            Task { [sender] in
                while !Task.isCancelled {
                    progress.update(settled: sender.progress)
                    try? await Task.sleep(for: .milliseconds(200))
                }
            }
        }
        do {
            try await sender.send(contentsOf: campaign)
        } catch {
            watcher?.cancel()
            _ = await sender.finish(timeout: .seconds(5))
            throw BenchError("sending \(count) notifications failed: \(error)")
        }
        let report = await sender.finish()
        watcher?.cancel()
        let cpuAfter = BenchSystem.cpuSeconds()
        let allocationsAfter = allocationRequests?()

        return BenchResults.Run(
            rate: report.sendRatePerSecond, seconds: report.seconds,
            cpuUserSeconds: cpuAfter.user - cpuBefore.user, cpuSystemSeconds: cpuAfter.system - cpuBefore.system,
            accepted: report.accepted, rejected: report.rejected, failed: report.failed, resent: report.resent,
            reconnects: report.reconnects, possibleDuplicates: report.possibleDuplicates, windowOverruns: report.windowOverruns,
            allocations: allocationsBefore.flatMap { before in allocationsAfter.map { $0 - before } },
            connections: report.connections)
    }
}
