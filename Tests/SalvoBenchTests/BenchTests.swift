import Foundation
#if canImport(FoundationXML)
import FoundationXML
#endif
import Testing
import SalvoBench

/// The pure pieces of `salvo bench`: statistics, tables, the SVG plot and the results README.
/// No timing is asserted anywhere.
struct BenchStatisticsTests {
    @Test func medianOfOddAndEvenCounts() {
        #expect(BenchSpread.median([]) == nil)
        #expect(BenchSpread.median([7]) == 7)
        #expect(BenchSpread.median([3, 1, 2]) == 2)
        #expect(BenchSpread.median([4, 1, 3, 2]) == 2.5)
    }

    @Test func spreadAroundTheMedian() throws {
        let spread = try #require(BenchSpread([90, 100, 120]))
        #expect(spread.median == 100 && spread.minimum == 90 && spread.maximum == 120)
        #expect(abs(spread.relativeSpread - 0.3) < 1e-12)
        #expect(abs(spread.relativeRange.below + 0.1) < 1e-12 && abs(spread.relativeRange.above - 0.2) < 1e-12)
        #expect(BenchSpread([]) == nil)
    }

    @Test func formats() {
        #expect(BenchFormat.grouped(1_234_567.6) == "1,234,568")
        #expect(BenchFormat.grouped(999) == "999")
        #expect(BenchFormat.errorRate(0) == "none")
        #expect(BenchFormat.errorRate(0.001) == "1/1,000")
        #expect(BenchFormat.errorRate(0.0001) == "1/10,000")
        #expect(BenchFormat.errorRate(0.0003) == "0.0003")
        #expect(SVGLinePlot.shortNumber(1_500_000) == "1.5 M")
        #expect(SVGLinePlot.shortNumber(250_000) == "250 k")
        #expect(SVGLinePlot.shortNumber(8) == "8")
    }

    @Test func failurePlanForAnErrorRate() {
        func spec(_ rate: Double) -> BenchMatrix.CellSpec {
            BenchMatrix.CellSpec(connections: 1, errorRate: rate, payloadBytes: 100, errorWaitMilliseconds: 1000)
        }
        #expect(spec(0).failurePlan == [])
        #expect(spec(0.001).failurePlan == ["--reject-every", "1000"])
        #expect(spec(0.0003).failurePlan == ["--reject-probability", "0.0003"])
        #expect(spec(0).frameBytes == 161)
    }

    @Test func theMatrixExpandsWaitsInsidePayloadsAndOutsideRates() {
        let matrix = BenchMatrix(connections: [1, 4], errorRates: [0, 0.001], payloadSizes: [100, 2048], errorWaits: [20, 1000])
        let cells = matrix.cells
        #expect(cells.count == 16)
        #expect(Set(cells).count == 16)
        // Payload outermost, then wait, then rate, then connections.
        #expect(cells.prefix(8).map(\.errorWaitMilliseconds) == [20, 20, 20, 20, 1000, 1000, 1000, 1000])
        #expect(cells.prefix(4).map(\.errorRate) == [0, 0, 0.001, 0.001])
        #expect(cells.prefix(2).map(\.connections) == [1, 4])
        #expect(cells.prefix(8).allSatisfy { $0.payloadBytes == 100 } && cells.suffix(8).allSatisfy { $0.payloadBytes == 2048 })
        #expect(cells[4].label == "1 conn, errors none, 100 B, error wait 1,000 ms")
        #expect(cells[2].label == "1 conn, errors 1/1,000, 100 B, error wait 20 ms")
        #expect(BenchMatrix(connections: [1], errorRates: [0], payloadSizes: [100], errorWaits: [1000]).cells.count == 1)
    }

    @Test func payloadHasTheAskedSizeAndIsJSON() throws {
        for size in [21, 100, 2048] {
            let payload = BenchSenderRun.payload(bytes: size)
            #expect(payload.count == size)
            _ = try JSONSerialization.jsonObject(with: Data(payload))
        }
    }

    @Test func ceilingOutputIsParsed() {
        let output = """
            run 1: 10000000 frames of 161 bytes in 0.800 s: 12.50 M frames/s, 2012 MB/s; CPU busy: gateway 99%, sender 70%
            run 2: 10000000 frames of 161 bytes in 1.000 s: 10.00 M frames/s, 1610 MB/s; CPU busy: gateway 98%, sender 71%
            median of 2 runs: 11.25 M frames/s
            """
        #expect(BenchCeiling.parse(output) == [12_500_000, 10_000_000])
    }

    @Test func tablesAlignAndEscape() {
        var table = BenchTable([("name", .left), ("rate", .right)])
        table.append(["a|b", "1"])
        table.append(["long name", "1,000"])
        #expect(table.plain() == "name        rate\n---------  -----\na|b            1\nlong name  1,000")
        #expect(table.markdown() == "| name | rate |\n|---|---:|\n| a\\|b | 1 |\n| long name | 1,000 |")
    }
}

