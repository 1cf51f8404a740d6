import Foundation
import SalvoEngine
import SalvoIO

/// What one `salvo bench` invocation is asked to do: the matrix, how often each cell runs,
/// the sender's knobs, the optional reference measurements and where the results go.
/// `salvo bench`'s flags fill it in; `Bench.run(_:)` carries it out.
package struct BenchSettings: Sendable {
    /// An external gateway to measure instead of a fresh mock per cell.
    package struct Gateway: Sendable {
        package var host: String
        package var port: Int
        package var tls: TLSConfiguration

        package init(host: String, port: Int, tls: TLSConfiguration) {
            self.host = host
            self.port = port
            self.tls = tls
        }
    }

    /// The cells: connections × error rates × payload sizes × error waits.
    package var matrix: BenchMatrix
    /// Notifications per run.
    package var count: Int
    /// Measured runs per cell.
    package var runs: Int
    /// One unmeasured run per cell first.
    package var warmup: Bool
    /// Measure the ceiling (the ingest probe) first, with this many frames per run; nil: don't.
    package var ceilingFrames: Int?
    /// Run this PHP baseline script against a fresh mock; nil: don't.
    package var phpScript: String?
    /// Nil: a fresh `salvo mock` per cell, with the accounting check.
    package var gateway: Gateway?
    /// The sender's staging ring per connection, MiB; nil: the sender's default.
    package var ringMiB: Int?
    /// Run every cell over a delay line with this round trip (`salvo delay-line`); nil: loopback.
    package var roundTripMilliseconds: Int?
    /// Sender shards; nil: one per core except the mock's.
    package var shards: Int?
    /// Pin the mock to the last core and the sender's shards to the others (with 2+ cores).
    package var pin: Bool
    /// The results directory.
    package var output: String
    /// Write only the JSON results.
    package var jsonOnly: Bool
    /// The command line, recorded in the results.
    package var command: String
    /// The `salvo` executable that runs `salvo mock` and the ingest probe. The default, the
    /// running process's own executable, is right when the CLI runs the harness.
    package var executable: String
    /// Allocation requests of the whole process so far (jemalloc's counter, which only the
    /// executable links); nil, or a nil answer, leaves allocations unmeasured.
    package var allocationRequests: (@Sendable () -> Int?)?

    package init(matrix: BenchMatrix, count: Int, runs: Int = 3, warmup: Bool = true, ceilingFrames: Int? = nil,
                 phpScript: String? = nil, gateway: Gateway? = nil, ringMiB: Int? = nil, roundTripMilliseconds: Int? = nil,
                 shards: Int? = nil, pin: Bool = true, output: String = "results", jsonOnly: Bool = false,
                 command: String = CommandLine.arguments.joined(separator: " "),
                 executable: String = BenchSystem.executablePath(), allocationRequests: (@Sendable () -> Int?)? = nil) {
        self.matrix = matrix
        self.count = count
        self.runs = runs
        self.warmup = warmup
        self.ceilingFrames = ceilingFrames
        self.phpScript = phpScript
        self.gateway = gateway
        self.ringMiB = ringMiB
        self.roundTripMilliseconds = roundTripMilliseconds
        self.shards = shards
        self.pin = pin
        self.output = output
        self.jsonOnly = jsonOnly
        self.command = command
        self.executable = executable
        self.allocationRequests = allocationRequests
    }
}

/// What `salvo bench` prints when it is done, and how it exits.
package struct BenchOutcome: Sendable {
    package var results: BenchResults
    /// The table, the goals, the files written and, last, `bench: <best median> notifications/s (...)`.
    package var lines: [String]
    /// 0, or 1 when the mock's accounting differs from the sender's in any cell.
    package var exitStatus: Int32
}

