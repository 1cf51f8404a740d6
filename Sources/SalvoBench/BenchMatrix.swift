import Foundation
import SalvoEngine
import SalvoIO
import SalvoMock

/// The cells of a bench run and how each is measured: a fresh mock per cell, an optional
/// warm-up run, then the measured runs, and the mock's counts against the sender's.
package struct BenchMatrix: Sendable {
    /// One cell: what the sender and the mock are asked to do.
    package struct CellSpec: Sendable, Hashable {
        package var connections: Int
        package var errorRate: Double
        package var payloadBytes: Int
        /// The sender's error wait: how long a written notification waits for an error
        /// response naming it before it counts as accepted.
        package var errorWaitMilliseconds: Int
        package var frameBytes: Int { 61 + payloadBytes }  // command 2, all five items

        package init(connections: Int, errorRate: Double, payloadBytes: Int, errorWaitMilliseconds: Int) {
            self.connections = connections
            self.errorRate = errorRate
            self.payloadBytes = payloadBytes
            self.errorWaitMilliseconds = errorWaitMilliseconds
        }

        package var label: String {
            "\(connections) conn, errors \(BenchFormat.errorRate(errorRate)), \(payloadBytes) B, "
                + "error wait \(BenchFormat.milliseconds(errorWaitMilliseconds))"
        }

        /// The mock flags that make it reject at this rate: every Nth when 1/rate is whole.
        package var failurePlan: [String] {
            guard errorRate > 0 else { return [] }
            let every = 1 / errorRate
            if abs(every - every.rounded()) < 1e-6 * every { return ["--reject-every", String(Int(every.rounded()))] }
            return ["--reject-probability", String(errorRate)]
        }
    }

    package var connections: [Int]
    package var errorRates: [Double]
    package var payloadSizes: [Int]
    /// The sender's error waits, milliseconds.
    package var errorWaits: [Int]

    package init(connections: [Int], errorRates: [Double], payloadSizes: [Int], errorWaits: [Int]) {
        self.connections = connections
        self.errorRates = errorRates
        self.payloadSizes = payloadSizes
        self.errorWaits = errorWaits
    }

    /// Payload size outermost, then error wait, then error rate, then connections (the
    /// plot's X axis).
    package var cells: [CellSpec] {
        payloadSizes.flatMap { payload in
            errorWaits.flatMap { wait in
                errorRates.flatMap { rate in
                    connections.map {
                        CellSpec(connections: $0, errorRate: rate, payloadBytes: payload, errorWaitMilliseconds: wait)
                    }
                }
            }
        }
    }
}

/// Where the sender sends: a fresh mock per cell, or an external gateway.
enum BenchTarget {
    /// `namespace`: the mock runs at the far end of a delay line (see `DelayLine`).
    case mock(executable: String, certificates: BenchCertificates, core: Int?, namespace: String?, workDirectory: String)
    case external(host: String, port: Int, tls: TLSConfiguration)
}

/// Runs the cells of a matrix one by one.
struct BenchCellRunner {
    var target: BenchTarget
    var base: (_ host: String, _ port: Int, _ tls: TLSConfiguration) -> SenderConfiguration
    var count: Int
    var runs: Int
    var warmup: Bool
    var progress: BenchProgress?
    var allocationRequests: (@Sendable () -> Int?)?

    func measure(_ spec: BenchMatrix.CellSpec, index: Int, of total: Int) async throws -> BenchResults.Cell {
        BenchSystem.resetPeakResidentSet()
        var mock: BenchMockProcess?
        let host: String, port: Int, tls: TLSConfiguration
        switch target {
        case .mock(let executable, let certificates, let core, let namespace, let workDirectory):
            let process = try BenchMockProcess(executable: executable, certificates: certificates, failurePlan: spec.failurePlan,
                                               core: core, namespace: namespace, workDirectory: workDirectory, name: "mock-\(index)")
            mock = process
            (host, port, tls) = (namespace == nil ? "127.0.0.1" : DelayLine.farAddress, process.gatewayPort, certificates.clientTLS)
        case .external(let externalHost, let externalPort, let externalTLS):
            (host, port, tls) = (externalHost, externalPort, externalTLS)
        }
        var configuration = base(host, port, tls)
        // A cell measures this many connections: none added.
        configuration.connectionsPerShard = spec.connections
        configuration.maximumConnectionsPerShard = spec.connections
        configuration.errorWait = .milliseconds(spec.errorWaitMilliseconds)

        var measured: [BenchResults.Run] = []
        var totals = (accepted: 0, rejected: 0, failed: 0)
        do {
            let planned = (warmup ? 1 : 0) + runs
            for attempt in 1...planned {
                let isWarmup = warmup && attempt == 1
                let runLabel = isWarmup ? "warm-up" : "run \(attempt - (warmup ? 1 : 0))/\(runs)"
                progress?.begin("[\(index)/\(total)] \(spec.label): \(runLabel)", total: count)
                let run = try await BenchSenderRun.run(count: count, cell: spec,
                                                       configuration: configuration, progress: progress,
                                                       allocationRequests: allocationRequests)
                totals.accepted += run.accepted
                totals.rejected += run.rejected
                totals.failed += run.failed
                if !isWarmup { measured.append(run) }
            }
        } catch {
            let diagnosis = mock?.diagnosis
            mock?.abandon()
            throw BenchError("\(spec.label): \(error)" + (diagnosis.map { "\n  \($0)" } ?? ""))
        }
        progress?.note("[\(index)/\(total)] \(spec.label): stopping the mock")
        let statistics = try mock?.stop()
        let accounting = BenchResults.Accounting(
            senderAccepted: totals.accepted, senderRejected: totals.rejected, senderFailed: totals.failed,
            mockAccepted: statistics?.accepted, mockRejected: statistics?.rejected)

        let notifications = Double(count)
        return BenchResults.Cell(
            connections: spec.connections, errorRate: spec.errorRate, payloadBytes: spec.payloadBytes,
            errorWaitMilliseconds: spec.errorWaitMilliseconds, frameBytes: spec.frameBytes,
            runs: measured,
            rate: BenchSpread(measured.map(\.rate))!,
            cpuSecondsPerMillion: BenchSpread.median(measured.map { ($0.cpuUserSeconds + $0.cpuSystemSeconds) / notifications * 1e6 })!,
            allocationsPerNotification: measured.allSatisfy { $0.allocations != nil }
                ? BenchSpread.median(measured.map { Double($0.allocations!) / notifications }) : nil,
            peakRssMib: BenchSystem.peakResidentSetMiB(),
            resent: Int(BenchSpread.median(measured.map { Double($0.resent) })!.rounded()),
            accounting: accounting)
    }
}
