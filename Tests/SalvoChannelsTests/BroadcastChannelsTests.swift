import Foundation
import SalvoEngine
import SalvoIO
import Testing
@testable import SalvoChannels

/// The client without a management gateway: what it refuses before sending, an unreachable
/// gateway, and the team's provider token taken from the token cache `salvo send` uses.
@Suite(.timeLimit(.minutes(2))) struct BroadcastChannelsTests {
    static func client(port: Int, authentication: BroadcastChannelsConfiguration.Authentication = .certificate)
        throws -> BroadcastChannels
    {
        var configuration = BroadcastChannelsConfiguration(gateway: Endpoint(host: "127.0.0.1", port: port),
                                                           bundleID: "com.example.scores", authentication: authentication)
        configuration.maximumAttempts = 2
        configuration.retryBackoff = .milliseconds(10)
        return try BroadcastChannels(configuration)
    }

    /// A port nothing listens on: bound, never listened, so that no other test takes it meanwhile.
    static func closedPort() throws -> (Int32, Int) {
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        try #require(withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } } == 0)
        withUnsafeMutablePointer(to: &address) { _ = $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) } }
        return (socket, Int(UInt16(bigEndian: address.sin_port)))
    }

    @Test func aCountOverTheAppsLimitIsRefusedBeforeAnythingIsSent() async throws {
        let (socket, port) = try Self.closedPort()
        defer { close(socket) }
        let channels = try Self.client(port: port)
        for count in [0, 10_001] {
            let error = await #expect(throws: BroadcastChannelError.self) { try await channels.create(count: count, storagePolicy: .noStorage) }
            guard case .invalidRequest(let why)? = error?.kind else {
                Issue.record("\(String(describing: error))")
                continue
            }
            #expect(why.contains("10,000") && error?.requestID == nil, "nothing was sent: \(why)")
        }
        await channels.shutdown()
    }

    @Test func anUnreachableGatewayIsATransportErrorNamingItAndTheRequest() async throws {
        let (socket, port) = try Self.closedPort()
        defer { close(socket) }
        let channels = try Self.client(port: port)
        // Bounded by the suite's time limit: a refused connect is retried a few times, then given up.
        let error = await #expect(throws: BroadcastChannelError.self) { try await channels.list() }
        guard case .transport(let what)? = error?.kind else {
            Issue.record("\(String(describing: error))")
            return
        }
        #expect(what.contains("cannot connect"), "\(what)")
        #expect(error?.description.contains("127.0.0.1:\(port)") == true && error?.requestID?.count == 36, "\(String(describing: error))")
        await channels.shutdown()
    }

    /// Two clients of one team, one after the other, as two `salvo channel` commands: the
    /// second takes the token the first signed and left in the cache, not one of its own.
    @Test func clientsOfOneTeamShareTheTokenInTheCache() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-channels-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let credentials = try ProviderCredentials(pem: try DevelopmentPKI.makeSigningKey(), keyID: "TESTKEY001", teamID: "TESTTEAM01")
        let cache = ProviderTokenCache(path: directory + "/provider-tokens")
        var tokens: [String] = []
        for _ in 1...2 {
            tokens.append(try await ChannelTokens(credentials: credentials, store: cache).current().text)
        }
        #expect(tokens[0] == tokens[1])
        let cached = try String(contentsOfFile: cache.path, encoding: .utf8)
        #expect(cached.contains("TESTTEAM01\tTESTKEY001") && cached.contains(tokens[0]) && !cached.contains("PRIVATE KEY"))
        let own = try await ChannelTokens(credentials: credentials, store: nil).current()
        #expect(own.text != tokens[0], "without a store the client signs its own")
    }

    /// 403 ExpiredProviderToken on a token 25 minutes old (another process signed it and
    /// left it in the cache): renewed through the cache, which then holds the new one for
    /// the team's other processes. On a token signed a moment ago: no renewal (APNs would
    /// answer 429), but an error that asks about the clock.
    @Test func anExpiredTokenIsRenewedThroughTheCacheUnlessItIsTooYoung() async throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-channels-\(UUID())").path
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let credentials = try ProviderCredentials(pem: try DevelopmentPKI.makeSigningKey(), keyID: "TESTKEY001", teamID: "TESTTEAM01")
        let cache = ProviderTokenCache(path: directory + "/provider-tokens")
        let signed = Int64(time(nil)) - 25 * 60
        try "salvo-provider-tokens v1\nTESTTEAM01\tTESTKEY001\t\(credentials.keyFingerprint)\t\(signed)\tanother.process.token\n"
            .write(toFile: cache.path, atomically: true, encoding: .utf8)
        chmod(cache.path, 0o600)
        let tokens = try ChannelTokens(credentials: credentials, store: cache)
        let old = try await tokens.current()
        #expect(old.text == "another.process.token" && old.issuedAt == signed)
        let renewed = try await tokens.renewal(refusing: old)
        #expect(renewed.text != old.text && renewed.issuedAt > signed)
        #expect(try String(contentsOfFile: cache.path, encoding: .utf8).contains(renewed.text))

        let problem = await #expect(throws: ChannelTokenProblem.self) { try await tokens.renewal(refusing: renewed) }
        #expect(problem?.description.contains("clock") == true, "\(String(describing: problem))")
    }
}
