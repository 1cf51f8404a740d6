import Crypto
import Foundation
import SalvoWire
import Testing
@testable import SalvoMock

/// The APNs checks without sockets: a request's headers and body in, a reason (or none) out.
@Suite struct RequestValidationTests {
    /// The verdict on a request made of `headers` (name, value) and a payload of `payload` bytes.
    func verdict(_ headers: [(String, String)], payload: Int = 20, allowedTopics: [String] = [],
                 authorization: RequestValidation.Authorization? = nil) -> APNsReason? {
        verdict(bytes: headers.map { ($0.0, Array($0.1.utf8)) }, payload: payload, allowedTopics: allowedTopics,
                authorization: authorization)
    }

    /// The same, with values as bytes (any byte, not only text).
    func verdict(bytes headers: [(String, [UInt8])], payload: Int = 20, allowedTopics: [String] = [],
                 authorization: RequestValidation.Authorization? = nil) -> APNsReason? {
        var validation = RequestValidation()
        for (name, value) in headers {
            guard let header = Array(name.utf8).withUnsafeBytes({ APNsRequestHeader(name: $0) }) else { continue }
            value.withUnsafeBytes {
                validation.header(header, $0, allowedTopics: allowedTopics.map { Array($0.utf8) })
            }
        }
        if let authorization { validation.authorization = authorization }
        [UInt8](repeating: 0x20, count: payload).withUnsafeBytes { validation.body($0) }
        return validation.verdict(tokenAuthentication: authorization != nil)
    }

    let good: [(String, String)] = [(":method", "POST"), (":path", "/3/device/\(h2Token)"),
                                    ("apns-topic", "com.example.app"), ("apns-push-type", "alert")]

    func replacing(_ name: String, with value: String) -> [(String, String)] {
        good.filter { $0.0 != name } + [(name, value)]
    }

