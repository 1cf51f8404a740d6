import Foundation
import Logging
import SalvoCampaignFiles
import SalvoEngine
import SalvoIO
import SalvoWire
import ServiceLifecycle
import Synchronization
import UnixSignals

/// One campaign through one sender, as the CLI runs it: the rejected-token CSV, the
/// progress line, periodic checkpoints, and the summary and JSON report at the end.
final class CampaignRun: Sendable {
    /// The sender: one, or one per set of credentials (`--credentials`), routing by topic.
    let sender: RoutingSender
    /// The subcommand, for messages: `salvo send: ...`.
    private let command: String
    private let rejectedFile: RejectedTokenFile?
    private let checkpoint: CampaignCheckpoint?
    /// The lines this run reads: after the checkpoint it resumed from, and the lines that
    /// failed before it (`.fresh` without a resume).
    private let resumePlan: ResumePlan
    /// The lines that failed in this run, for the checkpoint.
    private let failures = FailedLines()
    private let total: Int?
    private let background: Locked<[Task<Void, Never>]> = Locked([])
    /// Reads the sender's events until the sender finishes (not cancelled: the last
    /// failures must be counted before the checkpoint is saved).
    private let eventReader: Locked<Task<Void, Never>?> = Locked(nil)
    /// The sender (and `services`) as a service group: metrics every second, and a
    /// graceful finish on SIGTERM or SIGINT.
    private let group: ServiceGroup
    private let serving: Locked<Task<Void, Never>?> = Locked(nil)
    private let signalled = Atomic<Bool>(false)

    /// Whether SIGTERM or SIGINT stopped the run (also after everything was handed over:
    /// what was in flight then did not finish on its own).
    var wasInterrupted: Bool { signalled.load(ordering: .relaxed) }

    /// How sending ended.
    enum Ending: Equatable {
        /// Every line of the input was read and handed to the sender.
        case readToEnd
        /// Sending stopped early: at this input error (a bad line under the abort policy, a
        /// payload the encoder refuses, a read error), or, when nil, because the gateway is
        /// out of reach (the report says what failed).
        case stopped(inputError: String?)
        /// SIGTERM or SIGINT: nothing more was taken; what was handed over was finished.
        case interrupted
    }

    /// - Parameters:
    ///   - routes: with `--credentials`, a sender per set of credentials and the topics it
    ///     serves (`configuration` is then unused); nil: one sender with `configuration`.
    ///   - defaultTopic: with `routes`, the topic of lines that name none (`--topic`).
    ///   - services: run beside the sender, shut down after it (the demo's mock).
    init(command: String, configuration: SenderConfiguration, routes: [RoutingSender.Route]? = nil, defaultTopic: String? = nil,
         rejectedPath: String?, checkpoint: CampaignCheckpoint?,
         resumePlan: ResumePlan = .fresh, total: Int?, services: [any Service] = []) throws {
        self.command = command
        let rejectedFile = try rejectedPath.map(RejectedTokenFile.init(path:))
        self.rejectedFile = rejectedFile
        self.checkpoint = checkpoint
        self.resumePlan = resumePlan
        self.total = total
        let logger = Logger(label: "salvo.sender")
        let onRejected: @Sendable (PushTarget, Rejection, UInt64) -> Void = { target, rejection, _ in
            rejectedFile?.append(target: target, rejection: rejection)
        }
        if let routes {
            sender = try RoutingSender(routes: routes, defaultTopic: defaultTopic, logger: logger, onRejected: onRejected)
        } else {
            sender = try RoutingSender(configuration, logger: logger, onRejected: onRejected)
        }
        // Shut down in reverse order: the sender first, then what it talks to.
        group = ServiceGroup(configuration: ServiceGroupConfiguration(
            services: services.map { .init(service: $0) }
                + [.init(service: sender, successTerminationBehavior: .gracefullyShutdownGroup)],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger))
        startBackgroundWork()
    }

