import Crypto
import Foundation
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Synchronization
import Testing

/// UNIX seconds that only the test moves.
final class TestClock: Sendable {
    private let seconds: Atomic<Int64>

    init(_ start: Int64) { seconds = Atomic(start) }

    var now: Int64 { seconds.load(ordering: .relaxed) }

    func set(_ value: Int64) { seconds.store(value, ordering: .relaxed) }

    var function: @Sendable () -> Int64 { { [self] in now } }
}

/// An AuthKey as Apple hands it out, and the gateway's check of what it signs.
enum AuthKey {
    static let keyID = "ABCDE12345"
    static let teamID = "TEAM123456"
    static let pem = P256.Signing.PrivateKey().pemRepresentation
    static let verifier = try! ProviderTokenVerifier(authKeyPEM: pem, keyID: keyID, teamID: teamID)
    static let credentials = try! ProviderCredentials(pem: pem, keyID: keyID, teamID: teamID)

    /// The mock gateway's verdict on `token` at `now`.
    static func verify(_ token: ProviderTokenSigner.Token, now: Int64) -> ProviderTokenVerifier.Outcome {
        Array(token.text.utf8).withUnsafeBytes { verifier.verify($0, now: now) }
    }
}

/// Expects that `text` quotes no part of `pem`'s base64 (any 12 characters in a row).
func expectNoKeyMaterial(_ text: String, from pem: String, sourceLocation: SourceLocation = #_sourceLocation) {
    let base64 = Array(pem.split(separator: "\n").filter { !$0.hasPrefix("-----") }.joined())
    for start in stride(from: 0, to: base64.count - 12, by: 1) {
        let chunk = String(base64[start..<start + 12])
        if text.contains(chunk) {
            Issue.record("'\(text)' quotes the key's base64", sourceLocation: sourceLocation)
            return
        }
    }
}

@Suite struct ProviderTokenSignerTests {
    let start: Int64 = 1_700_000_000
    let clock: TestClock
    let signer: ProviderTokenSigner

    init() throws {
        clock = TestClock(start)
        signer = try ProviderTokenSigner(credentials: AuthKey.credentials, clock: clock.function)
    }

    // MARK: Renewal by time

    @Test func theFirstTokenIsSignedAtTheClocksTimeAndVerifies() throws {
        let token = signer.token()!
        #expect(token.generation == 1)
        #expect(signer.generation == 1)
        #expect(token.issuedAt == start)
        #expect(AuthKey.verify(token, now: start) == .valid(issuedAt: start))
        #expect(token.authorization == Array("bearer \(token.text)".utf8))
        let parsed = try Array(token.text.utf8).withUnsafeBytes { try ProviderToken.parse($0) }
        #expect(parsed.token == ProviderToken(keyID: AuthKey.keyID, teamID: AuthKey.teamID, issuedAt: start))

        // The JSON exactly as APNs documents it.
        let parts = token.text.split(separator: ".").map { part in
            Array(part.utf8).withUnsafeBytes { Base64URL.decode($0).map { String(decoding: $0, as: UTF8.self) } }
        }
        #expect(parts.count == 3)
        #expect(parts[0] == #"{"alg":"ES256","kid":"ABCDE12345"}"#)
        #expect(parts[1] == #"{"iss":"TEAM123456","iat":1700000000}"#)

        // The verifier is not a rubber stamp: another key's, or another team's, refuses it.
        let otherKey = try ProviderTokenVerifier(authKeyPEM: P256.Signing.PrivateKey().pemRepresentation,
                                                 keyID: AuthKey.keyID, teamID: AuthKey.teamID)
        let otherTeam = try ProviderTokenVerifier(authKeyPEM: AuthKey.pem, keyID: AuthKey.keyID, teamID: "TEAM999999")
        for verifier in [otherKey, otherTeam] {
            #expect(Array(token.text.utf8).withUnsafeBytes { verifier.verify($0, now: start) } == .invalid)
        }
    }

    @Test func theSameTokenServesUntilFiftyMinutesThenANewOneThatVerifies() throws {
        let first = signer.token()!
        for age in [0, 1, 600, 1199, 1200, 2400, 2999] as [Int64] {
            clock.set(start + age)
            try signer.refreshIfDue()
            #expect(signer.generation == 1, "renewed at \(age) s")
            #expect(signer.token()!.text == first.text)
        }

        clock.set(start + 3000)
        try signer.refreshIfDue()
        let second = signer.token()!
        #expect(signer.generation == 2)
        #expect(second.generation == 2 && second.issuedAt == start + 3000)
        #expect(second.text != first.text)
        #expect(AuthKey.verify(second, now: start + 3000) == .valid(issuedAt: start + 3000))
        // The first stays good for connections that have not switched yet.
        #expect(AuthKey.verify(first, now: start + 3000) == .valid(issuedAt: start))

        clock.set(start + 6000)
        try signer.refreshIfDue()
        #expect(signer.token()!.generation == 3 && signer.token()!.issuedAt == start + 6000)
    }

