import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoEngine

extension SendCommandHTTP2Tests {
    /// A graceful stop must not depend on the gateway: `salvo send` told to stop while every
    /// answer it waits for never ends drains for at most `--drain-timeout`, a second signal
    /// ends it at once, and either way the report and checkpoint are written and the run
    /// exits 3 with everything accounted for. Nested in the serialized suite, as
    /// `ProviderTokenSharingTests`.
    @Suite struct GracefulStopTests {
        typealias Workspace = SendCommandTests.Workspace

        /// Starts `salvo send` against a gateway whose answers never end; returns it once the
        /// gateway holds streams of it.
        static func sendToEndlessAnswers(_ workspace: Workspace, lines: Int, drainTimeout: String) throws
            -> (ChildProcess, H2LoopbackRig)
        {
            let (rig, key) = try SendCommandHTTP2Tests.tokenRig(workspace, plan: H2FailurePlan(misbehaviour: .endlessAnswer))
            try workspace.writeCampaign(lines: lines)
            let send = try SendCommandTests.launch(
                ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", workspace.path("campaign.jsonl"),
                 "--report", workspace.path("report.json"), "--checkpoint", workspace.path("ckpt"), "--no-token-cache",
                 "--answer-timeout", "120", "--drain-timeout", drainTimeout] + SendCommandHTTP2Tests.tokenArguments(workspace, key: key))
            _ = rig.statistics { $0.requests >= 1 }
            return (send, rig)
        }

        static func expectAccountedFor(_ workspace: Workspace, sourceLocation: SourceLocation = #_sourceLocation) throws {
            let report = try SendCommandTests.report(workspace.path("report.json"))
            #expect(report.isComplete && report.accepted == 0 && report.failed == report.submitted && report.submitted > 0,
                    "\(report)", sourceLocation: sourceLocation)
            #expect(report.failedByReason.keys.allSatisfy { $0 == "cancelled" }, "\(report.failedByReason)", sourceLocation: sourceLocation)
            let checkpoint = try String(contentsOfFile: workspace.path("ckpt"), encoding: .utf8)
            #expect(checkpoint.contains("line 0"), "nothing is done: a resume sends it all", sourceLocation: sourceLocation)
        }

        /// 100 lines are all handed over before the signal, 5000 are not: a stop either way.
        @Test(arguments: [100, 5000])
        func sigtermDrainsForAtMostTheDrainTimeoutThenExitsThree(lines: Int) async throws {
            let workspace = try Workspace()
            defer { workspace.remove() }
            let (send, rig) = try Self.sendToEndlessAnswers(workspace, lines: lines, drainTimeout: "1")
            defer { rig.gateway.stop() }
            send.kill(SIGTERM)
            // The drain's second, then the report: the bound is a hang guard, far above both.
            #expect(try await send.exitStatus(within: .seconds(60)) == 3, "stderr: \(send.errors)")
            #expect(send.errors.contains("stopped by a signal"), "stderr: \(send.errors)")
            try Self.expectAccountedFor(workspace)
        }

        @Test func aSecondSignalEndsTheDrainAtOnce() async throws {
            let workspace = try Workspace()
            defer { workspace.remove() }
            let (send, rig) = try Self.sendToEndlessAnswers(workspace, lines: 5000, drainTimeout: "600")
            defer { rig.gateway.stop() }
            send.kill(SIGTERM)
            _ = eventually({ send.errors }, until: { $0.contains("finishing what is in flight") || !send.isRunning })
            send.kill(SIGINT)
            // Ten minutes of drain unless the second signal ends it.
            #expect(try await send.exitStatus(within: .seconds(60)) == 3, "stderr: \(send.errors)")
            #expect(send.errors.contains("a second signal"), "stderr: \(send.errors)")
            try Self.expectAccountedFor(workspace)
        }
    }
}
