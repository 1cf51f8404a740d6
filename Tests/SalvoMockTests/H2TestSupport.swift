import Crypto
import Foundation
import SalvoIO
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoMock

/// An `H2MockGateway` on a free port with certificates in a temporary directory (for the
/// command-line clients), and those clients: curl, nghttp and h2load, as `make test`
/// installs them.
final class H2Rig {
    static let pki = try! DevelopmentPKI.Bundle()
    /// The provider-token key the rig's token gateways trust (as the text of a .p8: Crypto's
    /// key type is not `Sendable`).
    static let authKeyPEM = P256.Signing.PrivateKey().pemRepresentation
    static var authKey: P256.Signing.PrivateKey { try! .init(pemRepresentation: authKeyPEM) }
    static let keyID = "KEY0000001"
    static let teamID = "TEAM000001"

    let directory: String
    let gateway: H2MockGateway

    /// A gateway as `configure` leaves the default configuration (TLS and a free port set).
    init(tokenAuthentication: Bool = false, _ configure: (inout H2MockGateway.Configuration) -> Void = { _ in }) throws {
        directory = NSTemporaryDirectory() + "salvo-h2-\(UUID().uuidString)"
        try Self.pki.write(to: directory)
        var configuration = H2MockGateway.Configuration(
            tls: .server(certificateChain: Self.pki.server.certificate, privateKey: Self.pki.server.privateKey), loops: 2)
        if tokenAuthentication {
            configuration.tokenVerifier = try ProviderTokenVerifier(
                authKeyPEM: Self.authKeyPEM, keyID: Self.keyID, teamID: Self.teamID)
        }
        configure(&configuration)
        gateway = try H2MockGateway(configuration)
    }

