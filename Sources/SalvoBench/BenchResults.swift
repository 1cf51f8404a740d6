import Foundation

/// Everything one `salvo bench` invocation measured: what `results/<date>-<sha>.json` holds,
/// what `results/binary.md` and `results/throughput.svg` are drawn from, and what
/// `scripts/compare.sh` reads. Field names are snake_case in the JSON.
package struct BenchResults: Sendable, Codable, Equatable {
    /// 2: each cell records its error wait (1: one error wait for the run, in the settings).
    package static let currentSchema = 2

    package var schema = currentSchema
    /// UTC, ISO 8601.
    package var date: String
    /// `git rev-parse --short HEAD`, "nosha" outside a repository; "+dirty" when the tree had changes.
    package var commit: String
    /// The command line, as typed.
    package var command: String
    package var machine: Machine
    package var settings: Settings
    /// `--ceiling`: the ingest probe's frames per second, run by run.
    package var ceiling: Ceiling?
    /// `--php-baseline`: the classic PHP sender against the same mock.
    package var php: PHPBaseline?
    /// `--rtt-ms`: the delayed path every cell ran over, and what it carries.
    package var path: Path?
    package var cells: [Cell]

    package init(date: String, commit: String, command: String, machine: Machine, settings: Settings,
                 ceiling: Ceiling?, php: PHPBaseline?, path: Path? = nil, cells: [Cell]) {
        self.date = date
        self.commit = commit
        self.command = command
        self.machine = machine
        self.settings = settings
        self.ceiling = ceiling
        self.php = php
        self.path = path
        self.cells = cells
    }

    /// A round trip made by `salvo delay-line`, and what one bulk TCP stream carries over it:
    /// the reference for a sender on that path.
    package struct Path: Sendable, Codable, Equatable {
        package var roundTripMilliseconds: Int
        /// Bytes per second a plain TCP stream delivered, run by run.
        package var bulkTCPBytesPerSecond: [Double]
        package var median: Double { BenchSpread.median(bulkTCPBytesPerSecond) ?? 0 }

        // Spelled so that the snake-case key round-trips ("TCP" would come back as "Tcp").
        enum CodingKeys: String, CodingKey {
            case roundTripMilliseconds
            case bulkTCPBytesPerSecond = "bulkTcpBytesPerSecond"
        }

        package init(roundTripMilliseconds: Int, bulkTCPBytesPerSecond: [Double]) {
            self.roundTripMilliseconds = roundTripMilliseconds
            self.bulkTCPBytesPerSecond = bulkTCPBytesPerSecond
        }

        /// The bulk stream's rate in frames of `frameBytes` per second.
        package func framesPerSecond(frameBytes: Int) -> Double { median / Double(frameBytes) }
    }

    package struct Machine: Sendable, Codable, Equatable {
        package var cores: Int
        package var cpu: String
        package var kernel: String
        package var memoryGib: Double

        package init(cores: Int, cpu: String, kernel: String, memoryGib: Double) {
            self.cores = cores
            self.cpu = cpu
            self.kernel = kernel
            self.memoryGib = memoryGib
        }
    }

    package struct Settings: Sendable, Codable, Equatable {
        package var notificationsPerRun: Int
        package var runsPerCell: Int
        package var warmup: Bool
        package var ringMib: Int
        package var shards: Int
        /// "mock on core 1, sender shards on core 0", or "not pinned".
        package var pinning: String
        /// "mock" (a fresh `salvo mock` per cell) or the external gateway's HOST:PORT.
        package var gateway: String
        /// The run's one error wait, in results written before the error wait became an axis
        /// of the matrix: their cells take it from here. Nil since (each cell has its own).
        package var errorWaitMilliseconds: Int?

        package init(notificationsPerRun: Int, runsPerCell: Int, warmup: Bool, ringMib: Int,
                     shards: Int, pinning: String, gateway: String, errorWaitMilliseconds: Int? = nil) {
            self.notificationsPerRun = notificationsPerRun
            self.runsPerCell = runsPerCell
            self.warmup = warmup
            self.ringMib = ringMib
            self.shards = shards
            self.pinning = pinning
            self.gateway = gateway
            self.errorWaitMilliseconds = errorWaitMilliseconds
        }
    }

    package struct Ceiling: Sendable, Codable, Equatable {
        package var frameBytes: Int
        package var framesPerRun: Int
        package var framesPerSecond: [Double]
        package var median: Double { BenchSpread.median(framesPerSecond) ?? 0 }

        package init(frameBytes: Int, framesPerRun: Int, framesPerSecond: [Double]) {
            self.frameBytes = frameBytes
            self.framesPerRun = framesPerRun
            self.framesPerSecond = framesPerSecond
        }
    }

    package struct PHPBaseline: Sendable, Codable, Equatable {
        package var payloadBytes: Int
        package var notificationsPerRun: Int
        package var notificationsPerSecond: [Double]
        /// The mock accepted exactly what PHP wrote, over all runs.
        package var accountingExact: Bool
        package var median: Double { BenchSpread.median(notificationsPerSecond) ?? 0 }

        package init(payloadBytes: Int, notificationsPerRun: Int, notificationsPerSecond: [Double], accountingExact: Bool) {
            self.payloadBytes = payloadBytes
            self.notificationsPerRun = notificationsPerRun
            self.notificationsPerSecond = notificationsPerSecond
            self.accountingExact = accountingExact
        }
    }

    /// One measured run of a cell.
    package struct Run: Sendable, Codable, Equatable {
        /// Notifications per second: the sender's send rate, the count over the time from its
        /// start to its last write (the final error wait, a fixed latency, left out). Results
        /// written before the window of records took the count over the time until all were
        /// settled, less the cell's error wait when the run ended with one.
        package var rate: Double
        package var seconds: Double
        package var cpuUserSeconds: Double
        package var cpuSystemSeconds: Double
        package var accepted: Int
        package var rejected: Int
        package var failed: Int
        package var resent: Int
        package var reconnects: Int
        package var possibleDuplicates: Int
        package var windowOverruns: Int
        /// jemalloc allocation requests made by the whole bench process during the run.
        package var allocations: Int?
        /// Connections the sender used (it may add some); nil in older results.
        package var connections: Int?

        package init(rate: Double, seconds: Double, cpuUserSeconds: Double, cpuSystemSeconds: Double, accepted: Int,
                     rejected: Int, failed: Int, resent: Int, reconnects: Int, possibleDuplicates: Int,
                     windowOverruns: Int, allocations: Int?, connections: Int? = nil) {
            self.rate = rate
            self.seconds = seconds
            self.cpuUserSeconds = cpuUserSeconds
            self.cpuSystemSeconds = cpuSystemSeconds
            self.accepted = accepted
            self.rejected = rejected
            self.failed = failed
            self.resent = resent
            self.reconnects = reconnects
            self.possibleDuplicates = possibleDuplicates
            self.windowOverruns = windowOverruns
            self.allocations = allocations
            self.connections = connections
        }
    }

    /// One point of the matrix.
    package struct Cell: Sendable, Codable, Equatable {
        /// Binary (older results have none) or HTTP/2.
        package var wireProtocol: BenchProtocol = .binary
        /// Connections per shard; 0: the sender's own choice (`connectionsUsed`).
        package var connections: Int
        package var errorRate: Double
        package var payloadBytes: Int
        /// The sender's error wait in this cell, milliseconds.
        package var errorWaitMilliseconds: Int
        /// HTTP/2: how long the mock held every answer, milliseconds.
        package var responseDelayMilliseconds: Int?
        /// HTTP/2: the connections the sender used in all (every shard), median over runs.
        package var connectionsUsed: Double?
        /// HTTP/2: broadcasts to this many channels instead of pushes to devices (nil: devices).
        package var broadcastChannels: Int?
        /// Bytes per notification on the wire: the binary frame, or what the HTTP/2 mock read
        /// per request (TLS records of HEADERS and DATA, HPACK-compressed).
        package var frameBytes: Int
        package var runs: [Run]
        /// Notifications per second over the measured runs.
        package var rate: BenchSpread
        /// Sender CPU (user + system) seconds per million notifications, median over runs.
        package var cpuSecondsPerMillion: Double
        /// Heap allocations per notification, median over runs (nil without jemalloc stats).
        package var allocationsPerNotification: Double?
        /// The bench process's peak resident set during the cell (VmHWM after a reset), MiB.
        package var peakRssMib: Double
        /// Frames written again, median over runs.
        package var resent: Int
        package var accounting: Accounting
        /// `rate.median` as a percentage of the ceiling's median, with `--ceiling`.
        package var percentOfCeiling: Double?
        /// `rate.median` as a percentage of the path's bulk TCP rate in this cell's frames, with `--rtt-ms`.
        package var percentOfPath: Double?

        package var key: String {
            wireProtocol == .h2 ? "h2-c\(connections)-e\(errorRate)-p\(payloadBytes)-d\(responseDelayMilliseconds ?? 0)"
                + (broadcastChannels.map { "-b\($0)" } ?? "")
                : "c\(connections)-e\(errorRate)-p\(payloadBytes)-w\(errorWaitMilliseconds)"
        }

        /// What distinguishes cells beyond connections, errors and payload: the error wait
        /// (binary) or the answer delay (HTTP/2), milliseconds.
        package var condition: Int { wireProtocol == .h2 ? responseDelayMilliseconds ?? 0 : errorWaitMilliseconds }

        /// "4", or "auto: 24" for a cell that let the sender choose (what it used, in all).
        package var connectionsLabel: String {
            connections > 0 ? String(connections) : "auto: " + (connectionsUsed.map { BenchFormat.fixed($0, 0) } ?? "?")
        }

        package init(connections: Int, errorRate: Double, payloadBytes: Int, errorWaitMilliseconds: Int, frameBytes: Int,
                     runs: [BenchResults.Run],
                     rate: BenchSpread, cpuSecondsPerMillion: Double, allocationsPerNotification: Double?, peakRssMib: Double,
                     resent: Int, accounting: BenchResults.Accounting, percentOfCeiling: Double? = nil) {
            self.connections = connections
            self.errorRate = errorRate
            self.payloadBytes = payloadBytes
            self.errorWaitMilliseconds = errorWaitMilliseconds
            self.frameBytes = frameBytes
            self.runs = runs
            self.rate = rate
            self.cpuSecondsPerMillion = cpuSecondsPerMillion
            self.allocationsPerNotification = allocationsPerNotification
            self.peakRssMib = peakRssMib
            self.resent = resent
            self.accounting = accounting
            self.percentOfCeiling = percentOfCeiling
        }
    }

    /// The mock's counts against the sender's, summed over the cell's runs (warm-up included).
    package struct Accounting: Sendable, Codable, Equatable {
        package var senderAccepted: Int
        package var senderRejected: Int
        package var senderFailed: Int
        /// Nil for an external gateway (nothing to compare with).
        package var mockAccepted: Int?
        package var mockRejected: Int?

        package var checked: Bool { mockAccepted != nil }
        package var exact: Bool {
            guard let mockAccepted, let mockRejected else { return senderFailed == 0 }
            return mockAccepted == senderAccepted && mockRejected == senderRejected && senderFailed == 0
        }
        package var summary: String {
            guard let mockAccepted, let mockRejected else { return senderFailed == 0 ? "unchecked" : "\(senderFailed) failed" }
            if exact { return "exact" }
            return "MISMATCH: mock \(mockAccepted)/\(mockRejected), sender \(senderAccepted)/\(senderRejected)"
                + (senderFailed > 0 ? " (\(senderFailed) failed)" : "")
        }

        package init(senderAccepted: Int, senderRejected: Int, senderFailed: Int, mockAccepted: Int?, mockRejected: Int?) {
            self.senderAccepted = senderAccepted
            self.senderRejected = senderRejected
            self.senderFailed = senderFailed
            self.mockAccepted = mockAccepted
            self.mockRejected = mockRejected
        }
    }

    /// The cells' error waits, milliseconds, ascending.
    package var errorWaits: [Int] { Array(Set(cells.map(\.errorWaitMilliseconds))).sorted() }

    /// The cell with the highest median rate.
    package var best: Cell? { cells.max { $0.rate.median < $1.rate.median } }

    package func encoded() throws -> Data {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        encoder.keyEncodingStrategy = .convertToSnakeCase
        return try encoder.encode(self) + Data("\n".utf8)
    }

    /// Reads a results file, also one written before cells had their own error wait.
    package static func decode(_ data: Data) throws -> BenchResults {
        let decoder = JSONDecoder()
        decoder.keyDecodingStrategy = .convertFromSnakeCase
        struct Header: Decodable { var settings: Settings }
        if let wait = try decoder.decode(Header.self, from: data).settings.errorWaitMilliseconds {
            decoder.userInfo[Cell.errorWaitIfMissing] = wait
        }
        return try decoder.decode(BenchResults.self, from: data)
    }

    /// `<date>-<sha>.json`, e.g. `2026-11-23-d18e8d4.json`, then `<date>-<sha>-2.json`,
    /// `-3` and on: the names a run's JSON may take, first free one first (HTTP/2 runs:
    /// `h2-<date>-<sha>.json` and on).
    package var fileNames: some Sequence<String> {
        let stem = (cells.first?.wireProtocol == .h2 ? "h2-" : "") + "\(date.prefix(10))-\(commit)"
        return (1...).lazy.map { $0 == 1 ? "\(stem).json" : "\(stem)-\($0).json" }
    }
}

