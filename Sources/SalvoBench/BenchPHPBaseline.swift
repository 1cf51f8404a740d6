import Foundation

/// `--php-baseline`: `scripts/php-baseline.php` (one TLS stream, one `fwrite` per simple-format
/// notification) against a fresh mock on the same core as the cells' mock.
enum BenchPHPBaseline {
    static let installHint = "php is not on PATH: install it with `apt-get install -y php-cli` (Debian) to get the PHP baseline row; skipped"

    static func measure(php: String, script: String, executable: String, certificates: BenchCertificates, core: Int?,
                        workDirectory: String, count: Int, runs: Int, payloadBytes: Int,
                        progress: BenchProgress?) throws -> BenchResults.PHPBaseline {
        let mock = try BenchMockProcess(executable: executable, certificates: certificates, failurePlan: [], core: core,
                                        namespace: nil, workDirectory: workDirectory, name: "mock-php")
        var rates: [Double] = []
        do {
            for run in 1...runs {
                progress?.note("PHP baseline: run \(run)/\(runs) (\(BenchFormat.grouped(Double(count))) notifications)")
                rates.append(try runOnce(php: php, script: script, port: mock.gatewayPort, certificates: certificates,
                                         count: count, payloadBytes: payloadBytes))
            }
        } catch {
            mock.abandon()
            throw error
        }
        let statistics = try mock.stopBinary(after: .milliseconds(300))
        let expected = count * runs
        return .init(payloadBytes: payloadBytes, notificationsPerRun: count, notificationsPerSecond: rates,
                     accountingExact: statistics.accepted == expected && statistics.framesByCommand.simple == expected)
    }

    /// One PHP process; its last line is `php-baseline: N notifications in S s`.
    private static func runOnce(php: String, script: String, port: Int, certificates: BenchCertificates,
                                count: Int, payloadBytes: Int) throws -> Double {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: php)
        process.arguments = [script, "127.0.0.1", String(port), certificates.path("ca.pem"), certificates.path("client.pem"),
                             certificates.path("client.key"), String(count), String(payloadBytes)]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0,
              let line = text.split(separator: "\n").last(where: { $0.hasPrefix("php-baseline:") }) else {
            throw BenchError("the PHP baseline failed (status \(process.terminationStatus)): \(text.suffix(600))")
        }
        let words = line.split(separator: " ")
        guard words.count >= 5, let sent = Double(words[1]), let seconds = Double(words[4]), seconds > 0 else {
            throw BenchError("cannot read the PHP baseline's output: \(line)")
        }
        return sent / seconds
    }
}
