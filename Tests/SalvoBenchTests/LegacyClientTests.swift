import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoBench

/// Other teams' senders against `salvo mock` at its defaults, each against a fresh mock
/// process that requires a client certificate: the classic PHP cookbook loop and PyAPNs 2.0.1
/// in enhanced mode. Neither reads what it does not expect, so both break on anything the
/// gateway sends unasked (TLS 1.3 session tickets did). `make test` installs them (php-cli
/// from Debian, PyAPNs with scripts/pyapns.sh); without them a test is skipped and says why.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("legacy-client-tests"))
struct LegacyClientTests {
    static let repository = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../..").standardized.path

    static let php = BenchSystem.which("php")
    static let phpMissing = php == nil ? "php is not on PATH (`make test` installs php-cli)" : nil

    static let pyapns = repository + "/.build/legacy-clients/pyapns"
    static let pyapnsMissing: String? = {
        if FileManager.default.fileExists(atPath: pyapns + "/ready") { return nil }
        if let failed = try? String(contentsOfFile: pyapns + "/failed", encoding: .utf8) {
            return "PyAPNs could not be installed: \(failed.trimmingCharacters(in: .whitespacesAndNewlines))"
        }
        return "PyAPNs is not installed in \(pyapns) (`make test` installs it with scripts/pyapns.sh)"
    }()

    @Test(.disabled(if: phpMissing != nil, Comment(rawValue: phpMissing ?? "")))
    func theClassicPHPSenderDeliversEveryNotification() async throws {
        let count = 200_000
        let statistics = try await Self.withMock { mock, certificates in
            let (status, output) = try await Self.run(Self.php!, [
                Self.repository + "/scripts/php-baseline.php", "127.0.0.1", String(mock.gatewayPort),
                certificates.path("ca.pem"), certificates.path("client.pem"), certificates.path("client.key"), String(count),
            ])
            #expect(status == 0, "php: \(output)")
        }
        // One fwrite per notification, then fclose with nothing unread: the mock read it all.
        #expect(statistics.accepted == count, "the mock counted \(statistics.accepted) of \(count)")
        #expect(statistics.framesByCommand.simple == count)
        #expect(statistics.rejected == 0 && statistics.duplicates == 0)
    }

    /// What `scripts/pyapns-sender.py` prints.
    struct PyAPNsOutcome: Decodable {
        var sent: Int
        /// [status, identifier], as PyAPNs's error-response listener got them.
        var errorResponses: [[Int]]
        /// PyAPNs's own warnings and errors (a failed read or write it logged and carried on from).
        var faults: [String]
    }

    @Test(.disabled(if: pyapnsMissing != nil, Comment(rawValue: pyapnsMissing ?? "")))
    func pyAPNsGetsItsErrorResponsesAndEverythingElseArrives() async throws {
        let (count, deadEvery) = (100_000, 10_000)
        var outcome: PyAPNsOutcome?
        let statistics = try await Self.withMock(["--invalid-token-suffix", "dead"]) { mock, certificates in
            let (status, output) = try await Self.run(Self.pyapns + "/venv/bin/python", [
                "-W", "ignore::DeprecationWarning", Self.repository + "/scripts/pyapns-sender.py", "127.0.0.1",
                String(mock.gatewayPort), certificates.path("client.pem"), certificates.path("client.key"),
                String(count), String(deadEvery),
            ])
            #expect(status == 0, "PyAPNs: \(output)")
            let line = output.split(separator: "\n").last { $0.hasPrefix("{") }
            let decoder = JSONDecoder()
            decoder.keyDecodingStrategy = .convertFromSnakeCase
            outcome = try line.map { try decoder.decode(PyAPNsOutcome.self, from: Data($0.utf8)) }
            #expect(outcome != nil, "no result line from PyAPNs: \(output.suffix(2000))")
        }
        let dead = Array(stride(from: deadEvery, through: count, by: deadEvery))
        if let outcome {
            #expect(outcome.sent == count)
            #expect(outcome.errorResponses == dead.map { [8, $0] }, "status 8 (invalid token) naming each dead token")
            #expect(outcome.faults.isEmpty, "PyAPNs logged faults: \(outcome.faults.prefix(5))")
        }
        // PyAPNs resends what followed each rejection; the mock had discarded exactly that.
        #expect(statistics.rejected == dead.count && statistics.rejected(.invalidToken) == dead.count)
        #expect(statistics.accepted == count - dead.count, "the mock accepted \(statistics.accepted)")
        #expect(statistics.framesByCommand.enhanced == count)
        #expect(statistics.duplicates == 0)
    }

    // MARK: Helpers

    /// Runs `body` against a fresh `salvo mock` (its defaults, client certificates required,
    /// every accepted notification recorded) and returns the mock's statistics once it has
    /// read everything the client wrote.
    static func withMock(_ flags: [String] = [],
                         _ body: (BenchMockProcess, BenchCertificates) async throws -> Void) async throws -> MockStatistics {
        let directory = NSTemporaryDirectory() + "salvo-legacy-\(UUID().uuidString)"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let certificates = try BenchCertificates(directory: directory)
        let mock = try BenchMockProcess(executable: DelayLineTests.salvo, certificates: certificates,
                                        failurePlan: flags + ["--record-accepted"], core: nil, namespace: nil,
                                        workDirectory: directory, name: "mock")
        do { try await body(mock, certificates) } catch {
            mock.abandon()
            throw error
        }
        // Waits for the mock to read everything, then for its exit: on a thread of its own.
        nonisolated(unsafe) let stopping = mock
        return try await onOwnThread { try stopping.stopBinary() }
    }

    /// Runs a client to its end, or kills it after `timeout`; standard output and error go
    /// through one pipe, read to its end (on a thread of its own, off the cooperative pool).
    static func run(_ executable: String, _ arguments: [String],
                    timeout: Duration = .seconds(120)) async throws -> (status: Int32, output: String) {
        let (status, exited, text) = try await onOwnThread { try blockingRun(executable, arguments, timeout: timeout) }
        #expect(exited, "\(executable) did not finish within \(timeout): \(text.suffix(2000))")
        return (status, text)
    }

    private static func blockingRun(_ executable: String, _ arguments: [String],
                                    timeout: Duration) throws -> (status: Int32, exited: Bool, output: String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        let watchdog = DispatchWorkItem { if process.isRunning { kill(process.processIdentifier, SIGKILL) } }
        DispatchQueue.global().asyncAfter(deadline: .now() + timeout.secondsDouble, execute: watchdog)
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        watchdog.cancel()
        return (process.terminationStatus, process.terminationReason == .exit, String(decoding: data, as: UTF8.self))
    }
}