    @Test func refreshIfDueNeverRenewsWithinTwentyMinutesOfTheLastRenewal() throws {
        // After an early renewal (a 403 at 20 minutes), the next is 50 minutes after it.
        clock.set(start + 1200)
        #expect(try signer.expired(generation: 1) == .retry)
        let renewed = start + 1200
        for second in renewed..<renewed + ProviderTokenSigner.refreshAge {
            clock.set(second)
            try signer.refreshIfDue()
        }
        #expect(signer.generation == 2)

        // Nor does a 403 for the token just renewed: that is the clock, not the token.
        clock.set(renewed + ProviderToken.minimumRefreshInterval - 1)
        #expect(try signer.expired(generation: 2) == .clockSkew(age: ProviderToken.minimumRefreshInterval - 1))
        #expect(signer.generation == 2)

        // A clock that goes back renews nothing.
        clock.set(renewed - 10_000)
        try signer.refreshIfDue()
        #expect(signer.generation == 2)

        clock.set(renewed + ProviderTokenSigner.refreshAge)
        try signer.refreshIfDue()
        #expect(signer.generation == 3)
    }

    @Test func manyThreadsFindingTheRenewalDueSignOnce() throws {
        let failures = Atomic<Int>(0)
        for round in 1...20 {
            clock.set(start + Int64(round) * ProviderTokenSigner.refreshAge)
            DispatchQueue.concurrentPerform(iterations: 16) { _ in
                do { try signer.refreshIfDue() } catch { failures.add(1, ordering: .relaxed) }
            }
            #expect(signer.generation == UInt32(round + 1))
        }
        #expect(failures.load(ordering: .relaxed) == 0)
        #expect(AuthKey.verify(signer.token()!, now: clock.now) == .valid(issuedAt: clock.now))
    }

    @Test func tokensReadFromManyThreadsWhileItIsRenewedAreWholeAndInOrder() throws {
        // Four threads take the token as connections do while this one renews it 20 times:
        // every token seen must be one the signer made (generation n signed at
        // start + (n - 1) * refreshAge, a JWT that verifies), never older than the
        // generation that sent the thread to it, and never older than one seen before.
        let renewals: UInt32 = 20
        let seen = Locked<[[(generation: UInt32, token: ProviderTokenSigner.Token)]]>([])
        let done = DispatchGroup()
        for _ in 0..<4 {
            done.enter()
            Thread { [signer] in
                var tokens: [(generation: UInt32, token: ProviderTokenSigner.Token)] = []
                var cached: UInt32 = 0
                while cached <= renewals {
                    let generation = signer.generation
                    guard generation != cached else { continue }
                    let token = signer.token()!
                    tokens.append((generation, token))
                    cached = token.generation
                }
                seen.withLock { $0.append(tokens) }
                done.leave()
            }.start()
        }
        for round in 1...Int64(renewals) {
            clock.set(start + round * ProviderTokenSigner.refreshAge)
            try signer.refreshIfDue()
        }
        #expect(done.wait(timeout: .now() + 60) == .success)

        let threads = seen.withLock { $0 }
        #expect(threads.count == 4)
        for tokens in threads {
            #expect(tokens.last?.token.generation == renewals + 1)
            #expect(tokens.allSatisfy { $0.token.generation >= $0.generation })
            #expect(zip(tokens, tokens.dropFirst()).allSatisfy { $0.token.generation < $1.token.generation })
            for token in tokens.map(\.token) {
                let issuedAt = start + Int64(token.generation - 1) * ProviderTokenSigner.refreshAge
                #expect(token.issuedAt == issuedAt)
                #expect(token.authorization == Array("bearer \(token.text)".utf8))
                #expect(AuthKey.verify(token, now: issuedAt) == .valid(issuedAt: issuedAt))
            }
        }
    }

    // MARK: 403 ExpiredProviderToken

    @Test func anExpiredOlderTokenIsRetriedWithTheCurrentOneWithoutSigning() throws {
        clock.set(start + 3000)
        try signer.refreshIfDue()
        let current = signer.token()!

        clock.set(start + 3001)
        #expect(try signer.expired(generation: 1) == .retry)
        #expect(signer.generation == 2)
        #expect(signer.token()!.text == current.text)
    }

