import Foundation
import SalvoIO
import SalvoMock
#if canImport(Glibc)
import Glibc
#endif

/// Why the bench stopped.
package struct BenchError: Error, CustomStringConvertible {
    package var description: String
    package init(_ description: String) { self.description = description }
}

/// Throwaway certificates for the mock and the sender, written once per bench run.
struct BenchCertificates: Sendable {
    let directory: String
    let bundle: DevelopmentPKI.Bundle

    init(directory: String, serverNames: [String] = []) throws {
        self.directory = directory
        bundle = try DevelopmentPKI.Bundle(serverNames: serverNames)
        try bundle.write(to: directory)
    }

    func path(_ name: String) -> String { "\(directory)/\(name)" }

    /// The sender's side: the client identity, trusting the throwaway CA.
    var clientTLS: TLSConfiguration {
        .client(certificateChain: bundle.client.certificate, privateKey: bundle.client.privateKey,
                trustRoots: .certificates(bundle.authority.certificate))
    }
}

/// `salvo mock` as a child process: started with `taskset` on its own core when asked, at
/// the far end of a delay line when given its namespace, stopped with SIGINT, and read back
/// through its JSON report.
final class BenchMockProcess {
    let gatewayPort: Int
    private let process: Process
    private let output: Pipe
    private let reportPath: String
    private let errorPath: String

    /// - Parameters:
    ///   - wireProtocol: the binary gateway (with its feedback service) or HTTP/2; both
    ///     require the bench's client certificate.
    ///   - failurePlan: mock flags such as `["--reject-every", "1000"]`.
    ///   - core: run the mock on this core only (`taskset -c`), or anywhere when nil.
    ///   - namespace: run it in this network namespace, listening on the delay line's far
    ///     address with the kernel's receive-buffer autotuning (a fixed buffer would cap the
    ///     TCP window, and so the rate, at buffer ÷ round trip), or on loopback when nil.
    init(executable: String, wireProtocol: BenchProtocol = .binary, certificates: BenchCertificates, failurePlan: [String],
         core: Int?, namespace: String?, workDirectory: String, name: String) throws {
        reportPath = "\(workDirectory)/\(name).json"
        errorPath = "\(workDirectory)/\(name).stderr"
        try? FileManager.default.removeItem(atPath: reportPath)
        _ = FileManager.default.createFile(atPath: errorPath, contents: nil)
        let binary = wireProtocol == .binary
        let mockArguments = [executable, "mock", "--protocol", wireProtocol.rawValue, "--port", "0", "--loops", "1"]
            + (binary ? ["--feedback-port", "0"] : [])
            + ["--cert", certificates.path("server.pem"), "--key", certificates.path("server.key"),
               "--ca", certificates.path("ca.pem"), "--require-client-cert", "--report", reportPath]
            + failurePlan
            + (namespace == nil ? [] : ["--host", DelayLine.farAddress] + (binary ? ["--receive-buffer-kib", "0"] : []))
        var command = namespace.map { [BenchSystem.which("ip") ?? "/usr/sbin/ip", "netns", "exec", $0] + mockArguments } ?? mockArguments
        if let core, let taskset = BenchSystem.which("taskset") { command = [taskset, "-c", String(core)] + command }
        process = Process()
        process.executableURL = URL(fileURLWithPath: command[0])
        process.arguments = Array(command.dropFirst())
        output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle(forWritingAtPath: errorPath)
        process.standardInput = FileHandle.nullDevice
        try process.run()

        // The first line says where it listens.
        guard let text = Self.firstLine(of: output) else {
            process.waitUntilExit()
            throw BenchError("salvo mock exited before listening (status \(process.terminationStatus)): \(Self.tail(errorPath))")
        }
        guard let field = text.split(whereSeparator: \.isWhitespace).first(where: { $0.hasPrefix("gateway=") }),
              let port = Int(field.dropFirst("gateway=".count)) else {
            process.interrupt()
            throw BenchError("salvo mock said '\(text.trimmingCharacters(in: .whitespacesAndNewlines))', not 'listening gateway=PORT ...'")
        }
        gatewayPort = port
    }

    /// The first line a child process writes to `pipe`, or nil when it closes it first.
    static func firstLine(of pipe: Pipe) -> String? {
        var line: [UInt8] = []
        let fd = pipe.fileHandleForReading.fileDescriptor
        var byte: UInt8 = 0
        while line.last != UInt8(ascii: "\n") {
            guard (try? syscallOrThrow("read") { read(fd, &byte, 1) }) == 1 else { return nil }
            line.append(byte)
        }
        return String(decoding: line, as: UTF8.self)
    }

    /// What a mock of either protocol counted, and the bytes it read (TLS records: what
    /// crossed the wire, from `/proc/PID/io`).
    struct Counts: Decodable {
        var accepted: Int
        var rejected: Int
        var bytesRead = 0

        enum CodingKeys: CodingKey { case accepted, rejected }
    }

    /// Waits until the mock has read everything the sender wrote (see `unreadConnections`),
    /// stops it with SIGINT and returns its counts.
    func stop(after grace: Duration = .milliseconds(20)) throws -> Counts {
        let (data, bytesRead) = try stopAndReadReport(after: grace)
        do {
            var counts = try JSONDecoder().decode(Counts.self, from: data)
            counts.bytesRead = bytesRead
            return counts
        } catch {
            throw BenchError("cannot read the mock's report \(reportPath): \(error)")
        }
    }

    /// `stop`, with the binary mock's whole statistics.
    func stopBinary(after grace: Duration = .milliseconds(20)) throws -> MockStatistics {
        do {
            return try JSONDecoder().decode(MockStatistics.self, from: try stopAndReadReport(after: grace).report)
        } catch let error as BenchError {
            throw error
        } catch {
            throw BenchError("cannot read the mock's report \(reportPath): \(error)")
        }
    }

