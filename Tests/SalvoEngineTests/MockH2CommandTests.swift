import Foundation
import SalvoIO
import Testing
import SalvoTestSupport

/// `salvo mock --protocol h2` as a process: the same first line as the binary mock, the
/// report on a signal, exit 2 on bad flags.
@Suite(.serialized, .timeLimit(.minutes(2))) struct MockH2CommandTests {
    @Test func itAnnouncesItsPortAnswersCurlAndReportsOnSIGTERM() throws {
        let workspace = try SendCommandTests.Workspace()
        defer { workspace.remove() }
        let report = workspace.path("report.json")
        let process = try SendCommandTests.launch(
            ["mock", "--protocol", "h2", "--port", "0", "--cert", workspace.path("server.pem"),
             "--key", workspace.path("server.key"), "--report", report])
        defer { process.kill(SIGKILL) }
        let first = try process.firstLine(within: .seconds(20))
        let port = try #require(first.hasPrefix("listening gateway=") ? Int(first.dropFirst("listening gateway=".count)) : nil,
                                "first line: \(first)")

        let token = String(repeating: "ab", count: 32)
        let (status, output, errors) = try Self.curl(
            ["--silent", "--show-error", "--http2", "--cacert", workspace.path("ca.pem"), "--write-out", "%{http_code}",
             "--header", "apns-topic: com.example.app", "--header", "apns-push-type: alert",
             "--data-binary", #"{"aps":{"alert":"hi"}}"#, "https://127.0.0.1:\(port)/3/device/\(token)"])
        #expect(status == 0 && output == "200", "curl: \(errors)")

        process.kill(SIGTERM)
        #expect(try MockCommandTests.waitForExit(process) == 0)
        let json = try JSONSerialization.jsonObject(with: Data(contentsOf: URL(fileURLWithPath: report))) as? [String: Any]
        #expect(json?["accepted"] as? Int == 1)
        #expect(json?["requests"] as? Int == 1)
        #expect(json?["connections"] as? Int == 1)
    }

    @Test(arguments: [
        (["--protocol", "h2", "--shutdown-every", "3"], "--shutdown-every is for the binary protocol"),
        (["--protocol", "h2", "--feedback-port", "0"], "--feedback-port is for the binary protocol"),
        (["--protocol", "h2", "--throttle-every", "0"], "--throttle-every must be at least 1"),
        (["--protocol", "h2", "--max-streams", "0"], "--max-streams must be"),
        (["--protocol", "h2", "--key-id", "K"], "--auth-key, --key-id and --team-id go together"),
        (["--protocol", "h2", "--auth-key", "/nonexistent/AuthKey.p8", "--key-id", "K", "--team-id", "T"], "/nonexistent/AuthKey.p8"),
        (["--goaway-every", "2"], "--goaway-every is for --protocol h2"),
        (["--protocol", "h3"], "h3"),
    ])
    func badFlagsExitWithTwo(_ arguments: [String], _ message: String) throws {
        let (status, _, errors) = try SendCommandTests.run(["mock"] + arguments)
        #expect(status == 2, "\(arguments)")
        #expect(errors.contains(message), "stderr: \(errors)")
    }

    /// Runs curl to completion (its --max-time bounds it), both pipes drained at once.
    static func curl(_ arguments: [String]) throws -> (Int32, String, String) {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/bin/curl")
        process.arguments = ["--max-time", "10"] + arguments
        let out = Pipe(), err = Pipe()
        process.standardOutput = out
        process.standardError = err
        try process.run()
        nonisolated(unsafe) var errors = Data()
        let drained = DispatchSemaphore(value: 0)
        Thread.detachNewThread {
            errors = err.fileHandleForReading.readDataToEndOfFile()
            drained.signal()
        }
        let output = out.fileHandleForReading.readDataToEndOfFile()
        drained.wait()
        process.waitUntilExit()
        return (process.terminationStatus, String(decoding: output, as: UTF8.self), String(decoding: errors, as: UTF8.self))
    }
}
