import Foundation
import SalvoBlackBerry
import SalvoIO
import SalvoWire
#if canImport(Glibc)
import Glibc
#endif

/// `salvo bench --target blackberry`: the Push Channel sender (in this process) against
/// `salvo mock --protocol gnp` (a child process on the last core), for each connection
/// count × answer delay, on loopback or over a delay line. A Push Channel sender waits for
/// each answer before the next request on a connection, so its ceiling is connections ÷
/// round trip; the bench reports how close it gets, and the sender's CPU per notification.
package enum PushChannelBench {
    /// What to measure.
    package struct Settings: Sendable {
        /// The `salvo` executable, started again as the mock (and the delay line).
        package var executable: String
        package var connections: [Int]
        /// The mock holds every answer this long, ms.
        package var responseDelays: [Int]
        /// Run over a delay line with this round trip, ms (nil: loopback).
        package var roundTripMilliseconds: Int?
        package var count: Int
        package var runs: Int
        /// The payload's size in bytes.
        package var payloadBytes = 100

        package init(executable: String, connections: [Int], responseDelays: [Int], roundTripMilliseconds: Int?,
                     count: Int, runs: Int) {
            self.executable = executable
            self.connections = connections
            self.responseDelays = responseDelays
            self.roundTripMilliseconds = roundTripMilliseconds
            self.count = count
            self.runs = runs
        }
    }

    /// One cell's measurements.
    package struct Cell: Sendable {
        package var connections: Int
        package var responseDelayMilliseconds: Int
        package var pathRoundTripMilliseconds: Int
        /// Notifications per second of each run.
        package var rates: [Double]
        /// User + system CPU of this process per notification, microseconds, each run.
        package var cpuMicroseconds: [Double]
        /// Whether the mock's accepted count equalled the sender's in every run.
        package var accountingExact: Bool

        package var medianRate: Double { Self.median(rates) }
        package var medianCPUMicroseconds: Double { Self.median(cpuMicroseconds) }
        /// Connections ÷ round trip, when there is a round trip.
        package var ceiling: Double? {
            let roundTrip = responseDelayMilliseconds + pathRoundTripMilliseconds
            return roundTrip > 0 ? Double(connections) * 1000 / Double(roundTrip) : nil
        }

        static func median(_ values: [Double]) -> Double {
            let sorted = values.sorted()
            guard !sorted.isEmpty else { return 0 }
            return sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        }
    }

    /// Runs every cell; `log` gets a line per run.
    package static func run(_ settings: Settings, log: @Sendable (String) -> Void) async throws -> [Cell] {
        let work = try BenchSystem.temporaryDirectory("salvo-bench-bb")
        defer { try? FileManager.default.removeItem(atPath: work) }
        let certificates = try BenchCertificates(directory: work, serverNames: [DelayLine.farAddress])
        let campaign = "\(work)/campaign.jsonl"
        let payload = String(repeating: "x", count: settings.payloadBytes)
        var text = ""
        for n in 1...settings.count { text += #"{"token":"bench-\#(n)","payload":"\#(payload)"}"# + "\n" }
        try text.write(toFile: campaign, atomically: true, encoding: .utf8)

        let line = try settings.roundTripMilliseconds.map {
            try BenchDelayLineProcess(executable: settings.executable, roundTripMilliseconds: $0)
        }
        defer { line?.stop() }
        let mockCore = ProcessInfo.processInfo.activeProcessorCount >= 2 ? ProcessInfo.processInfo.activeProcessorCount - 1 : nil
        var cells: [Cell] = []
        for delay in settings.responseDelays {
            for connections in settings.connections {
                var cell = Cell(connections: connections, responseDelayMilliseconds: delay,
                                pathRoundTripMilliseconds: settings.roundTripMilliseconds ?? 0, rates: [], cpuMicroseconds: [],
                                accountingExact: true)
                for run in 1...settings.runs {
                    let mock = try GNPMockProcess(executable: settings.executable, certificates: certificates,
                                                  responseDelayMilliseconds: delay, core: mockCore,
                                                  namespace: line?.namespace, workDirectory: work)
                    var configuration = PushChannelConfiguration(
                        route: .noc(host: line == nil ? "127.0.0.1" : DelayLine.farAddress, port: mock.port))
                    configuration.connections = connections
                    configuration.trustedCertificatesFile = certificates.path("ca.pem")
                    let client = try PushChannelClient(configuration)
                    let reader = try PushChannelCampaignReader(.jsonl(campaign))
                    let pushRun = PushChannelRun(client: client)
                    let cpuBefore = BenchSystem.cpuSeconds()
                    let start = ContinuousClock.now
                    _ = await pushRun.send(from: reader)
                    let seconds = (ContinuousClock.now - start).secondsDouble
                    let cpuAfter = BenchSystem.cpuSeconds()
                    try await client.shutdown()
                    let report = pushRun.ledger.report(connections: connections)
                    let accepted = try mock.stop()
                    let exact = accepted == report.accepted && report.accepted == settings.count && report.isComplete
                    cell.accountingExact = cell.accountingExact && exact
                    let rate = Double(report.submitted) / seconds
                    let cpu = (cpuAfter.user + cpuAfter.system - cpuBefore.user - cpuBefore.system) * 1e6 / Double(settings.count)
                    cell.rates.append(rate)
                    cell.cpuMicroseconds.append(cpu)
                    log(String(format: "connections %d, answer delay %d ms, path %d ms, run %d: %.0f /s, %.1f µs CPU/notification, accounting %@",
                               connections, delay, cell.pathRoundTripMilliseconds, run, rate, cpu, exact ? "exact" : "MISMATCH"))
                }
                cells.append(cell)
            }
        }
        return cells
    }

    /// The results as a markdown table.
    package static func table(_ cells: [Cell]) -> String {
        var lines = ["| connections | answer delay | path RTT | median /s | ceiling (conn ÷ RTT) | of ceiling | CPU µs/notif | accounting |",
                     "|---:|---:|---:|---:|---:|---:|---:|:---|"]
        for cell in cells {
            let ceiling = cell.ceiling.map { String(format: "%.0f", $0) } ?? "—"
            let share = cell.ceiling.map { String(format: "%.0f%%", 100 * cell.medianRate / $0) } ?? "—"
            lines.append("| \(cell.connections) | \(cell.responseDelayMilliseconds) ms | \(cell.pathRoundTripMilliseconds) ms | "
                         + String(format: "%.0f", cell.medianRate) + " | \(ceiling) | \(share) | "
                         + String(format: "%.1f", cell.medianCPUMicroseconds) + " | "
                         + (cell.accountingExact ? "exact" : "MISMATCH") + " |")
        }
        return lines.joined(separator: "\n")
    }
}

/// `salvo mock --protocol gnp` as a child process, on its own core, at the far end of a
/// delay line when given its namespace; stopped with SIGINT and read back from its report.
final class GNPMockProcess {
    let port: Int
    private let process: Process
    private let reportPath: String

    init(executable: String, certificates: BenchCertificates, responseDelayMilliseconds: Int, core: Int?,
         namespace: String?, workDirectory: String) throws {
        reportPath = "\(workDirectory)/gnp-mock.json"
        try? FileManager.default.removeItem(atPath: reportPath)
        let arguments = [executable, "mock", "--protocol", "gnp", "--port", "0", "--loops", "1",
                         "--cert", certificates.path("server.pem"), "--key", certificates.path("server.key"),
                         "--response-delay-ms", String(responseDelayMilliseconds), "--report", reportPath]
            + (namespace == nil ? [] : ["--host", DelayLine.farAddress])
        var command = namespace.map { [BenchSystem.which("ip") ?? "/usr/sbin/ip", "netns", "exec", $0] + arguments } ?? arguments
        if let core, let taskset = BenchSystem.which("taskset") { command = [taskset, "-c", String(core)] + command }
        process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        process.standardInput = FileHandle.nullDevice
        try process.run()
        guard let line = BenchMockProcess.firstLine(of: output),
              let port = Int(line.trimmingCharacters(in: .whitespacesAndNewlines).split(separator: "=").last ?? "") else {
            process.waitUntilExit()
            throw BenchError("salvo mock --protocol gnp did not start (status \(process.terminationStatus))")
        }
        self.port = port
    }

    /// Stops the mock and returns the notifications it accepted.
    func stop() throws -> Int {
        process.interrupt()
        process.waitUntilExit()
        struct Report: Decodable { var accepted: Int }
        do {
            return try JSONDecoder().decode(Report.self, from: Data(contentsOf: URL(fileURLWithPath: reportPath))).accepted
        } catch {
            throw BenchError("cannot read the mock NOC's report \(reportPath): \(error)")
        }
    }
}
