import SalvoWire
import Testing

/// The HTTP/2 provider API's formats: reasons, push types, header names, provider tokens.
@Suite struct APNsHTTP2Tests {
    @Test func reasonsCarryApplesStatusesAndNames() {
        #expect(APNsReason.badDeviceToken.status == 400 && APNsReason.badDeviceToken.name == "BadDeviceToken")
        #expect(APNsReason.expiredProviderToken.status == 403)
        #expect(APNsReason.badPath.status == 404 && APNsReason.methodNotAllowed.status == 405)
        #expect(APNsReason.unregistered.status == 410 && APNsReason.payloadTooLarge.status == 413)
        #expect(APNsReason.tooManyProviderTokenUpdates.status == 429 && APNsReason.serviceUnavailable.status == 503)
        #expect(APNsReason.badTopic.body == Array(#"{"reason":"BadTopic"}"#.utf8))
        for reason in APNsReason.allCases { #expect(APNsReason(name: reason.name) == reason) }
        #expect(APNsReason(name: "BadEnvironmentKeyInToken") == .badEnvironmentKeyIdInToken, "the spelling seen on the wire")
        #expect(APNsReason(name: "NoSuchReason") == nil)
    }

    @Test func pushTypesKnowTheirTopicSuffixAndPayloadLimit() {
        func owner(_ topic: String) -> APNsPushType? {
            Array(topic.utf8).withUnsafeBytes { APNsPushType.owningSuffix(of: $0) }
        }
        #expect(owner("com.example.app") == nil)
        #expect(owner("com.example.app.voip") == .voip)
        #expect(owner("com.example.app.voip-ptt") == .pushtotalk)
        #expect(owner("com.example.app.pushkit.fileprovider") == .fileprovider)
        #expect(owner("com.example.app.push-type.liveactivity") == .liveactivity)
        #expect(owner(".voip") == nil, "a suffix needs a bundle id before it")
        #expect(APNsPushType.voip.payloadLimit == 5120 && APNsPushType.alert.payloadLimit == 4096)
        #expect(Array("location".utf8).withUnsafeBytes { APNsPushType(name: $0) } == .location)
        #expect(Array("Alert".utf8).withUnsafeBytes { APNsPushType(name: $0) } == nil, "values are lowercase")
    }

    @Test func pushTypesAreFoundByName() {
        for type in APNsPushType.allCases {
            #expect(Array(type.name.utf8).withUnsafeBytes { APNsPushType(name: $0) } == type)
        }
        // Each length the types share, and a near miss of each.
        for other in ["", "md", "voiq", "alerts", "widget", "locatiox", "controlz", "backgrounc", "pushtotalc",
                      "complicatiox", "fileprovidex", "liveactivitx", "xiveactivity", "Liveactivity"] {
            #expect(Array(other.utf8).withUnsafeBytes { APNsPushType(name: $0) } == nil, "\(other)")
        }
    }

    @Test func requestHeadersAreFoundByName() {
        for header in APNsRequestHeader.allCases {
            let name = header.name
            let found = APNsRequestHeader(name: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount))
            #expect(found == header)
        }
        for other in ["apns-topix", "content-length", ":scheme", "user-agent"] {
            #expect(Array(other.utf8).withUnsafeBytes { APNsRequestHeader(name: $0) } == nil, "\(other)")
        }
    }

    @Test func base64urlRoundTripsWithoutPadding() {
        var generator = SplitMix64(seed: 12)
        for length in 0..<40 {
            let bytes = (0..<length).map { _ in UInt8(truncatingIfNeeded: generator.next()) }
            let text = Base64URL.encode(bytes)
            #expect(!text.contains("=") && !text.contains("+") && !text.contains("/"))
            #expect(Array(text.utf8).withUnsafeBytes { Base64URL.decode($0) } == bytes)
        }
        #expect(Array("a".utf8).withUnsafeBytes { Base64URL.decode($0) } == nil, "4n + 1 characters encode nothing")
        #expect(Array("ab=c".utf8).withUnsafeBytes { Base64URL.decode($0) } == nil)
    }

    @Test func aProviderTokenIsReadBackWithItsClaims() throws {
        let token = ProviderToken(keyID: "ABC123DEFG", teamID: "DEF123GHIJ", issuedAt: 1_700_000_000)
        let signature = [UInt8](repeating: 7, count: 64)
        let text = token.compact(signature: signature)
        let parsed = try Array(text.utf8).withUnsafeBytes { try ProviderToken.parse($0) }
        #expect(parsed.token == token)
        #expect(parsed.signature == signature)
        #expect(String(text.prefix(parsed.signingInputLength)) == token.signingInput)
        let header = Array(token.signingInput.split(separator: ".")[0].utf8).withUnsafeBytes { Base64URL.decode($0) }
        #expect(header.map { String(decoding: $0, as: UTF8.self) } == #"{"alg":"ES256","kid":"ABC123DEFG"}"#)
    }

    @Test(arguments: [
        ("only.two", "three dot-separated parts"),
        ("a!.b.c", "header is not base64url"),
        (Base64URL.encode(Array(#"{"alg":"HS256","kid":"K"}"#.utf8)) + ".e30." + sig64, "alg is 'HS256'"),
        (Base64URL.encode(Array(#"{"alg":"ES256"}"#.utf8)) + ".e30." + sig64, "no 'kid'"),
        (Base64URL.encode(Array(#"{"alg":"ES256","kid":"K"}"#.utf8)) + "." + Base64URL.encode(Array(#"{"iss":"T"}"#.utf8)) + "." + sig64, "no 'iat'"),
        (Base64URL.encode(Array(#"{"alg":"ES256","kid":"K"}"#.utf8)) + "." + Base64URL.encode(Array(#"{"iss":"T","iat":"soon"}"#.utf8)) + "." + sig64, "'iat' is not a number"),
        (Base64URL.encode(Array(#"{"alg":"ES256","kid":"K"}"#.utf8)) + "." + Base64URL.encode(Array(#"{"iss":"T","iat":1}"#.utf8)) + ".AAAA", "signature has 3 bytes"),
        ("e30x.e30.e30", "not a JSON object"),
    ])
    func badTokensSayWhatIsWrong(_ text: String, _ message: String) {
        #expect {
            _ = try Array(text.utf8).withUnsafeBytes { try ProviderToken.parse($0) }
        } throws: { error in
            "\(error)".contains(message)
        }
    }
}

/// 64 bytes of signature, base64url.
private let sig64 = Base64URL.encode([UInt8](repeating: 1, count: 64))
