import Foundation
import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

/// Broadcasts (iOS 18 Live Activities) on the push port and channel management on the
/// second port, checked with curl as Apple's hosts would answer it.
@Suite(.serialized, .timeLimit(.minutes(2))) struct H2BroadcastTests {
    static let bundlePath = "/4/broadcasts/apps/com.example.app"
    static let channelsPath = "/1/apps/com.example.app/channels"
    static let update = Array(#"{"aps":{"timestamp":1700000000,"event":"update","content-state":{"score":"2-1"}}}"#.utf8)
    static let createBody = Array(#"{"message-storage-policy": 1, "push-type": "LiveActivity"}"#.utf8)

    /// The headers of a good broadcast to `channel`.
    static func broadcastHeaders(_ channel: String) -> [String] {
        ["apns-channel-id: \(channel)", "apns-push-type: liveactivity", "apns-expiration: 0", "apns-priority: 10"]
    }

    /// A gateway with a channel management port.
    static func rig(tokenAuthentication: Bool = false, _ configure: (inout H2MockGateway.Configuration) -> Void = { _ in }) throws -> H2Rig {
        try H2Rig(tokenAuthentication: tokenAuthentication) {
            $0.channelManagementPort = 0
            configure(&$0)
        }
    }

    /// One management request with curl.
    func manage(_ rig: H2Rig, _ method: String, _ path: String = channelsPath, headers: [String] = [],
                body: [UInt8]? = nil, extra: [String] = []) async throws -> CurlResponse {
        try await rig.curl(path, method: method, headers: headers, payload: body, extra: extra, port: rig.gateway.channelsPort)
    }

    // MARK: Channel management

    @Test func createReadListDeleteThenReadIsChannelNotRegistered() async throws {
        let rig = try Self.rig()
        #expect(rig.gateway.channelsPort != rig.gateway.port)
        let created = try await manage(rig, "POST", body: Self.createBody)
        #expect(created.status == 201, "curl: \(created.errors)")
        #expect(created.body.isEmpty)
        let id = try #require(created.headers["apns-channel-id"])
        #expect(Data(base64Encoded: id)?.count == 16, "16 bytes in standard base64: \(id)")
        let madeUp = try #require(created.headers["apns-request-id"])
        #expect(madeUp == madeUp.lowercased() && UUID(uuidString: madeUp) != nil, "a lowercase UUID: \(madeUp)")

        let requestID = "0f9a3c8e-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
        let read = try await manage(rig, "GET", headers: ["apns-channel-id: \(id)", "apns-request-id: \(requestID)"])
        #expect(read.status == 200 && read.headers["apns-request-id"] == requestID)
        let settings = try JSONSerialization.jsonObject(with: Data(read.body.utf8)) as? [String: Any]
        #expect(settings?["message-storage-policy"] as? Int == 1 && settings?["push-type"] as? String == "LiveActivity")

        let list = try await manage(rig, "GET", "/1/apps/com.example.app/all-channels")
        #expect(list.status == 200)
        let listed = try JSONSerialization.jsonObject(with: Data(list.body.utf8)) as? [String: Any]
        #expect(listed?["channels"] as? [String] == [id])

        let deleted = try await manage(rig, "DELETE", headers: ["apns-channel-id: \(id)"])
        #expect(deleted.status == 204 && deleted.body.isEmpty && deleted.headers["apns-request-id"] != nil)
        let gone = try await manage(rig, "GET", headers: ["apns-channel-id: \(id)"])
        #expect(gone.status == 400 && gone.reason == "ChannelNotRegistered" && gone.headers["apns-request-id"] != nil)

        let statistics = rig.gateway.statistics()
        #expect(statistics.channelOperations == ["create": 1, "read": 1, "list": 1, "delete": 1])
        #expect(statistics.rejectedChannelOperations == ["ChannelNotRegistered": 1])
        #expect(statistics.requests == 0 && statistics.accepted == 0 && statistics.rejected == 0, "not notifications")
    }

    @Test(arguments: [0, 1]) func theStoragePolicyRoundTrips(_ policy: Int) async throws {
        let rig = try Self.rig()
        let created = try await manage(rig, "POST", body: Array(#"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#.utf8))
        let id = try #require(created.headers["apns-channel-id"], "curl: \(created.errors) \(created.body)")
        let read = try await manage(rig, "GET", headers: ["apns-channel-id: \(id)"])
        #expect(read.body == #"{"message-storage-policy":\#(policy),"push-type":"LiveActivity"}"#)
        #expect(rig.gateway.channels.policy(of: id, bundleID: "com.example.app")?.rawValue == policy)
    }

    @Test func faultsAreAnsweredWithApplesReasons() async throws {
        let rig = try Self.rig { $0.allowedTopics = ["com.example.app"] }
        func check(_ response: CurlResponse, _ status: Int, _ reason: String) {
            #expect(response.status == status && response.reason == reason, "\(reason): \(response.status ?? -1) \(response.body)")
        }
        check(try await manage(rig, "POST", body: Array(#"{"message-storage-policy": 3, "push-type": "LiveActivity"}"#.utf8)),
              400, "BadRequestPayload")
        check(try await manage(rig, "POST", body: Array("not json".utf8)), 400, "BadRequestPayload")
        check(try await manage(rig, "PUT", body: Self.createBody), 405, "MethodNotAllowed")
        check(try await manage(rig, "GET", "/1/apps/com.example.app/channel-list"), 404, "BadPath")
        check(try await manage(rig, "GET"), 400, "MissingChannelId")
        check(try await manage(rig, "DELETE", headers: ["apns-channel-id: ???"]), 400, "BadChannelId")
        check(try await manage(rig, "GET", headers: ["apns-channel-id: dGVzdA=="]), 400, "ChannelNotRegistered")
        check(try await manage(rig, "GET", headers: ["apns-request-id: 42"]), 400, "BadMessageId")
        check(try await manage(rig, "GET", "/1/apps/com.other.app/all-channels"), 403, "TopicMismatch")
        #expect(rig.gateway.statistics().channelOperations.isEmpty)
    }

    @Test func pastTheLimitACreateIsCannotCreateChannelConfig() async throws {
        let rig = try Self.rig { $0.channelLimit = 2 }
        for _ in 0..<2 { #expect(try await manage(rig, "POST", body: Self.createBody).status == 201) }
        let refused = try await manage(rig, "POST", body: Self.createBody)
        #expect(refused.status == 400 && refused.reason == "CannotCreateChannelConfig")
        #expect(try await manage(rig, "POST", "/1/apps/com.example.other/channels", body: Self.createBody).status == 201, "per bundle id")
        #expect(rig.gateway.channels.count == 3)
    }

    @Test func oneTeamTokenServesBothPortsAndTheInProcessChannelsAreServed() async throws {
        let rig = try Self.rig(tokenAuthentication: true)
        let token = "authorization: bearer \(try mintToken(issuedAt: unixNow - 60))"
        #expect(try await manage(rig, "POST", body: Self.createBody).reason == "MissingProviderToken")
        let created = try await manage(rig, "POST", headers: [token], body: Self.createBody)
        let id = try #require(created.headers["apns-channel-id"], "curl: \(created.status ?? -1) \(created.body)")
        let broadcast = try await rig.curl(Self.bundlePath, headers: Self.broadcastHeaders(id) + [token], payload: Self.update)
        #expect(broadcast.status == 200, "\(broadcast.body)")
        let stranger = "authorization: bearer \(try mintToken(key: .init(), issuedAt: unixNow - 60))"
        #expect(try await manage(rig, "GET", "/1/apps/com.example.app/all-channels", headers: [stranger]).reason == "InvalidProviderToken")
        let inProcess = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        let list = try await manage(rig, "GET", "/1/apps/com.example.app/all-channels", headers: [token])
        #expect(list.body == #"{"channels":["\#(id)","\#(inProcess)"]}"#)
        let statistics = rig.gateway.statistics()
        #expect(statistics.providerTokensTaken == 1, "the team's one token, on both ports")
        #expect(statistics.accepted == 1 && statistics.broadcastsByChannel == [id: 1])
    }

    @Test func certificatesAreRequiredOnTheManagementPortToo() async throws {
        let rig = try Self.rig {
            $0.tls = .server(certificateChain: H2Rig.pki.server.certificate, privateKey: H2Rig.pki.server.privateKey,
                             clientCertificateRoots: .certificates(H2Rig.pki.authority.certificate))
        }
        let without = try await manage(rig, "POST", body: Self.createBody)
        #expect(without.status == nil && without.exitCode != 0, "no certificate, no handshake")
        let with = try await manage(rig, "POST", body: Self.createBody,
                                    extra: ["--cert", "\(rig.directory)/client.pem", "--key", "\(rig.directory)/client.key"])
        #expect(with.status == 201, "curl: \(with.errors)")
    }

    // MARK: Broadcasts

    @Test func anAcceptedBroadcastEchoesItsRequestIdAndIsCountedByChannel() async throws {
        let rig = try Self.rig { $0.recordAccepted = true }
        let id = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        let requestID = "0f9a3c8e-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
        let response = try await rig.curl(Self.bundlePath, headers: Self.broadcastHeaders(id) + ["apns-request-id: \(requestID)"],
                                          payload: Self.update)
        #expect(response.status == 200 && response.body.isEmpty, "curl: \(response.errors) \(response.body)")
        #expect(response.headers["apns-request-id"] == requestID)
        #expect(response.headers["apns-unique-id"]?.count == 36, "Apple's broadcasts answer with apns-unique-id")
        #expect(response.headers["apns-id"] == nil)
        let madeUp = try await rig.curl(Self.bundlePath, headers: Self.broadcastHeaders(id), payload: Self.update)
        #expect(madeUp.headers["apns-request-id"].map { UUID(uuidString: $0) != nil && $0 == $0.lowercased() } == true)
        let statistics = rig.gateway.statistics()
        #expect(statistics.accepted == 2 && statistics.requests == 2)
        #expect(statistics.broadcastsByChannel == [id: 2])
        #expect(statistics.acceptedDigests == [H2Statistics.broadcastDigest(channelID: id, payload: Self.update)])
        #expect(statistics.duplicates == 1)
    }

    @Test(arguments: [
        BroadcastCase(200, nil),
        BroadcastCase(200, nil, replacing: "apns-expiration", with: "1767225600", channel: "{most}"),
        BroadcastCase(200, nil, without: "apns-priority"),
        BroadcastCase(200, nil, replacing: "apns-priority", with: "5"),
        BroadcastCase(400, "MissingChannelId", without: "apns-channel-id"),
        BroadcastCase(400, "BadChannelId", channel: "not base64!"),
        BroadcastCase(400, "ChannelNotRegistered", channel: "dGVzdA=="),
        BroadcastCase(400, "ChannelNotRegistered", channel: "AAAAAAAAAAAAAAAAAAAAAA=="),
        BroadcastCase(400, "ChannelNotRegistered", path: "/4/broadcasts/apps/com.example.app.other"),
        BroadcastCase(400, "MissingPushType", without: "apns-push-type"),
        BroadcastCase(400, "InvalidPushType", replacing: "apns-push-type", with: "alert"),
        BroadcastCase(400, "InvalidPushType", replacing: "apns-push-type", with: "Liveactivity"),
        BroadcastCase(400, "BadPriority", replacing: "apns-priority", with: "7"),
        BroadcastCase(400, "BadExpirationDate", without: "apns-expiration"),
        BroadcastCase(400, "BadExpirationDate", replacing: "apns-expiration", with: "soon"),
        BroadcastCase(400, "BadExpirationDate", replacing: "apns-expiration", with: "1767225600"),
        BroadcastCase(400, "BadMessageId", adding: "apns-request-id: 42"),
        BroadcastCase(400, "TopicDisallowed", adding: "apns-topic: com.example.app"),
        BroadcastCase(400, "TopicDisallowed", adding: "apns-topic: com.example.app.push-type.liveactivity"),
        BroadcastCase(400, "TopicDisallowed", path: "/4/broadcasts/apps/com.other.app"),
        BroadcastCase(400, "PayloadEmpty", payload: 0),
        BroadcastCase(413, "PayloadTooLarge", payload: 5121),
        BroadcastCase(200, nil, payload: 5120),
        BroadcastCase(405, "MethodNotAllowed", method: "PUT"),
        BroadcastCase(404, "BadPath", path: "/4/broadcasts/apps/"),
        BroadcastCase(404, "BadPath", path: "/4/broadcast/apps/com.example.app"),
        // Precedence: the channel before the push type, the push type before the payload.
        BroadcastCase(400, "MissingChannelId", without: "apns-channel-id", payload: 0),
        BroadcastCase(400, "ChannelNotRegistered", replacing: "apns-push-type", with: "alert", channel: "dGVzdA=="),
        BroadcastCase(400, "InvalidPushType", replacing: "apns-push-type", with: "alert", payload: 0),
    ])
    func eachBroadcastCheckAnswersWithItsReason(_ check: BroadcastCase) async throws {
        let rig = try Self.rig { $0.allowedTopics = ["com.example.app", "com.example.app.other"] }
        let noStorage = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        let mostRecent = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .mostRecent)
        _ = try rig.gateway.channels.create(bundleID: "com.example.app.other", policy: .mostRecent)
        let channel = check.channel.replacingOccurrences(of: "{none}", with: noStorage).replacingOccurrences(of: "{most}", with: mostRecent)
        let payload = check.payloadLength.map { length -> [UInt8] in
            guard length > 0 else { return [] }
            let open = Array(#"{"aps":{"event":"update"},"pad":""#.utf8), close = Array(#""}"#.utf8)
            return open + [UInt8](repeating: 0x61, count: length - open.count - close.count) + close
        } ?? Self.update
        let response = try await rig.curl(check.path, method: check.method, headers: check.headers(channel: channel),
                                          payload: payload.isEmpty ? nil : payload)
        #expect(response.status == check.status, "\(check): curl \(response.errors) \(response.body)")
        #expect(response.reason == check.reason, "\(check): body \(response.body)")
        let statistics = rig.gateway.statistics()
        #expect(statistics.requests == 1)
        if let reason = check.reason {
            #expect(statistics.rejectedByReason == [reason: 1] && statistics.broadcastsByChannel.isEmpty)
        } else {
            #expect(statistics.accepted == 1 && statistics.broadcastsByChannel == [channel: 1])
        }
    }

    @Test func anAppWithoutTheBroadcastCapabilityGetsFeatureNotEnabledOnBothPorts() async throws {
        let rig = try Self.rig(tokenAuthentication: true) { $0.broadcastsEnabled = false }
        let token = "authorization: bearer \(try mintToken(issuedAt: unixNow - 60))"
        let id = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        #expect(try await rig.curl(Self.bundlePath, headers: Self.broadcastHeaders(id), payload: Self.update).reason == "MissingProviderToken",
                "authentication first")
        let broadcast = try await rig.curl(Self.bundlePath, headers: Self.broadcastHeaders(id) + [token], payload: Self.update)
        #expect(broadcast.status == 400 && broadcast.reason == "FeatureNotEnabled", "\(broadcast.body)")
        let create = try await manage(rig, "POST", headers: [token], body: Self.createBody)
        #expect(create.status == 400 && create.reason == "FeatureNotEnabled", "\(create.body)")
        #expect(try await rig.curl("/3/device/\(h2Token)", headers: standardHeaders + [token]).status == 200, "device requests are unaffected")
    }

    // MARK: Failure plans

    /// The gateway-wide rules count broadcasts with device requests; held answers go out and
    /// are counted by channel when sent.
    @Test func theFailurePlanAppliesToBroadcastsAsToDeviceRequests() async throws {
        let rig = try Self.rig {
            $0.failurePlan = H2FailurePlan(rejectEvery: 10, unavailableEvery: 7, responseDelay: .milliseconds(2))
            $0.recordAccepted = true
        }
        let id = try rig.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        let body = try rig.file("update.json", Self.update)
        let result = try await runTool("h2load", ["-n", "200", "-c", "2", "-m", "20", "-d", body]
                                       + Self.broadcastHeaders(id).flatMap { ["-H", $0] } + [rig.url(Self.bundlePath)])
        // Of positions 1...200: every 10th rejected (20); of the rest, every 7th unavailable
        // (28, less 70 and 140: 26).
        #expect(result.output.contains("status codes: 154 2xx, 0 3xx, 20 4xx, 26 5xx"), "h2load: \(result.output)")
        let statistics = try #require(rig.statistics { $0.accepted + $0.rejected == 200 })
        #expect(statistics.accepted == 154 && statistics.broadcastsByChannel == [id: 154])
        #expect(statistics.rejectedByReason == ["ChannelNotRegistered": 20, "ServiceUnavailable": 26])
        #expect(statistics.acceptedDigests?.count == 1 && statistics.duplicates == 153)
    }

    @Test func aDropLeavesABroadcastUnansweredAndGoawayNamesIt() async throws {
        let dropping = try Self.rig { $0.failurePlan = H2FailurePlan(dropEvery: 1) }
        let id = try dropping.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        let dropped = try await dropping.curl(Self.bundlePath, headers: Self.broadcastHeaders(id), payload: Self.update)
        #expect(dropped.status == nil && dropped.exitCode != 0)
        #expect(dropping.gateway.statistics().droppedConnections == 1)

        // One stream at a time, so that the first request is the last one taken up.
        let goingAway = try Self.rig {
            $0.failurePlan = H2FailurePlan(goawayEvery: 1)
            $0.maximumConcurrentStreams = 1
        }
        let channel = try goingAway.gateway.channels.create(bundleID: "com.example.app", policy: .noStorage)
        let body = try goingAway.file("update.json", Self.update)
        let log = try await runTool("nghttp", ["-v", "-n", "-M", "1", "-m", "2", "-d", body, "-t", "10"]
                                        + Self.broadcastHeaders(channel).flatMap { ["-H", $0] } + [goingAway.url(Self.bundlePath)])
        #expect(log.output.contains("recv GOAWAY frame"), "nghttp: \(log.output)")
        #expect(log.output.components(separatedBy: ":status: 200").count - 1 == 1, "one answered, the other never processed")
        let statistics = goingAway.gateway.statistics()
        #expect(statistics.goaways == 1 && statistics.broadcastsByChannel == [channel: 1])
    }
}

/// One broadcast validation case: how the request differs from a good one to the
/// no-storage channel (`{none}`; `{most}` is the most-recent one), and the answer due.
struct BroadcastCase: CustomStringConvertible, Sendable {
    var status: Int
    var reason: String?
    var path = H2BroadcastTests.bundlePath
    var method = "POST"
    var channel = "{none}"
    var without: String?
    var replacing: (String, String)?
    var adding: String?
    var payloadLength: Int?

    init(_ status: Int, _ reason: String?, path: String = H2BroadcastTests.bundlePath, method: String = "POST",
         without: String? = nil, replacing name: String? = nil, with value: String = "", adding: String? = nil,
         channel: String = "{none}", payload: Int? = nil) {
        self.status = status
        self.reason = reason
        self.path = path
        self.method = method
        self.without = without
        replacing = name.map { ($0, value) }
        self.adding = adding
        self.channel = channel
        payloadLength = payload
    }

    func headers(channel: String) -> [String] {
        var headers = H2BroadcastTests.broadcastHeaders(channel).filter { header in
            let name = String(header.prefix { $0 != ":" })
            return name != without && name != replacing?.0
        }
        if let (name, value) = replacing { headers.append("\(name): \(value)") }
        if let adding { headers.append(adding) }
        return headers
    }

    var description: String {
        "\(status) \(reason ?? "OK") \(method) \(path) channel \(channel) without \(without ?? "-") "
            + "\(replacing.map { "\($0.0): \($0.1)" } ?? "") \(adding ?? "") payload \(payloadLength.map(String.init) ?? "update")"
    }
}
