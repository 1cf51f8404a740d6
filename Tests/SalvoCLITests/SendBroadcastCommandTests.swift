import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// `salvo send` with broadcasts (iOS 18 Live Activities): `--broadcast --channel`, and
/// campaign lines naming a `channel_id`, end to end against the in-process HTTP/2 mock.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("send-broadcast-command-tests")) struct SendBroadcastCommandTests {
    typealias Workspace = SendCommandTests.Workspace
    static let update = #"{"aps": {"event": "update", "timestamp": 1767225600, "content-state": {"score": "2-1"}}}"#

    @Test func broadcastsToChannelsAreSentAndAnUnknownChannelIsARowOfTheRejectedList() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, key) = try SendCommandHTTP2Tests.tokenRig(workspace)
        defer { rig.gateway.stop() }
        let live = try (0..<2).map { _ in try rig.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage) }
        let deleted = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        rig.gateway.channels.delete(deleted, bundleID: "com.example.app")
        let payload = workspace.path("update.json")
        try Self.update.write(toFile: payload, atomically: true, encoding: .utf8)

        let (status, output, errors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--broadcast", "--channel", live[0],
             "--channel", deleted, "--channel", live[1], "--payload", payload, "--report", workspace.path("report.json"),
             "--rejected", workspace.path("rejected.csv")] + SendCommandHTTP2Tests.tokenArguments(workspace, key: key))
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.contains("accounting: complete"), "stdout: \(output)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.accepted == 2 && report.rejected == 1 && report.rejectedByReason == ["ChannelNotRegistered": 1])
        let csv = try String(contentsOfFile: workspace.path("rejected.csv"), encoding: .utf8)
        #expect(csv == "token,status,reason,timestamp\nchannel:\(deleted),400,ChannelNotRegistered,\n", "csv: \(csv)")
        let mock = rig.statistics { $0.accepted >= 2 }
        #expect(mock.broadcastsByChannel == [live[0]: 1, live[1]: 1])
        let requests = try #require(mock.acceptedRequests)
        #expect(requests.allSatisfy { $0.pushType == "liveactivity" && $0.topic == nil && $0.expiration == "0" && $0.priority == "10" })
    }

    /// One campaign of device pushes and broadcasts: both accounted for, each rejection
    /// named by its target in the CSV.
    @Test func aCampaignMixesDevicesAndChannels() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, key) = try SendCommandHTTP2Tests.tokenRig(workspace)
        defer { rig.gateway.stop() }
        let channel = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .mostRecent)
        let lines = (1...300).map { n -> String in
            if n % 3 == 0 {
                return #"{"channel_id":"\#(channel)","payload":{"aps":{"event":"update","timestamp":\#(n)}},"expiration":1900000000}"#
            }
            let token = n == 100 ? H2LoopbackRig.deadToken(n) : LoopbackRig.token(n)
            return #"{"token":"\#(token.hex)","payload":{"aps":{"alert":"\#(n)"}}}"#
        } + [#"{"channel_id":"bm90LWEtY2hhbm5lbA==","payload":{"aps":{"event":"end","timestamp":1}}}"#]
        let campaign = workspace.path("campaign.jsonl")
        try (lines.joined(separator: "\n") + "\n").write(toFile: campaign, atomically: true, encoding: .utf8)

        let (status, _, errors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign,
             "--report", workspace.path("report.json"), "--rejected", workspace.path("rejected.csv")]
                + SendCommandHTTP2Tests.tokenArguments(workspace, key: key))
        #expect(status == 0, "stderr: \(errors)")
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.submitted == 301 && report.accepted == 299 && report.rejected == 2)
        #expect(report.rejectedByReason == ["Unregistered": 1, "ChannelNotRegistered": 1])
        let rows = try String(contentsOfFile: workspace.path("rejected.csv"), encoding: .utf8).split(separator: "\n").dropFirst()
        #expect(rows.contains { $0.hasPrefix("\(H2LoopbackRig.deadToken(100).hex),410,Unregistered,") })
        #expect(rows.contains("channel:bm90LWEtY2hhbm5lbA==,400,ChannelNotRegistered,"))
        #expect(rig.statistics { $0.accepted >= 299 }.broadcastsByChannel == [channel: 100])
    }

    @Test(arguments: [
        (["--broadcast", "--payload", "p.json"], "--broadcast needs --channel ID"),
        (["--channel", "Y2hhbm5lbA==", "--payload", "p.json"], "--channel goes with --broadcast"),
        (["--broadcast", "--channel", "not base64!", "--payload", "p.json"], "is not a channel id"),
        (["--broadcast", "--channel", "Y2hhbm5lbA==", "--input", "c.jsonl"], "give no --input or --tokens"),
    ])
    func badBroadcastFlagsExitWithTwo(_ flags: [String], _ message: String) async throws {
        let (status, _, errors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:1", "--cert", "c.pem", "--topic", "com.example.app"] + flags)
        #expect(status == 2 && errors.contains(message), "stderr: \(errors)")
    }

    @Test func aBroadcastOverTheBinaryProtocolOrWithoutABundleIDIsRefused() async throws {
        let (binary, _, binaryErrors) = try await SendCommandTests.run(
            ["send", "--gateway", "127.0.0.1:1", "--broadcast", "--channel", "Y2hhbm5lbA==", "--payload", "p.json"])
        #expect(binary == 2 && binaryErrors.contains("the binary protocol has no broadcasts"), "stderr: \(binaryErrors)")
        let (noBundle, _, noBundleErrors) = try await SendCommandTests.run(
            ["send", "--protocol", "h2", "--gateway", "127.0.0.1:1", "--cert", "c.pem", "--broadcast", "--channel", "Y2hhbm5lbA==",
             "--payload", "p.json"])
        #expect(noBundle == 2 && noBundleErrors.contains("--broadcast needs --bundle-id"), "stderr: \(noBundleErrors)")
    }
}
