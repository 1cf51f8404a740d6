import SalvoWire
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// Which lines a resume reads, and how a run's checkpoint moves on: the failed lines are
/// listed apart from the final prefix, so that a resume sends them and nothing else final.
@Suite struct ResumePlanTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    static let plan = ResumePlan(doneThrough: 10, retry: [3...3, 7...8])

    @Test func aResumeReadsTheFailedLinesAndThoseAfterTheCheckpoint() {
        #expect((1...13).filter(Self.plan.includes(line:)) == [3, 7, 8, 11, 12, 13])
        #expect((1...5).filter(ResumePlan.fresh.includes(line:)) == [1, 2, 3, 4, 5])
        #expect(Self.plan.retryLineCount == 3)
        #expect(ResumePlan.describe(Self.plan.retry) == "3, 7–8")
    }

    @Test func aRunsFailuresAreListedAndTheRestIsFinal() {
        // Lines 1–100, 40 and 41 and 77 failed: final through 100, those three to send again.
        let after = ResumePlan.fresh.advanced(finalThrough: 100, failedLines: [77, 40, 41], cleanThrough: 39)
        #expect(after == ResumePlan(doneThrough: 100, retry: [40...41, 77...77]))
        // Without the failures' names the first one holds the checkpoint back, as before.
        #expect(ResumePlan.fresh.advanced(finalThrough: 100, failedLines: nil, cleanThrough: 39)
            == ResumePlan(doneThrough: 39, retry: []))
    }

    /// Failures at the end of the final lines (an unreachable gateway fails everything in
    /// flight) are simply not done: the checkpoint stops before them.
    @Test func failuresThatEndTheFinalLinesAreNotDone() {
        #expect(ResumePlan.fresh.advanced(finalThrough: 500, failedLines: Array(1...500), cleanThrough: 0) == .fresh)
        #expect(ResumePlan.fresh.advanced(finalThrough: 500, failedLines: [7] + Array(400...500), cleanThrough: 6)
            == ResumePlan(doneThrough: 399, retry: [7...7]))
    }

    @Test func aResumedRunKeepsTheLinesItHasNotSentAgainYet() {
        // Line 3 is back in flight (final through 2): 7–8 are still to retry, 3 too, and the
        // lines up to 10 stay done.
        #expect(Self.plan.advanced(finalThrough: 2, failedLines: [], cleanThrough: 2) == ResumePlan(doneThrough: 10, retry: [3...3, 7...8]))
        // Everything sent again; 8 failed again, 12 failed for the first time.
        #expect(Self.plan.advanced(finalThrough: 20, failedLines: [8, 12], cleanThrough: 7)
            == ResumePlan(doneThrough: 20, retry: [8...8, 12...12]))
        // Without names: up to the first failure, what is left of the old list.
        #expect(Self.plan.advanced(finalThrough: 20, failedLines: nil, cleanThrough: 7) == ResumePlan(doneThrough: 10, retry: [8...8]))
    }

    @Test func moreRunsOfFailuresThanACheckpointHoldsStopItBeforeTheFirstThatDoesNotFit() {
        let failed = stride(from: 2, through: 20, by: 2).map { $0 }  // 10 runs of one line
        let after = ResumePlan.fresh.advanced(finalThrough: 30, failedLines: failed, cleanThrough: 1, limit: 4)
        #expect(after == ResumePlan(doneThrough: 9, retry: [2...2, 4...4, 6...6, 8...8]))
    }

    /// A campaign read with a plan, and read again from a position (as a sender does after a
    /// drop): both pass over the lines the plan leaves out.
    @Test func theReaderAndTheReadersItsFileMakesFollowThePlan() throws {
        let path = try directory.write("campaign.jsonl", (1...12).map { campaignLine($0) }.joined(separator: "\n") + "\n")
        var file = CampaignFile(.jsonl(path), for: .http2(defaultPushType: .alert))
        file.resumePlan = Self.plan
        let reader = try file.makeReader()
        var lines: [Int] = []
        var positions: [SourcePosition] = []
        while let notification = try reader.next() {
            lines.append(Int(notification.position.sequence))
            positions.append(notification.position)
        }
        #expect(lines == [3, 7, 8, 11, 12])
        let again = try file.makeReader()
        try again.seek(to: positions[1])
        var resent: [Int] = []
        while let notification = try again.next() { resent.append(Int(notification.position.sequence)) }
        #expect(resent == [7, 8, 11, 12])
    }
}

/// A good JSONL line for token `n`.
func campaignLine(_ n: Int) -> String {
    #"{"token": "\#(campaignToken(n))", "payload": {"aps": {"alert": "\#(n)"}}}"#
}
