import Foundation
import SalvoEngine
import SalvoIO
import SalvoMock

/// The protocol a bench run measures.
package enum BenchProtocol: String, Sendable, Codable {
    /// The legacy binary protocol, in command 2.
    case binary
    /// The HTTP/2 provider API (client-certificate authentication: the mock takes one
    /// provider token per team, and each run is a new sender).
    case h2
}

/// The cells of a bench run and how each is measured: a fresh mock per cell, an optional
/// warm-up run, then the measured runs, and the mock's counts against the sender's.
package struct BenchMatrix: Sendable {
    /// One cell: what the sender and the mock are asked to do.
    package struct CellSpec: Sendable, Hashable {
        package var wireProtocol: BenchProtocol = .binary
        /// Connections per shard; 0 (HTTP/2): as many as the sender grows to by itself.
        package var connections: Int
        package var errorRate: Double
        package var payloadBytes: Int
        /// The sender's error wait: how long a written notification waits for an error
        /// response naming it before it counts as accepted (binary).
        package var errorWaitMilliseconds: Int
        /// How long the mock holds every answer (HTTP/2).
        package var responseDelayMilliseconds = 0
        /// HTTP/2: broadcasts to this many channels (made by the mock) instead of pushes
        /// to devices; 0: devices.
        package var broadcastChannels = 0
        /// Binary: command 2 with all five items. HTTP/2 measures its own (HPACK).
        package var frameBytes: Int { 61 + payloadBytes }

        package init(connections: Int, errorRate: Double, payloadBytes: Int, errorWaitMilliseconds: Int) {
            self.connections = connections
            self.errorRate = errorRate
            self.payloadBytes = payloadBytes
            self.errorWaitMilliseconds = errorWaitMilliseconds
        }

        package var label: String {
            let connections = self.connections == 0 ? "auto" : String(self.connections)
            let condition = wireProtocol == .h2 ? "answers after \(BenchFormat.milliseconds(responseDelayMilliseconds))"
                : "error wait \(BenchFormat.milliseconds(errorWaitMilliseconds))"
            let broadcasts = broadcastChannels > 0 ? ", broadcasts to \(BenchFormat.grouped(Double(broadcastChannels))) channels" : ""
            return "\(connections) conn, errors \(BenchFormat.errorRate(errorRate)), \(payloadBytes) B, \(condition)\(broadcasts)"
        }

        /// The mock flags that make it reject at this rate (every Nth when 1/rate is whole;
        /// HTTP/2: 400 BadDeviceToken), and hold its answers.
        package var failurePlan: [String] {
            var flags = responseDelayMilliseconds > 0 ? ["--response-delay-ms", String(responseDelayMilliseconds)] : []
            if broadcastChannels > 0 { flags += ["--preset-channels", "\(BenchSenderRun.topic)=\(broadcastChannels)"] }
            guard errorRate > 0 else { return flags }
            let every = 1 / errorRate
            if abs(every - every.rounded()) < 1e-6 * every {
                flags += ["--reject-every", String(Int(every.rounded()))]
            } else {
                flags += ["--reject-probability", String(errorRate)]
            }
            return flags
        }
    }

    package var wireProtocol: BenchProtocol = .binary
    package var connections: [Int]
    package var errorRates: [Double]
    package var payloadSizes: [Int]
    /// The sender's error waits, milliseconds (binary).
    package var errorWaits: [Int]
    /// The mock's answer delays, milliseconds (HTTP/2).
    package var responseDelays: [Int] = [0]
    /// HTTP/2: with a count, each cell without errors is followed by the same cell sent as
    /// broadcasts to that many channels: the two side by side say what a broadcast costs.
    package var broadcastChannels = 0

    package init(connections: [Int], errorRates: [Double], payloadSizes: [Int], errorWaits: [Int]) {
        self.connections = connections
        self.errorRates = errorRates
        self.payloadSizes = payloadSizes
        self.errorWaits = errorWaits
    }

    /// Payload size outermost, then error wait (or answer delay), then error rate, then
    /// connections (the plot's X axis).
    package var cells: [CellSpec] {
        let conditions = wireProtocol == .h2 ? responseDelays : errorWaits
        let broadcastChannels = wireProtocol == .h2 ? self.broadcastChannels : 0
        return payloadSizes.flatMap { payload in
            conditions.flatMap { condition in
                errorRates.flatMap { rate in
                    connections.flatMap {
                        var cell = CellSpec(connections: $0, errorRate: rate, payloadBytes: payload,
                                            errorWaitMilliseconds: wireProtocol == .h2 ? 1000 : condition)
                        cell.wireProtocol = wireProtocol
                        if wireProtocol == .h2 { cell.responseDelayMilliseconds = condition }
                        guard broadcastChannels > 0, rate == 0 else { return [cell] }
                        var broadcasts = cell
                        broadcasts.broadcastChannels = broadcastChannels
                        return [cell, broadcasts]
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
            let process = try BenchMockProcess(executable: executable, wireProtocol: spec.wireProtocol, certificates: certificates,
                                               failurePlan: spec.failurePlan, core: core, namespace: namespace,
                                               workDirectory: workDirectory, name: "mock-\(index)")
            mock = process
            (host, port, tls) = (namespace == nil ? "127.0.0.1" : DelayLine.farAddress, process.gatewayPort, certificates.clientTLS)
        case .external(let externalHost, let externalPort, let externalTLS):
            (host, port, tls) = (externalHost, externalPort, externalTLS)
        }
        var configuration = base(host, port, tls)
        if spec.wireProtocol == .h2 { configuration.transport = .http2(HTTP2Options(topic: BenchSenderRun.topic)) }
        // A cell measures this many connections: none added (unless it asks for the
        // sender's own growth).
        if spec.connections > 0 {
            configuration.connectionsPerShard = spec.connections
            configuration.maximumConnectionsPerShard = spec.connections
        }
        configuration.errorWait = .milliseconds(spec.errorWaitMilliseconds)

        var measured: [BenchResults.Run] = []
        var totals = (accepted: 0, rejected: 0, failed: 0, submitted: 0)
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
                totals.submitted += count
                if !isWarmup { measured.append(run) }
            }
        } catch {
            let diagnosis = mock?.diagnosis
            mock?.abandon()
            throw BenchError("\(spec.label): \(error)" + (diagnosis.map { "\n  \($0)" } ?? ""))
        }
        progress?.note("[\(index)/\(total)] \(spec.label): stopping the mock")
        let counts = try mock?.stop()
        let accounting = BenchResults.Accounting(
            senderAccepted: totals.accepted, senderRejected: totals.rejected, senderFailed: totals.failed,
            mockAccepted: counts?.accepted, mockRejected: counts?.rejected)
        // HTTP/2's requests are as long as HPACK makes them: what the mock read, per request.
        let frameBytes = spec.wireProtocol == .binary ? spec.frameBytes
            : counts.map { Int((Double($0.bytesRead) / Double(max(1, totals.submitted))).rounded()) } ?? 0

        let notifications = Double(count)
        var cell = BenchResults.Cell(
            connections: spec.connections, errorRate: spec.errorRate, payloadBytes: spec.payloadBytes,
            errorWaitMilliseconds: spec.errorWaitMilliseconds, frameBytes: frameBytes,
            runs: measured,
            rate: BenchSpread(measured.map(\.rate))!,
            cpuSecondsPerMillion: BenchSpread.median(measured.map { ($0.cpuUserSeconds + $0.cpuSystemSeconds) / notifications * 1e6 })!,
            allocationsPerNotification: measured.allSatisfy { $0.allocations != nil }
                ? BenchSpread.median(measured.map { Double($0.allocations!) / notifications }) : nil,
            peakRssMib: BenchSystem.peakResidentSetMiB(),
            resent: Int(BenchSpread.median(measured.map { Double($0.resent) })!.rounded()),
            accounting: accounting)
        if spec.wireProtocol == .h2 {
            cell.wireProtocol = .h2
            cell.responseDelayMilliseconds = spec.responseDelayMilliseconds
            if spec.broadcastChannels > 0 { cell.broadcastChannels = spec.broadcastChannels }
            cell.connectionsUsed = BenchSpread.median(measured.map { Double($0.connections ?? 0) })
        }
        return cell
    }
}
