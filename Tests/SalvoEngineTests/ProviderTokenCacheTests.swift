import Crypto
import Foundation
import SalvoEngine
import SalvoTestSupport
import SalvoWire
import Testing

/// One token per team on one machine: signers that share a `ProviderTokenCache` send the
/// token the first one signed, and only the key that signed it reuses it.
@Suite final class ProviderTokenCacheTests {
    let start: Int64 = 1_700_000_000
    let clock: TestClock
    let directory: String
    let cache: ProviderTokenCache

    init() throws {
        clock = TestClock(start)
        directory = NSTemporaryDirectory() + "salvo-token-cache-\(UUID().uuidString.prefix(8))"
        cache = ProviderTokenCache(path: directory + "/state/salvo/provider-tokens")
    }

    deinit { try? FileManager.default.removeItem(atPath: directory) }

    /// A signer on the cache whose first token has come (or whose store failed).
    func signer(_ credentials: ProviderCredentials = AuthKey.credentials) async throws -> ProviderTokenSigner {
        let signer = try ProviderTokenSigner(credentials: credentials, clock: clock.function, store: cache)
        #expect(signer.generation == 0 && signer.token() == nil, "no token until the store gives one")
        try signer.refreshIfDue()
        _ = await eventuallyYielding({ signer.generation > 0 || signer.failure != nil }, until: { $0 })
        return signer
    }

    @Test func aSecondSignerSendsTheTokenTheFirstSignedAndStored() async throws {
        let first = try await signer()
        let token = try #require(first.token(), "\(first.failure ?? "the store gave no token in time")")
        #expect(token.issuedAt == start && AuthKey.verify(token, now: start) == .valid(issuedAt: start))

        clock.set(start + 600)
        let second = try await signer()
        #expect(second.token()?.text == token.text, "ten minutes later: the same token, not a new one")

        var info = stat()
        #expect(stat(cache.path, &info) == 0 && info.st_mode & 0o777 == 0o600)
        #expect(stat(directory + "/state/salvo", &info) == 0 && info.st_mode & 0o777 == 0o700)
        let text = try String(contentsOfFile: cache.path, encoding: .utf8)
        #expect(text.contains(AuthKey.teamID) && text.contains(AuthKey.keyID) && text.contains(token.text))
        expectNoKeyMaterial(text, from: AuthKey.pem)
    }

    @Test func aTokenIsNotReusedAfterFiftyMinutesNorFromTheFutureNorByAnotherKey() async throws {
        let token = try #require(try await signer().token())

        clock.set(start + ProviderTokenSigner.refreshAge)
        #expect(try await signer().token()?.issuedAt == start + ProviderTokenSigner.refreshAge, "50 minutes old: signed anew")

        clock.set(start - 10)
        let fromThePast = try #require(try await signer().token())
        #expect(fromThePast.issuedAt == start - 10 && fromThePast.text != token.text, "the cached token is from the future")

        // Same team and key id, another key: the cached token is not this key's to send.
        clock.set(start)
        let other = try ProviderCredentials(pem: P256.Signing.PrivateKey().pemRepresentation,
                                            keyID: AuthKey.keyID, teamID: AuthKey.teamID)
        let otherToken = try #require(try await signer(other).token())
        #expect(otherToken.text != fromThePast.text)
        #expect(otherToken.issuedAt == start)
    }

    @Test func aCacheEveryUserMayReadIsRefusedAndTheSignerSaysWhy() async throws {
        _ = try await signer()
        chmod(cache.path, 0o644)
        #expect(throws: ProviderTokenStoreError.self) { try cache.check() }
        let signer = try await signer()
        let failure = try #require(signer.failure)
        #expect(failure.contains("chmod 600 \(cache.path)") && failure.contains(AuthKey.teamID), "\(failure)")
        #expect(signer.token() == nil)
    }

    @Test func aDamagedCacheIsNamedAndNotGuessedAt() async throws {
        try FileManager.default.createDirectory(atPath: directory + "/state/salvo", withIntermediateDirectories: true)
        FileManager.default.createFile(atPath: cache.path, contents: Data("salvo-provider-tokens v1\nnot a token\n".utf8),
                                       attributes: [.posixPermissions: 0o600])
        do {
            try cache.check()
            Issue.record("a damaged cache was read")
        } catch {
            #expect(error.description.contains("line 2") && error.description.contains(cache.path), "\(error)")
        }
    }

    /// Renewal by time asks the cache first: a token another process renewed meanwhile is
    /// taken, not replaced by one more.
    @Test func aRenewalTakesTheTokenAnotherProcessRenewedMeanwhile() async throws {
        let first = try await signer()
        let second = try await signer()
        clock.set(start + ProviderTokenSigner.refreshAge)
        try first.refreshIfDue()
        _ = await eventuallyYielding({ first.generation }, until: { $0 == 2 })
        try second.refreshIfDue()
        _ = await eventuallyYielding({ second.generation }, until: { $0 == 2 })
        #expect(first.token()?.text == second.token()?.text)
        #expect(first.token()?.issuedAt == start + ProviderTokenSigner.refreshAge)
    }

    @Test func theDefaultPathFollowsXDGStateHomeThenHome() {
        #expect(ProviderTokenCache.defaultPath(environment: ["XDG_STATE_HOME": "/s", "HOME": "/h"]) == "/s/salvo/provider-tokens")
        #expect(ProviderTokenCache.defaultPath(environment: ["HOME": "/h"]) == "/h/.local/state/salvo/provider-tokens")
        #expect(ProviderTokenCache.defaultPath(environment: ["XDG_STATE_HOME": "relative", "HOME": "/h"])
                == "/h/.local/state/salvo/provider-tokens", "XDG: a relative path is invalid and ignored")
        #expect(ProviderTokenCache.defaultPath(environment: [:]) == nil)
    }
}
