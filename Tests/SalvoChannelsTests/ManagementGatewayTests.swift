import Foundation
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

    /// 503, 429 and 500 are sent again after a pause, up to `maximumAttempts` in all; past
    /// that, the last answer is the error.
    @Test func busyAnswersAreSentAgainBoundedAndTheLastIsTheError() async throws {
        let rig = try H2LoopbackRig {
            $0.channelManagementPort = 0
            $0.managementFailures = [.serviceUnavailable, .serviceUnavailable, .serviceUnavailable, .tooManyRequests, .internalServerError]
        }
        defer { rig.gateway.stop() }
        var configuration = DeviceGatewayTests.configuration(port: try #require(rig.gateway.channelsPort))
        configuration.maximumAttempts = 2
        let impatient = try BroadcastChannels(configuration)
        let error = await #expect(throws: BroadcastChannelError.self) { try await impatient.list() }
        #expect(error?.kind == .refused(status: 503, reason: .apns(.serviceUnavailable)), "\(String(describing: error))")
        await impatient.shutdown()

        let channels = try Self.client(rig)  // 4 attempts
        var created: BroadcastChannel?
        do { created = try await channels.create(storagePolicy: .noStorage) } catch { Issue.record("\(error)") }
        await channels.shutdown()
        #expect(rig.gateway.channels.list(bundleID: "com.example.app") == created.map { [$0.id] }, "made once, at the fourth attempt")
        let mock = rig.gateway.statistics()
        #expect(mock.channelOperations == ["create": 1])
        #expect(mock.rejectedChannelOperations == ["ServiceUnavailable": 3, "TooManyRequests": 1, "InternalServerError": 1])
    }

    /// The team's token in the cache is 45 minutes old, which this machine reuses (under 50)
    /// but the gateway calls expired: it is renewed (older than 20 minutes, so allowed),
    /// the request is sent again with the new one, and the cache holds the new one.
    @Test func aTokenTheGatewayCallsExpiredIsRenewedAndTheRequestSentAgain() async throws {
        let pem = try DevelopmentPKI.makeSigningKey()
        let credentials = try ProviderCredentials(pem: pem, keyID: "TESTKEY001", teamID: "TESTTEAM01")
        var verifier = try ProviderTokenVerifier(authKeyPEM: pem, keyID: "TESTKEY001", teamID: "TESTTEAM01")
        verifier.lifetime = 40 * 60
        let rig = try H2LoopbackRig(clientCertificates: false) {
            $0.channelManagementPort = 0
            $0.tokenVerifier = verifier
        }
        defer { rig.gateway.stop() }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-channels-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let cache = ProviderTokenCache(path: directory + "/provider-tokens")
        let signed = Int64(time(nil)) - 45 * 60
        let old = try #require(try ProviderTokenSigner(credentials: credentials, clock: { signed }).token())
        try "salvo-provider-tokens v1\nTESTTEAM01\tTESTKEY001\t\(credentials.keyFingerprint)\t\(signed)\t\(old.text)\n"
            .write(toFile: cache.path, atomically: true, encoding: .utf8)
        chmod(cache.path, 0o600)

        let channels = try BroadcastChannels(DeviceGatewayTests.configuration(
            port: try #require(rig.gateway.channelsPort), clientCertificate: false, authentication: .token(credentials, store: cache)))
        var listed: [String]?
        do { listed = try await channels.list() } catch { Issue.record("\(error)") }
        await channels.shutdown()
        #expect(listed == [])
        #expect(rig.gateway.statistics().rejectedChannelOperations == ["ExpiredProviderToken": 1])
        #expect(rig.gateway.statistics().channelOperations == ["list": 1])
        let cached = try String(contentsOfFile: cache.path, encoding: .utf8)
        #expect(!cached.contains(old.text) && cached.contains("TESTTEAM01\tTESTKEY001"), "the cache holds the renewed token")
    }
}
