import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import Testing

/// `salvo channel` as a user meets it, the built executable run as a process: against the
/// real mock's channel management port (in process, with throwaway certificates), and
/// usage errors (exit 2) and an unreachable gateway (exit 1), which need no server.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("channel-command-tests")) struct ChannelCommandTests {
    typealias Workspace = SendCommandTests.Workspace

    static func channel(_ operation: String, port: Int, _ workspace: Workspace, _ more: [String]) -> [String] {
        ["channel", operation, "--bundle-id", "com.example.scores", "--gateway", "127.0.0.1:\(port)"] + workspace.tlsArguments() + more
    }

    @Test func usageErrorsExitTwoAndSayWhatToGive() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let cases: [([String], String)] = [
            (Self.channel("read", port: 2196, workspace, []), "--channel-id"),
            (Self.channel("delete", port: 2196, workspace, []), "--channel-id"),
            (Self.channel("create", port: 2196, workspace, ["--storage-policy", "forever"]), "no-storage"),
            (Self.channel("create", port: 2196, workspace, ["--count", "10001"]), "10,000"),
            (Self.channel("create", port: 2196, workspace, ["--count", "0"]), "--count"),
            (["channel", "list", "--bundle-id", "com.example.scores", "--gateway", "sandbox"], "--auth-key"),
            (["channel", "list", "--bundle-id", "com.example.scores", "--gateway", "example.com"] + workspace.tlsArguments(),
             "needs a port"),
            (["channel", "list", "--bundle-id", "com.example.scores", "--gateway", "sandbox", "--auth-key", "k.p8"], "--key-id"),
            (Self.channel("list", port: 2196, workspace, ["--auth-key", "k.p8", "--key-id", "K", "--team-id", "T"]), "not both"),
        ]
        for (arguments, hint) in cases {
            let (status, output, errors) = try await SendCommandTests.run(arguments)
            #expect(status == 2, "\(arguments): stdout \(output) stderr \(errors)")
            #expect(errors.contains(hint), "\(arguments): \(errors)")
            #expect(output.isEmpty)
        }
    }

    @Test func anUnreachableGatewayExitsOneNamingTheGatewayAndTheRequest() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // A port nothing listens on: bound, never listened.
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let (status, output, errors) = try await SendCommandTests.run(Self.channel("list", port: port, workspace, []))
        #expect(status == 1, "stdout \(output) stderr \(errors)")
        #expect(errors.hasPrefix("salvo channel list: channel list at 127.0.0.1:\(port): no answer: cannot connect"), "\(errors)")
        #expect(errors.contains("apns-request-id"), "\(errors)")
    }

    @Test func helpNamesTheOperationsAndTheGateways() async throws {
        let (status, output, _) = try await SendCommandTests.run(["channel", "--help"])
        #expect(status == 0)
        for word in ["create", "read", "delete", "list", "api-manage-broadcast.push.apple.com:2196", "--auth-key"] {
            #expect(output.contains(word), "\(word): \(output)")
        }
        let (createStatus, createHelp, _) = try await SendCommandTests.run(["channel", "create", "--help"])
        #expect(createStatus == 0 && createHelp.contains("most-recent") && createHelp.contains("--token-cache"), "\(createHelp)")
    }

    // MARK: Against the mock's management port

    /// A mock with a management port; with `key`, it takes only provider tokens signed by a
    /// fresh key written to the workspace (`AuthKey.p8`), and no client certificates.
    static func managementRig(_ workspace: Workspace, tokens: Bool = false) throws -> (H2LoopbackRig, key: String?) {
        guard tokens else { return (try H2LoopbackRig { $0.channelManagementPort = 0 }, nil) }
        let pem = try DevelopmentPKI.makeSigningKey()
        let key = workspace.path("AuthKey.p8")
        try pem.write(toFile: key, atomically: true, encoding: .utf8)
        chmod(key, 0o600)
        let rig = try H2LoopbackRig(clientCertificates: false) {
            $0.channelManagementPort = 0
            $0.tokenVerifier = try! ProviderTokenVerifier(authKeyPEM: pem, keyID: SendCommandHTTP2Tests.keyID,
                                                          teamID: SendCommandHTTP2Tests.teamID)
        }
        return (rig, key)
    }

    static func channel(_ operation: String, _ rig: H2LoopbackRig, _ workspace: Workspace, _ more: [String]) -> [String] {
        channel(operation, port: rig.gateway.channelsPort!, workspace, more)
    }

    /// `key: value` lines of a channel's text output.
    static func fields(_ output: String) -> [String: String] {
        Dictionary(output.split(separator: "\n").compactMap { line in
            line.firstRange(of: ": ").map { (String(line[..<$0.lowerBound]), String(line[$0.upperBound...])) }
        }, uniquingKeysWith: { first, _ in first })
    }

    @Test func aChannelIsCreatedReadListedDeletedAndThenUnknownWithExitOne() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, _) = try Self.managementRig(workspace)
        defer { rig.gateway.stop() }
        let (created, createOutput, createErrors) = try await SendCommandTests.run(
            Self.channel("create", rig, workspace, ["--storage-policy", "most-recent"]))
        #expect(created == 0, "\(createErrors)")
        let channel = Self.fields(createOutput)
        let id = try #require(channel["channel-id"])
        #expect(channel["storage-policy"] == "most-recent" && channel["apns-request-id"]?.count == 36, "\(createOutput)")
        #expect(rig.gateway.channels.list(bundleID: "com.example.scores") == [id])

        let (read, readOutput, _) = try await SendCommandTests.run(Self.channel("read", rig, workspace, ["--channel-id", id]))
        #expect(read == 0 && Self.fields(readOutput)["channel-id"] == id && Self.fields(readOutput)["storage-policy"] == "most-recent")
        let (listed, listOutput, listErrors) = try await SendCommandTests.run(Self.channel("list", rig, workspace, []))
        #expect(listed == 0 && listOutput == id + "\n" && listErrors.contains("1 channel of com.example.scores"), "\(listErrors)")
        let (deleted, deleteOutput, _) = try await SendCommandTests.run(Self.channel("delete", rig, workspace, ["--channel-id", id]))
        #expect(deleted == 0 && deleteOutput == "deleted \(id)\n")

        let (gone, goneOutput, goneErrors) = try await SendCommandTests.run(Self.channel("read", rig, workspace, ["--channel-id", id]))
        #expect(gone == 1 && goneOutput.isEmpty)
        #expect(goneErrors.hasPrefix("salvo channel read: channel read of \(id) at 127.0.0.1:\(rig.gateway.channelsPort!): "
                                     + "refused, 400 ChannelNotRegistered"), "\(goneErrors)")
        #expect(goneErrors.contains("apns-request-id "), "\(goneErrors)")
        #expect(rig.gateway.statistics().channelOperations == ["create": 1, "read": 1, "list": 1, "delete": 1])
    }

    @Test func createCountPrintsOneIdALineAndJSONParses() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, _) = try Self.managementRig(workspace)
        defer { rig.gateway.stop() }
        let (status, output, errors) = try await SendCommandTests.run(Self.channel("create", rig, workspace, ["--count", "5"]))
        #expect(status == 0, "\(errors)")
        let ids = output.split(separator: "\n").map(String.init)
        #expect(ids.count == 5 && Set(ids) == Set(rig.gateway.channels.list(bundleID: "com.example.scores")), "\(output)")

        struct Channel: Decodable {
            var channelID: String, storagePolicy: String, messageStoragePolicy: Int, requestID: String
            enum CodingKeys: String, CodingKey {
                case channelID = "channel-id", storagePolicy = "storage-policy", messageStoragePolicy = "message-storage-policy"
                case requestID = "apns-request-id"
            }
        }
        struct Channels: Decodable { var channels: [String] }
        let (_, created, _) = try await SendCommandTests.run(Self.channel("create", rig, workspace, ["--json"]))
        let channel = try JSONDecoder().decode(Channel.self, from: Data(created.utf8))
        #expect(channel.storagePolicy == "no-storage" && channel.messageStoragePolicy == 0 && channel.requestID.count == 36)
        let (_, read, _) = try await SendCommandTests.run(Self.channel("read", rig, workspace, ["--json", "--channel-id", channel.channelID]))
        #expect(try JSONDecoder().decode(Channel.self, from: Data(read.utf8)).channelID == channel.channelID)
        let (_, listed, _) = try await SendCommandTests.run(Self.channel("list", rig, workspace, ["--json"]))
        #expect(Set(try JSONDecoder().decode(Channels.self, from: Data(listed.utf8)).channels) == Set(ids + [channel.channelID]))
        let (_, batch, _) = try await SendCommandTests.run(Self.channel("create", rig, workspace, ["--json", "--count", "2"]))
        #expect(try JSONDecoder().decode(Channels.self, from: Data(batch.utf8)).channels.count == 2, "\(batch)")
    }

    /// The app's limit reached in the middle of a batch: the ids made are printed (they
    /// exist now), and the command exits 1 with Apple's reason.
    @Test func aBatchStoppedByTheLimitPrintsWhatItMadeAndExitsOne() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try H2LoopbackRig {
            $0.channelManagementPort = 0
            $0.channelLimit = 3
        }
        defer { rig.gateway.stop() }
        let (status, output, errors) = try await SendCommandTests.run(Self.channel("create", rig, workspace, ["--count", "5"]))
        #expect(status == 1)
        #expect(Set(output.split(separator: "\n").map(String.init)) == Set(rig.gateway.channels.list(bundleID: "com.example.scores")))
        #expect(output.split(separator: "\n").count == 3, "\(output)")
        #expect(errors.contains("created 3 of 5") && errors.contains("400 CannotCreateChannelConfig"), "\(errors)")
    }

    /// Against `salvo mock --protocol h2` as a process: its first line names the channels
    /// port, and create --count 5 there makes five, as the mock's report counts them.
    @Test func createCountAgainstTheMockCommandsChannelsPort() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        var made: [String] = []
        let report = try await MockH2CommandTests.runMock([]) { _, _, first in
            let port = try #require(first.split(separator: " ").first { $0.hasPrefix("channels=") }.flatMap { Int($0.dropFirst(9)) },
                                    "first line: \(first)")
            let (status, output, errors) = try await SendCommandTests.run(Self.channel("create", port: port, workspace, ["--count", "5"]))
            #expect(status == 0, "\(errors)")
            made = output.split(separator: "\n").map(String.init)
        }
        #expect(made.count == 5 && Set(made).count == 5)
        #expect(report?["channelOperations"] as? [String: Int] == ["create": 5])
    }

    @Test func anAppWithoutTheBroadcastCapabilityIsToldWhereToTurnItOn() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try H2LoopbackRig {
            $0.channelManagementPort = 0
            $0.broadcastsEnabled = false
        }
        defer { rig.gateway.stop() }
        let (status, _, errors) = try await SendCommandTests.run(Self.channel("create", rig, workspace, []))
        #expect(status == 1 && errors.contains("400 FeatureNotEnabled: turn on the Broadcast Capability"), "\(errors)")
    }

    /// `salvo send` and then two `salvo channel` commands of one team: all three send the
    /// token the first signed (the mock, as APNs, refuses a second one within 20 minutes).
    @Test func aSendAndTwoChannelCommandsShareTheTeamsTokenThroughTheCache() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, key) = try Self.managementRig(workspace, tokens: true)
        defer { rig.gateway.stop() }
        let cache = ["--token-cache", workspace.path("tokens")]
        try workspace.writeCampaign(lines: 10)
        let (sent, _, sendErrors) = try await SendCommandTests.run(
            SendCommandHTTP2Tests.ProviderTokenSharingTests.arguments(workspace, port: rig.gateway.port, key: key!, cache))
        #expect(sent == 0, "\(sendErrors)")
        let token = ["--auth-key", key!, "--key-id", SendCommandHTTP2Tests.keyID, "--team-id", SendCommandHTTP2Tests.teamID,
                     "--ca", workspace.path("ca.pem")] + cache
        let base = ["--bundle-id", "com.example.scores", "--gateway", "127.0.0.1:\(rig.gateway.channelsPort!)"] + token
        let (created, output, errors) = try await SendCommandTests.run(["channel", "create"] + base)
        #expect(created == 0, "\(errors)")
        let (listed, listOutput, listErrors) = try await SendCommandTests.run(["channel", "list"] + base)
        #expect(listed == 0 && listOutput == output.split(separator: "\n")[0].dropFirst("channel-id: ".count) + "\n", "\(listErrors)")
        let mock = rig.gateway.statistics()
        #expect(mock.providerTokensTaken == 1 && mock.rejected(.tooManyProviderTokenUpdates) == 0)
        #expect(mock.rejectedChannelOperations.isEmpty, "\(mock.rejectedChannelOperations)")
        for text in [output, errors, listOutput, listErrors] { #expect(!text.contains("eyJ"), "no token is printed") }

        // Without the cache, a second token for the team: refused, exit 1, with the reason.
        let (refused, _, refusal) = try await SendCommandTests.run(["channel", "list", "--no-token-cache"] + base.filter { !cache.contains($0) })
        #expect(refused == 1 && refusal.contains("429 TooManyProviderTokenUpdates") && refusal.contains("token cache"), "\(refusal)")
    }

    @Test func aGatewayWhoseCertificateDoesNotNameItIsRefused() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try H2LoopbackRig {
            $0.channelManagementPort = 0
            $0.server.host = "127.0.0.2"
        }
        defer { rig.gateway.stop() }
        let (status, output, errors) = try await SendCommandTests.run(
            ["channel", "list", "--bundle-id", "com.example.scores", "--gateway", "127.0.0.2:\(rig.gateway.channelsPort!)"]
                + workspace.tlsArguments())
        #expect(status == 1 && output.isEmpty)
        #expect(errors.contains("certificate does not name 127.0.0.2"), "\(errors)")
        #expect(rig.gateway.statistics().channelOperations.isEmpty)
    }
}
