import Foundation
import SalvoEngine
import SalvoIO
import SalvoWire

/// One measured run: `count` notifications through a fresh `Sender` in this process, timed,
/// with the process's CPU time and allocation requests before and after.
package enum BenchSenderRun {
    /// A JSON payload of exactly `bytes` bytes: `{"aps":{"alert":"xxx…"}}`.
    package static func payload(bytes: Int) -> [UInt8] {
        let prefix = Array(#"{"aps":{"alert":""#.utf8), suffix = Array(#""}}"#.utf8)
        precondition(bytes >= prefix.count + suffix.count + 1, "payloads start at 21 bytes")
        return prefix + [UInt8](repeating: UInt8(ascii: "x"), count: bytes - prefix.count - suffix.count) + suffix
    }

    /// - Parameters:
    ///   - cell: the payload size, and the error wait the rate discounts (`configuration`'s).
    ///   - allocationRequests: the process's allocation requests so far, when known.
    static func run(count: Int, cell: BenchMatrix.CellSpec, configuration: SenderConfiguration,
                    progress: BenchProgress?, allocationRequests: (@Sendable () -> Int?)?) async throws -> BenchResults.Run {
        let encoded = payload(bytes: cell.payloadBytes)
        // One payload buffer for the whole run, as a campaign reader's would be.
        let payload = UnsafeMutableRawBufferPointer.allocate(byteCount: encoded.count, alignment: 1)
        defer { payload.deallocate() }
        payload.copyBytes(from: encoded)
        var tokenBytes = [UInt8](repeating: 0x5A, count: 32)

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
        let started = ContinuousClock.now
        for n in 1...count {
            withUnsafeBytes(of: UInt64(n).bigEndian) { tokenBytes.replaceSubrange(24..<32, with: $0) }
            let token = try tokenBytes.withUnsafeBytes { try DeviceToken(bytes: $0) }
            do {
                // The non-suspending call first: only backpressure pays for an await.
                if try !sender.trySend(token: token, payload: UnsafeRawBufferPointer(payload)) {
                    try await sender.send(token: token, payload: UnsafeRawBufferPointer(payload))
                }
            } catch {
                watcher?.cancel()
                _ = await sender.finish(timeout: .seconds(5))
                throw BenchError("sending notification \(n) of \(count) failed: \(error)")
            }
        }
        let submitted = ContinuousClock.now
        let report = await sender.finish()
        let finished = ContinuousClock.now
        watcher?.cancel()
        let cpuAfter = BenchSystem.cpuSeconds()
        let allocationsAfter = allocationRequests?()

        let seconds = started.duration(to: finished).secondsDouble
        // The final error wait is not throughput, but not every run ends with one: when an
        // error response names the last notification, nothing is left to wait for. Finishing
        // sooner than one error wait after the last submission is how such a run shows.
        let errorWait = Double(cell.errorWaitMilliseconds) / 1000
        let tail = submitted.duration(to: finished).secondsDouble >= errorWait ? errorWait : 0
        return BenchResults.Run(
            rate: Double(count) / max(seconds - tail, 1e-9), seconds: seconds,
            cpuUserSeconds: cpuAfter.user - cpuBefore.user, cpuSystemSeconds: cpuAfter.system - cpuBefore.system,
            accepted: report.accepted, rejected: report.rejected, failed: report.failed, resent: report.resent,
            reconnects: report.reconnects, possibleDuplicates: report.possibleDuplicates, windowOverruns: report.windowOverruns,
            allocations: allocationsBefore.flatMap { before in allocationsAfter.map { $0 - before } })
    }
}