    @Test func aWellFormedRequestPasses() {
        #expect(verdict(good) == nil)
        #expect(verdict(good + [("apns-id", "0F9A3C8E-1B2D-4E5F-8A9B-0C1D2E3F4A5B"), ("apns-priority", "1"),
                                ("apns-expiration", "1767225600"), ("apns-collapse-id", String(repeating: "c", count: 64)),
                                ("user-agent", "curl")]) == nil)
        #expect(verdict(good, payload: 4096) == nil)
    }

    @Test func aTopicTakesLettersDigitsDashUnderscoreAndDotOnly() {
        let allowed = Set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_.".utf8)
        let others = good.filter { $0.0 != "apns-topic" }.map { ($0.0, Array($0.1.utf8)) }
        for byte in UInt8.min ... UInt8.max {
            let reason = verdict(bytes: others + [("apns-topic", [UInt8(ascii: "a"), byte, UInt8(ascii: "b")])])
            #expect((reason == nil) == allowed.contains(byte), "byte \(byte): \(String(describing: reason))")
        }
    }

    @Test func eachCheckNamesItsReason() {
        #expect(verdict(replacing(":method", with: "GET")) == .methodNotAllowed)
        #expect(verdict(replacing(":path", with: "/3/devices/\(h2Token)")) == .badPath)
        #expect(verdict(replacing(":path", with: "/3/device/")) == .missingDeviceToken)
        #expect(verdict(replacing(":path", with: "/3/device/\(h2Token)00")) == .badDeviceToken)
        #expect(verdict(replacing(":path", with: "/3/device/\(String(h2Token.dropLast()))g")) == .badDeviceToken)
        #expect(verdict(good.filter { $0.0 != "apns-topic" }, authorization: .valid) == .missingTopic)
        for topic in ["", "com..app", ".com.app", "com.app.", "com app", "com/app", String(repeating: "a", count: 256)] {
            #expect(verdict(replacing("apns-topic", with: topic)) == .badTopic, "\(topic)")
        }
        #expect(verdict(replacing("apns-topic", with: "com.other.app"), allowedTopics: ["com.example.app"]) == .topicDisallowed)
        #expect(verdict(replacing("apns-push-type", with: "sms")) == .invalidPushType)
        #expect(verdict(replacing("apns-push-type", with: "complication")) == .invalidPushType, "the topic lacks .complication")
        #expect(verdict(good + [("apns-priority", "0")]) == .badPriority)
        #expect(verdict(good + [("apns-expiration", "-1")]) == .badExpirationDate)
        #expect(verdict(good + [("apns-expiration", "")]) == .badExpirationDate)
        #expect(verdict(good + [("apns-collapse-id", String(repeating: "c", count: 65))]) == .badCollapseId)
        #expect(verdict(good + [("apns-id", "0f9a3c8e1b2d4e5f8a9b0c1d2e3f4a5b")]) == .badMessageId)
        #expect(verdict(good + [("apns-id", "0f9a3c8e-1b2d-4e5f-8a9b-0c1d2e3f4a5g")]) == .badMessageId)
        #expect(verdict(good + [("apns-topic", "com.example.app")]) == .duplicateHeaders)
        #expect(verdict(good, payload: 0) == .payloadEmpty)
        #expect(verdict(good, payload: 4097) == .payloadTooLarge)
    }

    /// Apple takes a request without `apns-topic` from a client with a single-topic
    /// certificate (the certificate names it); with a token the request must name it.
    @Test func withoutTokenAuthenticationTheTopicMayBeLeftOut() {
        let noTopic = good.filter { $0.0 != "apns-topic" }
        #expect(verdict(noTopic) == nil)
        #expect(verdict(noTopic.filter { $0.0 != "apns-push-type" } + [("apns-push-type", "voip")], payload: 5000) == nil,
                "a VoIP certificate's topic carries .voip")
        #expect(verdict(noTopic, allowedTopics: ["com.example.app"]) == nil, "the certificate's topic is its own")
        #expect(verdict(noTopic, authorization: .valid) == .missingTopic)
    }

    @Test func topicsCarryTheirPushTypesSuffix() {
        let voip = replacing("apns-topic", with: "com.example.app.voip").filter { $0.0 != "apns-push-type" }
        #expect(verdict(voip + [("apns-push-type", "voip")], payload: 5120) == nil)
        #expect(verdict(voip + [("apns-push-type", "voip")], payload: 5121) == .payloadTooLarge)
        #expect(verdict(voip + [("apns-push-type", "alert")]) == .invalidPushType, "a voip topic for an alert")
        #expect(verdict(voip, payload: 5000) == nil, "without a push type, APNs infers it from the topic")
        #expect(verdict(replacing("apns-topic", with: "com.example.app.voip"), allowedTopics: ["com.example.app"])
                == .invalidPushType, "the allowed list names bundle ids; the suffix is the type's business")
        #expect(verdict(replacing("apns-topic", with: "com.example.app.push-type.widgets").filter { $0.0 != "apns-push-type" }
                        + [("apns-push-type", "widgets")], allowedTopics: ["com.example.app"]) == nil)
    }

    @Test func theFirstFailureInPrecedenceWinsWhateverTheHeaderOrder() {
        let bad: [(String, String)] = [("apns-priority", "0"), (":path", "/3/device/abc"), ("apns-push-type", "sms"),
                                       (":method", "POST"), ("apns-topic", "com.example.app")]
        #expect(verdict(bad) == .badDeviceToken)
        #expect(verdict(bad.reversed()) == .badDeviceToken)
        #expect(verdict(bad, authorization: .absent) == .missingProviderToken, "authentication before the headers")
        #expect(verdict(replacing(":method", with: "GET"), payload: 0, authorization: .invalid) == .methodNotAllowed)
    }

    @Test func tokenAuthenticationOutcomesBecomeReasons() {
        #expect(verdict(good, authorization: .valid) == nil)
        #expect(verdict(good, authorization: .absent) == .missingProviderToken)
        #expect(verdict(good, authorization: .invalid) == .invalidProviderToken)
        #expect(verdict(good, authorization: .expired) == .expiredProviderToken)
        #expect(verdict(good, authorization: .tooManyUpdates) == .tooManyProviderTokenUpdates)
    }

    @Test func madeUpMessageIdsAreCanonicalVersion4Uuids() {
        let id = MessageID(random: .max, 0)
        let text = id.withText { String(decoding: $0, as: UTF8.self) }
        #expect(text == "ffffffff-ffff-4fff-8000-000000000000")
        #expect(text.utf8.withContiguousStorageIfAvailable { MessageID(UnsafeRawBufferPointer($0)) } != nil)
    }

    @Test func errorBodiesAreJSONWithATimestampFor410() throws {
        let scratch = UnsafeMutableRawBufferPointer.allocate(byteCount: ResponseBody.maximumLength, alignment: 1)
        defer { scratch.deallocate() }
        for reason in APNsReason.allCases {
            let length = ResponseBody.write(reason, timestamp: 1_700_000_000_123, into: scratch)
            let json = try JSONSerialization.jsonObject(with: Data(scratch[..<length])) as? [String: Any]
            #expect(json?["reason"] as? String == reason.name)
            #expect((json?["timestamp"] as? Int64).map { $0 == 1_700_000_000_123 } ?? (reason.status != 410))
        }
    }
}

