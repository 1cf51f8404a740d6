import SalvoWire
import Testing
@testable import SalvoChannels

/// Channel requests as they go on the wire, built without a server: the pitfalls other
/// libraries fell into (the id in the path, list on /channels, the policy's spelling) each
/// pinned by a test.
@Suite struct ChannelRequestTests {
    static let requestID = "6c1bd6b2-4f8e-4b47-9a55-d64a5a1b1b0a"

    static func fields(_ request: ChannelRequest) -> [String: String] {
        Dictionary(request.fields.map { ($0.name, $0.value) }, uniquingKeysWith: { first, _ in first })
    }

    @Test func createPostsThePolicyAndPushTypeAsJSONToChannels() throws {
        let request = try ChannelRequest(.create(.mostRecent), bundleID: "com.example.scores", requestID: Self.requestID,
                                         authorization: "bearer a.b.c")
        #expect(request.method == "POST")
        #expect(request.path == "/1/apps/com.example.scores/channels")
        #expect(String(decoding: request.body ?? [], as: UTF8.self) == #"{"message-storage-policy":1,"push-type":"LiveActivity"}"#)
        #expect(Self.fields(request) == ["apns-request-id": Self.requestID, "authorization": "bearer a.b.c",
                                         "content-type": "application/json"])
        let plain = try ChannelRequest(.create(.noStorage), bundleID: "com.example.scores", requestID: Self.requestID, authorization: nil)
        #expect(String(decoding: plain.body ?? [], as: UTF8.self).hasPrefix(#"{"message-storage-policy":0,"#))
        #expect(Self.fields(plain)["authorization"] == nil, "certificate authentication sends no token")
    }

    @Test func readAndDeleteNameTheChannelInTheHeaderNotInThePath() throws {
        let id = "dHN0LXNyY2gtY2hubA=="
        let read = try ChannelRequest(.read(channelID: id), bundleID: "com.example.scores", requestID: Self.requestID, authorization: nil)
        let delete = try ChannelRequest(.delete(channelID: id), bundleID: "com.example.scores", requestID: Self.requestID,
                                        authorization: nil)
        #expect(read.method == "GET" && delete.method == "DELETE")
        for request in [read, delete] {
            #expect(request.path == "/1/apps/com.example.scores/channels")
            #expect(Self.fields(request)["apns-channel-id"] == id)
            #expect(request.body == nil)
        }
    }

    @Test func listGetsAllChannels() throws {
        let list = try ChannelRequest(.list, bundleID: "com.example.scores", requestID: Self.requestID, authorization: nil)
        #expect(list.method == "GET" && list.path == "/1/apps/com.example.scores/all-channels" && list.body == nil)
        #expect(Self.fields(list) == ["apns-request-id": Self.requestID])
    }

    @Test func aBundleIDThatWouldChangeThePathIsRefusedBeforeSending() {
        for bad in ["", "com.example/../x", "com.example app", "com.example?x=1", "com.exämple"] {
            #expect(throws: ChannelRequestProblem.self, "\(bad)") {
                try ChannelRequest(.list, bundleID: bad, requestID: Self.requestID, authorization: nil)
            }
        }
        #expect((try? ChannelRequest(.list, bundleID: "com.Example-app_2.widget", requestID: Self.requestID, authorization: nil)) != nil)
    }

    @Test func aChannelIDThatCannotBeAHeaderIsRefusedBeforeSending() {
        for bad in ["", "abc def", "abc\r\nx-injected: 1", "ab\u{7F}"] {
            #expect(throws: ChannelRequestProblem.self) {
                try ChannelRequest(.read(channelID: bad), bundleID: "com.example", requestID: Self.requestID, authorization: nil)
            }
        }
    }

    @Test func requestIDsAreFreshLowercaseUUIDs() {
        let ids = (0..<100).map { _ in BroadcastChannels.makeRequestID() }
        #expect(Set(ids).count == 100)
        for id in ids {
            #expect(APNsID(id) != nil && id == id.lowercased() && id.count == 36, "\(id)")
        }
    }

    @Test func storagePoliciesHaveTheirCommandLineNames() {
        #expect(MessageStoragePolicy(name: "no-storage") == .noStorage && MessageStoragePolicy(name: "most-recent") == .mostRecent)
        #expect(MessageStoragePolicy(name: "0") == nil && MessageStoragePolicy(name: "mostRecent") == nil)
        #expect(MessageStoragePolicy.noStorage.rawValue == 0 && MessageStoragePolicy.mostRecent.rawValue == 1)
    }
}
