import ArgumentParser
import Foundation
import SalvoEngine
import SalvoIO

/// `salvo bench`: the end-to-end benchmark. Runs a matrix of connections × error rates ×
/// payload sizes through the real sender (in this process) to `salvo mock` (a child
/// process on its own core), checks the mock's accounting against the sender's, and writes
/// the results: a table, `results/<date>-<sha>.json`, `results/README.md`, `results/throughput.svg`.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure end-to-end throughput, CPU and memory against a mock gateway; write results/.",
        discussion: """
            Each cell (connections × error rate × payload size) gets a fresh `salvo mock` process, \
            pinned to the last core when there are two or more (the sender's shards take the \
            others), an optional warm-up run and --runs measured runs of --count notifications. \
            The mock's accepted and rejected counts must equal the sender's: any mismatch makes \
            the command exit 1 (after writing the results). Error rates become the mock's \
            --reject-every 1/rate.

            The last line printed is `bench: <best median> notifications/s (<p>% of ceiling)`.
            --quick is a small matrix for smoke tests (under a minute).
            """)

    @Option(help: ArgumentHelp("Connections per shard, comma-separated. Default 1,2,4,8 (--quick: 1,4).", valueName: "list"))
    var connections: String?

    @Option(name: .customLong("error-rates"),
            help: ArgumentHelp("Rejected share of notifications, comma-separated. Default 0,0.0001,0.001 (--quick: 0,0.001).", valueName: "list"))
    var errorRates: String?

    @Option(name: .customLong("payload-sizes"),
            help: ArgumentHelp("Payload bytes, comma-separated (21...2048). Default 100,1024,2048 (--quick: 100).", valueName: "list"))
    var payloadSizes: String?

    @Option(help: ArgumentHelp("Notifications per run. Default 1000000 (--quick: 200000).", valueName: "n"))
    var count: Int?

    @Option(help: "Measured runs per cell.")
    var runs = 3

    @Flag(inversion: .prefixedNo, help: "One unmeasured run per cell first.")
    var warmup = true

    @Flag(help: "A small matrix for smoke tests.")
    var quick = false

    @Flag(help: "Also measure the ceiling: the ingest probe's rate of pre-encoded 161-byte frames over one TLS connection.")
    var ceiling = false

    @Option(name: .customLong("ceiling-frames"), help: ArgumentHelp("Frames per ceiling run.", valueName: "n"))
    var ceilingFrames = 10_000_000

    @Flag(name: .customLong("php-baseline"), help: "Also run scripts/php-baseline.php (needs php on PATH) against a fresh mock.")
    var phpBaseline = false

    @Option(name: .customLong("php-script"), help: ArgumentHelp("The PHP baseline script. Default: scripts/php-baseline.php in the repository.", valueName: "file"))
    var phpScript: String?

    @Option(help: ArgumentHelp("An external gateway instead of the mock (no accounting check, no error rates).", valueName: "host:port"))
    var gateway: String?

    @OptionGroup(title: "TLS (with --gateway)")
    var tls: TLSOptions

    @Option(name: .customLong("error-wait-ms"), help: ArgumentHelp("The sender's error wait (a loopback mock answers in well under a millisecond).", valueName: "ms"))
    var errorWaitMilliseconds = 20

    @Option(name: .customLong("ring-mib"),
            help: ArgumentHelp("Send ring per connection, MiB. It holds what is in flight during the error wait: rate x wait x frame size.", valueName: "MiB"))
    var ringMiB = 16

    @Option(help: ArgumentHelp("Sender shards. Default: one per core except the mock's.", valueName: "n"))
    var shards: Int?

    @Flag(inversion: .prefixedNo, help: "Pin the mock to the last core and the sender's shards to the others (with 2+ cores).")
    var pin = true

    @Option(help: ArgumentHelp("Where the results go.", valueName: "dir"))
    var output = "results"

    @Flag(name: .customLong("json-only"), help: "Write only the JSON results (leave README.md and the plot alone).")
    var jsonOnly = false

    @Option(name: .customLong("render"), help: ArgumentHelp("Only regenerate README.md and the plot in --output from this results JSON.", valueName: "file"))
    var render: String?

    // MARK: The matrix

    var matrix: BenchMatrix {
        get throws {
            BenchMatrix(
                connections: try Self.list(connections ?? (quick ? "1,4" : "1,2,4,8"), "--connections", Int.init),
                errorRates: try Self.list(errorRates ?? (quick ? "0,0.001" : "0,0.0001,0.001"), "--error-rates", Double.init),
                payloadSizes: try Self.list(payloadSizes ?? "100,1024,2048".split(separator: ",").prefix(quick ? 1 : 3).joined(separator: ","),
                                            "--payload-sizes", Int.init))
        }
    }

    var notificationsPerRun: Int { count ?? (quick ? 200_000 : 1_000_000) }

    static func list<T>(_ text: String, _ flag: String, _ parse: (String) -> T?) throws -> [T] {
        let values = text.split(separator: ",").map { $0.trimmingCharacters(in: .whitespaces) }
        let parsed = values.compactMap(parse)
        guard !values.isEmpty, parsed.count == values.count else {
            throw ValidationError("\(flag) wants a comma-separated list of numbers, got '\(text)'")
        }
        return parsed
    }

    func validate() throws {
        let matrix = try matrix
        guard matrix.connections.allSatisfy({ (1...256).contains($0) }) else { throw ValidationError("--connections must be 1...256") }
        guard matrix.errorRates.allSatisfy({ (0..<1).contains($0) }) else { throw ValidationError("--error-rates must be 0 <= rate < 1") }
        guard matrix.payloadSizes.allSatisfy({ (21...2048).contains($0) }) else {
            throw ValidationError("--payload-sizes must be 21...2048 bytes (the smallest is {\"aps\":{\"alert\":\"x\"}})")
        }
        if gateway != nil, matrix.errorRates != [0], errorRates != nil {
            throw ValidationError("--error-rates needs the mock: an external --gateway decides its own rejections")
        }
        guard notificationsPerRun >= 1, runs >= 1 else { throw ValidationError("--count and --runs must be at least 1") }
        guard errorWaitMilliseconds >= 1 else { throw ValidationError("--error-wait-ms must be at least 1") }
        guard (1...1024).contains(ringMiB) else { throw ValidationError("--ring-mib must be 1...1024") }
        if let shards, shards < 1 { throw ValidationError("--shards must be at least 1") }
        guard ceilingFrames >= 1 else { throw ValidationError("--ceiling-frames must be at least 1") }
    }

    // MARK: Running

    func run() async throws {
        if let render {
            let results = try BenchResults.decode(try Data(contentsOf: URL(fileURLWithPath: render)))
            print("wrote " + (try BenchOutput.write(results, to: output, jsonOnly: false)).joined(separator: ", "))
            return
        }
        var matrix = try matrix
        if gateway != nil { matrix.errorRates = [0] }
        let cores = BenchSystem.cores
        let pinned = pin && cores >= 2 && gateway == nil
        let mockCore = pinned ? cores - 1 : nil
        let shardCount = shards ?? max(1, cores - 1)
        let executable = BenchSystem.executablePath()
        let progress = BenchProgress.make()
        let work = NSTemporaryDirectory() + "salvo-bench-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: work, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: work) }

        let target: BenchTarget
        var certificates: BenchCertificates?
        if let gateway {
            let endpoint = try Endpoint(parsing: gateway)
            target = .external(host: endpoint.host, port: endpoint.port, tls: try tls.configuration())
        } else {
            let made = try BenchCertificates(directory: work + "/certs")
            certificates = made
            target = .mock(executable: executable, certificates: made, core: mockCore, workDirectory: work)
        }
        let pinning = pinned
            ? "mock on core \(cores - 1), sender shard threads pinned to cores 0…\(max(0, cores - 2)) (the producer thread is not pinned)"
            : "not pinned"
        let settings = BenchResults.Settings(
            notificationsPerRun: notificationsPerRun, runsPerCell: runs, warmup: warmup,
            errorWaitMilliseconds: errorWaitMilliseconds, ringMib: ringMiB, shards: shardCount, pinning: pinning,
            gateway: gateway ?? "mock")
        let cells = matrix.cells
        printError("salvo bench: \(cells.count) cells × \(runs) runs\(warmup ? " (+1 warm-up)" : "") × "
                   + "\(BenchFormat.grouped(Double(notificationsPerRun))) notifications; \(pinning)")

        // The ceiling first, while nothing else of ours runs.
        var ceilingResult: BenchResults.Ceiling?
        if ceiling {
            progress?.note("ceiling: \(runs) ingest-probe runs of \(BenchFormat.grouped(Double(ceilingFrames))) frames")
            let measured = try BenchCeiling.measure(executable: executable, frames: ceilingFrames, runs: runs)
            progress?.clear()
            printError("ceiling: \(BenchFormat.grouped(measured.median)) frames/s (median of \(runs))")
            ceilingResult = measured
        }

        let runner = BenchCellRunner(
            target: target,
            base: { [errorWaitMilliseconds, ringMiB, pinned] host, port, tls in
                var configuration = SenderConfiguration(host: host, port: port, tls: tls)
                configuration.shards = shardCount
                configuration.errorWait = .milliseconds(errorWaitMilliseconds)
                configuration.ringCapacity = ringMiB << 20
                configuration.pinThreads = pinned
                return configuration
            },
            count: notificationsPerRun, runs: runs, warmup: warmup, progress: progress)
        var results: [BenchResults.Cell] = []
        for (index, spec) in cells.enumerated() {
            var cell = try await runner.measure(spec, index: index + 1, of: cells.count)
            if let ceilingResult { cell.percentOfCeiling = 100 * cell.rate.median / ceilingResult.median }
            progress?.clear()
            printError("[\(index + 1)/\(cells.count)] \(spec.label): median \(BenchFormat.grouped(cell.rate.median)) /s "
                       + "(\(BenchFormat.grouped(cell.rate.minimum))–\(BenchFormat.grouped(cell.rate.maximum))), "
                       + "CPU \(BenchFormat.fixed(cell.cpuSecondsPerMillion * 1000, 0)) ns/notif, accounting \(cell.accounting.summary)")
            if !cell.accounting.exact {
                printError("salvo bench: ACCOUNTING MISMATCH in \(spec.label): \(cell.accounting.summary); continuing, will exit 1")
            }
            results.append(cell)
        }

        var phpResult: BenchResults.PHPBaseline?
        if phpBaseline, let certificates {
            if let php = BenchSystem.which("php") {
                let script = phpScript ?? BenchSystem.repositoryRoot() + "/scripts/php-baseline.php"
                guard FileManager.default.fileExists(atPath: script) else {
                    throw BenchError("the PHP baseline script \(script) does not exist; give --php-script")
                }
                let measured = try BenchPHPBaseline.measure(
                    php: php, script: script, executable: executable, certificates: certificates, core: mockCore,
                    workDirectory: work, count: notificationsPerRun, runs: runs,
                    payloadBytes: matrix.payloadSizes.first ?? 100, progress: progress)
                progress?.clear()
                printError("PHP baseline: \(BenchFormat.grouped(measured.median)) notifications/s, accounting "
                           + (measured.accountingExact ? "exact" : "MISMATCH"))
                phpResult = measured
            } else {
                printError(BenchPHPBaseline.installHint)
            }
        }

        let formatter = ISO8601DateFormatter()
        formatter.timeZone = TimeZone(identifier: "UTC")
        let results_ = BenchResults(
            date: formatter.string(from: Date()), commit: BenchSystem.commit(),
            command: CommandLine.arguments.joined(separator: " "),
            machine: BenchSystem.machine(), settings: settings, ceiling: ceilingResult, php: phpResult, cells: results)
        let written = try BenchOutput.write(results_, to: output, jsonOnly: jsonOnly)
        progress?.clear()

        print(results_.table().plain())
        print("")
        for goal in results_.goals() { print("goal: \(goal.goal): \(goal.measured) — \(goal.verdict == .met ? "met" : goal.verdict == .missed ? "NOT MET" : "not measured")") }
        if let phpResult, let best = results_.best {
            print("PHP baseline: \(BenchFormat.grouped(phpResult.median)) /s; Salvo's best median is \(BenchFormat.fixed(best.rate.median / phpResult.median, 1))× that")
        }
        print("wrote " + written.joined(separator: ", "))
        let mismatches = results.filter { !$0.accounting.exact }.count + (phpResult.map { $0.accountingExact ? 0 : 1 } ?? 0)
        if mismatches > 0 { print("ACCOUNTING MISMATCH in \(mismatches) cell(s): see the table; exit status 1") }

        let best = results_.best?.rate.median ?? 0
        let share = ceilingResult.map { String(format: "%.1f%% of ceiling", 100 * best / $0.median) } ?? "ceiling not measured"
        print("bench: \(Int(best.rounded())) notifications/s (\(share))")
        if mismatches > 0 { throw ExitCode(1) }
    }
}