/// ES256 provider tokens, verified as APNs does.
@Suite struct ProviderTokenVerifierTests {
    let verifier = try! ProviderTokenVerifier(authKeyPEM: H2Rig.authKeyPEM, keyID: H2Rig.keyID, teamID: H2Rig.teamID)
    let now: Int64 = 1_800_000_000

    func outcome(_ token: String) -> ProviderTokenVerifier.Outcome {
        Array(token.utf8).withUnsafeBytes { verifier.verify($0, now: now) }
    }

    @Test func aTokenSignedByTheKeyIsValidForAnHour() throws {
        #expect(outcome(try mintToken(issuedAt: now)) == .valid(issuedAt: now))
        #expect(outcome(try mintToken(issuedAt: now - 3600)) == .valid(issuedAt: now - 3600))
        #expect(outcome(try mintToken(issuedAt: now - 3601)) == .expired)
    }

    @Test func anyOtherTokenIsInvalid() throws {
        #expect(outcome(try mintToken(key: .init(), issuedAt: now)) == .invalid, "another key")
        #expect(outcome(try mintToken(keyID: "KEY0000002", issuedAt: now)) == .invalid)
        #expect(outcome(try mintToken(teamID: "TEAM000002", issuedAt: now)) == .invalid)
        var tampered = Array(try mintToken(issuedAt: now).utf8)
        tampered[tampered.count - 3] = tampered[tampered.count - 3] == UInt8(ascii: "A") ? UInt8(ascii: "B") : UInt8(ascii: "A")
        #expect(outcome(String(decoding: tampered, as: UTF8.self)) == .invalid, "a changed signature")
        #expect(outcome("") == .invalid)
    }

    /// RFC 7519's NumericDate is any number: pyapns-client signs `time.time()`. Its seconds
    /// count, so the hour runs from the second it was made in.
    @Test func anIssuedAtWithAFractionCountsItsWholeSeconds() throws {
        // PyJWT's header, with its `typ`.
        func token(_ iat: String) throws -> String {
            try mintToken(header: #"{"alg":"ES256","kid":"\#(H2Rig.keyID)","typ":"JWT"}"#,
                          claims: #"{"iss":"\#(H2Rig.teamID)","iat":\#(iat)}"#)
        }
        #expect(outcome(try token("1800000000.7345")) == .valid(issuedAt: now))
        #expect(outcome(try token("1799996400.25")) == .valid(issuedAt: now - 3600))
        #expect(outcome(try token("1799996399.999")) == .expired, "made in the second that began 3601 s ago")
        #expect(outcome(try token("1.8e9")) == .valid(issuedAt: now))
        #expect(outcome(try token("18000000005E-1")) == .valid(issuedAt: now))
        #expect(outcome(try token("\"1800000000\"")) == .invalid, "a string is no NumericDate")
        #expect(outcome(try token("1e300")) == .invalid, "beyond any date")
    }

    @Test func aKeyThatIsNotAP256PrivateKeyIsRefused() {
        #expect(throws: ProviderTokenVerifierError.self) {
            try ProviderTokenVerifier(authKeyPEM: "-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n",
                                      keyID: "K", teamID: "T")
        }
    }
}