    @Test func anExpiredCurrentTokenTwentyMinutesOldIsRenewedAndRetried() throws {
        clock.set(start + ProviderToken.minimumRefreshInterval)
        #expect(try signer.expired(generation: 1) == .retry)
        let renewed = signer.token()!
        #expect(renewed.generation == 2 && renewed.issuedAt == start + 1200)
        #expect(AuthKey.verify(renewed, now: clock.now) == .valid(issuedAt: start + 1200))
    }

    @Test func anExpiredCurrentTokenYoungerThanTwentyMinutesIsAClockFaultAndNotRenewed() throws {
        clock.set(start + 1199)
        let verdict = try signer.expired(generation: 1)
        #expect(verdict == .clockSkew(age: 1199))
        #expect(verdict.description.contains("signed 19 minutes ago has expired"))
        #expect(verdict.description.contains("is this machine's clock right?"))
        #expect(signer.generation == 1)

        clock.set(start + 30)
        #expect(try signer.expired(generation: 1).description.contains("signed 30 seconds ago"))
        #expect(signer.generation == 1)
    }

    @Test func manyStreamsRefusedAtOnceRenewTheTokenOnce() throws {
        clock.set(start + 1500)
        let verdicts = Locked<[ExpiredTokenVerdict]>([])
        DispatchQueue.concurrentPerform(iterations: 32) { _ in
            let verdict = (try? signer.expired(generation: 1)) ?? .clockSkew(age: -1)
            verdicts.withLock { $0.append(verdict) }
        }
        #expect(verdicts.withLock { $0 } == Array(repeating: .retry, count: 32))
        #expect(signer.generation == 2)
    }

    @Test func aTokenDoesNotPrintItself() {
        let token = signer.token()!
        var dumped = "", dumpedSigner = ""
        dump(token, to: &dumped)
        dump(signer, to: &dumpedSigner)
        for text in [token.description, String(reflecting: token), "\(token)", dumped, dumpedSigner,
                     "\(signer)", String(reflecting: signer)] {
            #expect(!text.contains(token.text))
            #expect(!text.contains(token.text.split(separator: ".")[2]))
        }
    }
}

extension ProviderTokenSignerTests {
    /// Loading the key: under ProviderTokenSignerTests so that one filter runs both.
    @Suite struct Credentials {
        let directory: CampaignScratchDirectory

        init() throws { directory = try CampaignScratchDirectory() }

        /// `pem` written as an AuthKey file with `mode`; returns its path.
        func keyFile(_ pem: String, mode: mode_t = 0o600, name: String = "AuthKey_\(AuthKey.keyID).p8") throws -> String {
            let path = try directory.write(name, pem)
            #expect(chmod(path, mode) == 0)
            return path
        }

        /// The error loading `path` gives; records an issue when there is none.
        func failure(_ path: String, keyID: String = AuthKey.keyID, teamID: String = AuthKey.teamID,
                     sourceLocation: SourceLocation = #_sourceLocation) -> ProviderCredentialsError? {
            do {
                _ = try ProviderCredentials(keyFile: path, keyID: keyID, teamID: teamID)
                Issue.record("\(path) was accepted", sourceLocation: sourceLocation)
                return nil
            } catch {
                #expect(error.source == path, sourceLocation: sourceLocation)
                #expect(error.description.contains(path), sourceLocation: sourceLocation)
                return error
            }
        }

        /// A key made by the openssl command line, as PEM text.
        func openssl(_ arguments: [String]) async throws -> String {
            let out = "\(directory.path)/openssl-\(UUID().uuidString).pem"
            let child = try ChildProcess("/usr/bin/env", ["openssl"] + arguments + ["-out", out])
            let status = try await child.exitStatus(within: .seconds(60))
            #expect(status == 0, "openssl \(arguments): \(child.errors)")
            return try String(contentsOfFile: out, encoding: .utf8)
        }

        @Test func anAuthKeyFileLoadsAndSignsTokensTheGatewayAccepts() throws {
            let path = try keyFile(AuthKey.pem)
            let credentials = try ProviderCredentials(keyFile: path, keyID: AuthKey.keyID, teamID: AuthKey.teamID)
            #expect(credentials.source == path)
            #expect(credentials.warnings.isEmpty)
            let signer = try ProviderTokenSigner(credentials: credentials, clock: { 1_700_000_000 })
            #expect(AuthKey.verify(signer.token()!, now: 1_700_000_000) == .valid(issuedAt: 1_700_000_000))
        }