struct BenchOutputTests {
    static func sample(ceiling: Bool = true, php: Bool = true, mismatch: Bool = false, waits: [Int] = [50],
                       count: Int = 1_000_000) -> BenchResults {
        func cell(_ connections: Int, _ rate: Double, _ median: Double, wait: Int, exact: Bool = true) -> BenchResults.Cell {
            let run = BenchResults.Run(rate: median, seconds: 1, cpuUserSeconds: 0.1, cpuSystemSeconds: 0.02, accepted: 1000,
                                       rejected: 0, failed: 0, resent: 0, reconnects: 0, possibleDuplicates: 0,
                                       windowOverruns: 0, allocations: 10)
            return BenchResults.Cell(
                connections: connections, errorRate: rate, payloadBytes: 100, errorWaitMilliseconds: wait, frameBytes: 161, runs: [run],
                rate: BenchSpread(median: median, minimum: median * 0.9, maximum: median * 1.1),
                cpuSecondsPerMillion: 0.12, allocationsPerNotification: 0.001, peakRssMib: 40,
                resent: rate > 0 ? 5000 : 0,
                accounting: .init(senderAccepted: 1000, senderRejected: 1, senderFailed: 0,
                                  mockAccepted: exact ? 1000 : 999, mockRejected: 1),
                percentOfCeiling: ceiling ? 100 * median / 10_000_000 : nil)
        }
        return BenchResults(
            date: "2026-11-23T10:00:00Z", commit: "abc1234", command: "salvo bench --quick",
            machine: .init(cores: 2, cpu: "Test CPU", kernel: "6.0", memoryGib: 8),
            settings: .init(notificationsPerRun: count, runsPerCell: 3, warmup: true, ringMib: 4,
                            shards: 1, pinning: "mock on core 1", gateway: "mock"),
            ceiling: ceiling ? .init(frameBytes: 161, framesPerRun: 100, framesPerSecond: [9e6, 10e6, 11e6]) : nil,
            php: php ? .init(payloadBytes: 100, notificationsPerRun: 1000, notificationsPerSecond: [200_000], accountingExact: true) : nil,
            // A longer wait halves the rates, so that the cells of two waits differ.
            cells: waits.enumerated().flatMap { index, wait in
                let scale = 1 / Double(1 << index)
                return [cell(1, 0, 2e6 * scale, wait: wait), cell(4, 0, 6e6 * scale, wait: wait),
                        cell(1, 0.001, 1e6 * scale, wait: wait), cell(4, 0.001, 2e6 * scale, wait: wait, exact: !mismatch)]
            })
    }

