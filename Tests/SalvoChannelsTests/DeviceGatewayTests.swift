import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoChannels

/// The client against the real HTTP/2 mock's device port, the gateway a channel client is
/// most easily pointed at by mistake (`api.push.apple.com` instead of the management host):
/// HTTP/2 over TLS with verification, a client certificate or the team's token, and a
/// refusal that says what it is.
@Suite(.serialized, .timeLimit(.minutes(2)), .ownThread("channel-device-gateway-tests")) struct DeviceGatewayTests {
    static let pki = H2LoopbackRig.pki

    static func configuration(port: Int, host: String = "127.0.0.1", clientCertificate: Bool = true,
                              authentication: BroadcastChannelsConfiguration.Authentication = .certificate)
        -> BroadcastChannelsConfiguration
    {
        let tls = SalvoIO.TLSConfiguration.client(certificateChain: clientCertificate ? pki.client.certificate : nil,
                                                  privateKey: clientCertificate ? pki.client.privateKey : nil,
                                                  trustRoots: .certificates(pki.authority.certificate))
        var configuration = BroadcastChannelsConfiguration(gateway: Endpoint(host: host, port: port), bundleID: "com.example.app",
                                                           authentication: authentication, tls: tls)
        configuration.retryBackoff = .milliseconds(10)
        return configuration
    }

    @Test func aChannelRequestToTheDevicePortIsRefusedWithApplesReason() async throws {
        let rig = try H2LoopbackRig()
        defer { rig.gateway.stop() }
        let channels = try BroadcastChannels(Self.configuration(port: rig.gateway.port))
        let listing = await #expect(throws: BroadcastChannelError.self) { try await channels.list() }
        #expect(listing?.kind == .refused(status: 405, reason: .apns(.methodNotAllowed)), "\(String(describing: listing))")
        let creation = await #expect(throws: BroadcastChannelError.self) { try await channels.create(storagePolicy: .noStorage) }
        #expect(creation?.kind == .refused(status: 404, reason: .apns(.badPath)), "\(String(describing: creation))")
        #expect(creation?.requestID?.count == 36)
        await channels.shutdown()
        #expect(rig.statistics { $0.requests >= 2 }.requests == 2, "HTTP/2 requests, each answered once")
    }

    /// The token is the team's, from the engine's signer: the mock verifies it (a refusal of
    /// the path, not of the token).
    @Test func withTokenAuthenticationTheMockSeesOneValidTokenForTheTeam() async throws {
        let pem = try DevelopmentPKI.makeSigningKey()
        let rig = try H2LoopbackRig(clientCertificates: false) {
            $0.tokenVerifier = try! ProviderTokenVerifier(authKeyPEM: pem, keyID: "TESTKEY001", teamID: "TESTTEAM01")
        }
        defer { rig.gateway.stop() }
        let credentials = try ProviderCredentials(pem: pem, keyID: "TESTKEY001", teamID: "TESTTEAM01")
        let channels = try BroadcastChannels(Self.configuration(port: rig.gateway.port, clientCertificate: false,
                                                                authentication: .token(credentials, store: nil)))
        for _ in 1...3 {
            let error = await #expect(throws: BroadcastChannelError.self) { try await channels.create(storagePolicy: .mostRecent) }
            #expect(error?.reason == .badPath, "\(String(describing: error))")
        }
        await channels.shutdown()
        let mock = rig.statistics { $0.requests >= 3 }
        #expect(mock.providerTokensTaken == 1 && mock.rejected(.invalidProviderToken) == 0 && mock.rejected(.missingProviderToken) == 0)
    }

    /// 127.0.0.2 is loopback too, but not a name the mock's certificate holds (localhost,
    /// 127.0.0.1, ::1): verification refuses it before anything is sent.
    @Test func aServerWhoseCertificateDoesNotNameTheHostIsRefused() async throws {
        let rig = try H2LoopbackRig { $0.server.host = "127.0.0.2" }
        defer { rig.gateway.stop() }
        let channels = try BroadcastChannels(Self.configuration(port: rig.gateway.port, host: "127.0.0.2"))
        let error = await #expect(throws: BroadcastChannelError.self) { try await channels.list() }
        guard case .transport(let what)? = error?.kind else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(what.contains("does not name 127.0.0.2"), "\(what)")
        await channels.shutdown()
        #expect(rig.gateway.statistics().requests == 0)
    }
}