    /// Sends the campaign from `reader` on. Everything read before an early stop is sent
    /// and final when this returns.
    func send<Source: NotificationSource>(_ campaign: Source, from reader: Source.Reader) async -> Ending {
        serving.withLock { [group] in $0 = Task { try? await group.run() } }
        do {
            try await sender.send(contentsOf: campaign, startingWith: reader)
            return .readToEnd
        } catch SendError.finished {
            // Only a signal finishes the sender while the campaign is being sent.
            return .interrupted
        } catch let error as CampaignError {
            return .stopped(inputError: error.description)
        } catch let error as SendError {
            switch error {
            case .invalidPayload, .unservedTopic: return .stopped(inputError: error.description)
            default: break
            }
            printError("salvo \(command): \(error)")
            return .stopped(inputError: nil)
        } catch {
            return .stopped(inputError: "\(error)")
        }
    }

    private func startBackgroundWork() {
        eventReader.withLock { [sender, failures, command] in
            $0 = Task { await reportSenderEvents(sender, command: command, failures: failures) }
        }
        var tasks: [Task<Void, Never>] = []
        // The service group drains on the first SIGTERM or SIGINT (at most --drain-timeout);
        // a second one ends the drain at once.
        tasks.append(Task { [weak self, sender, command] in
            var signals = 0
            for await signal in await UnixSignalsSequence(trapping: .sigterm, .sigint) {
                signals += 1
                if signals == 1 {
                    self?.signalled.store(true, ordering: .relaxed)
                    let drain = Int(sender.configuration.drainTimeout.secondsDouble.rounded())
                    printError("\nsalvo \(command): \(signal): taking nothing more; finishing what is in flight for at most "
                               + "\(drain) s (--drain-timeout); a second signal stops at once")
                    continue
                }
                printError("\nsalvo \(command): a second signal: stopping now; what is not final fails and is accounted for")
                sender.abandonUnsettled()
                return
            }
        })
        if isatty(STDERR_FILENO) == 1 {
            tasks.append(Task { [sender, total] in
                // At most 10 refreshes a second, on one line.
                while !Task.isCancelled {
                    printProgress(sender.progress, total: total)
                    try? await Task.sleep(for: .milliseconds(100))
                }
            })
        }
        if let checkpoint {
            tasks.append(Task { [weak self] in
                var saved: ResumePlan?
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    guard let self, !Task.isCancelled else { return }
                    // While the run goes on, a failure holds the checkpoint back: its event
                    // may not have been read yet, so it cannot be listed.
                    guard let clean = self.sender.completedSequence() else { continue }
                    let plan = self.resumePlan.advanced(finalThrough: Int(clean), failedLines: nil, cleanThrough: Int(clean))
                    if plan != saved {
                        self.saveCheckpoint(checkpoint, plan)
                        saved = plan
                    }
                }
            })
        }
        background.withLock { $0 = tasks }
    }

    private func saveCheckpoint(_ checkpoint: CampaignCheckpoint, _ plan: ResumePlan) {
        do {
            try checkpoint.save(plan)
        } catch {
            printError("salvo \(command): warning: cannot save the checkpoint: \(error)")
        }
    }

    /// Drains the sender, saves the last checkpoint, writes the report and summary, and
    /// says what stopped the run early; returns the final report.
    ///
    /// - Parameters:
    ///   - lastLine: the last line the reader read (or skipped).
    ///   - resumedAfter: the line the run resumed after (0: from the start).
    func finish(badLines: [BadLine], badLineCount: Int, ending: Ending, lastLine: Int, resumedAfter: Int,
                reportPath: String?) async -> SenderReport {
        let report = await sender.finish()
        let ending = wasInterrupted && ending == .readToEnd ? .interrupted : ending
        // The sender's service ends with it (at once: it watches for the finish).
        if let serving = serving.withLock({ $0 }) { await serving.value }
        let tasks = background.withLock { tasks in
            tasks.forEach { $0.cancel() }
            return tasks
        }
        // The checkpoint task may be saving right now: let it end before the last save.
        for task in tasks { await task.value }
        // The sender's events end with it: every failure has been read once this returns.
        if let events = eventReader.withLock({ $0 }) { await events.value }
        if isatty(STDERR_FILENO) == 1 { printError("") }
        let plan = finalPlan(report, ending: ending, lastLine: lastLine)
        if let checkpoint { saveCheckpoint(checkpoint, plan) }
        rejectedFile?.close()
        print(Self.summary(report, badLineCount: badLineCount, resumedAfter: resumedAfter,
                           http2: sender.configuration.http2 != nil))
        if case .stopped(let inputError?) = ending {
            printError("salvo \(command): \(inputError); stopped there (everything before it was sent and is accounted for above)")
        }
        if ending == .interrupted {
            printError("salvo \(command): stopped by a signal; nothing more was taken, and everything handed to the sender "
                       + "is accounted for above")
        }
        if let checkpoint, plan.doneThrough < lastLine || ending != .readToEnd || !plan.retry.isEmpty {
            printError(Self.checkpointNote(checkpoint.checkpoint.path, plan, continues: plan.doneThrough < lastLine || ending != .readToEnd))
        }
        if let reportPath {
            do {
                try Self.writeReport(report, badLines: badLines, badLineCount: badLineCount, resumedAfter: resumedAfter,
                                     to: reportPath)
            } catch {
                printError("salvo \(command): warning: cannot write the report to \(reportPath): \(error)")
            }
        }
        return report
    }

    /// The checkpoint after the run. Everything read is final now. When the input was read
    /// to its end every line is; otherwise up to what the sender completed: a run stopped
    /// early leaves the line that stopped it (and what it read and could not send) for the
    /// resume. The lines that failed are listed for the resume to send again; when some
    /// could not be named, the first failure holds the checkpoint back instead.
    private func finalPlan(_ report: SenderReport, ending: Ending, lastLine: Int) -> ResumePlan {
        let finalThrough = ending == .readToEnd ? lastLine : sender.completedSequence(holdingBackFailures: false).map { Int($0) } ?? 0
        let cleanThrough = ending == .readToEnd && report.failed == 0 ? lastLine : sender.completedSequence().map { Int($0) } ?? 0
        return resumePlan.advanced(finalThrough: finalThrough, failedLines: failures.exactly(report.failed),
                                   cleanThrough: cleanThrough)
    }

    /// What a checkpoint left for a resume, and what `--resume` will do with it.
    static func checkpointNote(_ path: String, _ plan: ResumePlan, continues: Bool) -> String {
        let failed = plan.retryLineCount
        var note = "checkpoint \(path): "
        if failed > 0 {
            note += "lines 1–\(plan.doneThrough) are final, \(failed) of them failed (line\(failed == 1 ? "" : "s") "
                + "\(ResumePlan.describe(plan.retry)))"
        } else {
            note += plan.doneThrough == 0 ? "no line is done" : "lines 1–\(plan.doneThrough) are done"
        }
        note += "; the same command with --resume "
        switch (failed > 0, continues) {
        case (true, true): note += "sends the failed line\(failed == 1 ? "" : "s") again and continues with line \(plan.doneThrough + 1)"
        case (true, false): note += "sends the failed line\(failed == 1 ? "" : "s") again, and nothing else"
        case (false, _): note += "continues with line \(plan.doneThrough + 1)"
        }
        return note
    }

    static func summary(_ report: SenderReport, badLineCount: Int = 0, resumedAfter: Int = 0, http2: Bool = false) -> String {
        func number(_ n: Int) -> String { n.formatted(.number.grouping(.automatic)) }
        func milliseconds(_ duration: Duration) -> String { number(Int((duration.secondsDouble * 1000).rounded())) + " ms" }
        func breakdown(_ counts: [String: Int]) -> String {
            counts.isEmpty ? "" : "  (" + counts.sorted { $0.key < $1.key }.map { "\($0.key): \(number($0.value))" }
                .joined(separator: ", ") + ")"
        }
        let notifications = report.submitted == 1 ? "notification" : "notifications"
        var lines = [
            "handed \(number(report.submitted)) \(notifications) to the gateway in \(String(format: "%.2f", report.sendingSeconds)) s "
                + "(\(number(Int(report.sendRatePerSecond.rounded()))) /s); all final "
                + "\(String(format: "%.2f", max(0, report.seconds - report.sendingSeconds))) s later "
                + (http2 ? "(the last answers)" : "(the error wait, then the gateway's answer to close_notify)"),
            "  accepted  \(number(report.accepted))",
            "  rejected  \(number(report.rejected))" + breakdown(report.rejectedByReason),
            "  failed    \(number(report.failed))" + breakdown(report.failedByReason),
            "  resent \(number(report.resent)), reconnects \(number(report.reconnects))"
                + (report.reconnects > 0 ? " (\(number(report.resumedReconnects)) resumed TLS)" : "")
                + ", possible duplicates \(number(report.possibleDuplicates))",
            "  connections \(number(report.connections))" + (report.connectionsReason.isEmpty ? "" : ": \(report.connectionsReason)"),
        ]
        if let latency = report.errorLatency {
            lines.append("  error responses: \(number(latency.count)), arriving after p50 \(String(format: "%.1f", latency.p50Milliseconds)) ms, "
                         + "p99 \(String(format: "%.1f", latency.p99Milliseconds)) ms, max \(String(format: "%.1f", latency.maximumMilliseconds)) ms")
        }
        if report.lateErrors > 0, let last = report.errorWaitRaises.last {
            lines.append("  \(number(report.lateErrors)) error response(s) arrived after the error wait; nothing was lost (their "
                         + "records were still kept), and the wait was raised to \(milliseconds(last.to)) for the rest of the run")
        }
        if report.windowOverruns > 0 {
            let unknown = report.failedByReason[FailureReason.deliveryUnknown.rawValue] ?? 0
            lines.append("  \(number(report.windowOverruns)) error response(s) named a notification older than every record kept: "
                         + "up to \(number(unknown)) notifications released as accepted may have been discarded by the gateway "
                         + "and are counted as failed (delivery_unknown). The gateway answered later than --error-wait-ms and "
                         + "--retention-ms allow: raise them (error latencies above) and resend those notifications.")
        }
        for (topic, counts) in report.byTopic.sorted(by: { $0.key < $1.key }) {
            lines.append("  \(topic): submitted \(number(counts.submitted)), accepted \(number(counts.accepted)), rejected "
                         + "\(number(counts.rejected))\(breakdown(counts.rejectedByReason)), failed \(number(counts.failed))"
                         + breakdown(counts.failedByReason))
        }
        if badLineCount > 0 { lines.append("  bad input lines skipped: \(number(badLineCount)) (listed in the report)") }
        if resumedAfter > 0 {
            lines.append("  resumed after line \(number(resumedAfter)): notifications written within the record retention "
                         + "before the interruption may have been sent twice")
        }
        if let cause = report.failureCause {
            lines.append("  why they failed: \(cause)")
            if let hint = gatewayHint(cause) { lines.append("  what to do: \(hint)") }
        }
        lines.append(report.isComplete ? "  accounting: complete (submitted = accepted + rejected + failed)"
                                       : "  accounting: INCOMPLETE — \(report.submitted - report.accepted - report.rejected - report.failed) unsettled")
        return lines.joined(separator: "\n")
    }

    static func writeReport(_ report: SenderReport, badLines: [BadLine], badLineCount: Int, resumedAfter: Int,
                            to path: String) throws {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.prettyPrinted, .sortedKeys]
        let file = RunReport(sender: report, badLines: badLines, badLineCount: badLineCount,
                             resumedAfterLine: resumedAfter > 0 ? resumedAfter : nil)
        try encoder.encode(file).write(to: URL(fileURLWithPath: path))
    }
}

