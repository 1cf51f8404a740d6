import Foundation
import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

/// The HTTP/2 mock checked by real HTTP/2 clients: curl for single requests, nghttp for
/// frames, h2load for load.
@Suite(.serialized, .timeLimit(.minutes(2))) struct H2MockGatewayTests {
    // MARK: Connection

    @Test func aWellFormedRequestIsAcceptedWithItsApnsIdEchoed() async throws {
        let rig = try H2Rig()
        let id = "0f9a3c8e-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
        let response = try await rig.curl(headers: standardHeaders + ["apns-id: \(id)", "apns-priority: 10",
                                                                 "apns-expiration: 0", "apns-collapse-id: sale"])
        #expect(response.status == 200, "curl: \(response.errors)")
        #expect(response.headers["apns-id"] == id)
        #expect(response.headers["apns-unique-id"] == nil, "production sends no apns-unique-id")
        #expect(response.body.isEmpty)
        let statistics = rig.gateway.statistics()
        #expect(statistics.accepted == 1 && statistics.requests == 1 && statistics.rejected == 0)
    }

    @Test func withoutAnApnsIdTheGatewayMakesOneAndDevelopmentAddsAUniqueId() async throws {
        let rig = try H2Rig { $0.environment = .development }
        let response = try await rig.curl()
        #expect(response.status == 200, "curl: \(response.errors)")
        let made = try #require(response.headers["apns-id"])
        #expect(MessageID(UnsafeRawBufferPointer(made.utf8.withContiguousStorageIfAvailable { UnsafeRawBufferPointer($0) }!)) != nil,
                "a canonical UUID: \(made)")
        let unique = try #require(response.headers["apns-unique-id"])
        #expect(unique.count == 36 && unique != made)
    }

    @Test func aClientOfferingOnlyOtherProtocolsIsRefused() async throws {
        let rig = try H2Rig()
        // curl offering only http/1.1 in ALPN: the handshake fails (no_application_protocol).
        let http1 = try await runTool("curl", ["--silent", "--http1.1", "--cacert", rig.caFile, "--max-time", "10",
                                               rig.url("/3/device/\(h2Token)")])
        #expect(http1.status == 35, "curl exits 35 on a failed TLS handshake, got \(http1.status)")
        let statistics = rig.gateway.statistics()
        #expect(statistics.handshakeFailures == 1)
        #expect(statistics.withoutALPN == 0)
        #expect(statistics.requests == 0)
    }

    /// Apple takes TLS without ALPN and HTTP/2 by prior knowledge (Pushy connected so for
    /// years; aioapns' default TLS setup offers no ALPN): the connection preface tells.
    @Test func aClientOfferingNoALPNSpeaksHTTP2ByPriorKnowledge() throws {
        let rig = try H2Rig()
        let client = try RawH2Client(port: rig.gateway.port, applicationProtocols: [])
        #expect(client.stream.negotiatedApplicationProtocol == nil)
        try client.send(RawH2Client.preface + RawH2Client.frame(type: 4, flags: 0, stream: 0, []) + client.request(stream: 1))
        let frames = try client.readFrames { $0.contains { $0.type == 1 && $0.stream == 1 } }
        let headers = try #require(frames.first { $0.type == 1 && $0.stream == 1 })
        #expect(headers.payload.first == 0x88, ":status 200 (static table entry 8)")
        let statistics = try #require(rig.statistics { $0.accepted == 1 })
        #expect(statistics.withoutALPN == 1 && statistics.refusedWithoutPreface == 0 && statistics.handshakeFailures == 0)
    }

    /// Without ALPN, a client that speaks HTTP/1.1 is closed at its first bytes, and counted.
    @Test func aClientOfferingNoALPNThatSpeaksHTTP1IsClosed() throws {
        let rig = try H2Rig()
        let client = try RawH2Client(port: rig.gateway.port, applicationProtocols: [])
        try client.send(Array("POST /3/device/\(h2Token) HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 2\r\n\r\n{}".utf8))
        // nghttp2 sends its GOAWAY, or nothing; either way the connection ends.
        let frames = try client.readFrames { _ in false }
        #expect(!frames.contains { $0.type == 1 }, "no answer to a request")
        let statistics = try #require(rig.statistics { $0.refusedWithoutPreface == 1 })
        #expect(statistics.withoutALPN == 1 && statistics.requests == 0)
    }

    /// RFC 9113 §8.3.1 lets a client send `host` instead of `:authority`; Apple takes it
    /// (aioapns sends only `host`).
    @Test func hostInsteadOfAuthorityIsAccepted() throws {
        let rig = try H2Rig()
        let client = try RawH2Client(port: rig.gateway.port)
        try client.send(RawH2Client.preface + RawH2Client.frame(type: 4, flags: 0, stream: 0, [])
                        + client.request(stream: 1, authority: .host))
        let frames = try client.readFrames { $0.contains { ($0.type == 1 || $0.type == 3) && $0.stream == 1 } }
        let headers = try #require(frames.first { $0.stream == 1 })
        #expect(headers.type == 1 && headers.payload.first == 0x88, ":status 200, not a reset")
        #expect(rig.statistics { $0.accepted == 1 } != nil)
    }

    // MARK: Validation, one curl request per case

    @Test(arguments: [
        ValidationCase(400, "MissingDeviceToken", path: "/3/device/"),
        ValidationCase(400, "BadDeviceToken", path: "/3/device/\(String(h2Token.dropLast()))x"),
        ValidationCase(400, "BadDeviceToken", path: "/3/device/abcd"),
        ValidationCase(404, "BadPath", path: "/2/device/\(h2Token)"),
        ValidationCase(405, "MethodNotAllowed", method: "PUT"),
        ValidationCase(200, nil, headers: ["apns-push-type: alert"]),  // no token: the certificate names the topic
        ValidationCase(400, "BadTopic", headers: ["apns-topic: com..example", "apns-push-type: alert"]),
        ValidationCase(400, "TopicDisallowed", headers: ["apns-topic: com.other.app", "apns-push-type: alert"]),
        ValidationCase(400, "InvalidPushType", headers: ["apns-topic: com.example.app", "apns-push-type: banner"]),
        ValidationCase(400, "InvalidPushType", headers: ["apns-topic: com.example.app", "apns-push-type: voip"]),
        ValidationCase(400, "InvalidPushType", headers: ["apns-topic: com.example.app.voip", "apns-push-type: alert"]),
        ValidationCase(400, "BadPriority", headers: standardHeaders + ["apns-priority: 7"]),
        ValidationCase(400, "BadExpirationDate", headers: standardHeaders + ["apns-expiration: tomorrow"]),
        ValidationCase(400, "BadCollapseId", headers: standardHeaders + ["apns-collapse-id: \(String(repeating: "c", count: 65))"]),
        ValidationCase(400, "BadMessageId", headers: standardHeaders + ["apns-id: not-a-uuid"]),
        ValidationCase(400, "DuplicateHeaders", headers: standardHeaders + ["apns-priority: 10", "apns-priority: 5"]),
        ValidationCase(400, "PayloadEmpty", payload: nil),
        ValidationCase(413, "PayloadTooLarge", payload: 4097),
        ValidationCase(413, "PayloadTooLarge", headers: ["apns-topic: com.example.app.voip", "apns-push-type: voip"], payload: 5121),
        ValidationCase(200, nil, headers: ["apns-topic: com.example.app.voip", "apns-push-type: voip"], payload: 5120),
        ValidationCase(200, nil, headers: ["apns-topic: com.example.app.push-type.liveactivity", "apns-push-type: liveactivity"]),
        ValidationCase(200, nil, headers: ["apns-topic: com.example.app", "apns-push-type: background", "apns-priority: 5"]),
    ])
    func eachValidationAnswersWithItsStatusAndReason(_ check: ValidationCase) async throws {
        let rig = try H2Rig { $0.allowedTopics = ["com.example.app"] }
        let payload = check.payloadLength.map { length in
            let open = Array(#"{"aps":{},"pad":""#.utf8), close = Array(#""}"#.utf8)
            return open + [UInt8](repeating: 0x61, count: length - open.count - close.count) + close
        } ?? (check.hasPayload ? Array(#"{"aps":{"alert":"hi"}}"#.utf8) : nil)
        let response = try await rig.curl(check.path, method: check.method, headers: check.headers, payload: payload)
        #expect(response.status == check.status, "\(check): curl \(response.errors)")
        #expect(response.reason == check.reason, "\(check): body \(response.body)")
        let statistics = rig.gateway.statistics()
        #expect(statistics.requests == 1)
        if let reason = check.reason {
            #expect(statistics.rejectedByReason == [reason: 1])
            #expect(statistics.rejectedByStatus == [String(check.status): 1])
        } else {
            #expect(statistics.accepted == 1)
        }
    }

    // MARK: Token authentication

    @Test func tokensAreVerifiedAndTheirFaultsNamed() async throws {
        let rig = try H2Rig(tokenAuthentication: true)
        let valid = try mintToken(issuedAt: unixNow - 60)
        func post(_ authorization: String?) async throws -> CurlResponse {
            try await rig.curl(headers: standardHeaders + (authorization.map { ["authorization: \($0)"] } ?? []))
        }
        #expect(try await post(nil).reason == "MissingProviderToken")
        let noTopic = try await rig.curl(headers: ["apns-push-type: alert", "authorization: bearer \(valid)"])
        #expect(noTopic.status == 400 && noTopic.reason == "MissingTopic", "a token names no topic")
        #expect(try await post("bearer \(valid)").status == 200)
        #expect(try await post("Bearer \(valid)").status == 200, "the scheme is case-insensitive")
        let stranger = try mintToken(key: .init(), issuedAt: unixNow - 60)
        let invalid = try await post("bearer \(stranger)")
        #expect(invalid.status == 403 && invalid.reason == "InvalidProviderToken")
        #expect(try await post("bearer \(try mintToken(keyID: "OTHERKEY01", issuedAt: unixNow - 60))").reason == "InvalidProviderToken")
        #expect(try await post("bearer \(try mintToken(teamID: "OTHERTEAM1", issuedAt: unixNow - 60))").reason == "InvalidProviderToken")
        #expect(try await post("bearer not.a.token").reason == "InvalidProviderToken")
        // A token minted an hour and more ago.
        let expired = try await post("bearer \(try mintToken(issuedAt: unixNow - 3601 - 600))")
        #expect(expired.status == 403 && expired.reason == "ExpiredProviderToken")
        // A new token from the same team five minutes after the current one.
        let tooSoon = try await post("bearer \(try mintToken(issuedAt: unixNow - 60 + 300))")
        #expect(tooSoon.status == 429 && tooSoon.reason == "TooManyProviderTokenUpdates")
        // Twenty minutes and more after it, a new token is taken.
        #expect(try await post("bearer \(try mintToken(issuedAt: unixNow - 60 - 1500))").status == 200)
        let statistics = rig.gateway.statistics()
        #expect(statistics.accepted == 3)
        #expect(statistics.rejectedByStatus == ["400": 1, "403": 6, "429": 1])
    }

    @Test func aClientCertificateIsRequiredWhenAsked() async throws {
        let rig = try H2Rig {
            $0.tls = .server(certificateChain: H2Rig.pki.server.certificate, privateKey: H2Rig.pki.server.privateKey,
                             clientCertificateRoots: .certificates(H2Rig.pki.authority.certificate))
        }
        let without = try await rig.curl()
        #expect(without.status == nil && without.exitCode != 0, "no certificate, no handshake")
        let with = try await rig.curl(extra: ["--cert", "\(rig.directory)/client.pem", "--key", "\(rig.directory)/client.key"])
        #expect(with.status == 200, "curl: \(with.errors)")
        #expect(rig.gateway.statistics().accepted == 1)
    }

    // MARK: Stream limit, seen by nghttp

    @Test func oneStreamUntilTheFirstValidTokenThenTheConfiguredLimit() async throws {
        let rig = try H2Rig(tokenAuthentication: true) { $0.maximumConcurrentStreams = 500 }
        let body = try rig.file("body.json", Array(#"{"aps":{}}"#.utf8))
        func nghttp(_ token: String) async throws -> ToolResult {
            // -M 1: assume one stream until the server's SETTINGS say otherwise; -m 3: three requests.
            try await runTool("nghttp", ["-v", "-n", "-M", "1", "-m", "3", "-d", body, "-t", "10",
                                         "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
                                         "-H", "authorization: bearer \(token)", rig.url("/3/device/\(h2Token)")])
        }
        let valid = try await nghttp(try mintToken(issuedAt: unixNow))
        let limits = Self.maxConcurrentStreams(in: valid.output)
        #expect(limits == [1, 500], "the limit before and after the first valid token: \(limits)")
        let firstResponse = try #require(valid.output.range(of: ":status: 200"))
        let raised = try #require(valid.output.range(of: "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):500"))
        #expect(raised.lowerBound < firstResponse.lowerBound, "raised with the first valid token, before its answer")
        #expect(valid.output.components(separatedBy: ":status: 200").count - 1 == 3)

        let invalid = try await nghttp(try mintToken(key: .init(), issuedAt: unixNow))
        #expect(Self.maxConcurrentStreams(in: invalid.output) == [1], "no valid token, no raise")
        #expect(invalid.output.components(separatedBy: ":status: 403").count - 1 == 3)
        #expect(rig.gateway.statistics().requests == 6)
    }

    /// The SETTINGS_MAX_CONCURRENT_STREAMS values nghttp received, in order (nghttp's -v
    /// log prints a frame's fields on the lines after its "recv …" or "send …" line).
    static func maxConcurrentStreams(in log: String) -> [Int] {
        var receiving = false
        var values: [Int] = []
        for line in log.components(separatedBy: "\n") {
            if line.contains(" frame <") { receiving = line.contains("recv ") }
            if receiving, let field = line.range(of: "SETTINGS_MAX_CONCURRENT_STREAMS(0x03):"),
               let value = Int(line[field.upperBound...].prefix { $0.isNumber }) {
                values.append(value)
            }
        }
        return values
    }

    // MARK: Load and failure plans

    @Test func aBoundedH2loadRunIsCountedExactlyUnderTheGatewayWideRules() async throws {
        let rig = try H2Rig {
            $0.failurePlan = H2FailurePlan(rejectEvery: 10, throttleEvery: 7, unavailableEvery: 11)
            $0.recordAccepted = true
        }
        let body = try rig.file("body", [UInt8](repeating: 0x20, count: 254) + Array("{}".utf8))
        let result = try await runTool("h2load", ["-n", "1000", "-c", "4", "-m", "20", "-d", body,
                                                  "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
                                                  rig.url("/3/device/\(h2Token)")])
        // Of positions 1...1000: every 10th rejected (100); of the rest, every 7th throttled
        // (142 - 14 = 128); of the rest, every 11th unavailable (90 - 9 - 12 + 1 = 70).
        #expect(result.output.contains("status codes: 702 2xx, 0 3xx, 228 4xx, 70 5xx"), "h2load: \(result.output)")
        let statistics = rig.gateway.statistics()
        #expect(statistics.requests == 1000 && statistics.streams == 1000)
        #expect(statistics.accepted == 702)
        #expect(statistics.rejectedByReason == ["BadDeviceToken": 100, "TooManyRequests": 128, "ServiceUnavailable": 70])
        #expect(statistics.acceptedDigests?.count == 1 && statistics.duplicates == 701, "one token, one payload")
    }

    @Test(arguments: [("DEAD", "Unregistered"), ("fade", "ExpiredToken")])
    func tokensEndingInDeadOrFadeAreGoneSinceATimestamp(suffix: String, reason: String) async throws {
        let rig = try H2Rig()
        let before = unixNow * 1000
        let response = try await rig.curl("/3/device/\(String(h2Token.dropLast(4)))\(suffix)")
        #expect(response.status == 410 && response.reason == reason)
        let json = try JSONSerialization.jsonObject(with: Data(response.body.utf8)) as? [String: Any]
        let timestamp = try #require(json?["timestamp"] as? Int64)
        #expect(timestamp >= before && timestamp <= unixNow * 1000 + 1000, "milliseconds since 1970: \(timestamp)")
    }

    @Test func goawayNamesTheLastProcessedStreamWithShutdown() async throws {
        // One stream at a time, so that the second request is the last one taken up.
        let rig = try H2Rig {
            $0.failurePlan = H2FailurePlan(goawayEvery: 2)
            $0.maximumConcurrentStreams = 1
        }
        let body = try rig.file("body.json", Array(#"{"aps":{}}"#.utf8))
        let result = try await runTool("nghttp", ["-v", "-n", "-M", "1", "-m", "4", "-d", body, "-t", "10",
                                                  "-H", "apns-topic: com.example.app", "-H", "apns-push-type: alert",
                                                  rig.url("/3/device/\(h2Token)")])
        #expect(result.output.contains("recv GOAWAY frame"), "nghttp: \(result.output)")
        // nghttp's request streams follow its priority anchors; the second answered one is named.
        let answered = result.output.components(separatedBy: "\n").compactMap { line -> Int? in
            guard line.contains(":status: 200"), let id = line.range(of: "stream_id=") else { return nil }
            return Int(line[id.upperBound...].prefix { $0.isNumber })
        }
        #expect(answered.count == 2, "answered streams: \(answered)")
        #expect(result.output.contains("last_stream_id=\(answered.last ?? -1),"))
        #expect(result.output.contains(#"{"reason":"Shutdown"}"#))
        let statistics = rig.gateway.statistics()
        #expect(statistics.goaways == 1 && statistics.requests == 2 && statistics.accepted == 2)
    }

    @Test func dropClosesWithoutAnAnswer() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(dropEvery: 1) }
        let response = try await rig.curl()
        #expect(response.status == nil && response.exitCode != 0, "curl: \(response.errors)")
        let statistics = rig.gateway.statistics()
        #expect(statistics.droppedConnections == 1 && statistics.requests == 1)
        #expect(statistics.accepted == 0 && statistics.rejected == 0)
    }

    @Test func stallsAreCountedAndEveryRequestStillAnswered() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(stallEvery: 5, stallDuration: .milliseconds(20)) }
        let result = try await runTool("h2load", ["-n", "20", "-c", "1", "-m", "1",
                                                  "-d", try rig.file("body", Array(#"{"aps":{}}"#.utf8)),
                                                  "-H", "apns-topic: com.example.app", rig.url("/3/device/\(h2Token)")])
        #expect(result.output.contains("status codes: 20 2xx"), "h2load: \(result.output)")
        #expect(rig.gateway.statistics().flowControlStalls == 4)
    }
}

/// One validation case: the request's deviation from a good one, and the answer due.
struct ValidationCase: CustomStringConvertible, Sendable {
    var status: Int
    var reason: String?
    var path = "/3/device/\(h2Token)"
    var method = "POST"
    var headers = standardHeaders
    var hasPayload = true
    var payloadLength: Int?

    init(_ status: Int, _ reason: String?, path: String = "/3/device/\(h2Token)", method: String = "POST",
         headers: [String] = standardHeaders, payload: Int?? = .some(nil)) {
        self.status = status
        self.reason = reason
        self.path = path
        self.method = method
        self.headers = headers
        hasPayload = payload != nil
        payloadLength = payload ?? nil
    }

    var description: String { "\(status) \(reason ?? "OK") \(method) \(path) \(headers)" }
}
