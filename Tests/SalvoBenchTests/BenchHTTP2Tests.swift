import Foundation
import Testing
@testable import SalvoBench

/// `salvo bench --protocol h2`: its cells, results, goals and summary, without sockets.
@Suite struct BenchHTTP2Tests {
    @Test func theMatrixExpandsAnswerDelaysWhereTheBinaryHasErrorWaits() {
        var matrix = BenchMatrix(connections: [0, 4], errorRates: [0, 0.001], payloadSizes: [100], errorWaits: [20, 1000])
        matrix.wireProtocol = .h2
        matrix.responseDelays = [0, 300]
        let cells = matrix.cells
        #expect(cells.count == 8 && cells.allSatisfy { $0.wireProtocol == .h2 && $0.errorWaitMilliseconds == 1000 })
        #expect(cells.prefix(4).allSatisfy { $0.responseDelayMilliseconds == 0 } && cells.suffix(4).allSatisfy { $0.responseDelayMilliseconds == 300 })
        #expect(cells[6].label == "auto conn, errors 1/1,000, 100 B, answers after 300 ms")
        #expect(cells[6].failurePlan == ["--response-delay-ms", "300", "--reject-every", "1000"])
        #expect(cells[0].failurePlan == [])
    }

    static func sample() -> BenchResults {
        func cell(_ connections: Int, _ errorRate: Double, delay: Int, median: Double, used: Double? = nil) -> BenchResults.Cell {
            let run = BenchResults.Run(rate: median, seconds: 1, cpuUserSeconds: 0.8, cpuSystemSeconds: 0.1, accepted: 1000,
                                       rejected: 0, failed: 0, resent: 0, reconnects: 0, possibleDuplicates: 0,
                                       windowOverruns: 0, allocations: 0, connections: Int(used ?? Double(connections)))
            var cell = BenchResults.Cell(
                connections: connections, errorRate: errorRate, payloadBytes: 100, errorWaitMilliseconds: 1000, frameBytes: 211,
                runs: [run], rate: BenchSpread(median: median, minimum: median, maximum: median),
                cpuSecondsPerMillion: 0.9, allocationsPerNotification: 0, peakRssMib: 60, resent: 0,
                accounting: .init(senderAccepted: 1000, senderRejected: 1, senderFailed: 0, mockAccepted: 1000, mockRejected: 1))
            cell.wireProtocol = .h2
            cell.responseDelayMilliseconds = delay
            cell.connectionsUsed = used
            return cell
        }
        return BenchResults(
            date: "2026-11-25T23:00:00Z", commit: "abc1234", command: "salvo bench --protocol h2",
            machine: .init(cores: 2, cpu: "Test CPU", kernel: "6.0", memoryGib: 8),
            settings: .init(notificationsPerRun: 1_000_000, runsPerCell: 1, warmup: false, ringMib: 1, shards: 1,
                            pinning: "mock on core 1", gateway: "mock"),
            ceiling: nil, php: nil,
            cells: [cell(0, 0, delay: 0, median: 500_000, used: 4), cell(0, 0.001, delay: 0, median: 490_000, used: 4),
                    cell(0, 0, delay: 100, median: 420_000, used: 64), cell(0, 0, delay: 300, median: 250_000, used: 64),
                    cell(2, 0, delay: 300, median: 6_600)])
    }

    @Test func resultsRoundTripUnderTheirOwnNames() throws {
        let results = Self.sample()
        #expect(try BenchResults.decode(results.encoded()) == results)
        #expect(results.fileNames.first { _ in true } == "h2-2026-11-25-abc1234.json")
        #expect(results.cells[2].key == "h2-c0-e0.0-p100-d100" && results.cells[2].connectionsLabel == "auto: 64")
    }

    /// 490k of 500k with errors (98 %), 84 % at 100 ms, 50 % at 300 ms, 900 ns.
    @Test func goalsAreJudgedAgainstTheCellsAnsweredAtOnce() {
        let goals = Self.sample().goals()
        #expect(goals.map(\.verdict) == [.met, .met, .missed, .met, .met])
        #expect(goals[1].measured.contains("84%") && goals[1].measured.contains("auto: 64"))
        #expect(goals[2].measured.contains("50%"))
    }

    @Test func theSummaryIsItsOwnFileWithTheAnswerDelaysAndKeepsNotes() throws {
        let previous = "old\n\(BenchReadme.notesMarker)\n\nMeasured by hand.\n"
        let text = BenchReadme.renderHTTP2(Self.sample(), plotFile: "h2-throughput.svg", previous: previous)
        #expect(text.contains("# Salvo HTTP/2 benchmark") && text.contains("| conns | errors | answers after |"))
        #expect(text.contains("| auto: 64 |") && text.contains("Measured by hand.") && !text.contains("old\n"))
        let directory = NSTemporaryDirectory() + "bench-h2-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let written = try BenchOutput.write(Self.sample(), to: directory, jsonOnly: false)
        #expect(written.map { ($0 as NSString).lastPathComponent } == ["h2-2026-11-25-abc1234.json", "h2-throughput.svg", "h2.md"])
        let svg = try String(contentsOfFile: directory + "/h2-throughput.svg", encoding: .utf8)
        #expect(svg.contains("Salvo HTTP/2 throughput vs answer time") && svg.contains("connections: auto")
                && svg.contains("2 connections per shard"))
    }

    /// A small matrix end to end: the real sender against fresh `salvo mock --protocol h2`
    /// processes, every cell's accounting checked, the files written.
    @Test(.timeLimit(.minutes(3))) func aSmallHTTP2BenchRunsEveryCellExactly() async throws {
        var matrix = BenchMatrix(connections: [0, 1], errorRates: [0, 0.001], payloadSizes: [100], errorWaits: [1000])
        matrix.wireProtocol = .h2
        matrix.responseDelays = [0, 20]
        let directory = NSTemporaryDirectory() + "bench-h2-run-\(UInt32.random(in: 0...UInt32.max))"
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let outcome = try await Bench.run(BenchSettings(
            matrix: matrix, count: 3000, runs: 1, warmup: false, pin: false, output: directory, command: "test",
            executable: DelayLineTests.salvo))
        #expect(outcome.exitStatus == 0 && outcome.results.cells.count == 8)
        for cell in outcome.results.cells {
            #expect(cell.accounting.exact && cell.accounting.checked, "\(cell.key): \(cell.accounting.summary)")
            #expect(cell.wireProtocol == .h2 && cell.frameBytes > 100, "\(cell.key): \(cell.frameBytes) bytes per request")
        }
        #expect(outcome.results.cells.filter { $0.errorRate > 0 }.allSatisfy { $0.accounting.senderRejected == 3 })
        #expect(FileManager.default.fileExists(atPath: directory + "/h2.md"))
    }
}