    @Test func jsonRoundTrips() throws {
        let results = Self.sample()
        let decoded = try BenchResults.decode(results.encoded())
        #expect(decoded == results)
        let object = try #require(try JSONSerialization.jsonObject(with: results.encoded()) as? [String: Any])
        let cells = try #require(object["cells"] as? [[String: Any]])
        #expect(cells[0]["peak_rss_mib"] as? Double == 40)
        #expect(cells[0]["error_wait_milliseconds"] as? Int == 50)
        #expect(object["schema"] as? Int == BenchResults.currentSchema)
        let twoWaits = Self.sample(waits: [20, 1000])
        #expect(try BenchResults.decode(twoWaits.encoded()) == twoWaits)
        #expect((cells[0]["rate"] as? [String: Any])?["median"] as? Double == 2e6)
        #expect(Array(results.fileNames.prefix(3)) == ["2026-11-23-abc1234.json", "2026-11-23-abc1234-2.json",
                                                       "2026-11-23-abc1234-3.json"])
    }

    /// Two runs of one commit on one day: the second must not replace the first's results.
    @Test func aSecondRunOfTheSameCommitAndDayKeepsTheFirstsJSON() throws {
        let directory = NSTemporaryDirectory() + "salvo-bench-output-\(UUID().uuidString)"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let first = Self.sample()
        let second = Self.sample(mismatch: true)
        #expect(try BenchOutput.write(first, to: directory, jsonOnly: true) == ["\(directory)/2026-11-23-abc1234.json"])
        #expect(try BenchOutput.write(second, to: directory, jsonOnly: true) == ["\(directory)/2026-11-23-abc1234-2.json"])
        func read(_ name: String) throws -> BenchResults {
            try BenchResults.decode(Data(contentsOf: URL(fileURLWithPath: "\(directory)/\(name)")))
        }
        #expect(try read("2026-11-23-abc1234.json") == first)
        #expect(try read("2026-11-23-abc1234-2.json") == second)
    }

    /// Results written before the error wait was an axis: one wait in the settings, none in the cells.
    @Test func oldResultsTakeTheirCellsErrorWaitFromTheSettings() throws {
        var object = try #require(try JSONSerialization.jsonObject(with: Self.sample().encoded()) as? [String: Any])
        var settings = try #require(object["settings"] as? [String: Any])
        settings["error_wait_milliseconds"] = 20
        object["settings"] = settings
        object["schema"] = 1
        object["cells"] = try #require(object["cells"] as? [[String: Any]]).map { $0.filter { $0.key != "error_wait_milliseconds" } }
        let old = try JSONSerialization.data(withJSONObject: object)
        #expect(!String(decoding: old, as: UTF8.self).contains("\"cells\":[{\"error_wait"))

        let decoded = try BenchResults.decode(old)
        #expect(decoded.cells.count == 4)
        #expect(decoded.cells.allSatisfy { $0.errorWaitMilliseconds == 20 })
        #expect(decoded.settings.errorWaitMilliseconds == 20)
        #expect(decoded.errorWaits == [20])
        #expect(decoded.table().plain().contains("20 ms"))

        // Neither the cell nor the settings: a clear decoding error, not a made-up wait.
        settings["error_wait_milliseconds"] = nil
        object["settings"] = settings
        #expect(throws: DecodingError.self) { try BenchResults.decode(JSONSerialization.data(withJSONObject: object)) }
    }

    /// The committed results in results/ and the older runs in results/archive/ (all written
    /// before cells had their own error wait).
    @Test func committedResultsStillDecode() throws {
        let directory = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("../../results").standardized
        let latest = try FileManager.default.contentsOfDirectory(atPath: directory.path)
        let archived = try FileManager.default.subpathsOfDirectory(atPath: directory.appendingPathComponent("archive").path)
            .filter { !$0.hasPrefix("soak/") }.map { "archive/" + $0 }
        let files = (latest + archived).filter { $0.hasSuffix(".json") }
        #expect(!files.isEmpty)
        for file in files {
            let data = try Data(contentsOf: directory.appendingPathComponent(file))
            let results = try BenchResults.decode(data)
            #expect(!results.cells.isEmpty, "\(file)")
            if let wait = results.settings.errorWaitMilliseconds {
                #expect(results.cells.allSatisfy { $0.errorWaitMilliseconds == wait }, "\(file)")
            }
            _ = BenchReadme.render(results, plotFile: "throughput.svg", previous: nil)
        }
    }

    @Test func tableAndReadmeWithTwoErrorWaits() throws {
        let results = Self.sample(waits: [20, 1000])
        let plain = results.table().plain()
        let header = try #require(plain.split(separator: "\n").first)
        #expect(header.contains("errors  error wait  payload B"))
        let rows = plain.split(separator: "\n").dropFirst(2)
        #expect(rows.count == 8)
        #expect(rows.prefix(4).allSatisfy { $0.contains("  20 ms  ") } && rows.suffix(4).allSatisfy { $0.contains("1,000 ms") })

        let text = BenchReadme.render(results, plotFile: "throughput.svg", previous: nil)
        #expect(text.contains("error waits 20 ms, 1,000 ms (a table each below)"))
        let short = try #require(text.range(of: "### Error wait 20 ms\n"))
        let long = try #require(text.range(of: "### Error wait 1,000 ms\n"))
        #expect(short.upperBound < long.lowerBound)
        // Each section holds its own four cells, labelled with their wait.
        let shortSection = text[short.upperBound..<long.lowerBound]
        #expect(shortSection.components(separatedBy: "| 20 ms |").count - 1 == 4)
        #expect(!shortSection.contains("1,000 ms |"))
        let plot = try #require(text.range(of: "![Throughput vs connections]"))
        let longSection = text[long.upperBound..<plot.lowerBound]
        #expect(longSection.components(separatedBy: "| 1,000 ms |").count - 1 == 4)
        #expect(text.contains("**error wait**"))

        // One wait: one table, no sections.
        let single = BenchReadme.render(Self.sample(waits: [1000]), plotFile: "throughput.svg", previous: nil)
        #expect(single.contains(", error wait 1,000 ms."))
        #expect(!single.contains("### Error wait"))
        #expect(single.contains("| conns | errors | error wait | payload B |"))
    }

    @Test func goalsCompareCellsOfTheSameErrorWait() {
        // The 1,000 ms cells run at half the rate; errors against error-free is 33 % at each wait.
        let goals = Self.sample(waits: [20, 1000]).goals()
        #expect(goals[1].verdict == .missed)
        #expect(goals[1].measured.contains("per cell: 50%, 33%, 50%, 33%"))
        #expect(goals[1].measured.contains("error wait 20 ms"))
        #expect(goals[0].measured.contains("error wait 20 ms"))
    }

    @Test func thePlotDrawsEachErrorWaitInItsOwnDashes() throws {
        let svg = Self.sample(waits: [20, 1000]).throughputPlot().render()
        #expect(XMLParser(data: Data(svg.utf8)).parse())
        let lines = svg.components(separatedBy: "<polyline").dropFirst().map { $0.prefix { $0 != ">" } }
        #expect(lines.count == 4)
        #expect(lines.filter { $0.contains("stroke-dasharray") }.count == 2)
        #expect(svg.contains("no errors, wait 20 ms") && svg.contains("errors: 1/1,000, wait 1,000 ms"))
        // One wait: solid lines, the wait in the subtitle.
        let single = Self.sample(waits: [1000]).throughputPlot()
        #expect(single.subtitle.contains("error wait 1,000 ms"))
        #expect(!single.render().contains("stroke-dasharray=\"8"))
    }

    @Test func svgIsWellFormedWithAxesAndLegend() throws {
        let svg = Self.sample().throughputPlot().render()
        let parser = XMLParser(data: Data(svg.utf8))
        #expect(parser.parse(), "\(parser.parserError.map { "\($0)" } ?? "")")
        #expect(svg.contains("TLS connections"))
        #expect(svg.contains("notifications per second"))
        #expect(svg.contains("no errors") && svg.contains("errors: 1/1,000"))
        #expect(svg.contains("ceiling"))
        #expect(svg.components(separatedBy: "<polyline").count - 1 == 2)
    }

    @Test func svgEscapesTextAndSurvivesEmptyData() throws {
        var plot = SVGLinePlot(title: "a < b & \"c\"", xLabel: "x", yLabel: "y")
        #expect(XMLParser(data: Data(plot.render().utf8)).parse())
        plot.series = [.init(label: "<one>", points: [(x: 1, y: 5)])]
        plot.references = [.init(label: "far", y: 1000)]
        let svg = plot.render()
        #expect(XMLParser(data: Data(svg.utf8)).parse())
        #expect(svg.contains("off the scale"))
    }

    @Test func niceScale() {
        let large = SVGLinePlot.niceScale(7_300_000)
        #expect(large.top == 8_000_000 && large.step == 2_000_000)
        let small = SVGLinePlot.niceScale(1.1)
        #expect(abs(small.top - 1.25) < 1e-9 && abs(small.step - 0.25) < 1e-9)
        let empty = SVGLinePlot.niceScale(0)
        #expect(empty.top == 1 && empty.step == 0.25)
    }

    @Test func readmeHasCommandTableGoalsAndKeepsNotes() {
        let previous = "old generated text\n\(BenchReadme.notesMarker)\n\n## Notes\n\nperf says: AES.\n"
        let text = BenchReadme.render(Self.sample(), plotFile: "throughput.svg", previous: previous)
        #expect(text.contains("    salvo bench --quick"))
        #expect(text.contains("| conns | errors | error wait |"))
        #expect(text.contains("![Throughput vs connections](throughput.svg)"))
        #expect(text.contains("perf says: AES."))
        #expect(!text.contains("old generated text"))
        #expect(text.components(separatedBy: BenchReadme.notesMarker).count == 2)
        #expect(text.contains("PHP"))
        // Regenerating again keeps the notes exactly once.
        let again = BenchReadme.render(Self.sample(), plotFile: "throughput.svg", previous: text)
        #expect(again == text)
    }

    @Test func goalsAreJudged() {
        let goals = Self.sample().goals()
        // 6 M of a 10 M ceiling: met; errors 2 M of 6 M = 33 %: missed; 120 ns: missed.
        #expect(goals[0].verdict == .met)
        #expect(goals[1].verdict == .missed)
        #expect(goals[2].verdict == .missed)
        #expect(goals[3].verdict == .met)
        #expect(Self.sample(ceiling: false).goals()[0].verdict == .notMeasured)
        #expect(Self.sample(mismatch: true).cells[3].accounting.exact == false)
        #expect(Self.sample(mismatch: true).cells[3].accounting.summary.hasPrefix("MISMATCH"))
    }

    /// Runs of a thousand notifications measure setup, not sending: a goal they miss is
    /// too small to judge, never NOT MET; one they meet is still met.
    @Test func aRunTooSmallToJudgeSaysSoInsteadOfMissed() {
        let goals = Self.sample(count: 1000).goals()
        #expect(goals.map(\.verdict) == [.met, .tooSmall, .tooSmall, .met, .notMeasured])
        #expect(goals[1].measured.hasSuffix("(runs of 1,000 notifications; judge with --count 100,000 or more)"))
        #expect(goals[1].verdict.spoken == "too small to judge")
        #expect(Self.sample(count: BenchGoal.smallestJudgedRun).goals()[1].verdict == .missed)
    }
}
