import Foundation
import SalvoIO
import SalvoTestSupport
import Testing

/// `salvo mock` as a process: the first line, throwaway certificates, and the report on a
/// signal or after --duration.
@Suite(.serialized, .timeLimit(.minutes(2)), .ownThread("mock-command-tests")) struct MockCommandTests {
    /// Starts `salvo mock` and returns it with its parsed first line (bounded wait).
    static func start(_ arguments: [String]) async throws -> (ChildProcess, gateway: Int, feedback: Int) {
        let process = try SendCommandTests.launch(["mock", "--port", "0", "--feedback-port", "0"] + arguments)
        let first = try await process.firstLine(within: .seconds(20))
        let parts = first.split(separator: " ")
        #expect(parts.first == "listening", "first line: \(first)")
        let ports = parts.dropFirst().compactMap { Int($0.split(separator: "=").last ?? "") }
        guard ports.count == 2 else { throw UnexpectedOutput("unexpected first line: \(first)") }
        return (process, ports[0], ports[1])
    }

    struct UnexpectedOutput: Error, CustomStringConvertible {
        var description: String
        init(_ description: String) { self.description = description }
    }

    /// Its exit status, once it exits (bounded: killed after 20 s).
    static func waitForExit(_ process: ChildProcess) async throws -> Int32 {
        try await process.exitStatus(within: .seconds(20))
    }

    @Test func sigtermWritesTheReportAndExitsZero() async throws {
        let report = NSTemporaryDirectory() + "salvo-mock-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: report) }
        let (process, gateway, feedback) = try await Self.start(["--report", report])
        #expect(gateway > 0 && feedback > 0 && gateway != feedback)
        // The gateway answers TLS on its port (throwaway certificates: verification off here).
        var insecure = TLSConfiguration.client()
        insecure.verifyPeer = false
        let stream = try TLSStream.connect(host: "127.0.0.1", port: gateway, context: TLSContext(insecure, role: .client))
        stream.shutdown()
        process.kill(SIGTERM)
        #expect(try await Self.waitForExit(process) == 0)
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
        #expect(json?["accepted"] as? Int == 0)
        #expect((json?["connections"] as? Int ?? 0) >= 1)
    }

    @Test func durationStopsItOnItsOwn() async throws {
        let report = NSTemporaryDirectory() + "salvo-mock-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: report) }
        let (process, _, _) = try await Self.start(["--duration", "1", "--report", report])
        #expect(try await Self.waitForExit(process) == 0)
        #expect(FileManager.default.fileExists(atPath: report))
    }

    @Test func errorDelayOutOfRangeExitsWithTwo() async throws {
        for value in ["-1", "600001"] {
            let (status, _, errors) = try await SendCommandTests.run(["mock", "--error-delay-ms", value])
            #expect(status == 2, "--error-delay-ms \(value)")
            #expect(errors.contains("--error-delay-ms must be 0...600000"), "stderr: \(errors)")
            #expect(errors.contains("got \(value)"), "stderr: \(errors)")
        }
    }

    @Test func aDelayedAnswerIsCountedInTheReport() async throws {
        let report = NSTemporaryDirectory() + "salvo-mock-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: report) }
        let (process, gateway, _) = try await Self.start(["--reject-every", "1", "--error-delay-ms", "100", "--report", report])
        var insecure = TLSConfiguration.client()
        insecure.verifyPeer = false
        let stream = try TLSStream.connect(host: "127.0.0.1", port: gateway, context: TLSContext(insecure, role: .client))
        // Command 0 (simple): one token and a payload; rejected, then answered 100 ms later.
        let notification: [UInt8] = [0, 0, 32] + [UInt8](repeating: 0xab, count: 32) + [0, 2] + Array("{}".utf8)
        try notification.withUnsafeBytes { try stream.writeAll($0) }
        let answer = try stream.readToEnd(timeout: .seconds(10))
        #expect(answer == [8, 8, 0, 0, 0, 0], "status 8, identifier 0 (command 0 has none)")
        process.kill(SIGTERM)
        #expect(try await Self.waitForExit(process) == 0)
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
        #expect(json?["delayedResponses"] as? Int == 1)
        #expect(json?["rejected"] as? Int == 1)
    }

    @Test func badFlagsExitWithTwo() async throws {
        let (status, _, errors) = try await SendCommandTests.run(["mock", "--reject-every", "0"])
        #expect(status == 2)
        #expect(errors.contains("reject-every"))
    }
}
