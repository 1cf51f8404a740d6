import ArgumentParser
import Foundation
import SalvoEngine
import SalvoIO
import SalvoWire

/// `salvo send`: streams a campaign file through the sender and accounts for every line.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a campaign to an APNs binary-protocol gateway.",
        discussion: """
            Input: --input FILE.jsonl, one object per line: {"token": "<hex>", "payload": {...}} with \
            optional "expiry" (UNIX seconds) and "priority" (10 or 5); or --tokens FILE (one hex token \
            per line) with --payload FILE.json (one payload for all). Files are streamed: memory does \
            not grow with their size.

            Exit status: 0 when every notification was accepted or rejected by the gateway; 1 when any \
            failed (unreachable gateway, unknown fate after a drop under --on-drop report, retry budget); \
            2 for usage or input errors.
            """)

    @Option(help: ArgumentHelp("The gateway: host:port, [ipv6]:port, production or sandbox.", valueName: "host:port"))
    var gateway: String

    @OptionGroup(title: "TLS")
    var tls: TLSOptions

    @OptionGroup(title: "Campaign")
    var campaign: CampaignOptions

    @OptionGroup(title: "Engine")
    var engine: EngineOptions

    @Option(help: ArgumentHelp("Write the final report as JSON to this file.", valueName: "file"))
    var report: String?

    @Option(help: ArgumentHelp("Write rejected tokens as CSV (token,status,status_name) to this file.", valueName: "file"))
    var rejected: String?

    @Option(help: ArgumentHelp("Record progress durably in this file (see --resume).", valueName: "file"))
    var checkpoint: String?

    @Flag(help: "Continue from --checkpoint: lines it records as done are skipped.")
    var resume = false

    func validate() throws {
        if resume && checkpoint == nil { throw ValidationError("--resume needs --checkpoint FILE") }
        do { _ = try Endpoint(parsing: gateway, service: .gateway) } catch { throw ValidationError(error.description) }
    }

    func run() async throws {
        let (reader, resumedAfter, run) = try prepare()
        let inputError = await Self.send(from: reader, through: run)
        let outcome = await run.finish(
            badLines: reader.skippedLines, badLineCount: reader.skippedLineCount, lastLine: reader.linesRead,
            resumedAfter: resumedAfter, reportPath: report)
        if let inputError {
            printError("salvo send: \(inputError); stopped there (everything before it was sent and is accounted for above)")
            throw ExitCode(2)
        }
        if outcome.failed > 0 { throw ExitCode(1) }
    }
}

extension SendCommand {
    /// Everything before the first notification: configuration, input, sender.
    func prepare() throws -> (CampaignReader, resumedAfter: Int, CampaignRun) {
        let endpoint = try Endpoint(parsing: gateway, service: .gateway)
        var configuration = SenderConfiguration(host: endpoint.host, port: endpoint.port, tls: try tls.configuration())
        if tls.insecure { _ = try tls.makeContext() }  // prints the warning once
        engine.apply(to: &configuration)
        let checkpointFile = checkpoint.map(Checkpoint.init(path:))
        let (reader, resumedAfter) = try openCampaign(
            checkpoint: checkpointFile, maximumPayloadLength: configuration.maximumPayloadLength)
        let run = try CampaignRun(configuration: configuration, rejectedPath: rejected, checkpoint: checkpointFile,
                                  total: campaign.countLines())
        return (reader, resumedAfter, run)
    }

    /// Opens the input and, with --resume, moves past the lines the checkpoint records.
    func openCampaign(checkpoint: Checkpoint?, maximumPayloadLength: Int) throws -> (CampaignReader, resumedAfter: Int) {
        do {
            let reader = try campaign.openReader(maximumPayloadLength: maximumPayloadLength)
            guard resume, let checkpoint, let line = try checkpoint.load() else { return (reader, 0) }
            try reader.skip(throughLine: line)
            printError("resuming after line \(line) (from \(checkpoint.path))")
            return (reader, line)
        } catch {
            printError("salvo send: \(error)")
            throw ExitCode(2)
        }
    }

    /// Feeds every line to the sender; returns the input error that stopped it, if any.
    static func send(from reader: CampaignReader, through run: CampaignRun) async -> String? {
        do {
            while let item = try reader.next() {
                try await run.submit(token: item.token, payload: item.payload, expiry: item.expiry,
                                     priority: item.priority, line: item.line)
            }
            return nil
        } catch let error as CampaignError {
            return error.description
        } catch {
            // The sender refused: the gateway is unreachable. The report says what failed.
            printError("salvo send: \(error)")
            return nil
        }
    }
}