/// The `--report` file: the sender's report with the run's bad lines and resume point
/// beside its keys, in one object.
struct RunReport: Encodable {
    var sender: SenderReport
    var badLines: [BadLine]
    var badLineCount: Int
    var resumedAfterLine: Int?

    private enum CodingKeys: String, CodingKey {
        case badLines = "bad_lines", badLineCount = "bad_line_count", resumedAfterLine = "resumed_after_line"
    }

    private struct Line: Encodable {
        var line: Int
        var reason: String
    }

    func encode(to encoder: any Encoder) throws {
        try sender.encode(to: encoder)
        var container = encoder.container(keyedBy: CodingKeys.self)
        try container.encode(badLines.map { Line(line: $0.line, reason: $0.reason) }, forKey: .badLines)
        try container.encode(badLineCount, forKey: .badLineCount)
        try container.encodeIfPresent(resumedAfterLine, forKey: .resumedAfterLine)
    }
}

/// What to do when the gateway cannot be used for `reason`, when the reason says: the flag
/// that would help. Nil for reasons a retry may fix, or that say enough themselves.
func gatewayHint(_ reason: String) -> String? {
    if reason.contains("it speaks HTTP/2") {
        return "the gateway speaks HTTP/2: add --protocol h2 (with --auth-key, --key-id, --team-id and --topic, or --cert)"
    }
    if reason.contains("does not speak HTTP/2") {
        return "the gateway speaks the binary protocol, not HTTP/2: leave out --protocol h2 and its flags (HOST:PORT speaks "
            + "the binary protocol by default)"
    }
    if reason.contains("certificate verify failed") || reason.contains("CERTIFICATE_VERIFY_FAILED") {
        return "the server's certificate does not chain to a CA this machine trusts: give --ca FILE, the CA that issued it "
            + "(salvo mock names its throwaway ca.pem on standard error), or --insecure for a test"
    }
    return nil
}