extension BenchResults.Cell {
    /// The error wait for cells that do not record one (older results): the run's, from its
    /// settings. `BenchResults.decode` sets it.
    static let errorWaitIfMissing = CodingUserInfoKey(rawValue: "salvo.bench.errorWaitIfMissing")!

    package init(from decoder: any Decoder) throws {
        let container = try decoder.container(keyedBy: CodingKeys.self)
        wireProtocol = try container.decodeIfPresent(BenchProtocol.self, forKey: .wireProtocol) ?? .binary
        responseDelayMilliseconds = try container.decodeIfPresent(Int.self, forKey: .responseDelayMilliseconds)
        connectionsUsed = try container.decodeIfPresent(Double.self, forKey: .connectionsUsed)
        connections = try container.decode(Int.self, forKey: .connections)
        errorRate = try container.decode(Double.self, forKey: .errorRate)
        payloadBytes = try container.decode(Int.self, forKey: .payloadBytes)
        let recorded = try container.decodeIfPresent(Int.self, forKey: .errorWaitMilliseconds)
        guard let wait = recorded ?? (decoder.userInfo[Self.errorWaitIfMissing] as? Int) else {
            throw DecodingError.keyNotFound(CodingKeys.errorWaitMilliseconds, .init(
                codingPath: container.codingPath, debugDescription: "the cell has no error wait, nor have the run's settings"))
        }
        errorWaitMilliseconds = wait
        frameBytes = try container.decode(Int.self, forKey: .frameBytes)
        runs = try container.decode([BenchResults.Run].self, forKey: .runs)
        rate = try container.decode(BenchSpread.self, forKey: .rate)
        cpuSecondsPerMillion = try container.decode(Double.self, forKey: .cpuSecondsPerMillion)
        allocationsPerNotification = try container.decodeIfPresent(Double.self, forKey: .allocationsPerNotification)
        peakRssMib = try container.decode(Double.self, forKey: .peakRssMib)
        resent = try container.decode(Int.self, forKey: .resent)
        accounting = try container.decode(BenchResults.Accounting.self, forKey: .accounting)
        percentOfCeiling = try container.decodeIfPresent(Double.self, forKey: .percentOfCeiling)
    }
}