/// Broadcasts' checks without sockets; the registry's answer is given as the connection
/// would set it.
extension RequestValidationTests {
    func broadcastVerdict(_ headers: [(String, String)], payload: Int = 20,
                          registration: RequestValidation.Registration = .mostRecent) -> APNsReason? {
        var validation = RequestValidation()
        for (name, value) in headers {
            guard let header = Array(name.utf8).withUnsafeBytes({ APNsRequestHeader(name: $0) }) else { continue }
            Array(value.utf8).withUnsafeBytes { validation.header(header, $0, allowedTopics: []) }
        }
        validation.registration = registration
        [UInt8](repeating: 0x20, count: payload).withUnsafeBytes { validation.body($0) }
        return validation.verdict(tokenAuthentication: false)
    }

    var broadcast: [(String, String)] {
        [(":method", "POST"), (":path", "/4/broadcasts/apps/com.example.app"), ("apns-channel-id", "AAAAAAAAAAAAAAAAAAAAAA=="),
         ("apns-push-type", "liveactivity"), ("apns-expiration", "0"), ("apns-priority", "10")]
    }

    @Test func aBroadcastIsCheckedInTheDocumentedOrder() {
        #expect(broadcastVerdict(broadcast) == nil)
        #expect(broadcastVerdict(broadcast, registration: .noStorage) == nil)
        #expect(broadcastVerdict(broadcast, payload: 5120) == nil)
        let nonzero = broadcast.filter { $0.0 != "apns-expiration" } + [("apns-expiration", "1767225600")]
        #expect(broadcastVerdict(nonzero, registration: .mostRecent) == nil)
        #expect(broadcastVerdict(nonzero, registration: .noStorage) == .badExpirationDate)
        #expect(broadcastVerdict(broadcast, registration: .notRegistered) == .channelNotRegistered)
        func with(_ headers: [(String, String)], without removed: String? = nil) -> [(String, String)] {
            broadcast.filter { old in old.0 != removed && !headers.contains { $0.0 == old.0 } } + headers
        }
        // Each fault with the next one in `precedence`: the earlier answers.
        #expect(broadcastVerdict(with([(":method", "GET"), ("apns-topic", "com.example.app")])) == .methodNotAllowed)
        #expect(broadcastVerdict(with([("apns-topic", "com..bad")], without: "apns-channel-id")) == .topicDisallowed)
        #expect(broadcastVerdict(with([], without: "apns-channel-id"), payload: 0) == .missingChannelId)
        #expect(broadcastVerdict(with([("apns-channel-id", "%%%%"), ("apns-push-type", "alert")])) == .badChannelId)
        #expect(broadcastVerdict(with([("apns-channel-id", "dGVzdA=="), ("apns-push-type", "alert")])) == .channelNotRegistered)
        #expect(broadcastVerdict(with([("apns-push-type", "alert"), ("apns-priority", "0")])) == .invalidPushType)
        #expect(broadcastVerdict(with([("apns-priority", "0"), ("apns-expiration", "x")])) == .badPriority)
        #expect(broadcastVerdict(with([("apns-expiration", "x"), ("apns-request-id", "x")])) == .badExpirationDate)
        #expect(broadcastVerdict(with([("apns-request-id", "x")]), payload: 0) == .badMessageId)
        #expect(broadcastVerdict(broadcast, payload: 0) == .payloadEmpty)
        #expect(broadcastVerdict(broadcast, payload: 5121) == .payloadTooLarge)
        #expect(broadcastVerdict(with([("apns-channel-id", "dGVzdA==")]), payload: 0) == .channelNotRegistered)
        #expect(broadcastVerdict(with([(":path", "/4/broadcasts/apps/")])) == .badPath)
        #expect(broadcastVerdict(with([("apns-channel-id", "%%%%")]), registration: .featureNotEnabled) == .featureNotEnabled)
        #expect(broadcastVerdict(broadcast.filter { $0.0 != "apns-push-type" }) == .missingPushType)
        #expect(broadcastVerdict(broadcast.filter { $0.0 != "apns-expiration" }) == .badExpirationDate)
    }
}