    private func stopAndReadReport(after grace: Duration) throws -> (report: Data, bytesRead: Int) {
        // A sender settles a frame once its error wait passed, which says nothing about the
        // mock having read it: on loopback the socket buffers can hold megabytes. Stopping
        // the mock before it drained them would undercount it.
        let drainDeadline = Date().addingTimeInterval(30)
        while Self.unreadConnections(port: gatewayPort, process: process.processIdentifier) > 0 && Date() < drainDeadline {
            usleep(5_000)
        }
        Thread.sleep(forTimeInterval: grace.secondsDouble)
        let bytesRead = Self.bytesRead(process: process.processIdentifier)
        process.interrupt()
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { usleep(2_000) }
        if process.isRunning {
            kill(process.processIdentifier, SIGKILL)
            process.waitUntilExit()
            throw BenchError("salvo mock did not stop within 15 s of SIGINT: \(Self.tail(errorPath))")
        }
        process.waitUntilExit()
        guard let data = FileManager.default.contents(atPath: reportPath) else {
            throw BenchError("salvo mock (status \(process.terminationStatus)) wrote no report to \(reportPath): \(Self.tail(errorPath))")
        }
        return (data, bytesRead)
    }

    /// The bytes a process read through system calls so far (`rchar`), 0 when unknown.
    static func bytesRead(process: Int32) -> Int {
        guard let bytes = try? readSmallFile("/proc/\(process)/io", limit: 4096) else { return 0 }
        let line = String(decoding: bytes, as: UTF8.self).split(separator: "\n").first { $0.hasPrefix("rchar:") }
        return line.flatMap { Int($0.dropFirst("rchar:".count).trimmingCharacters(in: .whitespaces)) } ?? 0
    }

    /// Connections to `port` whose bytes the mock has not all read yet, from
    /// `/proc/PID/net/tcp{,6}` (the process's own network namespace). The mock's end:
    /// ESTABLISHED with a receive queue, or CLOSE_WAIT (it has not read up to the end of the
    /// stream). The client's end, when it is in the same namespace (loopback): ESTABLISHED
    /// with a send queue, or FIN_WAIT1 (a closed client's last bytes or its FIN are not yet
    /// acknowledged, so they are not in the mock's receive queue either; a busy machine can
    /// hold them back for a while).
    static func unreadConnections(port: Int, process: Int32) -> Int {
        func portNumber(_ address: Substring) -> Int? {
            address.lastIndex(of: ":").flatMap { Int(address[address.index(after: $0)...], radix: 16) }
        }
        var count = 0
        for table in ["/proc/\(process)/net/tcp", "/proc/\(process)/net/tcp6"] {
            // Read to the end: these files come in pages, and one read (which Foundation's
            // String(contentsOfFile:) makes here) sees only the first ~26 sockets.
            guard let bytes = try? readSmallFile(table, limit: 256 << 20) else { continue }
            let text = String(decoding: bytes, as: UTF8.self)
            for line in text.split(separator: "\n").dropFirst() {
                // sl local remote state tx_queue:rx_queue ...; states: 01 ESTABLISHED, 04 FIN_WAIT1, 08 CLOSE_WAIT
                let fields = line.split(separator: " ")
                guard fields.count > 4 else { continue }
                let state = fields[3]
                let queues = fields[4].split(separator: ":").map { Int($0, radix: 16) ?? 0 }
                guard queues.count == 2 else { continue }
                if portNumber(fields[1]) == port, state == "08" || (state == "01" && queues[1] > 0) { count += 1 }
                if portNumber(fields[2]) == port, state == "04" || (state == "01" && queues[0] > 0) { count += 1 }
            }
        }
        return count
    }

    /// Whether the mock is still running, and the end of what it wrote on standard error:
    /// for the message when a cell fails.
    var diagnosis: String {
        let state = process.isRunning ? "still running" : "exited with status \(process.terminationStatus)"
        let tail = Self.tail(errorPath)
        return "salvo mock (pid \(process.processIdentifier)) \(state)" + (tail.isEmpty ? "" : "; its standard error: \(tail)")
    }

    /// Kills the mock without reading anything (after an error).
    func abandon() {
        if process.isRunning { kill(process.processIdentifier, SIGKILL); process.waitUntilExit() }
    }

    private static func tail(_ path: String) -> String {
        let text = (try? String(contentsOfFile: path, encoding: .utf8)) ?? ""
        return String(text.suffix(600)).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}

/// `salvo delay-line` as a child process, for `--rtt-ms`: a network namespace at the end of
/// a delayed path, where each cell's mock runs. A process of its own, so that forwarding
/// packets does not count as the sender's CPU.
final class BenchDelayLineProcess {
    let namespace: String
    private let process: Process

    init(executable: String, roundTripMilliseconds: Int) throws {
        if let reason = DelayLine.unavailableReason { throw BenchError("--rtt-ms: \(reason)") }
        process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["delay-line", "--delay-ms", String(max(1, roundTripMilliseconds / 2))]
        let output = Pipe()
        process.standardOutput = output
        process.standardInput = FileHandle.nullDevice
        try process.run()
        guard let line = BenchMockProcess.firstLine(of: output),
              let field = line.split(separator: " ").first(where: { $0.hasPrefix("namespace=") }) else {
            process.waitUntilExit()
            throw BenchError("salvo delay-line did not start (status \(process.terminationStatus))")
        }
        namespace = String(field.dropFirst("namespace=".count))
    }

    func stop() {
        process.terminate()
        process.waitUntilExit()
    }
}
