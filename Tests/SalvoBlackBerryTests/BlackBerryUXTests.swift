import Foundation
import SalvoCampaignFiles
import SalvoEngine
import SalvoMock
import SalvoTestSupport
import Testing

extension BlackBerryCommandTests {
    /// Two lines fail for good (code 409, which no sender knows) among lines that are
    /// accepted. The checkpoint lists them apart from the final lines; a resume sends those
    /// two and not one line more.
    @Test func aResumeAfterPermanentFailuresSendsOnlyTheLinesThatFailed() async throws {
        var plan = GNPFailurePlan()
        plan.unknownCodeEvery = 25
        let rig = try NOCRig(plan)
        let file = try rig.writeCampaign(lines: 60)
        let checkpoint = rig.path("checkpoint")
        // One connection: the NOC counts notifications in line order.
        let arguments = Self.send(rig, ["--input", file, "--checkpoint", checkpoint, "--noc-connections", "1"])
        let (failed, output, errors) = try await Self.run(arguments)
        #expect(failed == 1, "stderr: \(errors)")
        #expect(output.contains("failed    2  (gnp_409: 2)") || output.contains("failed    2"), "\(output)")
        #expect(errors.contains("lines 1–60 are final, 2 of them failed (lines 25, 50); the same command with --resume sends "
                                + "the failed lines again, and nothing else"), "stderr: \(errors)")
        let saved = try #require(try Checkpoint(path: checkpoint).load())
        #expect(saved.line == 60 && saved.retry == [25...25, 50...50])
        let before = rig.noc.statistics()
        #expect(before.accepted == 58 && before.otherAnswers == 2)

        let (resumed, resumedOutput, resumeErrors) = try await Self.run(arguments + ["--resume"])
        #expect(resumed == 0, "stderr: \(resumeErrors)")
        #expect(resumeErrors.contains("first sending again the 2 lines that failed: 25, 50"), "stderr: \(resumeErrors)")
        #expect(resumedOutput.contains("accepted  2"), "\(resumedOutput)")
        let after = eventually(rig.noc.statistics) { $0.accepted >= 60 }
        #expect(after.accepted == 60 && after.duplicates == 0 && after.otherAnswers == 2, "lines 25 and 50, once each")
        #expect(try Checkpoint(path: checkpoint).load() == ResumePoint(line: 60, prefix: saved.prefix))
    }
}
