import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoEngine

extension SendCommandHTTP2Tests {
    /// Real use of one Apple key, as `salvo send` processes meet it: a second run, and a
    /// resume right after an interruption, send the team's token from the cache instead of
    /// signing one the gateway would refuse for 20 minutes (the mock refuses as APNs does).
    /// Nested in the serialized suite: its processes run one at a time.
    @Suite struct ProviderTokenSharingTests {
        typealias Workspace = SendCommandTests.Workspace

        static func arguments(_ workspace: Workspace, port: Int, key: String, _ more: [String]) -> [String] {
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(port)", "--input", workspace.path("campaign.jsonl")]
                + SendCommandHTTP2Tests.tokenArguments(workspace, key: key) + more
        }

        @Test func twoSendsInARowShareTheTeamsToken() async throws {
            let workspace = try Workspace()
            defer { workspace.remove() }
            let (rig, key) = try SendCommandHTTP2Tests.tokenRig(workspace)
            defer { rig.gateway.stop() }
            try workspace.writeCampaign(lines: 500)
            let cache = ["--token-cache", workspace.path("tokens")]
            for run in 1...2 {
                let (status, output, errors) = try await SendCommandTests.run(Self.arguments(workspace, port: rig.gateway.port, key: key, cache))
                #expect(status == 0, "run \(run): stdout: \(output)\nstderr: \(errors)")
                #expect(rig.statistics { $0.accepted >= 500 * run }.accepted == 500 * run)
            }
            let mock = rig.gateway.statistics()
            #expect(mock.providerTokensTaken == 1 && mock.rejected(.tooManyProviderTokenUpdates) == 0)
            let cached = try String(contentsOfFile: workspace.path("tokens"), encoding: .utf8)
            #expect(cached.contains(SendCommandHTTP2Tests.teamID) && !cached.contains("PRIVATE KEY"))
        }

        /// SIGINT, then `--resume` within a second: the resume sends the same token, and every
        /// line is accepted once the two runs are put together.
        @Test func aResumeRightAfterAnInterruptionSendsTheSameToken() async throws {
            let workspace = try Workspace()
            defer { workspace.remove() }
            // Held answers keep the first run going long enough to be interrupted.
            let (rig, key) = try SendCommandHTTP2Tests.tokenRig(workspace, plan: H2FailurePlan(responseDelay: .milliseconds(200)))
            defer { rig.gateway.stop() }
            let lines = 50_000
            try workspace.writeCampaign(lines: lines)
            let arguments = Self.arguments(workspace, port: rig.gateway.port, key: key,
                                           ["--token-cache", workspace.path("tokens"), "--checkpoint", workspace.path("ckpt")])
            let first = try SendCommandTests.launch(arguments)
            _ = rig.statistics { $0.accepted >= 1000 }
            first.kill(SIGINT)
            #expect(try await first.exitStatus(within: .seconds(60)) == 3, "stderr: \(first.errors)")
            let (status, output, errors) = try await SendCommandTests.run(arguments + ["--resume"])
            #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
            let mock = rig.statistics { $0.accepted - $0.duplicates >= lines }
            #expect(mock.providerTokensTaken == 1 && mock.rejected(.tooManyProviderTokenUpdates) == 0)
            let missing = Set(H2LoopbackRig.digests(1...lines)).subtracting(mock.acceptedDigests ?? [])
            #expect(missing.isEmpty, "\(missing.count) lines never accepted (accepted \(mock.accepted), duplicates \(mock.duplicates))")
        }

        /// A token for the team was taken from another process a moment ago, and this run may
        /// not share it: refused before anything was accepted, the run stops at once instead of
        /// retrying, and says what to do.
        @Test func aTokenRefusedBeforeAnyAcceptanceStopsTheRunAtOnce() async throws {
            let workspace = try Workspace()
            defer { workspace.remove() }
            let (rig, key) = try SendCommandHTTP2Tests.tokenRig(workspace)
            defer { rig.gateway.stop() }
            try workspace.writeCampaign(lines: 50_000)
            let first = try await SendCommandTests.run(Self.arguments(workspace, port: rig.gateway.port, key: key, ["--no-token-cache"]))
            #expect(first.0 == 0, "stderr: \(first.2)")
            // Tokens are told apart by their `iat`, in seconds: the next run's must differ.
            let signed = Int64(time(nil))
            _ = eventually({ Int64(time(nil)) }, until: { $0 > signed })
            let requestsBefore = rig.gateway.statistics().requests
            let started = ContinuousClock.now
            let (status, output, errors) = try await SendCommandTests.run(
                Self.arguments(workspace, port: rig.gateway.port, key: key, ["--no-token-cache", "--report", workspace.path("report.json")]))
            let elapsed = ContinuousClock.now - started
            #expect(status == 1, "stdout: \(output)\nstderr: \(errors)")
            #expect(errors.contains("TooManyProviderTokenUpdates") && errors.contains(SendCommandHTTP2Tests.teamID)
                    && errors.contains("--token-cache"), "stderr: \(errors)")
            let report = try SendCommandTests.report(workspace.path("report.json"))
            #expect(report.isComplete && report.accepted == 0 && report.failedByReason.keys.allSatisfy { $0 == "authentication_failed" })
            #expect(output.contains("handed") && !output.contains("sent 50,000"), "stdout: \(output)")
            // One request per connection (one stream each until a token is taken), none tried again.
            let refused = rig.gateway.statistics().requests - requestsBefore
            #expect(refused >= 1 && refused <= 2 * 128, "\(refused) requests")
            #expect(elapsed < .seconds(20), "a hang guard; scripts/h2-token-sharing.sh measures the stop: \(elapsed)")
        }

        @Test func aTokenCacheEveryUserMayReadIsRefusedBeforeAnythingIsSent() async throws {
            let workspace = try Workspace()
            defer { workspace.remove() }
            let (rig, key) = try SendCommandHTTP2Tests.tokenRig(workspace)
            defer { rig.gateway.stop() }
            try workspace.writeCampaign(lines: 10)
            let cache = workspace.path("tokens")
            try "salvo-provider-tokens v1\n".write(toFile: cache, atomically: true, encoding: .utf8)
            chmod(cache, 0o644)
            let (status, _, errors) = try await SendCommandTests.run(Self.arguments(workspace, port: rig.gateway.port, key: key,
                                                                               ["--token-cache", cache]))
            #expect(status == 2 && errors.contains("chmod 600 \(cache)"), "stderr: \(errors)")
            #expect(rig.gateway.statistics().requests == 0)
        }
    }
}