        @Test func aWorldReadableKeyFileIsRefusedWithTheChmodHintUnlessAllowed() throws {
            let path = try keyFile(AuthKey.pem, mode: 0o644)
            let error = try #require(failure(path))
            #expect(error.problem == .worldReadable)
            #expect(error.description.contains("readable by every user"))
            #expect(error.description.contains("chmod 600 \(path)"))
            #expect(error.description.contains("--allow-world-readable-key"))
            expectNoKeyMaterial(error.description, from: AuthKey.pem)

            let allowed = try ProviderCredentials(keyFile: path, keyID: AuthKey.keyID, teamID: AuthKey.teamID,
                                                  allowWorldReadable: true)
            #expect(allowed.keyID == AuthKey.keyID)

            // Readable by its owner, or its group: accepted.
            for mode: mode_t in [0o600, 0o640, 0o400] {
                #expect(chmod(path, mode) == 0)
                #expect(throws: Never.self, "mode \(String(mode, radix: 8))") {
                    try ProviderCredentials(keyFile: path, keyID: AuthKey.keyID, teamID: AuthKey.teamID)
                }
            }
        }

        @Test func aMissingKeyFileSaysWhy() throws {
            let path = "\(directory.path)/AuthKey_NOPE.p8"
            let error = try #require(failure(path))
            #expect(error.problem == .unreadable(errno: .noSuchFileOrDirectory))
            #expect(error.description.contains("cannot read the key file: ENOENT (No such file or directory)"))

            // A directory (world-readable, as most are) is not told to chmod.
            let directoryError = try #require(failure(directory.path))
            #expect(directoryError.problem == .unreadable(errno: .isDirectory))
            #expect(directoryError.description.contains("EISDIR (Is a directory)"))
        }

        @Test(arguments: [
            ("garbage", "hello, this is not a key\n\u{1}\u{2}\u{3}", "no -----BEGIN line"),
            ("empty", "", "no -----BEGIN line"),
            ("public key", P256.Signing.PrivateKey().publicKey.pemRepresentation, "holds a PUBLIC KEY but no private key"),
        ])
        func malformedKeyFilesAreRefused(_ what: String, _ text: String, _ expected: String) throws {
            let error = try #require(failure(try keyFile(text)))
            guard case .notAPrivateKey = error.problem else {
                Issue.record("\(what): \(error)")
                return
            }
            #expect(error.description.contains(expected), "\(what): \(error)")
            #expect(error.description.contains("not a PEM private key"))
            expectNoKeyMaterial(error.description, from: text)
        }

        @Test func aCertificateInsteadOfTheKeyIsRefused() throws {
            let certificate = try DevelopmentPKI.makeAuthority().certificatePEM
            let error = try #require(failure(try keyFile(certificate)))
            #expect(error.description.contains("holds a certificate but no private key"))
            #expect(error.description.contains("AuthKey_<KEYID>.p8"))
            expectNoKeyMaterial(error.description, from: certificate)
        }

        @Test func aTruncatedKeyIsRefused() throws {
            var lines = AuthKey.pem.split(separator: "\n").map(String.init)
            // Characters cut from the base64: no longer whole groups of four.
            var cut = lines
            cut[1] = String(cut[1].dropLast(3))
            var error = try #require(failure(try keyFile(cut.joined(separator: "\n"), name: "cut.p8")))
            #expect(error.description.contains("its base64 is cut short or damaged"))
            expectNoKeyMaterial(error.description, from: AuthKey.pem)

            // A whole line cut: the base64 is fine, the DER inside ends too soon.
            lines.remove(at: 2)
            error = try #require(failure(try keyFile(lines.joined(separator: "\n"), name: "short.p8")))
            #expect(error.description.contains("its DER structure is damaged or cut short"))
            expectNoKeyMaterial(error.description, from: AuthKey.pem)

            // The end line lost.
            let headless = AuthKey.pem.split(separator: "\n").dropLast().joined(separator: "\n")
            error = try #require(failure(try keyFile(headless, name: "open.p8")))
            #expect(error.description.contains("-----END PRIVATE KEY----- line is missing"))
            expectNoKeyMaterial(error.description, from: AuthKey.pem)
        }

        @Test func aP384KeyIsRefusedAsNotP256() throws {
            let pem = P384.Signing.PrivateKey().pemRepresentation
            let error = try #require(failure(try keyFile(pem)))
            #expect(error.problem == .notP256("an EC P-384 key"))
            #expect(error.description.contains("an EC P-384 key, not a P-256 (ES256) key"))
            expectNoKeyMaterial(error.description, from: pem)
        }