/// The end-to-end benchmark behind `salvo bench`.
package enum Bench {
    /// Runs every cell of the matrix (and the ceiling and the PHP baseline when asked),
    /// writes the results to `settings.output` and returns what to print. Progress and one
    /// line per cell go to standard error as they happen.
    package static func run(_ settings: BenchSettings) async throws -> BenchOutcome {
        let matrix = try matrix(of: settings)
        let h2 = matrix.wireProtocol == .h2
        let cores = BenchSystem.cores
        let pinned = settings.pin && cores >= 2 && settings.gateway == nil
        let mockCore = pinned ? cores - 1 : nil
        let shardCount = settings.shards ?? max(1, cores - 1)
        let executable = settings.executable
        let (count, runs) = (settings.count, settings.runs)
        let progress = BenchProgress.make()
        let work = try BenchSystem.temporaryDirectory("salvo-bench")
        defer { try? FileManager.default.removeItem(atPath: work) }

        // Over a delayed path: the line's own process, and what one bulk TCP stream carries on it.
        var delayLine: BenchDelayLineProcess?
        defer { delayLine?.stop() }
        var path: BenchResults.Path?
        if let roundTrip = settings.roundTripMilliseconds {
            guard settings.gateway == nil else { throw BenchError("--rtt-ms runs the mock at the end of a delay line: not with --gateway") }
            let line = try BenchDelayLineProcess(executable: executable, roundTripMilliseconds: roundTrip)
            delayLine = line
            path = try measurePath(line, roundTripMilliseconds: roundTrip, runs: runs, progress: progress)
        }

        let target: BenchTarget
        var certificates: BenchCertificates?
        if let gateway = settings.gateway {
            target = .external(host: gateway.host, port: gateway.port, tls: gateway.tls)
        } else {
            let made = try BenchCertificates(directory: work + "/certs", serverNames: [DelayLine.farAddress])
            certificates = made
            target = .mock(executable: executable, certificates: made, core: mockCore, namespace: delayLine?.namespace,
                           workDirectory: work)
        }
        let defaults = SenderConfiguration(host: "", port: 0, tls: TLSConfiguration(),
                                           transport: h2 ? .http2(HTTP2Options(topic: BenchSenderRun.topic)) : .binary(.frame))
        let ringCapacity = settings.ringMiB.map { $0 << 20 } ?? defaults.ringCapacity
        let pinning = pinned ? pinnedText(cores: cores) : "not pinned"
        let recordedSettings = BenchResults.Settings(
            notificationsPerRun: count, runsPerCell: runs, warmup: settings.warmup,
            ringMib: max(1, ringCapacity >> 20), shards: shardCount, pinning: pinning,
            gateway: settings.gateway.map { "\($0.host):\($0.port)" } ?? "mock")
        let cells = matrix.cells
        printError("salvo bench: \(cells.count) cells × \(runs) runs\(settings.warmup ? " (+1 warm-up)" : "") × "
                   + "\(BenchFormat.grouped(Double(count))) notifications; \(pinning)")

        // The ceiling first, while nothing else of ours runs.
        let ceilingResult = try settings.ceilingFrames.map { frames in
            try measureCeiling(executable: executable, frames: frames, runs: runs, progress: progress)
        }

        let runner = BenchCellRunner(
            target: target,
            base: { host, port, tls in
                var configuration = SenderConfiguration(host: host, port: port, tls: tls)
                configuration.shards = shardCount
                configuration.ringCapacity = ringCapacity
                if let mib = settings.ringMiB { configuration.sharedStagingCapacity = mib << 20 }
                configuration.pinThreads = pinned
                return configuration
            },
            count: count, runs: runs, warmup: settings.warmup, progress: progress,
            allocationRequests: settings.allocationRequests)
        let measuredCells = try await measure(cells, with: runner, ceiling: ceilingResult, path: path, progress: progress)

        var phpResult: BenchResults.PHPBaseline?
        if let script = settings.phpScript, let certificates, path == nil {
            phpResult = try measurePHP(script: script, executable: executable, certificates: certificates, core: mockCore,
                                       workDirectory: work, count: count, runs: runs,
                                       payloadBytes: matrix.payloadSizes.first ?? 100, progress: progress)
        }

        let results = BenchResults(
            date: Date().ISO8601Format(), commit: BenchSystem.commit(), command: settings.command,
            machine: BenchSystem.machine(), settings: recordedSettings, ceiling: ceilingResult, php: phpResult, path: path,
            cells: measuredCells)
        let written = try BenchOutput.write(results, to: settings.output, jsonOnly: settings.jsonOnly)
        progress?.clear()

        return outcome(results, written: written, php: phpResult)
    }

    /// Where the mock and the sender's threads run when pinned.
    private static func pinnedText(cores: Int) -> String {
        "mock on core \(cores - 1), sender shard threads pinned to cores 0…\(max(0, cores - 2)) (the producer thread is not pinned)"
    }

    /// The cells to measure: against another gateway, only those without errors (its
    /// errors are not ours to inject).
    private static func matrix(of settings: BenchSettings) throws -> BenchMatrix {
        var matrix = settings.matrix
        if settings.gateway != nil { matrix.errorRates = [0] }
        if matrix.wireProtocol == .h2, settings.gateway != nil || settings.ceilingFrames != nil || settings.phpScript != nil {
            throw BenchError("--protocol h2 measures against the HTTP/2 mock: not with --gateway, --ceiling or --php-baseline")
        }
        return matrix
    }

    /// What one bulk TCP stream carries over the delay line, `runs` times.
    private static func measurePath(_ line: BenchDelayLineProcess, roundTripMilliseconds roundTrip: Int, runs: Int,
                                    progress: BenchProgress?) throws -> BenchResults.Path {
        var rates: [Double] = []
        for run in 1...runs {
            progress?.note("path: bulk TCP over the \(roundTrip) ms round trip, run \(run)/\(runs)")
            rates.append(try BulkTCPProbe.measure(namespace: line.namespace, farAddress: DelayLine.farAddress,
                                                  duration: .seconds(5)))
        }
        progress?.clear()
        let path = BenchResults.Path(roundTripMilliseconds: roundTrip, bulkTCPBytesPerSecond: rates)
        printError("path: \(roundTrip) ms round trip, bulk TCP \(BenchFormat.fixed(path.median / 1e6, 1)) MB/s (median of \(runs))")
        return path
    }

    /// How many frames per second the mock ingests from the ingest probe, `runs` times.
    private static func measureCeiling(executable: String, frames: Int, runs: Int,
                                       progress: BenchProgress?) throws -> BenchResults.Ceiling {
        progress?.note("ceiling: \(runs) ingest-probe runs of \(BenchFormat.grouped(Double(frames))) frames")
        let measured = try BenchCeiling.measure(executable: executable, frames: frames, runs: runs)
        progress?.clear()
        printError("ceiling: \(BenchFormat.grouped(measured.median)) frames/s (median of \(runs))")
        return measured
    }

    /// Measures every cell in turn, with its share of the ceiling and the path; says each as it is done.
    private static func measure(_ cells: [BenchMatrix.CellSpec], with runner: BenchCellRunner, ceiling: BenchResults.Ceiling?,
                                path: BenchResults.Path?, progress: BenchProgress?) async throws -> [BenchResults.Cell] {
        var measured: [BenchResults.Cell] = []
        for (index, spec) in cells.enumerated() {
            var cell = try await runner.measure(spec, index: index + 1, of: cells.count)
            if let ceiling { cell.percentOfCeiling = 100 * cell.rate.median / ceiling.median }
            if let path { cell.percentOfPath = 100 * cell.rate.median / path.framesPerSecond(frameBytes: cell.frameBytes) }
            progress?.clear()
            printError("[\(index + 1)/\(cells.count)] \(spec.label): median \(BenchFormat.grouped(cell.rate.median)) /s "
                       + "(\(BenchFormat.grouped(cell.rate.minimum))–\(BenchFormat.grouped(cell.rate.maximum))), "
                       + "CPU \(BenchFormat.fixed(cell.cpuSecondsPerMillion * 1000, 0)) ns/notif, accounting \(cell.accounting.summary)")
            if !cell.accounting.exact {
                printError("salvo bench: ACCOUNTING MISMATCH in \(spec.label): \(cell.accounting.summary); continuing, will exit 1")
            }
            measured.append(cell)
        }
        return measured
    }

    /// The PHP client's rate against the same mock, or nil (with how to install PHP) without `php`.
    private static func measurePHP(script: String, executable: String, certificates: BenchCertificates, core: Int?,
                                   workDirectory: String, count: Int, runs: Int, payloadBytes: Int,
                                   progress: BenchProgress?) throws -> BenchResults.PHPBaseline? {
        guard let php = BenchSystem.which("php") else {
            printError(BenchPHPBaseline.installHint)
            return nil
        }
        guard FileManager.default.fileExists(atPath: script) else {
            throw BenchError("the PHP baseline script \(script) does not exist; give --php-script")
        }
        let measured = try BenchPHPBaseline.measure(
            php: php, script: script, executable: executable, certificates: certificates, core: core,
            workDirectory: workDirectory, count: count, runs: runs, payloadBytes: payloadBytes, progress: progress)
        progress?.clear()
        printError("PHP baseline: \(BenchFormat.grouped(measured.median)) notifications/s, accounting "
                   + (measured.accountingExact ? "exact" : "MISMATCH"))
        return measured
    }

    /// The table, the goals, the files written and the last line; exit 1 on any accounting mismatch.
    private static func outcome(_ results: BenchResults, written: [String], php: BenchResults.PHPBaseline?) -> BenchOutcome {
        var lines = [results.table().plain(), ""]
        for goal in results.goals() {
            lines.append("goal: \(goal.goal): \(goal.measured) — \(goal.verdict.spoken)")
        }
        if let php, let best = results.best {
            lines.append("PHP baseline: \(BenchFormat.grouped(php.median)) /s; Salvo's best median is \(BenchFormat.fixed(best.rate.median / php.median, 1))× that")
        }
        lines.append("wrote " + written.joined(separator: ", "))
        let mismatches = results.cells.filter { !$0.accounting.exact }.count + (php.map { $0.accountingExact ? 0 : 1 } ?? 0)
        if mismatches > 0 { lines.append("ACCOUNTING MISMATCH in \(mismatches) cell(s): see the table; exit status 1") }

        let best = results.best?.rate.median ?? 0
        let share = results.ceiling.map { String(format: "%.1f%% of ceiling", 100 * best / $0.median) } ?? "ceiling not measured"
        lines.append("bench: \(Int(best.rounded())) notifications/s (\(share))")
        return BenchOutcome(results: results, lines: lines, exitStatus: mismatches > 0 ? 1 : 0)
    }

    /// Regenerates the summary (binary.md or h2.md) and the plot in `output` from a results JSON file; returns the
    /// paths written.
    package static func render(resultsFile: String, to output: String) throws -> [String] {
        let results = try BenchResults.decode(try Data(contentsOf: URL(fileURLWithPath: resultsFile)))
        return try BenchOutput.writeSummary(results, to: output)
    }

    /// Where `scripts/php-baseline.php` is: in the repository the working directory is in.
    package static var defaultPHPScript: String { BenchSystem.repositoryRoot() + "/scripts/php-baseline.php" }
}
