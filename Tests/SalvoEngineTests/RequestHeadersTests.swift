import SalvoIO
import SalvoTestSupport
import SalvoWire
import Testing
@_spi(Fuzzing) @testable import SalvoEngine

/// The request encoder, checked by an independent HPACK decoder: requests go through
/// `RequestHeaders` and a `ClientSession` into bytes, and a fresh nghttp2 inflater (no
/// session, no shared state with the encoder) decodes the HEADERS blocks found in them.
@Suite struct RequestHeadersTests {
    @Test func everyRequestDecodesToItsHeadersAndTheRepeatedOnesCostAFewBytes() throws {
        let wire = RequestWire()
        var headers = RequestHeaders(authority: "api.push.apple.com", topic: "com.example.app", idSeed: 42)
        headers.authorization = Array("bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9.e30.c2ln".utf8)
        try wire.submit(&headers, token: 1, sequence: 1, payload: #"{"aps":{"alert":"one"}}"#)
        let explicitID = APNsID(random: 0x0123_4567_89AB_CDEF, 0x0FED_CBA9_8765_4321)
        try wire.submit(&headers, pushType: .voip, apnsID: explicitID, token: 2, sequence: 2,
                        payload: #"{"aps":{}}"#, expiry: 1_767_225_600, priority: 5)
        try wire.submit(&headers, pushType: .liveactivity, topic: "com.other.app.push-type.liveactivity",
                        collapseID: "score", token: 3, sequence: 3, payload: #"{"aps":{"event":"update"}}"#, priority: 10)

        let blocks = try HTTP2Frames(wire.output).headerBlocks()
        try #require(blocks.count == 3)
        let inflater = Inflater()
        let decoded = try blocks.map { try inflater.decode($0.block) }
        let ids = decoded.map { fields in fields.first { $0.name == "apns-id" }?.value ?? "" }
        let common: [(String, String)] = [(":method", "POST"), (":scheme", "https"), (":authority", "api.push.apple.com")]
        let bearer = ("authorization", String(decoding: headers.authorization, as: UTF8.self))
        #expect(decoded[0] == (common + [
            (":path", "/3/device/" + deviceToken(1).hex), bearer, ("apns-topic", "com.example.app"),
            ("apns-push-type", "alert"), ("apns-id", ids[0]),
        ]).map { HeaderPair($0.0, $0.1) })
        #expect(decoded[1] == (common + [
            (":path", "/3/device/" + deviceToken(2).hex), bearer, ("apns-topic", "com.example.app.voip"),
            ("apns-push-type", "voip"), ("apns-priority", "5"), ("apns-id", explicitID.description),
            ("apns-expiration", "1767225600"),
        ]).map { HeaderPair($0.0, $0.1) })
        #expect(ids[0] != ids[2] && ids.allSatisfy { $0.count == 36 })
        #expect(decoded[2] == (common + [
            (":path", "/3/device/" + deviceToken(3).hex), bearer, ("apns-push-type", "liveactivity"), ("apns-priority", "10"),
            ("apns-topic", "com.other.app.push-type.liveactivity"), ("apns-id", ids[2]), ("apns-collapse-id", "score"),
        ]).map { HeaderPair($0.0, $0.1) })
        // Each stream's DATA is its payload.
        #expect(blocks.map(\.body) == [#"{"aps":{"alert":"one"}}"#, #"{"aps":{}}"#, #"{"aps":{"event":"update"}}"#])

        // What repeats is indexed: a request like the first, after it, no longer spells out
        // the authority, the authorization, the topic and the push type (a byte each). Only
        // its `:path` and `apns-id` are literals (new every time, never indexed), and their
        // names are indices: the static table's `:path`, and `apns-id` in the dynamic table
        // since the first request (two bytes).
        try wire.submit(&headers, token: 4, sequence: 4, payload: #"{"aps":{"alert":"four"}}"#)
        let again = try HTTP2Frames(wire.output).headerBlocks()
        try #require(again.count == 4)
        #expect(try inflater.decode(again[3].block).count == decoded[0].count)
        let literals = (2 + ("/3/device/" + deviceToken(4).hex).utf8.count) + (2 + 1 + 36)
        #expect(again[3].block.count == 2 + literals + 4)
    }

    @Test func aBroadcastGoesToItsBundlesPathWithItsChannelAndNoTopic() throws {
        let wire = RequestWire()
        var headers = RequestHeaders(authority: "api.push.apple.com", topic: "com.example.app", idSeed: 42)
        headers.authorization = Array("bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9.e30.c2ln".utf8)
        let explicitID = APNsID(random: 0x0123_4567_89AB_CDEF, 0x0FED_CBA9_8765_4321)
        try wire.submit(&headers, channelID: "dHN0LXNyY2gtY2hubA==", token: 0, sequence: 1, payload: #"{"aps":{"event":"update"}}"#)
        try wire.submit(&headers, topic: "com.other.app", apnsID: explicitID, channelID: "Y2hhbm5lbC0y", token: 0, sequence: 2,
                        payload: #"{"aps":{"event":"end"}}"#, expiry: 1_767_225_600, priority: 1)
        // A device push between them is unchanged.
        try wire.submit(&headers, token: 3, sequence: 3, payload: #"{"aps":{}}"#)

        let inflater = Inflater()
        let decoded = try HTTP2Frames(wire.output).headerBlocks().map { try inflater.decode($0.block) }
        try #require(decoded.count == 3)
        let requestID = decoded[0].first { $0.name == "apns-request-id" }?.value ?? ""
        let common: [(String, String)] = [(":method", "POST"), (":scheme", "https"), (":authority", "api.push.apple.com")]
        let bearer = ("authorization", String(decoding: headers.authorization, as: UTF8.self))
        // Always an expiration (0: store nothing) and a priority (10); never an apns-topic.
        #expect(decoded[0] == (common + [
            (":path", "/4/broadcasts/apps/com.example.app"), bearer, ("apns-push-type", "liveactivity"), ("apns-expiration", "0"),
            ("apns-priority", "10"), ("apns-channel-id", "dHN0LXNyY2gtY2hubA=="), ("apns-request-id", requestID),
        ]).map { HeaderPair($0.0, $0.1) })
        #expect(requestID.count == 36)
        #expect(decoded[1] == (common + [
            (":path", "/4/broadcasts/apps/com.other.app"), bearer, ("apns-push-type", "liveactivity"), ("apns-priority", "1"),
            ("apns-channel-id", "Y2hhbm5lbC0y"), ("apns-request-id", explicitID.description), ("apns-expiration", "1767225600"),
        ]).map { HeaderPair($0.0, $0.1) })
        #expect(decoded[2].contains(HeaderPair(":path", "/3/device/" + deviceToken(3).hex)))
        #expect(decoded[2].contains(HeaderPair("apns-topic", "com.example.app")))
    }

    @Test func aBroadcastThatAppleWouldRefuseIsNotEncoded() throws {
        let builder = RequestRecordBuilder(defaultPushType: .alert, defaultExpiry: nil, defaultPriority: nil, defaultCollapseID: [])
        /// What the builder refuses the broadcast with; nil: encoded.
        func refusal(_ channel: String, pushType: APNsPushType? = nil, payloadLength: Int = 10) -> FrameEncodingError? {
            let channelBytes = Array(channel.utf8), payload = [UInt8](repeating: 0x7B, count: payloadLength)
            var buffer = [UInt8](repeating: 0, count: builder.maximumLength)
            return channelBytes.withUnsafeBytes { channel in
                payload.withUnsafeBytes { payload in
                    withUnsafePointer(to: RequestFields(pushType: pushType, channelID: channel)) { request in
                        let notification = SourceNotification(token: deviceToken(0), payload: payload,
                                                              position: SourcePosition(offset: 0, sequence: 1), request: request)
                        return buffer.withUnsafeMutableBytes { bytes in
                            do throws(FrameEncodingError) {
                                try builder.encode(notification, into: bytes)
                                return nil
                            } catch {
                                return error
                            }
                        }
                    }
                }
            }
        }
        let notBase64 = FrameEncodingError.invalidHeader(
            name: "apns-channel-id", problem: "must be 1 to 255 base64 characters, as Apple made the channel's id")
        #expect(refusal("not base64!") == notBase64)
        #expect(refusal("") == notBase64)
        #expect(refusal("Y2hhbm5lbA==", pushType: .alert)
                == .invalidHeader(name: "apns-push-type", problem: "is alert; a broadcast updates a Live Activity: liveactivity"))
        #expect(refusal("Y2hhbm5lbA==", payloadLength: 5121) == .payloadTooLong(length: 5121, maximum: 5120))
        #expect(refusal("Y2hhbm5lbA==", payloadLength: 5120) == nil)
    }

    @Test func theSameNotificationGetsTheSameIDEachTimeAndOthersDiffer() throws {
        let wire = RequestWire()
        var headers = RequestHeaders(authority: "localhost", topic: nil, idSeed: 7)
        for sequence: UInt64 in [10, 10, 11] {
            try wire.submit(&headers, token: 5, sequence: sequence, payload: "{}")
        }
        let inflater = Inflater()
        let decoded = try HTTP2Frames(wire.output).headerBlocks().map { try inflater.decode($0.block) }
        let ids = decoded.map { fields in fields.first { $0.name == "apns-id" }?.value }
        #expect(ids[0] != nil && ids[0] == ids[1])
        #expect(ids[0] != ids[2])
        // Without a topic (certificate authentication), no apns-topic at all.
        #expect(!decoded[0].contains { $0.name == "apns-topic" })
        #expect(decoded[0].contains(HeaderPair("apns-push-type", "alert")))
    }
}

