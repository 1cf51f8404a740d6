import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoChannels

/// `BroadcastChannels` against the real mock's channel management port (HTTP/2 over TLS,
/// client certificate or token), the mock's registry as the judge.
@Suite(.serialized, .timeLimit(.minutes(2)), .ownThread("channel-management-gateway-tests")) struct ManagementGatewayTests {
    static func rig(channelLimit: Int = MockChannelRegistry.defaultLimit) throws -> H2LoopbackRig {
        try H2LoopbackRig {
            $0.channelManagementPort = 0
            $0.channelLimit = channelLimit
        }
    }

    static func client(_ rig: H2LoopbackRig) throws -> BroadcastChannels {
        try BroadcastChannels(DeviceGatewayTests.configuration(port: try #require(rig.gateway.channelsPort)))
    }

    @Test func aChannelIsCreatedReadListedAndDeletedAndThenUnknown() async throws {
        let rig = try Self.rig()
        defer { rig.gateway.stop() }
        let channels = try Self.client(rig)
        let created = try await channels.create(storagePolicy: .mostRecent)
        #expect(created.storagePolicy == .mostRecent && created.requestID.count == 36)
        #expect(rig.gateway.channels.list(bundleID: "com.example.app") == [created.id], "the id is the one the gateway made")
        let read = try await channels.read(created.id)
        #expect(read.id == created.id && read.storagePolicy == .mostRecent && read.requestID != created.requestID)
        #expect(try await channels.list() == [created.id])
        try await channels.delete(created.id)
        #expect(try await channels.list() == [])
        let error = await #expect(throws: BroadcastChannelError.self) { try await channels.read(created.id) }
        #expect(error?.kind == .refused(status: 400, reason: .apns(.channelNotRegistered)), "\(String(describing: error))")
        #expect(error?.channelID == created.id && error?.requestID?.count == 36)
        await channels.shutdown()
        let mock = rig.gateway.statistics()
        #expect(mock.channelOperations == ["create": 1, "read": 1, "list": 2, "delete": 1])
        #expect(mock.rejectedChannelOperations == ["ChannelNotRegistered": 1])
    }

    @Test func manyAreCreatedAtOnceEachOnceAndTheLimitStopsTheBatchWithWhatWasMade() async throws {
        let rig = try Self.rig(channelLimit: 7)
        defer { rig.gateway.stop() }
        let channels = try Self.client(rig)
        let five = try await channels.create(count: 5, storagePolicy: .noStorage)
        #expect(five.error == nil && five.channels.count == 5)
        #expect(Set(five.channels.map(\.id)) == Set(rig.gateway.channels.list(bundleID: "com.example.app")))
        let more = try await channels.create(count: 5, storagePolicy: .noStorage)
        #expect(more.channels.count == 2, "the limit is 7")
        #expect(more.error?.reason == .cannotCreateChannelConfig, "\(String(describing: more.error))")
        #expect(more.error?.description.contains("10,000 channels") == true)
        #expect(rig.gateway.channels.list(bundleID: "com.example.app").count == 7)
        await channels.shutdown()
    }

    @Test func aBundleIDTheCertificateDoesNotCoverIsTopicMismatch() async throws {
        let rig = try H2LoopbackRig {
            $0.channelManagementPort = 0
            $0.allowedTopics = ["com.example.other"]
        }
        defer { rig.gateway.stop() }
        let channels = try Self.client(rig)
        let error = await #expect(throws: BroadcastChannelError.self) { try await channels.list() }
        #expect(error?.kind == .refused(status: 403, reason: .apns(.topicMismatch)), "\(String(describing: error))")
        await channels.shutdown()
    }
}
