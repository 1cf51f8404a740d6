import Foundation

/// One of the benchmark's goals, judged from one run's results.
package struct BenchGoal: Sendable, Equatable {
    package enum Verdict: String, Sendable {
        case met = "yes", missed = "**no**", notMeasured = "not measured here"
        /// The runs were too short for the goal to say anything: setup weighs on every figure.
        case tooSmall = "too small to judge"

        /// How the command's last lines say it.
        package var spoken: String {
            switch self {
            case .met: "met"
            case .missed: "NOT MET"
            case .notMeasured: "not measured"
            case .tooSmall: "too small to judge"
            }
        }
    }
    package var goal: String
    package var measured: String
    package var verdict: Verdict

    /// Runs shorter than this judge nothing: connecting, TLS handshakes, threads and the
    /// sender's setup weigh on the rate, the CPU and the allocations per notification, and
    /// one error per 1,000 makes too few errors to count.
    package static let smallestJudgedRun = 100_000

    /// `goals` as a run of `notificationsPerRun` judges them: below `smallestJudgedRun`,
    /// a goal missed is too small to judge instead.
    static func judged(_ goals: [BenchGoal], notificationsPerRun: Int) -> [BenchGoal] {
        guard notificationsPerRun < smallestJudgedRun else { return goals }
        return goals.map { goal in
            guard goal.verdict == .missed else { return goal }
            var judged = goal
            judged.verdict = .tooSmall
            judged.measured += " (runs of \(BenchFormat.grouped(Double(notificationsPerRun))) notifications; judge with "
                + "--count \(BenchFormat.grouped(Double(smallestJudgedRun))) or more)"
            return judged
        }
    }
}

extension BenchResults {
    /// The error-free cells, at the ceiling's frame size when there are any.
    private var errorFreeCells: [Cell] {
        let free = cells.filter { $0.errorRate == 0 }
        let ceilingSized = free.filter { $0.frameBytes == (ceiling?.frameBytes ?? 161) }
        return ceilingSized.isEmpty ? free : ceilingSized
    }

    /// Each goal with what this run measured for it and whether that meets it.
    package func goals() -> [BenchGoal] {
        BenchGoal.judged(cells.first?.wireProtocol == .h2 ? http2Goals() : binaryGoals(),
                         notificationsPerRun: settings.notificationsPerRun)
    }

