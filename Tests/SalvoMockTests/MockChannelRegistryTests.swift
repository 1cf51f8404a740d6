import Foundation
import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

/// The broadcast channel registry and the channel management rules, without sockets.
@Suite struct MockChannelRegistryTests {
    @Test func aChannelIsCreatedReadListedAndDeletedPerBundleId() throws {
        let registry = MockChannelRegistry()
        let first = try registry.create(bundleID: "com.example.app", policy: .noStorage)
        let second = try registry.create(bundleID: "com.example.app", policy: .mostRecent)
        let other = try registry.create(bundleID: "com.example.other", policy: .mostRecent)
        #expect(registry.policy(of: first, bundleID: "com.example.app") == .noStorage)
        #expect(registry.policy(of: second, bundleID: "com.example.app") == .mostRecent)
        #expect(registry.policy(of: other, bundleID: "com.example.app") == nil, "another bundle id's channel")
        #expect(registry.list(bundleID: "com.example.app") == [first, second], "oldest first")
        #expect(registry.list(bundleID: "com.example.none") == [])
        #expect(registry.count == 3)
        #expect(registry.delete(first, bundleID: "com.example.app"))
        #expect(!registry.delete(first, bundleID: "com.example.app"), "gone already")
        #expect(!registry.delete(other, bundleID: "com.example.app"))
        #expect(registry.policy(of: first, bundleID: "com.example.app") == nil)
        #expect(registry.list(bundleID: "com.example.app") == [second])
    }

    @Test func idsAreSixteenRandomBytesInStandardBase64AndNeverReused() throws {
        let registry = MockChannelRegistry()
        var seen: Set<String> = []
        for _ in 0..<200 {
            let id = try registry.create(bundleID: "com.example.app", policy: .noStorage)
            let bytes = try #require(Data(base64Encoded: id), "standard base64: \(id)")
            #expect(bytes.count == 16 && id.count == 24 && id.hasSuffix("=="))
            #expect(seen.insert(id).inserted, "a new id each time")
            #expect(registry.delete(id, bundleID: "com.example.app"))
        }
        #expect(Set(seen.map { $0.prefix(4) }).count > 100, "random, not counted up")
    }

