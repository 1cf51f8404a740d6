import Foundation
import SalvoEngine
import SalvoIO
import SalvoWire
import Synchronization

/// One campaign through one sender, as the CLI runs it: the rejected-token CSV, the
/// progress line, periodic checkpoints, and the summary and JSON report at the end.
final class CampaignRun: Sendable {
    let sender: Sender
    private let rejectedFile: RejectedTokenFile?
    private let checkpoint: Checkpoint?
    private let lastSubmittedLine = Atomic<Int>(0)
    private let total: Int?
    private let background: Mutex<[Task<Void, Never>]> = Mutex([])

    init(configuration: SenderConfiguration, rejectedPath: String?, checkpoint: Checkpoint?, total: Int?) throws {
        let rejectedFile = try rejectedPath.map(RejectedTokenFile.init(path:))
        self.rejectedFile = rejectedFile
        self.checkpoint = checkpoint
        self.total = total
        sender = try Sender(configuration) { token, status, _ in rejectedFile?.append(token: token, status: status) }
        startBackgroundWork()
    }

    /// Hands one notification to the sender if a ring has room; false is backpressure.
    /// Producers call this first and `submit` only when it fails, so the common case
    /// crosses no suspension point.
    @inline(__always)
    func trySubmit(token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32?, priority: UInt8?, line: Int) throws -> Bool {
        guard try sender.trySend(token: token, payload: payload, expiry: expiry, priority: priority, sequence: UInt64(line)) else {
            return false
        }
        lastSubmittedLine.store(line, ordering: .releasing)
        return true
    }

    /// Sends one notification, waiting while the rings are full.
    func submit(token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32?, priority: UInt8?, line: Int) async throws {
        try await sender.send(token: token, payload: payload, expiry: expiry, priority: priority, sequence: UInt64(line))
        lastSubmittedLine.store(line, ordering: .releasing)
    }

    /// The highest line such that it and every line before it reached a final state.
    private func completedThroughLine() -> Int {
        // Read the high-water mark first: every line up to it is then either settled or
        // still in a ring when the rings are scanned. (Scanning first could miss lines
        // published into an already-scanned ring during the scan.)
        let submitted = lastSubmittedLine.load(ordering: .acquiring)
        guard let oldest = sender.oldestUnsettledSequence() else { return submitted }
        return min(submitted, Int(oldest) - 1)
    }

    private func startBackgroundWork() {
        var tasks: [Task<Void, Never>] = [Task { [sender] in await reportConnectionEvents(sender) }]
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
                while !Task.isCancelled {
                    try? await Task.sleep(for: .milliseconds(500))
                    guard let self else { return }
                    self.saveCheckpoint(checkpoint)
                }
            })
        }
        background.withLock { $0 = tasks }
    }

    private func saveCheckpoint(_ checkpoint: Checkpoint) {
        do {
            try checkpoint.save(completedThroughLine: max(0, completedThroughLine()))
        } catch {
            printError("warning: cannot save the checkpoint: \(error)")
        }
    }

    /// Drains the sender, writes the report and summary; returns the final report.
    func finish(badLines: [BadLine], badLineCount: Int, lastLine: Int, resumedAfter: Int, reportPath: String?) async -> SenderReport {
        let report = await sender.finish()
        background.withLock { tasks in tasks.forEach { $0.cancel() } }
        if isatty(STDERR_FILENO) == 1 { printError("") }
        if let checkpoint {
            // Everything read has now reached a final state (or failed, which is final too).
            do { try checkpoint.save(completedThroughLine: lastLine) } catch { printError("warning: cannot save the checkpoint: \(error)") }
        }
        rejectedFile?.close()
        print(Self.summary(report, badLineCount: badLineCount, resumedAfter: resumedAfter))
        if let reportPath {
            do {
                try Self.writeReport(report, badLines: badLines, badLineCount: badLineCount, resumedAfter: resumedAfter,
                                     to: reportPath)
            } catch {
                printError("warning: cannot write the report to \(reportPath): \(error)")
            }
        }
        return report
    }

    static func summary(_ report: SenderReport, badLineCount: Int = 0, resumedAfter: Int = 0) -> String {
        func number(_ n: Int) -> String { n.formatted(.number.grouping(.automatic)) }
        var lines = [
            "sent \(number(report.submitted)) notifications in \(String(format: "%.2f", report.seconds)) s "
                + "(\(number(Int(report.ratePerSecond.rounded()))) /s)",
            "  accepted  \(number(report.accepted))",
            "  rejected  \(number(report.rejected))"
                + (report.rejectedByStatus.isEmpty ? "" : "  (" + report.rejectedByStatus.sorted { $0.key < $1.key }
                    .map { "\($0.key): \(number($0.value))" }.joined(separator: ", ") + ")"),
            "  failed    \(number(report.failed))"
                + (report.failedByReason.isEmpty ? "" : "  (" + report.failedByReason.sorted { $0.key < $1.key }
                    .map { "\($0.key): \(number($0.value))" }.joined(separator: ", ") + ")"),
            "  resent \(number(report.resent)), reconnects \(number(report.reconnects)), "
                + "possible duplicates \(number(report.possibleDuplicates)), window overruns \(number(report.windowOverruns))",
        ]
        if badLineCount > 0 { lines.append("  bad input lines skipped: \(number(badLineCount)) (listed in the report)") }
        if resumedAfter > 0 {
            lines.append("  resumed after line \(number(resumedAfter)): notifications written in the last error window "
                         + "before the interruption may have been sent twice")
        }
        lines.append(report.isComplete ? "  accounting: complete (submitted = accepted + rejected + failed)"
                                       : "  accounting: INCOMPLETE — \(report.submitted - report.accepted - report.rejected - report.failed) unsettled")
        return lines.joined(separator: "\n")
    }

    static func writeReport(_ report: SenderReport, badLines: [BadLine], badLineCount: Int, resumedAfter: Int,
                            to path: String) throws {
        let encoded = try JSONEncoder().encode(report)
        var object = try JSONSerialization.jsonObject(with: encoded) as! [String: Any]
        object["bad_line_count"] = badLineCount
        if resumedAfter > 0 { object["resumed_after_line"] = resumedAfter }
        object["bad_lines"] = badLines.map { ["line": $0.line, "reason": $0.reason] as [String: Any] }
        let data = try JSONSerialization.data(withJSONObject: object, options: [.prettyPrinted, .sortedKeys])
        try data.write(to: URL(fileURLWithPath: path))
    }
}