private func deviceToken(_ n: UInt8) -> DeviceToken {
    (0..<UInt8(32)).map { n &+ $0 }.withUnsafeBytes { try! DeviceToken(bytes: $0) }
}

/// A client session whose requests are collected as bytes, with the gateway's SETTINGS
/// received (so that every request goes out at once, not one stream at a time).
private final class RequestWire: ClientSessionDelegate {
    private var session: ClientSession<RequestWire>!
    private var nextSlot: Int32 = 0
    private(set) var output: [UInt8] = []

    init() {
        session = try! ClientSession(delegate: self)
        // SETTINGS: MAX_CONCURRENT_STREAMS 1000.
        let settings: [UInt8] = [0, 0, 6, 4, 0, 0, 0, 0, 0, 0, 3, 0, 0, 0x03, 0xE8]
        try! settings.withUnsafeBytes { try session.receive($0) }
    }

    /// Stages and submits one notification, and collects the bytes the session writes.
    func submit(_ headers: inout RequestHeaders, pushType: APNsPushType? = nil, topic: String? = nil,
                collapseID: String? = nil, apnsID: APNsID? = nil, channelID: String? = nil, token: UInt8, sequence: UInt64,
                payload: String, expiry: UInt32? = nil, priority: UInt8? = nil) throws {
        let builder = RequestRecordBuilder(defaultPushType: .alert, defaultExpiry: nil, defaultPriority: nil,
                                           defaultCollapseID: [])
        let payloadBytes = Array(payload.utf8), topicBytes = topic.map { Array($0.utf8) }
        let collapseBytes = collapseID.map { Array($0.utf8) }, channelBytes = channelID.map { Array($0.utf8) }
        // The record holds copies of the payload, topic and collapse id: the buffers only
        // need to live while it is made.
        var record: [UInt8] = []
        let position = SourcePosition(offset: sequence * 100, sequence: sequence)
        try payloadBytes.withUnsafeBytes { payload in
            try (topicBytes ?? []).withUnsafeBytes { topic in
                try (collapseBytes ?? []).withUnsafeBytes { collapse in
                    try (channelBytes ?? []).withUnsafeBytes { channel in
                        let request = RequestFields(pushType: pushType, topic: topicBytes == nil ? nil : topic,
                                                    collapseID: collapseBytes == nil ? nil : collapse, apnsID: apnsID,
                                                    channelID: channelBytes == nil ? nil : channel)
                        try withUnsafePointer(to: request) { request in
                            let notification = SourceNotification(token: deviceToken(token), payload: payload, expiry: expiry,
                                                                  priority: priority, position: position, request: request)
                            record = [UInt8](repeating: 0, count: builder.length(of: notification))
                            try record.withUnsafeMutableBytes { try builder.encode(notification, into: $0) }
                        }
                    }
                }
            }
        }
        try record.withUnsafeBytes { bytes in
            headers.make(for: RequestRecord(bytes), position: position, source: 3)
            let entry = nextSlot
            nextSlot += 1
            try payloadBytes.withUnsafeBytes { try session.submit(headers.fields, body: $0, entry: entry) }
            output += Array(session.output)
            session.consumeOutput(session.output.count)
        }
    }

