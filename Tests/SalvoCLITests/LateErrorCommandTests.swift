import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Synchronization
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// The same through the command line: `salvo send` as a process, against `salvo mock` as a
/// process (the overrun) or the in-process mock (kill -9 and --resume).
@Suite(.serialized, .timeLimit(.minutes(2)), .ownThread("late-error-command-tests")) struct LateErrorCommandTests {
    /// The line numbers of a `--rejected` CSV's rows (token n carries n in its last 8 bytes),
    /// one per row: a line rejected in both runs appears twice.
    static func rejectedLines(_ path: String) throws -> [UInt64] {
        let rows = try String(contentsOfFile: path, encoding: .utf8).split(separator: "\n")
        #expect(rows.first == "token,status,reason,timestamp")
        return rows.dropFirst().compactMap { row in
            guard let token = row.split(separator: ",").first, token.count == 64 else {
                Issue.record("unexpected row: \(row)")
                return nil
            }
            return UInt64(token.suffix(16), radix: 16)
        }
    }

    static func decodeReport(_ path: String) throws -> SenderReport {
        try JSONDecoder().decode(SenderReport.self, from: Data(contentsOf: URL(fileURLWithPath: path)))
    }

    /// The mock answers 225 ms late; the sender waits 20 ms and keeps records 150 ms (the
    /// effective retention: max(150, 2 × 20)). The first response names a notification
    /// whose record is gone: what it covers was counted accepted too early. The first
    /// rejection is the 5000th notification, a fraction of the campaign (about a second of
    /// sending in a debug build), so `salvo send` is still running when it is answered.
    ///
    /// Why 225 ms and not 1 s: the first such response raises the error wait to twice the
    /// retention (300 ms), above the delay, so every later response arrives within its
    /// notification's wait, also at the end of the run. With a delay above that (1 s), a
    /// rejection made in the last second of the run is answered after `salvo send` has
    /// finished (or, with a campaign sent in less than a second, every one is): the sender
    /// then counts as accepted what the mock discarded (seen: 60,000 accepted and exit 0
    /// against the mock's 9,998), and no sender can know, there being no positive
    /// acknowledgement. That is the loss the error wait exists to bound, not a bug; it
    /// would make the comparison below depend on timing.
    ///
    /// With every response received, the accounting is exact: the reclassification counts
    /// the named notification and everything released after it on that connection, which
    /// is exactly what the mock discarded (it judges nothing after a rejection), so the
    /// sender's accepted equals the mock's. (It is conservative in general, failing up to
    /// the released count when it cannot tell; here it can.)
    @Test func anErrorOlderThanEveryRecordFailsWhatItCoversAsDeliveryUnknown() async throws {
        let workspace = try SendCommandTests.Workspace()
        defer { workspace.remove() }
        let lines = 30_000
        let campaign = try workspace.writeCampaign(lines: lines)
        let mockReport = workspace.path("mock.json")
        let (mock, port, _) = try await MockCommandTests.start([
            "--cert", workspace.path("server.pem"), "--key", workspace.path("server.key"), "--ca", workspace.path("ca.pem"),
            "--require-client-cert", "--reject-every", "5000", "--error-delay-ms", "225", "--record-accepted",
            "--report", mockReport,
        ])
        defer {
            mock.kill(SIGKILL)
            _ = try? mock.exitStatus(within: .seconds(10))
        }
        let (status, output, errors) = try await SendCommandTests.run([
            "send", "--gateway", "127.0.0.1:\(port)", "--input", campaign, "--error-wait-ms", "20", "--retention-ms", "150",
            "--report", workspace.path("report.json"),
        ] + workspace.tlsArguments())
        mock.kill(SIGTERM)
        #expect(try await MockCommandTests.waitForExit(mock) == 0)
        let statistics = try JSONDecoder().decode(MockStatistics.self, from: Data(contentsOf: URL(fileURLWithPath: mockReport)))
        let report = try Self.decodeReport(workspace.path("report.json"))
        let unknown = report.failedByReason[FailureReason.deliveryUnknown.rawValue] ?? 0

        #expect(status == 1, "stdout: \(output)\nstderr: \(errors)")
        #expect(report.submitted == lines)
        #expect(report.isComplete)
        #expect(output.contains("accounting: complete"))
        #expect(report.windowOverruns >= 1)
        #expect(unknown > 0)
        #expect(report.failed == unknown, "delivery_unknown is the only failure: \(report.failedByReason)")

        // The summary explains and says how to avoid it.
        #expect(output.contains("delivery_unknown"), "stdout: \(output)")
        #expect(output.contains("--error-wait-ms") && output.contains("--retention-ms"), "stdout: \(output)")
        #expect(output.contains("raise them"), "stdout: \(output)")
        #expect(errors.contains("after its notification's record was released"), "stderr: \(errors)")
        // The first overrun raises the error wait to twice the retention, at least.
        #expect(report.errorWait >= .milliseconds(300), "error wait \(report.errorWait)")

        // Nothing counted accepted that the mock discarded, nor the other way round.
        #expect(report.accepted == statistics.accepted,
                "sender \(report.accepted) (+ \(unknown) delivery_unknown), mock \(statistics.accepted)")
        #expect(report.accepted <= statistics.accepted && report.accepted + unknown >= statistics.accepted)
        #expect(statistics.duplicates == 0)

        // Each error response the mock wrote either rejected a notification whose record
        // was kept, or named one older than every record: one window overrun per response.
        #expect(statistics.delayedResponses == statistics.rejected)
        #expect(report.rejected + report.windowOverruns == statistics.rejected,
                "rejected \(report.rejected) + window_overruns \(report.windowOverruns) vs \(statistics.rejected) responses from the mock")
        // Late errors handled exactly (record still kept) and overruns are counted apart.
        #expect(report.lateErrors + report.windowOverruns <= statistics.rejected)
        // Each overrun is told on stderr with its count; together they are the delivery_unknown.
        let told = errors.split(separator: "\n").filter { $0.contains("failed (delivery_unknown)") }
        #expect(told.count == report.windowOverruns, "stderr: \(errors)")
        #expect(told.compactMap { Int($0.prefix { $0.isNumber }) }.reduce(0, +) == unknown)
    }

    /// kill -9 while errors come late, then --resume: every line not rejected reaches the
    /// gateway, and the checkpoint never passed a line that was not final (its record
    /// released, or a later error response proving it processed).
    @Test func killedUnderLateErrorsAndResumedNothingIsLost() async throws {
        let workspace = try SendCommandTests.Workspace()
        defer { workspace.remove() }
        // Errors answered 150 ms late, past the sender's 50 ms error wait and within its
        // 600 ms retention. Stalls (every 1000 notifications on a connection, 40 ms) keep
        // the campaign going for seconds, so the kill lands mid-way.
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: 6000, stallEvery: 1000, stallDuration: .milliseconds(40),
                                                    errorDelay: .milliseconds(150)))
        defer { rig.gateway.stop() }
        let lines = 40_000
        let connections = 2
        let (arguments, checkpoint) = try workspace.checkpointedSend(
            port: rig.gateway.port, lines: lines,
            ["--error-wait-ms", "50", "--retention-ms", "600", "--shards", "1", "--max-connections", "\(connections)", "--ring-mib", "1"])

        let first = try SendCommandTests.launch(arguments + ["--rejected", workspace.path("rejected-1.csv")])
        // Wait (bounded) until the checkpoint shows progress, and a late error was answered,
        // then kill -9.
        let deadline = Instant.now() + .seconds(60)
        var recorded = 0
        while Instant.now() < deadline {
            recorded = (try? Checkpoint(path: checkpoint).load()?.line ?? 0) ?? 0
            // (The mock's statistics sort every digest: look only once the checkpoint moved.)
            if recorded > 0 && rig.gateway.statistics().delayedResponses > 0 { break }
            usleep(5_000)
        }
        first.kill(SIGKILL)
        try await first.exitStatus(within: .seconds(10))
        #expect(recorded > 0, "the checkpoint never advanced")
        // The checkpoint may have moved between the last look and the kill.
        let resumeAfter = try #require(try Checkpoint(path: checkpoint).load()).line
        let atKill = rig.gateway.statistics()
        #expect(atKill.accepted < lines, "the campaign finished before the kill; nothing was tested")
        #expect(atKill.delayedResponses > 0, "no error response was held back before the kill")

        // The checkpoint moves only as records are released: every line up to it was
        // accepted by the mock, or rejected (and written to the rejected list) already.
        let rejectedFirst = try Self.rejectedLines(workspace.path("rejected-1.csv"))
        let settled = LoopbackRig.digests(count: resumeAfter + 1, excluding: Set(rejectedFirst).union([0]))
        let notYetAccepted = settled.subtracting(atKill.acceptedDigestSet).count
        #expect(notYetAccepted == 0, "\(notYetAccepted) lines up to the checkpoint (\(resumeAfter)) were not accepted by the mock")

        let (status, output, errors) = try await SendCommandTests.run(
            arguments + ["--resume", "--rejected", workspace.path("rejected-2.csv"), "--report", workspace.path("report.json")])
        #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
        #expect(errors.contains("resuming after line \(resumeAfter)"), "stderr: \(errors)")
        #expect(output.contains("accounting: complete"))
        let report = try Self.decodeReport(workspace.path("report.json"))
        #expect(report.submitted == lines - resumeAfter)
        #expect(report.failed == 0 && report.windowOverruns == 0, "\(report.failedByReason)")
        #expect(report.lateErrors > 0, "the resumed run saw no late error; nothing was tested")

        let rejectedSecond = try Self.rejectedLines(workspace.path("rejected-2.csv"))
        let rejectedLines = Set(rejectedFirst).union(rejectedSecond)
        let expected = LoopbackRig.digests(count: lines + 1, excluding: rejectedLines.union([0]))
        let mock = rig.statistics { $0.accepted - $0.duplicates >= expected.count }
        let missing = expected.subtracting(mock.acceptedDigestSet).count
        #expect(missing == 0, "\(missing) lines neither rejected nor accepted by the mock")
        // Every response the sender read is a row of a rejected list. The ones never read are
        // those held back when the first run was killed: at most one per connection, since an
        // error response ends its connection.
        let unread = mock.rejected - rejectedFirst.count - rejectedSecond.count
        #expect((0...connections).contains(unread), "mock rejected \(mock.rejected), rows \(rejectedFirst.count) + \(rejectedSecond.count)")
        // Duplicates are bounded by what was not final at the checkpoint.
        #expect(mock.duplicates <= lines - resumeAfter)
    }
}
