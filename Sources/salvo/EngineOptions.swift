import ArgumentParser
import SalvoEngine
import SalvoWire

/// Engine tuning flags shared by `send` and `demo`.
struct EngineOptions: ParsableArguments {
    @Option(help: "Binary protocol: the frame format, frame (command 2; the default), enhanced (1) or simple (0, no identifiers).")
    var format: FormatChoice?

    @Option(help: ArgumentHelp("Event-loop threads. Default: one per core.", valueName: "n"))
    var shards: Int?

    @Option(help: ArgumentHelp("Gateway connections per shard at the start.", valueName: "n"))
    var connections: Int = 1

    @Option(name: .customLong("max-connections"),
            help: ArgumentHelp("The most connections per shard (default 2; HTTP/2: 128). Binary: one more is opened, at most every 250 ms, while every connection is full — over a long path, a connection the gateway closed after an error restarts TCP's slow start. HTTP/2: they are multiplied by four while every connection has all the streams the gateway allows open with more waiting (a connection's rate is its streams ÷ the answer time), and go back when a step did not raise the rate. Equal to --connections: a fixed number.",
                               valueName: "n"))
    var maximumConnections: Int?

    @Option(name: .customLong("error-wait-ms"),
            help: ArgumentHelp("Binary protocol: how long an error can still arrive for a written notification (default 1000, as Apple needed).",
                               valueName: "ms"))
    var errorWaitMilliseconds: Int?

    @Option(name: .customLong("on-drop"), help: "After a silent drop: resend (at-least-once) or report (at-most-once).")
    var onDrop: DropPolicy = .atLeastOnce

    @Option(name: .customLong("retention-ms"),
            help: ArgumentHelp("Binary protocol: how long records of presumed-accepted notifications are kept for late error responses (default 5000; at least twice the error wait).",
                               valueName: "ms"))
    var retentionMilliseconds: Int?

    @Option(name: .customLong("ring-mib"),
            help: ArgumentHelp("Staging ring, MiB: notifications encoded and waiting to be written. One per connection (default 2); HTTP/2: one per shard, which its connections draw from as streams free up (default 1). Resends are read again from the input, so it does not grow with the error wait.",
                               valueName: "MiB"))
    var ringMiB: Int?

    @Option(name: .customLong("socket-buffer-kib"),
            help: ArgumentHelp("Kernel send buffer per connection, KiB (default 0: the kernel's autotuning, which a long path needs). Halved on each error response, since what sits in it must be resent; this is the most it grows back to.",
                               valueName: "KiB"))
    var socketBufferKiB: Int?

    @Option(name: .customLong("drain-timeout"),
            help: ArgumentHelp("After SIGTERM or SIGINT, how long what is in flight may take to finish (default 30); then what is still open follows --on-drop and the run ends. A second signal ends it at once.",
                               valueName: "s"))
    var drainTimeoutSeconds: Double = 30

    @Flag(name: .customLong("ktls"), help: "Ask OpenSSL to let the kernel encrypt records (kTLS); says whether it engaged.")
    var kernelTLS = false

    enum FormatChoice: String, ExpressibleByArgument, CaseIterable {
        case frame, enhanced, simple
        var format: FrameFormat {
            switch self {
            case .frame: .frame
            case .enhanced: .enhanced
            case .simple: .simple
            }
        }
    }

    /// The frame format: `--format`, or command 2.
    var frameFormat: FrameFormat { (format ?? .frame).format }

    /// The first flag given that only the binary protocol has a use for: HTTP/2 has no
    /// frame format, and every stream answers for itself, so nothing waits for errors.
    var binaryOnlyFlag: String? {
        firstGivenFlag([("--format", format != nil), ("--error-wait-ms", errorWaitMilliseconds != nil),
                        ("--retention-ms", retentionMilliseconds != nil)])
    }

    /// The first flag given, for a command that does not use the engine (`--target blackberry`).
    var givenFlag: String? {
        binaryOnlyFlag ?? firstGivenFlag([
            ("--shards", shards != nil), ("--connections", connections != 1), ("--max-connections", maximumConnections != nil),
            ("--on-drop", onDrop != .atLeastOnce), ("--ring-mib", ringMiB != nil), ("--socket-buffer-kib", socketBufferKiB != nil),
            ("--drain-timeout", drainTimeoutSeconds != 30), ("--ktls", kernelTLS),
        ])
    }

    func validate() throws {
        if let shards, shards < 1 { throw ValidationError("--shards must be at least 1") }
        guard connections >= 1 else { throw ValidationError("--connections must be at least 1") }
        if let maximumConnections, maximumConnections < connections {
            throw ValidationError("--max-connections (\(maximumConnections)) must be at least --connections (\(connections))")
        }
        if let errorWaitMilliseconds, errorWaitMilliseconds < 1 { throw ValidationError("--error-wait-ms must be at least 1") }
        if let retentionMilliseconds, retentionMilliseconds < 1 { throw ValidationError("--retention-ms must be at least 1") }
        if let ringMiB, !(1...1024).contains(ringMiB) { throw ValidationError("--ring-mib must be 1...1024") }
        if let socketBufferKiB, !(0...65536).contains(socketBufferKiB) { throw ValidationError("--socket-buffer-kib must be 0...65536") }
        if !(0...3600).contains(drainTimeoutSeconds) { throw ValidationError("--drain-timeout must be 0...3600 seconds") }
    }

    func apply(to configuration: inout SenderConfiguration) {
        if let shards { configuration.shards = shards }
        configuration.connectionsPerShard = connections
        if let maximumConnections { configuration.maximumConnectionsPerShard = maximumConnections }
        if let errorWaitMilliseconds { configuration.errorWait = .milliseconds(errorWaitMilliseconds) }
        if let retentionMilliseconds { configuration.recordRetention = .milliseconds(retentionMilliseconds) }
        configuration.dropPolicy = onDrop
        if let ringMiB {
            configuration.ringCapacity = ringMiB << 20
            configuration.sharedStagingCapacity = ringMiB << 20
        }
        configuration.tls.kernelTLS = kernelTLS
        if let socketBufferKiB { configuration.socketSendBuffer = socketBufferKiB > 0 ? socketBufferKiB << 10 : nil }
        configuration.drainTimeout = .milliseconds(Int(drainTimeoutSeconds * 1000))
    }
}

extension DropPolicy: ExpressibleByArgument {}