    @Test func theLimitIsPerBundleIdAndDefaultsToApples() throws {
        #expect(MockChannelRegistry().limit == 10_000)
        #expect(MockChannelRegistry.defaultLimit == 10_000)
        #expect(H2MockGateway.Configuration(tls: .client()).channelLimit == 10_000)
        let registry = MockChannelRegistry(limit: 3)
        let ids = try (0..<3).map { _ in try registry.create(bundleID: "com.example.app", policy: .mostRecent) }
        #expect(throws: MockChannelRegistry.LimitReached(bundleID: "com.example.app", limit: 3)) {
            try registry.create(bundleID: "com.example.app", policy: .mostRecent)
        }
        _ = try registry.create(bundleID: "com.example.other", policy: .mostRecent)
        registry.delete(ids[0], bundleID: "com.example.app")
        _ = try registry.create(bundleID: "com.example.app", policy: .mostRecent)
    }

    @Test func theTenThousandAndFirstChannelIsRefusedByDefault() throws {
        let registry = MockChannelRegistry()
        for _ in 0..<10_000 { try registry.create(bundleID: "com.example.app", policy: .noStorage) }
        #expect(throws: MockChannelRegistry.LimitReached.self) { try registry.create(bundleID: "com.example.app", policy: .noStorage) }
        #expect(registry.list(bundleID: "com.example.app").count == 10_000)
    }

    @Test func channelIdsParseAsBase64OrAreMalformed() throws {
        func parse(_ text: String) -> ChannelID.Parsed { Array(text.utf8).withUnsafeBytes { ChannelID.parse($0) } }
        let registry = MockChannelRegistry()
        let id = try registry.create(bundleID: "com.example.app", policy: .mostRecent)
        guard case .id(let parsed) = parse(id) else { Issue.record("\(id) did not parse"); return }
        #expect(parsed.base64 == id, "the round trip")
        #expect(ChannelID(base64: id) == parsed)
        #expect(parse("AAAAAAAAAAAAAAAAAAAAAA==") == .id(ChannelID(high: 0, low: 0)))
        #expect(parse("/////////////////////w==") == .id(ChannelID(high: .max, low: .max)))
        for foreign in ["dGVzdA==", "AAAAAAAAAAAAAAAAAAAAAAAA", "AAAAAAAAAAAAAAAAAAAAAB=="] {
            #expect(parse(foreign) == .foreign, "well-formed, never issued: \(foreign)")
        }
        for malformed in ["", "abc", "not base64!", "AAAA=AAA", "====", "AAAAAAAAAAAAAAAAAAAAAA-_"] {
            #expect(parse(malformed) == .malformed, "\(malformed)")
        }
    }

    // MARK: Channel management requests

    /// The answer to a request of `headers` and `body`.
    func respond(_ registry: MockChannelRegistry, _ headers: [(String, String)], body: String = "",
                 authorization: RequestValidation.Authorization? = nil, allowedTopics: [String] = []) -> ChannelResponse {
        var request = ChannelRequest()
        for (name, value) in headers {
            guard let header = Array(name.utf8).withUnsafeBytes({ APNsRequestHeader(name: $0) }) else { continue }
            Array(value.utf8).withUnsafeBytes { request.header(header, $0) }
        }
        if let authorization { request.authorization = authorization }
        Array(body.utf8).withUnsafeBytes { request.body($0) }
        return request.respond(registry: registry, tokenAuthentication: authorization != nil,
                               allowedTopics: allowedTopics.map { Array($0.utf8) })
    }

    let create: [(String, String)] = [(":method", "POST"), (":path", "/1/apps/com.example.app/channels")]
    let createBody = #"{"message-storage-policy": 1, "push-type": "LiveActivity"}"#

    @Test func theFourOperationsAnswerAsApplesDo() throws {
        let registry = MockChannelRegistry()
        let created = respond(registry, create, body: createBody)
        #expect(created.status == 201 && created.body.isEmpty && created.operation == .create)
        let id = try #require(created.channelID)
        let read = respond(registry, [(":method", "GET"), (":path", "/1/apps/com.example.app/channels"), ("apns-channel-id", id)])
        #expect(read.status == 200 && read.operation == .read)
        #expect(String(decoding: read.body, as: UTF8.self) == #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
        let list = respond(registry, [(":method", "GET"), (":path", "/1/apps/com.example.app/all-channels")])
        #expect(String(decoding: list.body, as: UTF8.self) == #"{"channels":["\#(id)"]}"#)
        let deleted = respond(registry, [(":method", "DELETE"), (":path", "/1/apps/com.example.app/channels"), ("apns-channel-id", id)])
        #expect(deleted.status == 204 && deleted.body.isEmpty && deleted.operation == .delete)
        let again = respond(registry, [(":method", "GET"), (":path", "/1/apps/com.example.app/channels"), ("apns-channel-id", id)])
        #expect(again == .refused(.channelNotRegistered))
    }

    @Test func eachFaultIsRefusedInTheDocumentedOrder() throws {
        let registry = MockChannelRegistry(limit: 1)
        let read: [(String, String)] = [(":method", "GET"), (":path", "/1/apps/com.example.app/channels")]
        #expect(respond(registry, [(":method", "GET"), (":path", "/1/apps/com.example.app/channel")]).reason == .badPath)
        #expect(respond(registry, [(":method", "GET"), (":path", "/1/apps//channels")]).reason == .badPath)
        #expect(respond(registry, [(":method", "GET"), (":path", "/3/apps/com.example.app/channels")]).reason == .badPath)
        #expect(respond(registry, [(":method", "PUT"), (":path", "/1/apps/com.example.app/channels")]).reason == .methodNotAllowed)
        #expect(respond(registry, [(":method", "POST"), (":path", "/1/apps/com.example.app/all-channels")]).reason == .methodNotAllowed)
        #expect(respond(registry, read, authorization: .absent).reason == .missingProviderToken)
        #expect(respond(registry, read, authorization: .expired).reason == .expiredProviderToken)
        #expect(respond(registry, read + [("apns-channel-id", "a"), ("apns-channel-id", "b")]).reason == .duplicateHeaders)
        #expect(respond(registry, read, allowedTopics: ["com.example.other"]).reason == .topicMismatch)
        #expect(respond(registry, read + [("apns-request-id", "nope")]).reason == .badMessageId)
        #expect(respond(registry, read).reason == .missingChannelId)
        #expect(respond(registry, read + [("apns-channel-id", "not base64!")]).reason == .badChannelId)
        #expect(respond(registry, read + [("apns-channel-id", "dGVzdA==")]).reason == .channelNotRegistered)
        for body in ["", "{}", "[]", "nope", #"{"message-storage-policy": 2, "push-type": "LiveActivity"}"#,
                     #"{"message-storage-policy": "1", "push-type": "LiveActivity"}"#,
                     #"{"message-storage-policy": 1.0, "push-type": "LiveActivity"}"#,
                     #"{"message-storage-policy": true, "push-type": "LiveActivity"}"#,
                     #"{"message-storage-policy": 1}"#, #"{"push-type": "LiveActivity"}"#,
                     #"{"message-storage-policy": 1, "push-type": "alert"}"#,
                     #"{"message-storage-policy": 1, "push-type": "LiveActivity"} x"#,
                     #"{"message-storage-policy": 1, "push-type": "LiveActivity", "extra": {"nested": 1}}"#] {
            #expect(respond(registry, create, body: body).reason == .badRequestPayload, "\(body)")
        }
        #expect(respond(registry, create, body: String(repeating: " ", count: 5000) + createBody).reason == .badRequestPayload)
        #expect(respond(registry, create, body: #"{"push-type":"liveactivity","message-storage-policy":0,"x":null}"#).status == 201,
                "liveactivity in lowercase, fields in any order, others ignored")
        #expect(respond(registry, create, body: createBody).reason == .cannotCreateChannelConfig, "past the limit of 1")
    }
}