    private func binaryGoals() -> [BenchGoal] {
        var goals: [BenchGoal] = []
        let bestFree = errorFreeCells.max { $0.rate.median < $1.rate.median }

        // 1. End-to-end against the ceiling.
        if let ceiling, let bestFree {
            let share = 100 * bestFree.rate.median / ceiling.median
            goals.append(BenchGoal(
                goal: "End-to-end, no errors: ≥ 50 % of the ceiling",
                measured: "\(BenchFormat.grouped(bestFree.rate.median)) /s (\(bestFree.connections) connections, "
                    + "\(bestFree.payloadBytes) B payload, error wait \(BenchFormat.milliseconds(bestFree.errorWaitMilliseconds))) "
                    + "= \(BenchFormat.percent(share)) of \(BenchFormat.grouped(ceiling.median)) /s",
                verdict: share >= 50 ? .met : .missed))
        } else {
            goals.append(BenchGoal(goal: "End-to-end, no errors: ≥ 50 % of the ceiling",
                                   measured: "run with --ceiling", verdict: .notMeasured))
        }

        // 2. One error per 1,000 against error-free, with exact accounting.
        let withErrors = cells.filter { abs($0.errorRate - 0.001) < 1e-12 }
        if !withErrors.isEmpty {
            var pairs: [(Cell, Cell)] = []
            for cell in withErrors {
                if let free = cells.first(where: {
                    $0.errorRate == 0 && $0.connections == cell.connections && $0.payloadBytes == cell.payloadBytes
                        && $0.errorWaitMilliseconds == cell.errorWaitMilliseconds
                }) {
                    pairs.append((cell, free))
                }
            }
            let bestErrors = withErrors.max { $0.rate.median < $1.rate.median }!
            let bestFreeSamePayload = cells.filter {
                $0.errorRate == 0 && $0.payloadBytes == bestErrors.payloadBytes && $0.errorWaitMilliseconds == bestErrors.errorWaitMilliseconds
            }.max { $0.rate.median < $1.rate.median }
            let exact = withErrors.filter(\.accounting.exact).count
            if let bestFreeSamePayload {
                let ratio = 100 * bestErrors.rate.median / bestFreeSamePayload.rate.median
                let perCell = pairs.map { BenchFormat.percent(100 * $0.0.rate.median / $0.1.rate.median) }.joined(separator: ", ")
                goals.append(BenchGoal(
                    goal: "1 error per 1,000: ≥ 50 % of error-free throughput, accounting exact",
                    measured: "best \(BenchFormat.grouped(bestErrors.rate.median)) /s vs \(BenchFormat.grouped(bestFreeSamePayload.rate.median)) /s "
                        + "error-free (error wait \(BenchFormat.milliseconds(bestErrors.errorWaitMilliseconds))) = \(BenchFormat.percent(ratio)) "
                        + "(per cell: \(perCell)); accounting exact in \(exact) of \(withErrors.count) cells",
                    verdict: ratio >= 50 && exact == withErrors.count ? .met : .missed))
            }
        } else {
            goals.append(BenchGoal(goal: "1 error per 1,000: ≥ 50 % of error-free throughput, accounting exact",
                                   measured: "no cell with --error-rates 0.001", verdict: .notMeasured))
        }

        // 3. Sender CPU per notification.
        if let bestFree {
            let nanoseconds = bestFree.cpuSecondsPerMillion * 1000
            let lowest = errorFreeCells.map(\.cpuSecondsPerMillion).min()! * 1000
            goals.append(BenchGoal(
                goal: "Sender CPU (user + system) ≤ 100 ns per notification",
                measured: "\(BenchFormat.fixed(nanoseconds, 0)) ns in the fastest cell; lowest \(BenchFormat.fixed(lowest, 0)) ns (error-free cells)",
                verdict: nanoseconds <= 100 ? .met : .missed))
        }

        // 4. Allocations per notification.
        let allocations = errorFreeCells.compactMap(\.allocationsPerNotification)
        if let worst = allocations.max() {
            goals.append(BenchGoal(
                goal: "Steady state: 0 mallocs per notification",
                measured: "at most \(BenchFormat.fixed(worst, 4)) per notification over whole runs (error-free cells), "
                    + "i.e. the sender's fixed setup spread over the run; see also scripts/campaign-bench.sh",
                verdict: worst < 0.01 ? .met : .missed))
        } else {
            goals.append(BenchGoal(goal: "Steady state: 0 mallocs per notification",
                                   measured: "no allocator statistics; run scripts/campaign-bench.sh at two sizes", verdict: .notMeasured))
        }

        // 5. Not something salvo bench runs.
        goals.append(BenchGoal(goal: "A 10 M-notification campaign from a file: peak RSS ≤ 64 MiB",
                               measured: "scripts/campaign-bench.sh 10000000 (see the notes below)", verdict: .notMeasured))
        return goals
    }
}

