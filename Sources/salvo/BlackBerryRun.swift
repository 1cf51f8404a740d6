import ArgumentParser
import Foundation
import SalvoBlackBerry
import SalvoPostgres
import SalvoCampaignFiles
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
    var options: BlackBerryConnectionOptions
    /// The largest payload sent (longer lines are bad lines).
    var maximumPayloadBytes = GNP.defaultMaximumPayloadBytes
    var trust: ServerTrustOptions
    /// `--no-proxy`: the environment's proxy is not used.
    var noProxy = false
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
        if trust.insecure {
            printError("salvo \(command): warning: TLS verification is OFF: the NOC's certificate and name are not checked. Use --ca to trust a private CA instead.")
        }
        let (reader, checkpoint, plan) = try open()
        let resumedAfter = plan.doneThrough
        let rejectedFile: RejectedTokenFile?
        let client: PushChannelClient
        do {
            rejectedFile = try rejectedPath.map(RejectedTokenFile.init(path:))
            client = try PushChannelClient(try options.configuration(trust: trust, noProxy: noProxy))
        } catch {
            printError("salvo \(command): \(error)")
            throw ExitCode(2)
        }
        let run = PushChannelRun(client: client, request: request, resumedAfter: resumedAfter) { item, code in
            rejectedFile?.append(token: item.token, code: code.number, reason: code.text)
            if code.number == GNPCode.invalidToken.number { invalidations?.note(item.token) }
        }
        let background = startBackgroundWork(run, checkpoint: checkpoint, plan: plan, invalidations: invalidations)
        let ending = await run.send(from: reader)
        for task in background { task.cancel() }
        for task in background { await task.value }
        try? await client.shutdown()
        rejectedFile?.close()
        await invalidations?.flush()
        if isatty(STDERR_FILENO) == 1 { printError("") }

        let report = run.ledger.report(connections: options.connections)
        let saved = run.ledger.checkpointPlan(after: plan)
        if let checkpoint { Self.save(checkpoint, saved, command: command) }
        print(CampaignRun.summary(report, badLineCount: reader.skippedLineCount, resumedAfter: resumedAfter, http2: true))
        switch ending {
        case .readToEnd: break
        case .inputError(let message):
            printError("salvo \(command): \(message); stopped there (everything before it was sent and is accounted for above)")
        case .unreachable(let reason):
            printError("salvo \(command): the Push Channel service is out of reach: \(reason)")
        }
        let continues = saved.doneThrough < reader.linesRead || ending != .readToEnd
        if let checkpoint, continues || !saved.retry.isEmpty {
            printError(CampaignRun.checkpointNote(checkpoint.checkpoint.path, saved, continues: continues))
        }
        if let reportPath {
            do {
                try CampaignRun.writeReport(report, badLines: reader.skippedLines, badLineCount: reader.skippedLineCount,
                                            resumedAfter: resumedAfter, to: reportPath)
            } catch {
                printError("salvo \(command): warning: cannot write the report to \(reportPath): \(error)")
            }
        }
        let registryFailed = invalidations.map(reportRegistry) ?? false
        if case .inputError = ending { throw ExitCode(2) }
        if report.failed > 0 || ending != .readToEnd || registryFailed { throw ExitCode(1) }
    }

    /// The reader, the checkpoint, and the lines the run reads (a resume: after the
    /// checkpoint's line, and the failed ones before it). Ends the command before anything
    /// connects when there is nothing to send.
    private func open() throws -> (PushChannelCampaignReader, CampaignCheckpoint?, ResumePlan) {
        do {
            let source = try self.source()
            let reader = try PushChannelCampaignReader(source, maximumPayloadBytes: maximumPayloadBytes,
                                                       onBadLine: onBadLine)
            let bound = try checkpointPath.map { try CampaignCheckpoint(Checkpoint(path: $0), campaign: source.path) }
            var plan = ResumePlan.fresh
            if resume, let bound, let point = try bound.resumePoint() {
                plan = ResumePlan(point)
                reader.resumePlan = plan
                printError(SendCommand.resumeNote(plan, checkpoint: bound.checkpoint.path))
            }
            try refuseEmpty(source, plan: plan)
            try bound?.save(plan)
            return (reader, bound, plan)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            printError("salvo \(command): \(error)")
            throw ExitCode(2)
        }
    }

    /// As `SendCommand.refuseEmpty`, for a Push Channel campaign.
    private func refuseEmpty(_ source: PushChannelCampaignSource, plan: ResumePlan) throws {
        let probe = try PushChannelCampaignReader(source, maximumPayloadBytes: maximumPayloadBytes, onBadLine: onBadLine)
        probe.resumePlan = plan
        do {
            if try probe.next() != nil { return }
        } catch {
            return  // a bad line under --on-bad-line abort: the run reports it, with its number
        }
        if plan != .fresh {
            print("nothing left to send: the checkpoint records every line of \(source.path) as done")
            throw ExitCode.success
        }
        let (what, one) = request == .checkToken ? ("tokens", "a token") : ("notifications", "a notification")
        if probe.skippedLineCount > 0 {
            let first = probe.skippedLines.first.map { " (the first, \($0))" } ?? ""
            printError("salvo \(command): none of the \(probe.skippedLineCount) lines of \(source.path) can be sent\(first): "
                       + "nothing was sent")
        } else {
            printError("salvo \(command): \(source.path) has no \(what) (\(probe.linesRead) line\(probe.linesRead == 1 ? "" : "s"), "
                       + "none of them \(one)): nothing was sent")
        }
        throw ExitCode(2)
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
    private func startBackgroundWork(_ run: PushChannelRun, checkpoint: CampaignCheckpoint?, plan: ResumePlan,
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
            tasks.append(Task { [command] in
                var saved: ResumePlan?
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    guard !Task.isCancelled else { return }
                    // Read before the flush: every dead token of the lines up to it was noted.
                    let next = run.ledger.checkpointPlan(after: plan)
                    await invalidations?.flush()
                    if let checkpoint, next != saved {
                        Self.save(checkpoint, next, command: command)
                        saved = next
                    }
                }
            })
        }
        return tasks
    }

    private static func save(_ checkpoint: CampaignCheckpoint, _ plan: ResumePlan, command: String) {
        do {
            try checkpoint.save(plan)
        } catch {
            printError("salvo \(command): warning: cannot save the checkpoint: \(error)")
        }
    }
}
