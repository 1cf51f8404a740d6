import ArgumentParser
import Foundation
import Logging
import SalvoIO
import SystemPackage
import SalvoMock
import SalvoWire
import ServiceLifecycle

/// `salvo mock`: a local APNs gateway, speaking the binary protocol (with the feedback
/// service) or the HTTP/2 provider API, with failure plans, for trying out senders and for
/// the benchmarks.
struct MockCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "mock",
        abstract: "Run a mock gateway: Apple's HTTP/2 provider API (--protocol h2), the legacy binary protocol and its "
            + "feedback service (the default), or a BlackBerry Dynamics NOC (--protocol gnp).",
        discussion: """
            The first line on standard output says where it listens: `listening gateway=PORT \
            feedback=PORT` (binary), `listening gateway=PORT channels=PORT` (--protocol h2) or \
            `listening noc=PORT` (--protocol gnp). On SIGINT or SIGTERM, or after --duration, its \
            statistics are written as JSON (to --report, else standard output) and the command \
            exits 0.

            Every protocol takes --port, --host, --loops, --duration, --report, \
            --record-accepted, the TLS flags and the log and metrics flags. Without --cert and \
            --key, throwaway certificates are made in a new temporary directory (named on \
            standard error, removed when the mock stops): trust its ca.pem; its client.pem and client.key pass \
            --require-client-cert. scripts/certs.sh makes a lasting set. A flag of another \
            protocol is refused (exit 2), naming it.

            Binary (the default; see FailurePlan): --invalid-token/--invalid-token-suffix reject \
            with status 8; --reject-every N rejects every Nth notification gateway-wide; \
            --shutdown-every N answers status 10 after N accepted on a connection; \
            --drop-every N closes a connection silently at its Nth notification; \
            --stall-every N stops reading a connection for --stall-ms after every N; \
            --error-delay-ms MS holds back every error response (not silent drops) that \
            long, discarding what the client sends meanwhile, as a slow gateway does. Its own \
            flags: --feedback-port, --feedback-tuple, --receive-buffer-kib, and the failure \
            flags marked "binary".

            HTTP/2 (--protocol h2; see H2MockGateway and H2FailurePlan): ALPN h2, or no ALPN \
            and HTTP/2 by prior knowledge (as Apple takes it); every \
            request validated with Apple's statuses and reasons; token authentication with \
            --auth-key, --key-id and --team-id (one stream per connection until a valid \
            token, then --max-streams), or certificates with --require-client-cert; tokens \
            ending in `dead` get 410 Unregistered, tokens ending in `fade` 410 ExpiredToken \
            (both with a timestamp); --reject-every N (400 BadDeviceToken; a broadcast, \
            ChannelNotRegistered), \
            --throttle-every N (429 TooManyRequests), --unavailable-every N (503 \
            ServiceUnavailable), --internal-error-every N (500 InternalServerError) and \
            --goaway-every N (the connection taking the request goes away) count valid \
            requests gateway-wide; --drop-every N and --stall-every N count them per \
            connection. --response-delay-ms D[:JITTER] holds every answer D ms plus a \
            seeded jitter of up to JITTER ms, as Apple answers once it has processed a \
            request; --error-delay-ms MS holds error answers MS instead. Answers count in \
            the report when they are sent; those never sent (the client left first) in \
            unsentAnswers. --record-requests reports each accepted request's token and \
            APNs headers (acceptedRequests), for checking what a sender put on the wire. \
            Broadcasts (POST /4/broadcasts/apps/BUNDLE, iOS 18 Live Activities) are served on \
            the gateway port, and channel management (create, read, delete, list; Apple's \
            separate host) on --channels-port (default 0: a free one), at most \
            --channel-limit channels per bundle id (default 10000); with \
            --no-broadcast-capability both answer 400 FeatureNotEnabled; the report counts \
            broadcasts by channel (broadcastsByChannel) and channel operations \
            (channelOperations, rejectedChannelOperations).

            BlackBerry Dynamics NOC (--protocol gnp; see GNPMockNOC): the Push Channel \
            back-end API over HTTPS, notify (POST /GNP1.0?method=notify) and checkToken (GET \
            /GNP1.0?method=checkToken), answered with a GNP code in a header; the default port is \
            443. What `salvo send --target blackberry --noc 127.0.0.1:PORT` and `salvo \
            check-token` talk to. Tokens ending in --dead-token-suffix (default `dead`) are dead \
            (code 402); --reject-every N answers every Nth notification 402 as well; \
            --unavailable-every N answers HTTP 503 (the sender retries); --busy-every N answers \
            code 503 (retried too); --unknown-code-every N answers code 409, a code no sender \
            knows (it fails); --drop-every N closes the connection without an answer; \
            --response-delay-ms D holds every answer D ms (no jitter); a payload over \
            --max-payload-bytes gets code 413. The other failure flags are refused.
            """)

    @Option(name: .customLong("protocol"),
            help: "binary (the legacy protocol; the default), h2 (Apple's HTTP/2 provider API) or gnp (a BlackBerry Dynamics NOC).")
    var wireProtocol: MockProtocol = .binary

    @OptionGroup(title: "BlackBerry Dynamics NOC (--protocol gnp)")
    var gnp: GNPMockOptions

    @Option(help: "Gateway port; 0 picks a free one. Default 2195 (binary), 2197 (h2).")
    var port: Int?

    @Option(name: .customLong("feedback-port"), help: "Feedback service port (binary); 0 picks a free one. Default 2196.")
    var feedbackPort: Int?

    @OptionGroup(title: "HTTP/2 (--protocol h2)")
    var h2: H2MockOptions

    @Option(help: "Address to listen on.")
    var host = "127.0.0.1"

    @OptionGroup(title: "TLS")
    var tls: ServerTLSOptions

    @OptionGroup(title: "Failure plan")
    var failures: FailurePlanOptions

    @Option(help: ArgumentHelp("Stop after this many seconds.", valueName: "seconds"))
    var duration: Double?

    @Option(help: ArgumentHelp("Write the JSON statistics here instead of standard output.", valueName: "file"))
    var report: String?

    @Option(help: "Gateway event-loop threads. Default: the number of cores.")
    var loops: Int?

    @Option(name: .customLong("receive-buffer-kib"),
            help: ArgumentHelp("Kernel receive buffer per connection, KiB (default 256; 0: the kernel's autotuning). What sits in it after a rejected notification is discarded.",
                               valueName: "KiB"))
    var receiveBufferKiB: Int?

    @Flag(name: .customLong("record-accepted"), help: "Report the digest of every accepted notification (and count duplicates).")
    var recordAccepted = false

    @Option(name: .customLong("feedback-tuple"), help: ArgumentHelp("A feedback record, UNIX time and token; repeatable.", valueName: "time:hex"))
    var feedbackTuples: [String] = []

    @Option(name: .customLong("ingest-probe"), help: .hidden)
    var ingestProbe: Int?

    @Option(name: .customLong("probe-runs"), help: .hidden)
    var probeRuns = 5

    @OptionGroup(title: "Logs and metrics")
    var observability: ObservabilityOptions

    // MARK: Validation (exit 2 with a message, as every salvo usage error)

    func validate() throws {
        do {
            _ = try failures.plan()
            _ = try tuples()
            try tls.check()
            for (name, value) in [("--port", port), ("--feedback-port", feedbackPort)] {
                if let value, !(0...65535).contains(value) { throw UsageError("\(name) must be 0...65535, got \(value)") }
            }
            switch wireProtocol {
            case .gnp:
                if let flag = h2.givenFlag { throw UsageError("\(flag) is for --protocol h2") }
                if let flag = binaryOnlyFlag { throw UsageError("\(flag) is for the binary protocol, not --protocol gnp") }
                _ = try gnp.plan(failures)
            case .binary:
                if let flag = h2.givenFlag ?? failures.h2OnlyFlag { throw UsageError("\(flag) is for --protocol h2") }
                if let flag = gnp.givenFlag { throw UsageError("\(flag) is for --protocol gnp") }
            case .h2:
                if let flag = gnp.givenFlag { throw UsageError("\(flag) is for --protocol gnp") }
                if let flag = binaryOnlyFlag { throw UsageError("\(flag) is for the binary protocol, not --protocol h2") }
                _ = try failures.h2Plan()
                _ = try h2.tokenVerifiers()
                _ = try h2.maximumConcurrentStreams()
                try h2.checkChannels()
            }
            if let loops, loops < 1 { throw UsageError("--loops must be at least 1, got \(loops)") }
            if let duration, !(duration > 0) { throw UsageError("--duration must be positive, got \(duration)") }
            if let ingestProbe, ingestProbe < 1 { throw UsageError("--ingest-probe needs a frame count of at least 1") }
            if probeRuns < 1 { throw UsageError("--probe-runs must be at least 1") }
            if observability.metricsHold != nil { throw UsageError("--metrics-hold is for send and demo: the mock serves until it stops") }
        } catch let error as UsageError {
            throw ValidationError(error.message)
        }
    }

    func tuples() throws(UsageError) -> [FeedbackTuple] {
        try feedbackTuples.map { text throws(UsageError) in
            let parts = text.split(separator: ":", maxSplits: 1)
            guard parts.count == 2, let time = UInt32(parts[0]) else {
                throw UsageError("--feedback-tuple wants TIME:HEX (UNIX seconds, 64 hex digits), got '\(text)'")
            }
            do { return FeedbackTuple(timestamp: time, token: try DeviceToken(hex: parts[1])) } catch {
                throw UsageError("--feedback-tuple \(text): \(error)")
            }
        }
    }

    // MARK: Running

    func run() async throws {
        let observability = try await observability.start()
        defer { observability.endpoint?.stop() }
        let (serverTLS, throwaway) = try tls.configuration(defaultVersion: wireProtocol == .h2 ? .v1_3 : .v1_2)
        defer { throwaway?.remove() }
        if wireProtocol == .h2 {
            try await runH2(serverTLS)
            return
        }
        if wireProtocol == .gnp { return try await runGNP(serverTLS) }
        if let ingestProbe {
            try runIngestProbe(frames: ingestProbe, server: serverTLS, throwaway: throwaway?.bundle)
            return
        }
        var gatewayConfiguration = MockGateway.Configuration(
            host: host, port: port ?? 2195, tls: serverTLS, failurePlan: try failures.plan(), recordAccepted: recordAccepted)
        if let loops { gatewayConfiguration.loops = loops }
        if let receiveBufferKiB { gatewayConfiguration.receiveBuffer = receiveBufferKiB > 0 ? receiveBufferKiB << 10 : nil }
        let gateway = try MockGateway(gatewayConfiguration, logger: Logger(label: "salvo.mock"))
        let feedback = try MockFeedback(.init(host: host, port: feedbackPort ?? 2196, tls: serverTLS, tuples: try tuples()))
        // Watch the signals before announcing the ports: whoever reads the line may signal at once.
        let stop = StopSignal(duration: duration)
        print("listening gateway=\(gateway.port) feedback=\(feedback.port)")
        fflush(nil)  // all streams: other processes wait for this line

        await serve(gateway, until: stop)
        feedback.stop()
        try writeReport(gateway.statistics())
    }

    /// Runs `gateway` as a service (its metrics every second) until `stop`, then stops it.
    func serve(_ gateway: some Service & DemoGateway, until stop: StopSignal) async {
        let serving = Task { try? await gateway.run() }
        await stop.wait()
        serving.cancel()
        await serving.value
        gateway.stop()
    }

    func writeReport(_ statistics: some Encodable) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let json = try encoder.encode(statistics) + Data("\n".utf8)
        if let report {
            try json.write(to: URL(fileURLWithPath: report))
        } else {
            do {
                try FileHandle.standardOutput.write(contentsOf: json)
            } catch {
                // Whoever started us closed our stdout (a pipe's reader went away).
                printError("salvo mock: cannot write the statistics to stdout: \(error)")
                throw ExitCode(1)
            }
        }
    }

    /// `--ingest-probe N`: how fast the gateway takes N 161-byte frames over one connection.
    private func runIngestProbe(frames: Int, server: TLSConfiguration, throwaway: DevelopmentPKI.Bundle?) throws {
        var client = TLSConfiguration.client(trustRoots: throwaway.map { .certificates($0.authority.certificate) } ?? .system)
        if throwaway == nil { client.verifyPeer = false }  // the probe talks to itself
        if tls.requireClientCertificate, let throwaway {
            client.certificateChain = throwaway.client.certificate
            client.privateKey = throwaway.client.privateKey
        }
        let context = try TLSContext(client, role: .client)
        var rates: [Double] = []
        for run in 1...probeRuns {
            let result = try IngestProbe.run(frameCount: frames, server: server, client: context)
            rates.append(result.framesPerSecond)
            print(String(format: "run %d: %d frames of %d bytes in %.3f s: %.2f M frames/s, %.0f MB/s; CPU busy: gateway %.0f%%, sender %.0f%%",
                         run, result.frames, result.frameLength, result.seconds,
                         result.framesPerSecond / 1e6, result.bytesPerSecond / 1e6,
                         100 * result.gatewayCPUSeconds / result.seconds, 100 * result.senderCPUSeconds / result.seconds))
        }
        let sorted = rates.sorted()
        let median = sorted.count % 2 == 1 ? sorted[sorted.count / 2] : (sorted[sorted.count / 2 - 1] + sorted[sorted.count / 2]) / 2
        print(String(format: "median of %d runs: %.2f M frames/s", rates.count, median / 1e6))
    }
}

