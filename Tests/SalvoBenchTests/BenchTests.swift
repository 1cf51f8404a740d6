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
        #expect(BenchMatrix.CellSpec(connections: 1, errorRate: 0, payloadBytes: 100).failurePlan == [])
        #expect(BenchMatrix.CellSpec(connections: 1, errorRate: 0.001, payloadBytes: 100).failurePlan == ["--reject-every", "1000"])
        #expect(BenchMatrix.CellSpec(connections: 1, errorRate: 0.0003, payloadBytes: 100).failurePlan == ["--reject-probability", "0.0003"])
        #expect(BenchMatrix.CellSpec(connections: 1, errorRate: 0, payloadBytes: 100).frameBytes == 161)
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
    static func sample(ceiling: Bool = true, php: Bool = true, mismatch: Bool = false) -> BenchResults {
        func cell(_ connections: Int, _ rate: Double, _ median: Double, exact: Bool = true) -> BenchResults.Cell {
            let run = BenchResults.Run(rate: median, seconds: 1, cpuUserSeconds: 0.1, cpuSystemSeconds: 0.02, accepted: 1000,
                                       rejected: 0, failed: 0, resent: 0, reconnects: 0, possibleDuplicates: 0,
                                       windowOverruns: 0, allocations: 10)
            return BenchResults.Cell(
                connections: connections, errorRate: rate, payloadBytes: 100, frameBytes: 161, runs: [run],
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
            settings: .init(notificationsPerRun: 1000, runsPerCell: 3, warmup: true, errorWaitMilliseconds: 50, ringMib: 4,
                            shards: 1, pinning: "mock on core 1", gateway: "mock"),
            ceiling: ceiling ? .init(frameBytes: 161, framesPerRun: 100, framesPerSecond: [9e6, 10e6, 11e6]) : nil,
            php: php ? .init(payloadBytes: 100, notificationsPerRun: 1000, notificationsPerSecond: [200_000], accountingExact: true) : nil,
            cells: [cell(1, 0, 2e6), cell(4, 0, 6e6), cell(1, 0.001, 1e6), cell(4, 0.001, 2e6, exact: !mismatch)])
    }

    @Test func jsonRoundTrips() throws {
        let results = Self.sample()
        let decoded = try BenchResults.decode(results.encoded())
        #expect(decoded == results)
        let object = try #require(try JSONSerialization.jsonObject(with: results.encoded()) as? [String: Any])
        let cells = try #require(object["cells"] as? [[String: Any]])
        #expect(cells[0]["peak_rss_mib"] as? Double == 40)
        #expect((cells[0]["rate"] as? [String: Any])?["median"] as? Double == 2e6)
        #expect(results.fileName == "2026-11-23-abc1234.json")
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
        #expect(text.contains("| conns | errors |"))
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
}
