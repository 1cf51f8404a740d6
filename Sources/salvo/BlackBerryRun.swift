import ArgumentParser
import Foundation
import SalvoBlackBerry
import SalvoCampaigns
import SalvoEngine
import SalvoIO
import SalvoWire

/// One Push Channel campaign (or token check) as the CLI runs it: the same input flags,
/// checkpoint and resume, rejected CSV, progress line, summary, report JSON and exit codes
/// as an APNs campaign, around a `PushChannelRun`.
struct BlackBerryRun {
    /// The subcommand, for messages.
    var command: String
    /// The campaign file, opened when the run starts.
    var source: () throws -> PushChannelCampaignSource
    var onBadLine: BadLinePolicy
    /// Lines in the input, for the progress display.
    var countLines: () -> Int?
    var options: BlackBerryOptions
    var tls: TLSOptions
    var request: PushChannelRequest
    var reportPath: String?
    var rejectedPath: String?
    var checkpointPath: String?
    var resume: Bool
    /// The device registry the dead tokens are recorded in (`--db`, `--app-id`), or nil.
    var registry: PushChannelRegistryOptions? = nil

    /// Runs it to the end; throws `ExitCode` 2 for input errors (an unreachable registry
    /// database among them, before anything is sent), 1 when anything failed.
    func run() async throws {
        guard let registry, let url = registry.db, let appID = registry.appID else { return try await send(invalidations: nil) }
        try await withCampaignDatabase(url, command: command) { database in
            try await send(invalidations: PushChannelInvalidations(registry: DeviceRegistry(database), app: appID))
        }
    }

    private func send(invalidations: PushChannelInvalidations?) async throws {
        if tls.insecure {
            printError("warning: TLS verification is OFF: the NOC's certificate and name are not checked. Use --ca to trust a private CA instead.")
        }
        let (reader, checkpoint, resumedAfter) = try open()
        let rejectedFile: RejectedTokenFile?
        let client: PushChannelClient
        do {
            rejectedFile = try rejectedPath.map(RejectedTokenFile.init(path:))
            client = try PushChannelClient(try options.configuration(tls: tls))
        } catch {
            printError("salvo \(command): \(error)")
            throw ExitCode(2)
        }
        let run = PushChannelRun(client: client, request: request, resumedAfter: resumedAfter) { item, code in
            rejectedFile?.append(token: item.token, code: code.number, reason: code.text)
            if code.number == GNPCode.invalidToken.number { invalidations?.note(item.token) }
        }
        let background = startBackgroundWork(run, checkpoint: checkpoint, invalidations: invalidations)
        let ending = await run.send(from: reader)
        for task in background { task.cancel() }
        for task in background { await task.value }
        try? await client.shutdown()
        rejectedFile?.close()
        await invalidations?.flush()
        if isatty(STDERR_FILENO) == 1 { printError("") }

        let report = run.ledger.report(connections: options.connections)
        let done = run.ledger.completedThroughLine
        if let checkpoint { Self.save(checkpoint, line: done) }
        print(CampaignRun.summary(report, badLineCount: reader.skippedLineCount, resumedAfter: resumedAfter, http2: true))
        switch ending {
        case .readToEnd: break
        case .inputError(let message):
            printError("salvo \(command): \(message); stopped there (everything before it was sent and is accounted for above)")
        case .unreachable(let reason):
            printError("salvo \(command): the Push Channel service is out of reach: \(reason)")
        }
        if let checkpoint, done < reader.linesRead || ending != .readToEnd {
            printError("checkpoint \(checkpoint.checkpoint.path): " + (done > 0 ? "lines 1–\(done) are done" : "no line is done")
                       + "; the same command with --resume continues with line \(done + 1)")
        }
        if let reportPath {
            do {
                try CampaignRun.writeReport(report, badLines: reader.skippedLines, badLineCount: reader.skippedLineCount,
                                            resumedAfter: resumedAfter, to: reportPath)
            } catch {
                printError("warning: cannot write the report to \(reportPath): \(error)")
            }
        }
        let registryFailed = invalidations.map(reportRegistry) ?? false
        if case .inputError = ending { throw ExitCode(2) }
        if report.failed > 0 || ending != .readToEnd || registryFailed { throw ExitCode(1) }
    }

    /// The reader, the checkpoint, and the line a resume starts after.
    private func open() throws -> (PushChannelCampaignReader, CampaignCheckpoint?, Int) {
        do {
            let source = try self.source()
            let reader = try PushChannelCampaignReader(source, maximumPayloadBytes: options.maximumPayloadBytes,
                                                       onBadLine: onBadLine)
            let bound = try checkpointPath.map { try CampaignCheckpoint(Checkpoint(path: $0), campaign: source.path) }
            var resumedAfter = 0
            if resume, let bound, let point = try bound.resumePoint() {
                try reader.skip(throughLine: point.line)
                printError("resuming after line \(point.line) (from \(bound.checkpoint.path))")
                resumedAfter = point.line
            }
            try bound?.save(completedThroughLine: resumedAfter)
            return (reader, bound, resumedAfter)
        } catch {
            printError("salvo \(command): \(error)")
            throw ExitCode(2)
        }
    }

    /// What the registry learnt, on stderr; returns whether a write failed.
    private func reportRegistry(_ invalidations: PushChannelInvalidations) -> Bool {
        let totals = invalidations.totals
        guard let failure = totals.failure else {
            printError("\(totals.invalidated) dead token\(totals.invalidated == 1 ? "" : "s") recorded in the registry "
                       + "(not counted: those it had invalidated already, or that registered again since)")
            return false
        }
        printError("salvo \(command): \(failure); \(totals.unrecorded) dead tokens were not recorded in the registry"
                   + (rejectedPath.map { " (they are in \($0))" } ?? ""))
        return true
    }

    /// The progress line on a terminal, and every half second the dead tokens written to the
    /// registry, then the checkpoint saved: a line it records as done has its token recorded.
    private func startBackgroundWork(_ run: PushChannelRun, checkpoint: CampaignCheckpoint?,
                                     invalidations: PushChannelInvalidations?) -> [Task<Void, Never>] {
        var tasks: [Task<Void, Never>] = []
        let connections = options.connections
        if isatty(STDERR_FILENO) == 1 {
            let total = countLines()
            tasks.append(Task {
                while !Task.isCancelled {
                    printProgress(run.ledger.report(connections: connections), total: total)
                    try? await Task.sleep(for: .milliseconds(100))
                }
            })
        }
        if checkpoint != nil || invalidations != nil {
            tasks.append(Task {
                var saved: Int?
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    guard !Task.isCancelled else { return }
                    // Read before the flush: every dead token of the lines up to it was noted.
                    let line = run.ledger.completedThroughLine
                    await invalidations?.flush()
                    if let checkpoint, line != saved {
                        Self.save(checkpoint, line: line)
                        saved = line
                    }
                }
            })
        }
        return tasks
    }

    private static func save(_ checkpoint: CampaignCheckpoint, line: Int) {
        do {
            try checkpoint.save(completedThroughLine: line)
        } catch {
            printError("warning: cannot save the checkpoint: \(error)")
        }
    }
}