/// A usage mistake, reported on standard error with exit status 2.
struct UsageError: Error {
    let message: String
    init(_ message: String) { self.message = message }
}

/// Waits for SIGINT, SIGTERM or the end of the duration, whichever comes first.
///
/// The handlers are installed synchronously in `init` (before the listening line is
/// printed), so a signal sent the moment a client reads that line is never lost. The
/// handler only writes a byte to a pipe (async-signal-safe); a plain thread waits on it.
final class StopSignal: Sendable {
    private let readEnd: Int32
    private let deadline: Instant?

    init(duration: Double?) {
        var ends: [Int32] = [-1, -1]
        precondition(pipe(&ends) == 0, "pipe: \(String(cString: strerror(errno)))")
        readEnd = ends[0]
        stopPipeWriteEnd = ends[1]
        deadline = duration.map { Instant.now() + .milliseconds(Int64($0 * 1000)) }
        var action = sigaction()
        action.__sigaction_handler.sa_handler = { _ in
            var byte: UInt8 = 1
            _ = write(stopPipeWriteEnd, &byte, 1)
        }
        sigemptyset(&action.sa_mask)
        sigaction(SIGINT, &action, nil)
        sigaction(SIGTERM, &action, nil)
    }

    /// Returns once a signal arrived or the duration passed.
    func wait() async {
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let thread = Thread { [readEnd, deadline] in
                var poller = pollfd(fd: readEnd, events: Int16(POLLIN), revents: 0)
                // Computed in the body, which runs again after EINTR: each wait is what is left.
                func millisecondsLeft() -> Int32 {
                    guard let deadline else { return -1 }
                    return Int32(clamping: (deadline.since(.now()).nanosecondsClamped + 999_999) / 1_000_000)
                }
                // One poll: a byte in the pipe, the deadline, or a failure of poll itself all end the wait.
                _ = try? syscallOrThrow("poll") { poll(&poller, 1, millisecondsLeft()) }
                continuation.resume()
            }
            thread.start()
        }
    }
}

/// Where the signal handler writes; set once, before the handlers are installed.
nonisolated(unsafe) private var stopPipeWriteEnd: Int32 = -1
