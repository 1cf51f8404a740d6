import Foundation

extension BenchResults {
    /// The HTTP/2 goals that one `salvo bench --protocol h2` run can judge.
    func http2Goals() -> [BenchGoal] {
        var goals: [BenchGoal] = []
        let free = cells.filter { $0.errorRate == 0 }
        /// The best error-free cell answered after `delay` ms, at the first payload size.
        func best(_ cells: [Cell], delay: Int) -> Cell? {
            cells.filter { $0.condition == delay && $0.payloadBytes == self.cells.first?.payloadBytes }
                .max { $0.rate.median < $1.rate.median }
        }

        // 1. An error costs a stream, not a connection.
        let withErrors = cells.filter { abs($0.errorRate - 0.001) < 1e-12 && $0.condition == 0 }
        let pairs = withErrors.compactMap { cell in
            free.first { $0.connections == cell.connections && $0.payloadBytes == cell.payloadBytes && $0.condition == 0 }
                .map { (cell, $0) }
        }
        let goal1 = "1 error per 1,000 (400 BadDeviceToken): ≥ 95 % of the error-free rate, accounting exact"
        if pairs.isEmpty {
            goals.append(BenchGoal(goal: goal1, measured: "no pair of cells with --error-rates 0,0.001 answered at once", verdict: .notMeasured))
        } else {
            let ratios = pairs.map { 100 * $0.0.rate.median / $0.1.rate.median }
            let exact = withErrors.allSatisfy(\.accounting.exact)
            goals.append(BenchGoal(
                goal: goal1,
                measured: "per cell: " + zip(pairs, ratios).map { "\(BenchFormat.percent($1)) (\($0.0.connectionsLabel) conn)" }
                    .joined(separator: ", ") + "; accounting " + (exact ? "exact" : "NOT exact"),
                verdict: ratios.min()! >= 95 && exact ? .met : .missed))
        }

        // 2. Late answers: the rate follows connections × streams ÷ answer time.
        let atOnce = best(free, delay: 0)
        for (delay, share) in [(100, 80.0), (300, 60.0)] {
            let goal = "Answers after \(delay) ms: ≥ \(Int(share)) % of the rate with answers at once"
            guard let atOnce, let late = best(free, delay: delay) else {
                goals.append(BenchGoal(goal: goal, measured: "needs --response-delays 0,\(delay)", verdict: .notMeasured))
                continue
            }
            let ratio = 100 * late.rate.median / atOnce.rate.median
            goals.append(BenchGoal(
                goal: goal,
                measured: "\(BenchFormat.grouped(late.rate.median)) /s vs \(BenchFormat.grouped(atOnce.rate.median)) /s = "
                    + "\(BenchFormat.percent(ratio)) (connections: \(late.connectionsLabel))",
                verdict: ratio >= share ? .met : .missed))
        }

        // 3. CPU per notification, and 4. allocations.
        if let atOnce {
            let nanoseconds = atOnce.cpuSecondsPerMillion * 1000
            goals.append(BenchGoal(goal: "Sender CPU ≤ 1 µs per notification",
                                   measured: "\(BenchFormat.fixed(nanoseconds, 0)) ns in the fastest cell answered at once",
                                   verdict: nanoseconds <= 1000 ? .met : .missed))
        }
        if let worst = free.compactMap(\.allocationsPerNotification).max() {
            goals.append(BenchGoal(
                goal: "0 allocations per notification",
                measured: "at most \(BenchFormat.fixed(worst, 3)) per notification over whole runs (the bench process: "
                    + "our code and the libraries it calls, setup spread over the run)",
                verdict: worst < 0.01 ? .met : .missed))
        }
        return goals
    }
}