/// The campaign input flags.
struct CampaignOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A JSONL campaign: one {\"token\", \"payload\"} object per line.", valueName: "file"))
    var input: String?

    @Option(help: ArgumentHelp("A list of hex device tokens, one per line (use with --payload).", valueName: "file"))
    var tokens: String?

    @Option(help: ArgumentHelp("The JSON payload sent to every token of --tokens.", valueName: "file"))
    var payload: String?

    @Option(name: .customLong("on-bad-line"), help: "abort (default) or skip lines that cannot be sent; skipped lines are listed in the report.")
    var onBadLine: BadLineChoice = .abort

    enum BadLineChoice: String, ExpressibleByArgument, CaseIterable {
        case abort, skip
    }

    func validate() throws {
        switch (input, tokens, payload) {
        case (_?, nil, nil), (nil, _?, _?): break
        case (_?, _, _): throw ValidationError("give either --input or --tokens with --payload, not both")
        case (nil, _?, nil): throw ValidationError("--tokens needs --payload FILE.json (the payload sent to every token)")
        case (nil, nil, _?): throw ValidationError("--payload goes with --tokens FILE")
        case (nil, nil, nil): throw ValidationError("nothing to send: give --input FILE.jsonl, or --tokens FILE with --payload FILE.json")
        }
    }

    func openReader(maximumPayloadLength: Int) throws -> CampaignReader {
        let policy: BadLinePolicy = onBadLine == .skip ? .skip : .abort
        if let input {
            return try CampaignReader(.jsonl(input), maximumPayloadLength: maximumPayloadLength, onBadLine: policy)
        }
        let payloadBytes = try readWholeFile(payload!, limit: 1 << 20, what: "payload file")
        return try CampaignReader(.tokens(tokens!, payload: payloadBytes), maximumPayloadLength: maximumPayloadLength,
                                  onBadLine: policy)
    }

    /// Lines in the input, for the progress display's ETA (a fast newline count).
    func countLines() -> Int? {
        guard let path = input ?? tokens, let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        var count = 0
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            count += chunk.withUnsafeBytes { bytes in bytes.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) } }
        }
        return count
    }
}

/// Engine tuning flags shared by `send` and `demo`.
struct EngineOptions: ParsableArguments {
    @Option(help: "Notification format: frame (command 2), enhanced (1) or simple (0, no identifiers).")
    var format: FormatChoice = .frame

    @Option(help: ArgumentHelp("Event-loop threads. Default: one per core.", valueName: "n"))
    var shards: Int?

    @Option(help: ArgumentHelp("Gateway connections per shard.", valueName: "n"))
    var connections: Int = 1

    @Option(name: .customLong("error-wait-ms"),
            help: ArgumentHelp("How long an error can still arrive for a written notification (default 1000, as Apple needs).",
                               valueName: "ms"))
    var errorWaitMilliseconds: Int?

    @Option(name: .customLong("on-drop"), help: "After a silent drop: resend (at-least-once) or report (at-most-once).")
    var onDrop: DropPolicy = .atLeastOnce

    @Option(name: .customLong("ring-mib"),
            help: ArgumentHelp("Send ring per connection, MiB (default 4). It holds everything written within the error wait: rate x error wait x frame size.",
                               valueName: "MiB"))
    var ringMiB: Int?

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

    func validate() throws {
        if let shards, shards < 1 { throw ValidationError("--shards must be at least 1") }
        guard connections >= 1 else { throw ValidationError("--connections must be at least 1") }
        if let errorWaitMilliseconds, errorWaitMilliseconds < 1 { throw ValidationError("--error-wait-ms must be at least 1") }
        if let ringMiB, !(1...1024).contains(ringMiB) { throw ValidationError("--ring-mib must be 1...1024") }
    }

    func apply(to configuration: inout SenderConfiguration) {
        configuration.format = format.format
        if let shards { configuration.shards = shards }
        configuration.connectionsPerShard = connections
        if let errorWaitMilliseconds { configuration.errorWait = .milliseconds(errorWaitMilliseconds) }
        configuration.dropPolicy = onDrop
        if let ringMiB { configuration.ringCapacity = ringMiB << 20 }
        configuration.tls.kernelTLS = kernelTLS
    }
}

extension DropPolicy: ExpressibleByArgument {}
