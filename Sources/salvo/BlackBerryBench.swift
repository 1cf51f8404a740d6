import ArgumentParser
import Foundation
import SalvoBench
import SalvoIO

/// `salvo bench --target blackberry`: `--connections` (default 16), `--response-delays`
/// (default 0,50: the mock holds every answer that long), `--rtt-ms` (a delay line instead
/// of loopback), `--count` (default 20000), `--runs`; the table goes to stdout and
/// `--output`/blackberry-DATE.md.
extension BenchCommand {
    func validateBlackBerry() throws {
        let connections = try Self.list(self.connections ?? "16", "--connections", Int.init)
        guard connections.allSatisfy({ (1...1024).contains($0) }) else { throw ValidationError("--connections must be 1...1024") }
        let delays = try Self.list(responseDelays ?? "0,50", "--response-delays", Int.init)
        guard delays.allSatisfy({ (0...10_000).contains($0) }) else { throw ValidationError("--response-delays must be 0...10000 ms each") }
        if let roundTripMilliseconds, !(2...2000).contains(roundTripMilliseconds) { throw ValidationError("--rtt-ms must be 2...2000") }
        guard (count ?? 1) >= 1, runs >= 1 else { throw ValidationError("--count and --runs must be at least 1") }
    }

    func runBlackBerry() async throws {
        let settings = PushChannelBench.Settings(
            executable: BenchSystem.executablePath(),
            connections: try Self.list(connections ?? "16", "--connections", Int.init),
            responseDelays: try Self.list(responseDelays ?? "0,50", "--response-delays", Int.init),
            roundTripMilliseconds: roundTripMilliseconds, count: count ?? 20_000, runs: runs)
        let cells = try await PushChannelBench.run(settings) { printError($0) }
        let table = PushChannelBench.table(cells)
        print(table)
        let date = ISO8601DateFormatter.string(from: Date(), timeZone: .gmt, formatOptions: [.withFullDate])
        let file = "\(output)/blackberry-\(date).md"
        let header = "salvo " + CommandLine.arguments.dropFirst().joined(separator: " ")
        let text = "\n### `\(header)`\n\n\(table)\n"
        if let handle = FileHandle(forWritingAtPath: file) {
            handle.seekToEndOfFile()
            handle.write(Data(text.utf8))
            try handle.close()
        } else {
            try text.write(toFile: file, atomically: true, encoding: .utf8)
        }
        print("appended to \(file)")
        if cells.contains(where: { !$0.accountingExact }) { throw ExitCode(1) }
    }
}