/// Renders results/binary.md: the generated part (settings, goals, table, plot) and, kept
/// from the previous file, everything after `notesMarker` (hand-written analysis).
package enum BenchReadme {
    package static let notesMarker = "<!-- notes: everything below this line is kept when salvo bench regenerates this file -->"

    package static func render(_ results: BenchResults, plotFile: String, previous: String?) -> String {
        let text = header(results) + ceilingSection(results) + phpSection(results)
            + goalsAndResults(results, plotFile: plotFile) + howToRead
        return keepingNotes(text, from: previous)
    }

    /// The title, the command and the machine and settings of the run.
    private static func header(_ results: BenchResults) -> String {
        let settings = results.settings
        let waits = results.errorWaits.map(BenchFormat.milliseconds)
        let errorWait = waits.count <= 1
            ? "error wait \(waits.first ?? "-")"
            : "error waits \(waits.joined(separator: ", ")) (a table each below)"
        return """
            # Salvo end-to-end benchmark

            Generated by `salvo bench` on \(results.date) at commit `\(results.commit)`. Everything above the
            notes marker is regenerated by each full run; the JSON of every run is kept next to this file.

            Command (release build, from the repository root):

                \(results.command)

            Machine: \(results.machine.cores) cores (\(results.machine.cpu)), \(BenchFormat.fixed(results.machine.memoryGib, 0)) GiB, \
            Linux \(results.machine.kernel). Gateway: \(settings.gateway == "mock" ? "a fresh `salvo mock` process per cell (one loop)" : settings.gateway). \
            Pinning: \(settings.pinning). Sender: \(settings.shards) shard(s), \(settings.ringMib) MiB ring per \
            connection, \(errorWait). \
            \(BenchFormat.grouped(Double(settings.notificationsPerRun))) \
            notifications per run, \(settings.runsPerCell) measured runs per cell\(settings.warmup ? " after one warm-up run" : "").


            """
    }

    /// The ingest probe's ceiling, when measured.
    private static func ceilingSection(_ results: BenchResults) -> String {
        guard let ceiling = results.ceiling else { return "" }
        return """
            ## Ceiling

            \(BenchFormat.grouped(ceiling.median)) frames/s (median of \(ceiling.framesPerSecond.count); runs: \
            \(ceiling.framesPerSecond.map(BenchFormat.grouped).joined(separator: ", "))): pre-encoded \
            \(ceiling.frameBytes)-byte command-2 frames written in 16 KiB `SSL_write`s over one TLS connection to a \
            gateway loop that only decrypts, decodes and counts (`salvo mock --ingest-probe`, a separate process, \
            both threads unpinned). No sender can beat it on this machine.


            """
    }

    /// The classic PHP sender's rate against the same mock, when measured, and Salvo's against it.
    private static func phpSection(_ results: BenchResults) -> String {
        guard let php = results.php else { return "" }
        let best = results.cells.filter { $0.errorRate == 0 && $0.payloadBytes == php.payloadBytes }
        let oneConnection = best.first { $0.connections == 1 }
        let fastest = best.max { $0.rate.median < $1.rate.median }
        var text = """
            ## Baseline: the classic PHP sender

            `scripts/php-baseline.php`: one TLS stream, one `fwrite` per simple-format (command 0) notification, as \
            the old iOS cookbooks taught; \(php.payloadBytes)-byte payload, \(BenchFormat.grouped(Double(php.notificationsPerRun))) \
            per run, against a fresh mock on the same core as the cells' mock.
            \(BenchFormat.grouped(php.median)) notifications/s (median of \(php.notificationsPerSecond.count); \
            accounting \(php.accountingExact ? "exact" : "MISMATCH")).
            """
        if let oneConnection {
            text += " Salvo over one connection: \(BenchFormat.fixed(oneConnection.rate.median / php.median, 1))×."
        }
        if let fastest {
            text += " Salvo's fastest cell (\(fastest.connections) connections): \(BenchFormat.fixed(fastest.rate.median / php.median, 1))×."
        }
        return text + "\n\n"
    }

    /// The goals this run judged, the results tables (one per error wait) and the plot.
    private static func goalsAndResults(_ results: BenchResults, plotFile: String) -> String {
        var text = "## Goals\n\n"
        var goals = BenchTable([("goal", .left), ("measured in this run", .left), ("met", .left)])
        for goal in results.goals() { goals.append([goal.goal, goal.measured, goal.verdict.rawValue]) }
        text += goals.markdown() + "\n\n"
        text += "## Results\n\n"
        if results.errorWaits.count > 1 {
            for wait in results.errorWaits {
                text += "### Error wait \(BenchFormat.milliseconds(wait))\n\n"
                    + results.table(of: results.cells.filter { $0.errorWaitMilliseconds == wait }).markdown() + "\n\n"
            }
        } else {
            text += results.table().markdown() + "\n\n"
        }
        text += "![Throughput vs connections](\(plotFile))\n\n"
        return text
    }

    /// How to read the table's columns.
    private static let howToRead = """
        How to read it:

        - **median /s**: notifications per second, median of the measured runs; **min–max** is their spread.
          A run's clock starts at the first send and stops when every notification is settled
          (accepted, rejected or failed), less the cell's error wait: the tail in which the sender
          only waits to be sure no error response names the last frames (not subtracted from a run
          that ended without it, because an error response settled its last notification).
        - **error wait**: the sender's error wait in the cell, how long a written notification waits for
          an error response naming it before it counts as accepted (1,000 ms is the sender's default,
          what a user runs; `--error-waits` sets the list).
        - **CPU s/M**, **ns/notif**: user + system CPU of the bench process (`getrusage(RUSAGE_SELF)`
          deltas; the sender is all it runs during a run — the mock is another process) per million
          notifications and per notification, median over runs, TLS handshakes included.
        - **allocs/notif**: jemalloc allocation requests of the bench process during a run divided by the
          notifications sent (setup of the sender included, so a constant per run shows as a small fraction).
        - **peak RSS**: the bench process's resident-set high-water mark (`VmHWM`, reset before each cell
          through `/proc/self/clear_refs`), i.e. the sender's rings and buffers plus the bench itself.
        - **resent**: frames written again after an error response (median over runs); every frame the
          gateway discarded after a rejected one is resent.
        - **accounting**: the mock's accepted and rejected counts against the sender's, summed over all runs
          of the cell (warm-up included). A mismatch makes `salvo bench` exit 1.


        """

    /// `generated`, the notes marker, and the hand-written notes that followed the marker
    /// in `previous` (the file as it was), so that regenerating a summary keeps them.
    static func keepingNotes(_ generated: String, from previous: String?) -> String {
        var text = generated + notesMarker + "\n"
        if let previous, let range = previous.range(of: notesMarker) {
            let notes = previous[range.upperBound...].drop { $0 == "\n" }
            text += "\n" + notes
            if !text.hasSuffix("\n") { text += "\n" }
        }
        return text
    }
}