/// The lines of a run that failed, as the sender's events name them, for the checkpoint to
/// list. Kept only while every failure is named and there are not too many: otherwise the
/// checkpoint falls back to stopping before the first failure.
final class FailedLines: Sendable {
    private let state = Locked<(lines: Set<Int>, complete: Bool)>(([], true))
    /// More failed lines than this are not kept: a checkpoint lists at most
    /// `ResumePoint.maximumRetryRanges` runs of them anyway.
    static let limit = 100_000

    func failed(line: Int) {
        state.withLock { state in
            guard state.complete else { return }
            state.lines.insert(line)
            if state.lines.count > Self.limit { state = ([], false) }
        }
    }

    /// Failures that cannot be told by line.
    func unnamed() { state.withLock { $0 = ([], false) } }

    /// The failed lines, when they are exactly the `count` failures the report counts (none
    /// missed: the event stream drops its oldest events when it is not read fast enough).
    func exactly(_ count: Int) -> [Int]? {
        state.withLock { state in state.complete && state.lines.count == count ? state.lines.sorted() : nil }
    }
}

/// Tells the user, on stderr, what the connections do: the first failed attempt (the
/// sender retries with backoff), giving up, whether kTLS engaged when it was asked for,
/// a raised error wait, and notifications that failed without a name. Notes the lines
/// that failed in `failures`.
private func reportSenderEvents(_ sender: RoutingSender, command: String, failures: FailedLines) async {
    var toldFailure = false
    var toldUnreachable = false
    var toldCredentials = false
    var toldKernelTLS = !sender.configuration.tls.kernelTLS
    for await event in sender.events {
        switch event {
        case .connectionFailed(_, _, let reason) where !toldFailure:
            toldFailure = true
            // One no retry can fix is told once, with what to do, when the sender gives up.
            if gatewayHint(reason) == nil { printError("\nconnection failed: \(reason); retrying with backoff") }
        case .unreachable(let reason) where !toldUnreachable:
            toldUnreachable = true
            printError("\nsalvo \(command): gave up on the gateway: \(reason)" + (gatewayHint(reason).map { "\n  \($0)" } ?? ""))
        case .credentialsRefused(let reason) where !toldCredentials:
            toldCredentials = true
            printError("\n\(reason)")
        case .connected(_, _, _, let kernelTLS) where !toldKernelTLS:
            toldKernelTLS = true
            printError(kernelTLS ? "kTLS: engaged, the kernel encrypts records"
                                 : "kTLS: not engaged (needs the kernel's tls module and a kTLS-capable cipher); OpenSSL encrypts")
        case .errorWaitRaised(let raise):
            let latency = raise.latency.map { "\(Int(($0.secondsDouble * 1000).rounded())) ms after its notification" }
                ?? "after its notification's record was released"
            printError("\nan error response arrived \(latency), later than the error wait of "
                       + "\(Int((raise.from.secondsDouble * 1000).rounded())) ms; raising the wait to "
                       + "\(Int((raise.to.secondsDouble * 1000).rounded())) ms for the rest of the run")
        case .failed(_, _, let sequence):
            failures.failed(line: Int(clamping: sequence))
        case .failedUnnamed(let count, let reason, _, let detail):
            failures.unnamed()
            printError("\n\(count) notification\(count == 1 ? "" : "s") failed (\(reason.rawValue)): \(detail)")
        default:
            break
        }
    }
}