    deinit {
        gateway.stop()
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// The gateway's statistics once `condition` holds, or nil after 10 s: the gateway
    /// counts on its own threads, after a client has moved on. The pause between polls
    /// only keeps the CPU free.
    func statistics(when condition: (H2Statistics) -> Bool) -> H2Statistics? {
        let deadline = ContinuousClock.now + .seconds(10)
        var statistics = gateway.statistics()
        while !condition(statistics) {
            guard ContinuousClock.now < deadline else { return nil }
            usleep(1000)
            statistics = gateway.statistics()
        }
        return statistics
    }

    func url(_ path: String, port: Int? = nil) -> String { "https://127.0.0.1:\(port ?? gateway.port)\(path)" }
    var caFile: String { "\(directory)/ca.pem" }

    /// A file in the rig's directory holding `bytes`.
    func file(_ name: String, _ bytes: [UInt8]) throws -> String {
        let path = "\(directory)/\(name)"
        try Data(bytes).write(to: URL(fileURLWithPath: path))
        return path
    }

    /// One request with curl over HTTP/2, verifying the server against the test CA.
    /// `port`: another of the gateway's ports (the channel management port); by default its push port.
    func curl(_ path: String = "/3/device/\(h2Token)", method: String = "POST", headers: [String] = standardHeaders,
              payload: [UInt8]? = Array(#"{"aps":{"alert":"hi"}}"#.utf8), extra: [String] = [],
              port: Int? = nil) async throws -> CurlResponse {
        var arguments = ["--silent", "--show-error", "--http2", "--cacert", caFile, "--max-time", "10",
                         "--dump-header", "-", "--request", method]
        for header in headers { arguments += ["--header", header] }
        if let payload { arguments += ["--data-binary", "@" + (try file("payload-\(UUID().uuidString)", payload))] }
        let result = try await runTool("curl", arguments + extra + [url(path, port: port)])
        return CurlResponse(result)
    }
}

// MARK: - Load and frame logs

extension H2Rig {
    /// A small alert payload in a file, for the tools that read one.
    func payloadFile() throws -> String { try file("payload.json", Array(#"{"aps":{"alert":"hi"}}"#.utf8)) }

    /// h2load: `requests` well-formed requests to one token, over `clients` connections of
    /// up to `streams` concurrent streams each, timed by the caller's clock as well.
    func h2load(requests: Int, clients: Int = 1, streams: Int = 1) async throws -> H2loadRun {
        let started = ContinuousClock.now
        let result = try await runTool("h2load", ["-n", String(requests), "-c", String(clients), "-m", String(streams),
                                                  "-d", try payloadFile(), "-H", "apns-topic: com.example.app",
                                                  "-H", "apns-push-type: alert", url("/3/device/\(h2Token)")])
        return H2loadRun(output: result.output, elapsed: ContinuousClock.now - started)
    }

    /// curl with `count` URLs in one run, each a well-formed request: curl takes them one
    /// after another, on one connection while the gateway keeps it, on a new one after a
    /// GOAWAY. One `(status, new connections)` per request.
    func curlInSequence(_ count: Int) async throws -> [(status: Int, connects: Int)] {
        let result = try await runTool("curl", ["--silent", "--show-error", "--http2", "--cacert", caFile, "--max-time", "20",
                                                "--header", "apns-topic: com.example.app", "--header", "apns-push-type: alert",
                                                "--data-binary", "@" + (try payloadFile()), "--output", "/dev/null",
                                                "--write-out", "%{http_code} %{num_connects}\\n"]
                                       + Array(repeating: url("/3/device/\(h2Token)"), count: count))
        return result.output.split(separator: "\n").map { line in
            let fields = line.split(separator: " ").map { Int($0) ?? -1 }
            return (fields[0], fields.count > 1 ? fields[1] : -1)
        }
    }

    /// nghttp's frame log (`-v`) of `requests` concurrent well-formed requests on one
    /// connection.
    func nghttp(requests: Int) async throws -> NghttpLog {
        let result = try await runTool("nghttp", ["-v", "-n", "-m", String(requests), "-d", try payloadFile(), "-t", "20",
                                                  "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
                                                  url("/3/device/\(h2Token)")])
        return NghttpLog(result.output)
    }
}

/// What h2load printed, and how long it ran by the test's clock.
struct H2loadRun {
    var output: String
    var elapsed: Duration

    /// The counts of `status codes: A 2xx, B 3xx, C 4xx, D 5xx`: [A, B, C, D].
    var statusCodes: [Int] {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("status codes:") }) else { return [] }
        return line.dropFirst("status codes:".count).split(separator: ",").compactMap { Int($0.split(separator: " ").first ?? "") }
    }

    /// `time for request:`'s minimum and mean, in seconds.
    var requestTime: (min: Double, mean: Double)? {
        guard let line = output.split(separator: "\n").first(where: { $0.hasPrefix("time for request:") }) else { return nil }
        let values = line.dropFirst("time for request:".count).split(separator: " ").prefix(3).compactMap(Self.seconds)
        return values.count == 3 ? (values[0], values[2]) : nil
    }

    /// `152us`, `4.14ms`, `1.2s` in seconds.
    private static func seconds(_ text: Substring) -> Double? {
        for (unit, scale) in [("us", 1e-6), ("ms", 1e-3), ("s", 1.0)] where text.hasSuffix(unit) {
            return Double(text.dropLast(unit.count)).map { $0 * scale }
        }
        return nil
    }
}

/// nghttp's `-v` log, read for when each request went out and each answer came back.
struct NghttpLog {
    /// One answer: when its `:status` arrived (seconds since nghttp started), its stream
    /// and its status.
    struct Answer: Equatable {
        var time: Double
        var stream: Int
        var status: Int
    }

    var text: String
    /// The answers in the order they arrived.
    var answers: [Answer] = []
    /// When each stream's request headers went out.
    var sent: [Int: Double] = [:]

    init(_ text: String) {
        self.text = text
        for line in text.split(separator: "\n") {
            guard line.hasPrefix("["), let close = line.firstIndex(of: "]"),
                  let time = Double(line[line.index(after: line.startIndex)..<close].trimmingCharacters(in: .whitespaces)),
                  let id = line.range(of: "stream_id=") else { continue }
            let stream = Int(line[id.upperBound...].prefix { $0.isNumber }) ?? -1
            if line.contains(" send HEADERS frame") {
                sent[stream] = time
            } else if line.contains(" recv (stream_id="), let status = line.range(of: ":status: ") {
                answers.append(Answer(time: time, stream: stream, status: Int(line[status.upperBound...].prefix(3)) ?? -1))
            }
        }
    }

    /// How long the answer took after its request went out. nghttp prints its times to the
    /// millisecond, so this may read up to a millisecond short of the true time (and the
    /// subtraction of two such decimals can land a hair below a whole millisecond: a hold
    /// of 1000 ms read 0.9999999999999999 s).
    func latency(of answer: Answer) -> Double { answer.time - (sent[answer.stream] ?? .infinity) }

    /// The resolution of nghttp's times, in seconds.
    static let resolution = 0.001
}

/// The headers of a well-formed alert request.
let standardHeaders = ["apns-topic: com.example.app", "apns-push-type: alert"]
/// A device token, 64 hex digits.
let h2Token = String(repeating: "5a", count: 32)

/// What curl printed: the response head (`--dump-header -`) and the body.
struct CurlResponse {
    var exitCode: Int32
    var status: Int?
    var headers: [String: String] = [:]
    var body: String
    var errors: String

    init(_ result: ToolResult) {
        exitCode = result.status
        errors = result.errors
        // The head ends at the first blank line; the body follows it.
        let parts = result.output.components(separatedBy: "\r\n\r\n")
        let head = parts.first ?? ""
        body = parts.dropFirst().joined(separator: "\r\n\r\n")
        let lines = head.components(separatedBy: "\r\n")
        status = lines.first.flatMap { $0.split(separator: " ").dropFirst().first }.flatMap { Int($0) }
        for line in lines.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            headers[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
    }

    /// The body's `reason`, if it is an APNs error body.
    var reason: String? {
        let json = try? JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any]
        return json?["reason"] as? String
    }
}

/// A provider token signed by `key`.
func mintToken(key: P256.Signing.PrivateKey = H2Rig.authKey, keyID: String = H2Rig.keyID, teamID: String = H2Rig.teamID,
               issuedAt: Int64) throws -> String {
    let token = ProviderToken(keyID: keyID, teamID: teamID, issuedAt: issuedAt)
    let signature = try key.signature(for: Data(token.signingInput.utf8))
    return token.compact(signature: signature.rawRepresentation)
}

/// A token with these header and claims texts, exactly as written, signed by `key`: what
/// other signers send.
func mintToken(key: P256.Signing.PrivateKey = H2Rig.authKey, header: String, claims: String) throws -> String {
    let signingInput = Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
    return signingInput + "." + Base64URL.encode(try key.signature(for: Data(signingInput.utf8)).rawRepresentation)
}

/// UNIX seconds now.
var unixNow: Int64 { Int64(Date().timeIntervalSince1970) }

// MARK: - External tools

/// An external tool's exit status and output.
struct ToolResult {
    var status: Int32
    var output: String
    var errors: String
}

/// Runs `name` (found on PATH) to completion, draining both of its pipes at once so that
/// neither can fill up and block it; gives up (and records an issue) after `timeout`. The
/// waits are on a thread of their own, off the cooperative pool.
func runTool(_ name: String, _ arguments: [String], timeout: Duration = .seconds(60)) async throws -> ToolResult {
    let directories = (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":").map(String.init)
        + ["/usr/bin", "/usr/sbin"]
    guard let path = directories.map({ "\($0)/\(name)" }).first(where: { FileManager.default.isExecutableFile(atPath: $0) }) else {
        throw MissingTool(name: name)
    }
    let (result, finished) = try await onOwnThread { () throws -> (ToolResult, Bool) in
        let process = Process()
        process.executableURL = URL(fileURLWithPath: path)
        process.arguments = arguments
        let output = Pipe(), errors = Pipe()
        process.standardOutput = output
        process.standardError = errors
        try process.run()
        let outputData = DrainedPipe(output), errorData = DrainedPipe(errors)
        let seconds = Double(timeout.components.seconds)
        let finished = outputData.wait(seconds) && errorData.wait(seconds)
        if !finished { process.terminate() }
        process.waitUntilExit()
        return (ToolResult(status: process.terminationStatus, output: outputData.text, errors: errorData.text), finished)
    }
    if !finished { Issue.record("\(name) did not finish within \(timeout)") }
    return result
}

struct MissingTool: Error, CustomStringConvertible {
    var name: String
    var description: String { "\(name) is not installed: `make deps` installs it (nghttp2-client, curl)" }
}

/// Reads a pipe to its end on a thread of its own.
final class DrainedPipe: Sendable {
    private let data = Locked(Data())
    private let done = DispatchGroup()

    init(_ pipe: Pipe) {
        let handle = pipe.fileHandleForReading
        done.enter()
        Thread.detachNewThread { [self] in
            let read = handle.readDataToEndOfFile()
            data.withLock { $0 = read }
            done.leave()
        }
    }

    /// Waits for the end of the pipe; false after `seconds`.
    func wait(_ seconds: Double) -> Bool { done.wait(timeout: .now() + seconds) == .success }

    /// What was read, once the pipe ended.
    var text: String {
        done.wait()
        return data.withLock { String(decoding: $0, as: UTF8.self) }
    }
}