extension BenchResults {
    /// Throughput vs the mock's answer delay at the first payload size, one line per error
    /// rate (a colour each) and connections setting (a dash pattern each): how far the
    /// rate holds up when Apple answers slowly.
    func http2Plot() -> SVGLinePlot {
        let payload = cells.first?.payloadBytes ?? 0
        let atPayload = cells.filter { $0.payloadBytes == payload }
        let rates = Array(Set(atPayload.map(\.errorRate))).sorted()
        let settings = Array(Set(atPayload.map(\.connections))).sorted()
        var plot = SVGLinePlot(
            title: "Salvo HTTP/2 throughput vs answer time",
            subtitle: "\(payload)-byte payload (\(atPayload.first?.frameBytes ?? 0) bytes per request on the wire), median of "
                + "\(self.settings.runsPerCell) runs, \(self.settings.shards) shard(s); commit \(commit), \(date.prefix(10))",
            xLabel: "the mock's answer delay, ms", yLabel: "notifications per second")
        for (settingIndex, connections) in settings.enumerated() {
            for (rateIndex, rate) in rates.enumerated() {
                let points = atPayload.filter { $0.errorRate == rate && $0.connections == connections }
                    .map { (x: Double($0.condition), y: $0.rate.median) }
                    .sorted { $0.x < $1.x }
                guard !points.isEmpty else { continue }
                var label = rate == 0 ? "no errors" : "errors: " + BenchFormat.errorRate(rate)
                label += connections == 0 ? ", connections: auto" : ", \(connections) connections per shard"
                plot.series.append(.init(label: label, points: points, colour: rateIndex,
                                         dashes: SVGLinePlot.dashPatterns[settingIndex % SVGLinePlot.dashPatterns.count]))
            }
        }
        return plot
    }
}

extension BenchReadme {
    /// Renders results/h2.md: settings, goals, table and plot of an HTTP/2 run, and, kept from
    /// the previous file, everything after `notesMarker`.
    package static func renderHTTP2(_ results: BenchResults, plotFile: String, previous: String?) -> String {
        let settings = results.settings
        var text = """
            # Salvo HTTP/2 benchmark

            Generated by `salvo bench --protocol h2` on \(results.date) at commit `\(results.commit)`. Everything
            above the notes marker is regenerated by each run; the JSON of every run is kept next to this file
            (`h2-<date>-<commit>.json`).

            Command (release build, from the repository root):

                \(results.command)

            Machine: \(results.machine.cores) cores (\(results.machine.cpu)), \(BenchFormat.fixed(results.machine.memoryGib, 0)) GiB, \
            Linux \(results.machine.kernel). Gateway: a fresh `salvo mock --protocol h2` process per cell (one loop, \
            1000 streams per connection as Apple's), client-certificate authentication (the mock takes one provider \
            token per team, and each run starts a new sender). Pinning: \(settings.pinning). Sender: \
            \(settings.shards) shard(s). \(BenchFormat.grouped(Double(settings.notificationsPerRun))) notifications per \
            run, \(settings.runsPerCell) measured runs per cell\(settings.warmup ? " after one warm-up run" : "").
            \(results.path.map { "Path: \($0.roundTripMilliseconds) ms round trip (`salvo delay-line`), bulk TCP \(BenchFormat.fixed($0.median / 1e6, 1)) MB/s." } ?? "")

            ## Goals

            """
        var goals = BenchTable([("goal", .left), ("measured in this run", .left), ("met", .left)])
        for goal in results.goals() { goals.append([goal.goal, goal.measured, goal.verdict.rawValue]) }
        text += "\n" + goals.markdown() + "\n\n## Results\n\n" + results.table().markdown() + "\n\n"
        text += "![HTTP/2 throughput vs answer time](\(plotFile))\n\n"
        text += """
            How to read it:

            - **conns**: connections per shard, fixed for the cell; **auto**: the sender's own growth (every
              connection at its stream limit with work waiting multiplies them by four), with the number it used in all.
            - **answers after**: how long the mock held every answer (`--response-delay-ms`): Apple's answer time.
            - **wire B**: bytes per request the mock read (TLS records of HEADERS and DATA, HPACK-compressed).
            - **median /s**: the sender's rate, from its start to its last write, median of the measured runs.
            - **CPU s/M**, **ns/notif**: user + system CPU of the bench process (the sender; the mock is another
              process) per million notifications and per notification.
            - **accounting**: the mock's accepted and rejected counts against the sender's, summed over all runs
              of the cell (warm-up included). A mismatch makes `salvo bench` exit 1.


            """
        return keepingNotes(text, from: previous)
    }
}