/// The one-line progress display on a terminal.
func printProgress(_ report: SenderReport, total: Int?) {
    let settled = report.accepted + report.rejected + report.failed
    var line = "\r\u{1B}[2Ksent \(report.submitted)  in flight \(report.submitted - settled)  accepted \(report.accepted)"
        + "  rejected \(report.rejected)  failed \(report.failed)  \(Int(report.sendRatePerSecond)) /s"
    if let total, total > 0, report.sendRatePerSecond > 0 {
        let remaining = Double(max(0, total - report.submitted)) / report.sendRatePerSecond
        line += String(format: "  %.0f%%  ETA %.0fs", 100 * Double(report.submitted) / Double(total), remaining)
    }
    FileHandle.standardError.write(Data(line.utf8))
}

/// The rejected-token CSV, `token,status,reason,timestamp`: the device token in hex, or
/// `channel:` and the id for a broadcast; the binary status byte and its name
/// (`8,invalid_token,`), or the HTTP status with Apple's reason and, for 410, since when the
/// token is invalid in milliseconds (`410,Unregistered,1764000000000`). Appended from shard
/// threads.
final class RejectedTokenFile: Sendable {
    private let handle: Locked<FileHandle?>

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data("token,status,reason,timestamp\n".utf8)),
              let handle = FileHandle(forWritingAtPath: path) else {
            throw FileInputError(description: "cannot create the rejected-token file \(path)")
        }
        handle.seekToEndOfFile()
        self.handle = Locked(handle)
    }

    func append(target: PushTarget, rejection: Rejection) {
        let line = "\(target),\(rejection.statusCode),\(rejection.reasonName),\(rejection.timestamp.map(String.init) ?? "")\n"
        handle.withLock { $0?.write(Data(line.utf8)) }
    }

    /// A Push Channel rejection: the token as text (quoted when it holds a comma or quote),
    /// the GNP code and its text (`402,Invalid Token,`).
    func append(token: String, code: Int, reason: String) {
        let quoted = token.contains(where: { $0 == "," || $0 == "\"" })
            ? "\"" + token.replacingOccurrences(of: "\"", with: "\"\"") + "\"" : token
        handle.withLock { $0?.write(Data("\(quoted),\(code),\(reason),\n".utf8)) }
    }

    func close() {
        handle.withLock { handle in
            try? handle?.close()
            handle = nil
        }
    }
}
