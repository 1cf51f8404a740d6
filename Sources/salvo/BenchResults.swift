import Foundation

/// Everything one `salvo bench` invocation measured: what `results/<date>-<sha>.json` holds,
/// what `results/README.md` and `results/throughput.svg` are drawn from, and what
/// `scripts/compare.sh` reads. Field names are snake_case in the JSON.
struct BenchResults: Sendable, Codable, Equatable {
    static let currentSchema = 1

    var schema = currentSchema
    /// UTC, ISO 8601.
    var date: String
    /// `git rev-parse --short HEAD`, "nosha" outside a repository; "+dirty" when the tree had changes.
    var commit: String
    /// The command line, as typed.
    var command: String
    var machine: Machine
    var settings: Settings
    /// `--ceiling`: the ingest probe's frames per second, run by run.
    var ceiling: Ceiling?
    /// `--php-baseline`: the classic PHP sender against the same mock.
    var php: PHPBaseline?
    var cells: [Cell]

    struct Machine: Sendable, Codable, Equatable {
        var cores: Int
        var cpu: String
        var kernel: String
        var memoryGib: Double
    }

    struct Settings: Sendable, Codable, Equatable {
        var notificationsPerRun: Int
        var runsPerCell: Int
        var warmup: Bool
        var errorWaitMilliseconds: Int
        var ringMib: Int
        var shards: Int
        /// "mock on core 1, sender shards on core 0", or "not pinned".
        var pinning: String
        /// "mock" (a fresh `salvo mock` per cell) or the external gateway's HOST:PORT.
        var gateway: String
    }

    struct Ceiling: Sendable, Codable, Equatable {
        var frameBytes: Int
        var framesPerRun: Int
        var framesPerSecond: [Double]
        var median: Double { BenchSpread.median(framesPerSecond) ?? 0 }
    }

    struct PHPBaseline: Sendable, Codable, Equatable {
        var payloadBytes: Int
        var notificationsPerRun: Int
        var notificationsPerSecond: [Double]
        /// The mock accepted exactly what PHP wrote, over all runs.
        var accountingExact: Bool
        var median: Double { BenchSpread.median(notificationsPerSecond) ?? 0 }
    }

    /// One measured run of a cell.
    struct Run: Sendable, Codable, Equatable {
        /// Notifications per second: the count over the time from the first send until all
        /// were settled, less one error wait (the fixed tail in which the sender only waits
        /// to be sure no error names the last frames).
        var rate: Double
        var seconds: Double
        var cpuUserSeconds: Double
        var cpuSystemSeconds: Double
        var accepted: Int
        var rejected: Int
        var failed: Int
        var resent: Int
        var reconnects: Int
        var possibleDuplicates: Int
        var windowOverruns: Int
        /// jemalloc allocation requests made by the whole bench process during the run.
        var allocations: Int?
    }

    /// One point of the matrix.
    struct Cell: Sendable, Codable, Equatable {
        var connections: Int
        var errorRate: Double
        var payloadBytes: Int
        var frameBytes: Int
        var runs: [Run]
        /// Notifications per second over the measured runs.
        var rate: BenchSpread
        /// Sender CPU (user + system) seconds per million notifications, median over runs.
        var cpuSecondsPerMillion: Double
        /// Heap allocations per notification, median over runs (nil without jemalloc stats).
        var allocationsPerNotification: Double?
        /// The bench process's peak resident set during the cell (VmHWM after a reset), MiB.
        var peakRssMib: Double
        /// Frames written again, median over runs.
        var resent: Int
        var accounting: Accounting
        /// `rate.median` as a percentage of the ceiling's median, with `--ceiling`.
        var percentOfCeiling: Double?

        var key: String { "c\(connections)-e\(errorRate)-p\(payloadBytes)" }
    }

    /// The mock's counts against the sender's, summed over the cell's runs (warm-up included).
    struct Accounting: Sendable, Codable, Equatable {
        var senderAccepted: Int
        var senderRejected: Int
        var senderFailed: Int
        /// Nil for an external gateway (nothing to compare with).
        var mockAccepted: Int?
        var mockRejected: Int?

        var checked: Bool { mockAccepted != nil }
        var exact: Bool {
            guard let mockAccepted, let mockRejected else { return senderFailed == 0 }
            return mockAccepted == senderAccepted && mockRejected == senderRejected && senderFailed == 0
        }
        var summary: String {
            guard let mockAccepted, let mockRejected else { return senderFailed == 0 ? "unchecked" : "\(senderFailed) failed" }
            if exact { return "exact" }
            return "MISMATCH: mock \(mockAccepted)/\(mockRejected), sender \(senderAccepted)/\(senderRejected)"
                + (senderFailed > 0 ? " (\(senderFailed) failed)" : "")
        }
    }

    /// The cell with the highest median rate.
    var best: Cell? { cells.max { $0.rate.median < $1.rate.median } }

    func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return try encoder.encode(self) + Data("\n".utf8)
    }

    static func decode(_ data: Data) throws -> BenchResults {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        return try decoder.decode(BenchResults.self, from: data)
    }

    /// `<date>-<sha>.json`, e.g. `2026-11-23-d18e8d4.json`.
    var fileName: String { "\(date.prefix(10))-\(commit).json" }
}