/// Tells the user, on stderr, what the connections do: the first failed attempt (the
/// sender retries with backoff), giving up, and whether kTLS engaged when it was asked for.
private func reportConnectionEvents(_ sender: Sender) async {
    var toldFailure = false
    var toldKernelTLS = !sender.configuration.tls.kernelTLS
    for await event in sender.events {
        switch event {
        case .connectionFailed(_, _, let reason) where !toldFailure:
            toldFailure = true
            printError("\nconnection failed: \(reason); retrying with backoff")
        case .unreachable(let reason):
            printError("\ngateway unreachable: \(reason)")
        case .connected(_, _, _, let kernelTLS) where !toldKernelTLS:
            toldKernelTLS = true
            printError(kernelTLS ? "kTLS: engaged, the kernel encrypts records"
                                 : "kTLS: not engaged (needs the kernel's tls module and a kTLS-capable cipher); OpenSSL encrypts")
        default:
            break
        }
    }
}

/// The one-line progress display on a terminal.
private func printProgress(_ report: SenderReport, total: Int?) {
    let settled = report.accepted + report.rejected + report.failed
    var line = "\r\u{1B}[2Ksent \(report.submitted)  accepted \(report.accepted)  rejected \(report.rejected)  failed \(report.failed)"
        + "  \(Int(report.ratePerSecond)) /s"
    if let total, total > 0, report.ratePerSecond > 0 {
        let remaining = Double(max(0, total - settled)) / report.ratePerSecond
        line += String(format: "  %.0f%%  ETA %.0fs", 100 * Double(settled) / Double(total), remaining)
    }
    FileHandle.standardError.write(Data(line.utf8))
}

/// The rejected-token CSV: token, status code, status name. Appended from shard threads.
final class RejectedTokenFile: Sendable {
    private let handle: Mutex<FileHandle?>

    init(path: String) throws {
        guard FileManager.default.createFile(atPath: path, contents: Data("token,status,status_name\n".utf8)),
              let handle = FileHandle(forWritingAtPath: path) else {
            throw FileInputError(description: "cannot create the rejected-token file \(path)")
        }
        handle.seekToEndOfFile()
        self.handle = Mutex(handle)
    }

    func append(token: DeviceToken, status: Status) {
        let line = "\(token.hex),\(status.rawValue),\(status.name)\n"
        handle.withLock { $0?.write(Data(line.utf8)) }
    }

    func close() {
        handle.withLock { handle in
            try? handle?.close()
            handle = nil
        }
    }
}