    /// The windows are open: every body goes with its request.
    func keepBody(entry: Int32, _ rest: UnsafeRawBufferPointer) -> UInt64 {
        Issue.record("a body was held back")
        return 0
    }

    func requestBody(_ body: UInt64, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool) {
        Issue.record("a body was asked for")
        return (0, true)
    }

    func releaseBody(_ body: UInt64) { Issue.record("a body was released") }

    func responseStatus(entry: Int32, value: UnsafeRawBufferPointer) {}
    func responseBody(entry: Int32, chunk: UnsafeRawBufferPointer) {}
    func streamClosed(entry: Int32, refused: Bool, errorCode: UInt32) {}
    func requestNotSent(entry: Int32) {}
    func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {}
    func pingAcknowledged() {}
    func settingsReceived(streamLimit: Int) {}
}

/// The frames of a client's byte stream (after the connection preface).
private struct HTTP2Frames {
    struct Request { var block: [UInt8]; var body: String }
    let bytes: [UInt8]

    init(_ bytes: [UInt8]) { self.bytes = bytes }

    /// Each stream's header block (HEADERS and CONTINUATION joined) and its DATA, in order.
    func headerBlocks() throws -> [Request] {
        let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
        try #require(bytes.starts(with: preface))
        var requests: [Int: Request] = [:]
        var order: [Int] = []
        var at = preface.count
        while at + 9 <= bytes.count {
            let length = Int(bytes[at]) << 16 | Int(bytes[at + 1]) << 8 | Int(bytes[at + 2])
            let type = bytes[at + 3], flags = bytes[at + 4]
            let stream = Int(bytes[at + 5] & 0x7F) << 24 | Int(bytes[at + 6]) << 16 | Int(bytes[at + 7]) << 8 | Int(bytes[at + 8])
            var payload = Array(bytes[at + 9..<at + 9 + length])
            at += 9 + length
            switch type {
            case 0x1:  // HEADERS: padding and priority fields are not part of the block
                if flags & 0x8 != 0 { payload = Array(payload[1..<payload.count - Int(payload[0])]) }
                if flags & 0x20 != 0 { payload.removeFirst(5) }
                order.append(stream)
                requests[stream] = Request(block: payload, body: "")
            case 0x9: requests[stream]?.block += payload
            case 0x0: requests[stream]?.body += String(decoding: payload, as: UTF8.self)
            default: break
            }
        }
        #expect(at == bytes.count, "a frame is cut short")
        return order.map { requests[$0]! }
    }
}

