import ArgumentParser
import Foundation
import SalvoBench
import SalvoEngine

/// `salvo bench`: the end-to-end benchmark (the harness is `SalvoBench`; this is its flags).
/// Runs a matrix of connections × error rates × payload sizes × error waits through the real
/// sender (in this process) to `salvo mock` (a child process on its own core), checks the
/// mock's accounting against the sender's, and writes the results: a table,
/// `results/<date>-<sha>.json`, `results/binary.md`, `results/throughput.svg`.
struct BenchCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "bench",
        abstract: "Measure end-to-end throughput, CPU and memory against a mock gateway; write results/.",
        discussion: """
            Each cell (connections × error rate × payload size × error wait) gets a fresh `salvo mock` process, \
            pinned to the last core when there are two or more (the sender's shards take the \
            others), an optional warm-up run and --runs measured runs of --count notifications. \
            The mock's accepted and rejected counts must equal the sender's: any mismatch makes \
            the command exit 1 (after writing the results). Error rates become the mock's \
            --reject-every 1/rate. A run's rate is its count over its time less the cell's error wait \
            (when it ended with one).

            The last line printed is `bench: <best median> notifications/s (<p>% of ceiling)`.
            --quick is a small matrix for smoke tests (under a minute).

            --protocol h2 measures the HTTP/2 sender against `salvo mock --protocol h2` \
            (client-certificate authentication, 1000 streams per connection): connections × \
            error rate (400 BadDeviceToken) × payload size × the mock's answer delay \
            (--response-delays). Connections `auto` let the sender grow them itself. It writes \
            results/h2-<date>-<sha>.json, results/h2.md and results/h2-throughput.svg.
            """)

    @Option(name: .customLong("protocol"), help: "binary (default) or h2 (the HTTP/2 provider API).")
    var wireProtocol: BenchProtocol = .binary

    @Option(help: "apns (default) or blackberry: the Push Channel sender against salvo mock --protocol gnp (see BlackBerryBench).")
    var target: PushService = .apns

    @Option(name: .customLong("response-delays"),
            help: ArgumentHelp("HTTP/2: the mock holds every answer this long, milliseconds, comma-separated. Default 0,100,300 (--quick: 0,100).",
                               valueName: "list"))
    var responseDelays: String?

    @Option(name: .customLong("broadcast-channels"),
            help: ArgumentHelp("HTTP/2: after each cell without errors, the same cell as broadcasts to this many channels (the mock makes them), to set a broadcast's cost beside a push's.",
                               valueName: "n"))
    var broadcastChannels: Int?

    @Option(help: ArgumentHelp("Connections per shard, comma-separated. Default 1,2,4,8 (--quick: 1,4); HTTP/2: auto (the sender grows them while every one holds all its streams).", valueName: "list"))
    var connections: String?

    @Option(name: .customLong("error-rates"),
            help: ArgumentHelp("Rejected share of notifications, comma-separated. Default 0,0.0001,0.001 (--quick and HTTP/2: 0,0.001).", valueName: "list"))
    var errorRates: String?

    @Option(name: .customLong("payload-sizes"),
            help: ArgumentHelp("Payload bytes, comma-separated (21...2048; HTTP/2: ...4096). Default 100,1024,2048 (--quick: 100); HTTP/2: 100,2048.", valueName: "list"))
    var payloadSizes: String?

    @Option(name: .customLong("error-waits"),
            help: ArgumentHelp("The sender's error waits, milliseconds, comma-separated. Default 1000 (the sender's default).", valueName: "list"))
    var errorWaits: String?

    @Option(name: .customLong("error-wait-ms"), help: ArgumentHelp("One error wait: short for --error-waits with one value.", valueName: "ms"))
    var errorWaitMilliseconds: Int?

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

    @Option(name: .customLong("ring-mib"),
            help: ArgumentHelp("The sender's staging ring per connection, MiB (default: the sender's, 2).", valueName: "MiB"))
    var ringMiB: Int?

    @Option(name: .customLong("rtt-ms"),
            help: ArgumentHelp("Run every cell over a delay line with this round trip (salvo delay-line; needs root), and measure what a bulk TCP stream carries on it.",
                               valueName: "ms"))
    var roundTripMilliseconds: Int?

    @Option(help: ArgumentHelp("Sender shards. Default: one per core except the mock's.", valueName: "n"))
    var shards: Int?

    @Flag(inversion: .prefixedNo, help: "Pin the mock to the last core and the sender's shards to the others (with 2+ cores).")
    var pin = true

    @Option(help: ArgumentHelp("Where the results go.", valueName: "dir"))
    var output = "results"

    @Flag(name: .customLong("json-only"), help: "Write only the JSON results (leave the summary and the plot alone).")
    var jsonOnly = false

    @Option(name: .customLong("render"), help: ArgumentHelp("Only regenerate the summary (binary.md or h2.md) and the plot in --output from this results JSON.", valueName: "file"))
    var render: String?

    // MARK: The matrix

    var matrix: BenchMatrix {
        get throws {
            let h2 = wireProtocol == .h2
            let defaultConnections = h2 ? "auto" : quick ? "1,4" : "1,2,4,8"
            let defaultPayloads = h2 ? (quick ? "100" : "100,2048") : quick ? "100" : "100,1024,2048"
            var matrix = BenchMatrix(
                // `auto` (HTTP/2): the sender's own growth.
                connections: try Self.list(connections ?? defaultConnections, "--connections") { $0 == "auto" ? 0 : Int($0) },
                errorRates: try Self.list(errorRates ?? (quick || h2 ? "0,0.001" : "0,0.0001,0.001"), "--error-rates", Double.init),
                payloadSizes: try Self.list(payloadSizes ?? defaultPayloads, "--payload-sizes", Int.init),
                errorWaits: try errorWaitMilliseconds.map { [$0] } ?? Self.list(errorWaits ?? "1000", "--error-waits", Int.init))
            matrix.wireProtocol = wireProtocol
            matrix.responseDelays = try Self.list(responseDelays ?? (quick ? "0,100" : "0,100,300"), "--response-delays", Int.init)
            matrix.broadcastChannels = broadcastChannels ?? 0
            return matrix
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
        if target == .blackberry { return try validateBlackBerry() }
        let matrix = try matrix
        let h2 = wireProtocol == .h2
        guard matrix.connections.allSatisfy({ (1...256).contains($0) || (h2 && $0 == 0) }) else {
            throw ValidationError("--connections must be 1...256" + (h2 ? " or auto" : ""))
        }
        guard matrix.errorRates.allSatisfy({ (0..<1).contains($0) }) else { throw ValidationError("--error-rates must be 0 <= rate < 1") }
        let largest = h2 ? 4096 : 2048
        guard matrix.payloadSizes.allSatisfy({ (21...largest).contains($0) }) else {
            throw ValidationError("--payload-sizes must be 21...\(largest) bytes (the smallest is {\"aps\":{\"alert\":\"x\"}})")
        }
        if h2 {
            if errorWaits != nil || errorWaitMilliseconds != nil { throw ValidationError("--error-waits is for the binary protocol") }
            guard matrix.responseDelays.allSatisfy({ (0...10_000).contains($0) }) else {
                throw ValidationError("--response-delays must be 0...10000 ms each")
            }
            if let broadcastChannels, !(1...10_000).contains(broadcastChannels) {
                throw ValidationError("--broadcast-channels must be 1...10000 (Apple's limit per app)")
            }
        } else if responseDelays != nil || broadcastChannels != nil {
            throw ValidationError("\(responseDelays != nil ? "--response-delays" : "--broadcast-channels") is for --protocol h2")
        }
        if gateway != nil, matrix.errorRates != [0], errorRates != nil {
            throw ValidationError("--error-rates needs the mock: an external --gateway decides its own rejections")
        }
        guard notificationsPerRun >= 1, runs >= 1 else { throw ValidationError("--count and --runs must be at least 1") }
        if errorWaits != nil, errorWaitMilliseconds != nil { throw ValidationError("give --error-waits or --error-wait-ms, not both") }
        guard matrix.errorWaits.allSatisfy({ $0 >= 1 }) else { throw ValidationError("--error-waits must be at least 1 ms each") }
        if let ringMiB, !(1...1024).contains(ringMiB) { throw ValidationError("--ring-mib must be 1...1024") }
        if let roundTripMilliseconds, !(2...2000).contains(roundTripMilliseconds) { throw ValidationError("--rtt-ms must be 2...2000") }
        if roundTripMilliseconds != nil, gateway != nil { throw ValidationError("--rtt-ms runs the mock over a delay line: not with --gateway") }
        if let shards, shards < 1 { throw ValidationError("--shards must be at least 1") }
        guard ceilingFrames >= 1 else { throw ValidationError("--ceiling-frames must be at least 1") }
    }

    // MARK: Running

    func run() async throws {
        if target == .blackberry { return try await runBlackBerry() }
        if let render {
            print("wrote " + (try Bench.render(resultsFile: render, to: output)).joined(separator: ", "))
            return
        }
        var external: BenchSettings.Gateway?
        if let gateway {
            let endpoint = try Endpoint(parsing: gateway)
            external = .init(host: endpoint.host, port: endpoint.port, tls: try tls.configuration())
        }
        let settings = BenchSettings(
            matrix: try matrix, count: notificationsPerRun, runs: runs, warmup: warmup,
            ceilingFrames: ceiling ? ceilingFrames : nil,
            phpScript: phpBaseline ? (phpScript ?? Bench.defaultPHPScript) : nil,
            gateway: external, ringMiB: ringMiB, roundTripMilliseconds: roundTripMilliseconds, shards: shards, pin: pin,
            output: output, jsonOnly: jsonOnly, allocationRequests: jemallocAllocationRequests)
        let outcome = try await Bench.run(settings)
        for line in outcome.lines { print(line) }
        if outcome.exitStatus != 0 { throw ExitCode(outcome.exitStatus) }
    }
}

extension BenchProtocol: ExpressibleByArgument {}