        @Test func anRSAKeyInTraditionalFormIsRefusedByItsLabel() throws {
            let pem = "-----BEGIN RSA PRIVATE KEY-----\nMIIBOgIBAAJBAKj34GkxFhD90vcNLYLInFEX6Ppy1tPf9Cnzj4p4WGeKLs1Pt8Qu\n-----END RSA PRIVATE KEY-----\n"
            let error = try #require(failure(try keyFile(pem)))
            #expect(error.problem == .notP256("an RSA key"))
            expectNoKeyMaterial(error.description, from: pem)
        }

        @Test(arguments: [
            (["genpkey", "-algorithm", "RSA", "-pkeyopt", "rsa_keygen_bits:2048"], "an RSA key"),
            (["genpkey", "-algorithm", "ED25519"], "an Ed25519 key"),
            (["ecparam", "-genkey", "-noout", "-name", "secp384r1"], "an EC P-384 key"),
        ])
        func keysOfOtherKindsFromOpenSSLAreRefusedAsNotP256(_ command: [String], _ kind: String) async throws {
            let pem = try await openssl(command)
            let error = try #require(failure(try keyFile(pem)))
            #expect(error.problem == .notP256(kind))
            #expect(error.description.contains("\(kind), not a P-256 (ES256) key"))
            expectNoKeyMaterial(error.description, from: pem)
        }

        @Test func aP256KeyInSEC1FormIsAccepted() async throws {
            let pem = try await openssl(["ecparam", "-genkey", "-noout", "-name", "prime256v1"])
            #expect(pem.hasPrefix("-----BEGIN EC PRIVATE KEY-----"))
            let credentials = try ProviderCredentials(keyFile: try keyFile(pem), keyID: AuthKey.keyID, teamID: AuthKey.teamID)
            let verifier = try ProviderTokenVerifier(authKeyPEM: pem, keyID: AuthKey.keyID, teamID: AuthKey.teamID)
            let token = try ProviderTokenSigner(credentials: credentials, clock: { 1_700_000_000 }).token()!
            #expect(Array(token.text.utf8).withUnsafeBytes { verifier.verify($0, now: 1_700_000_000) } == .valid(issuedAt: 1_700_000_000))
        }

        @Test func emptyIdsAreRefusedAndUnusualOnesWarned() throws {
            let path = try keyFile(AuthKey.pem)
            #expect(failure(path, keyID: "")?.problem == .emptyKeyID)
            #expect(failure(path, teamID: "")?.problem == .emptyTeamID)
            #expect(failure(path, keyID: "ABCDE12345\n")?.problem == .controlCharacter("key id"))
            #expect(throws: ProviderCredentialsError(source: ProviderCredentials.textSource, problem: .emptyTeamID)) {
                try ProviderCredentials(pem: AuthKey.pem, keyID: AuthKey.keyID, teamID: "")
            }

            let unusual = try ProviderCredentials(keyFile: path, keyID: "KEY-1", teamID: "team_42")
            #expect(unusual.warnings.count == 3)
            #expect(unusual.warnings[0].contains("key id 'KEY-1' has 5 characters; Apple's key ids are 10 letters and digits"))
            #expect(unusual.warnings[1].contains("team id 'team_42' has 7 characters; Apple's team ids are 10 letters and digits"))
            #expect(unusual.warnings[2] == "the key file's name says key id '\(AuthKey.keyID)', but 'KEY-1' was given")
        }

        @Test func describingCredentialsShowsTheIdsAndNeverTheKey() throws {
            let credentials = try ProviderCredentials(keyFile: try keyFile(AuthKey.pem), keyID: AuthKey.keyID, teamID: AuthKey.teamID)
            var dumped = ""
            dump(credentials, to: &dumped)
            let mirrored = Mirror(reflecting: credentials).children.map { "\($0.label ?? ""): \($0.value)" }.joined(separator: ", ")
            for text in [credentials.description, credentials.debugDescription, String(reflecting: credentials),
                         "\(credentials)", "\([credentials])", dumped, mirrored] {
                #expect(text.contains(AuthKey.keyID) && text.contains(AuthKey.teamID), "\(text)")
                expectNoKeyMaterial(text, from: AuthKey.pem)
            }
            #expect(credentials.description == "APNs signing key \(AuthKey.keyID) of team \(AuthKey.teamID) (\(credentials.source))")
        }
    }
}
