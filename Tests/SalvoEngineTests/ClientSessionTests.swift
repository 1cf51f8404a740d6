import SalvoIO
import SalvoWire
import Testing
@_spi(Fuzzing) @testable import SalvoEngine

/// The HTTP/2 client session against frames written by hand: flow control, the ways a
/// stream ends, PING, GOAWAY and protocol errors. (The engine's HTTP/2 tests run it against
/// the nghttp2-based mock; RequestHeadersTests decodes its requests with nghttp2.)
@Suite struct ClientSessionTests {
    @Test func aBodyBeyondTheWindowWaitsAndGoesOutInStreamOrderAsTheWindowReopens() throws {
        let peer = Peer()
        // The gateway allows 10 bytes per stream.
        try peer.receive(settings([(HTTP2Setting.maxConcurrentStreams, 100), (HTTP2Setting.initialWindowSize, 10)]))
        #expect(peer.events == ["settings 100"])
        #expect(peer.sent().map(\.summary) == ["SETTINGS ack"])
        try peer.submit(entry: 0, body: 25)
        try peer.submit(entry: 1, body: 5)
        // Stream 3's body waits behind stream 1's, though its own window would take it.
        #expect(peer.sent().map(\.summary) == ["HEADERS 1", "DATA 1 10", "HEADERS 3"])
        try peer.receive(frame(.windowUpdate, stream: 1, [0, 0, 0, 15]))
        #expect(peer.sent().map(\.summary) == ["DATA 1 15 end", "DATA 3 5 end"])
        #expect(peer.bodyTaken == [0: 25, 1: 5])
        #expect(peer.released == [0, 1])

        // A larger initial window reopens a stream held by it.
        try peer.submit(entry: 2, body: 30)
        #expect(peer.sent().map(\.summary) == ["HEADERS 5", "DATA 5 10"])
        try peer.receive(settings([(HTTP2Setting.initialWindowSize, 40)]))
        #expect(peer.sent().map(\.summary) == ["SETTINGS ack", "DATA 5 20 end"])
        #expect(peer.released == [0, 1, 2])
    }

    /// What is left of a body is kept only for the streams whose body waits: one answered
    /// while its body waits is cancelled and its body released, one whose body went is not;
    /// a session that ends releases the bodies still waiting.
    @Test func aStreamAnsweredBeforeItsBodyWentIsCancelled() throws {
        let peer = Peer()
        try peer.receive(settings([(HTTP2Setting.initialWindowSize, 4)]))
        _ = peer.sent()
        try peer.submit(entry: 0, body: 2)
        for entry: Int32 in 1...3 { try peer.submit(entry: entry, body: 10) }
        #expect(peer.sent().map(\.summary) == ["HEADERS 1", "DATA 1 2 end", "HEADERS 3", "DATA 3 4", "HEADERS 5", "HEADERS 7"])
        let ok = responseBlock([(":status", "200")])
        for stream: Int32 in [5, 1, 7] {
            try peer.receive(frame(.headers, flags: HTTP2Flags.endHeaders | HTTP2Flags.endStream, stream: stream, ok))
        }
        #expect(peer.sent().map(\.summary) == ["RST_STREAM 5 8", "RST_STREAM 7 8"])
        #expect(peer.released == [2, 3])
        // Stream 3's body goes on; the closed streams' are skipped.
        try peer.receive(frame(.windowUpdate, stream: 3, [0, 0, 0, 6]))
        #expect(peer.sent().map(\.summary) == ["DATA 3 6 end"])
        try peer.receive(frame(.headers, flags: HTTP2Flags.endHeaders | HTTP2Flags.endStream, stream: 3, ok))
        #expect(peer.sent().isEmpty)
        #expect(peer.events.filter { $0.hasPrefix("closed") } == ["closed 2 0", "closed 0 0", "closed 3 0", "closed 1 0"])
        #expect(peer.released == [2, 3, 1])

        try peer.submit(entry: 4, body: 10)
        try peer.submit(entry: 5, body: 10)
        peer.session.releaseWaitingBodies()
        #expect(peer.released == [2, 3, 1, 4, 5])
    }

    @Test func streamsEndByTheirAnswerByResetAndByGoAway() throws {
        let peer = Peer()
        try peer.receive(settings([]))
        #expect(peer.session.remoteStreamLimit == Int(UInt32.max))
        for entry: Int32 in 0..<4 { try peer.submit(entry: entry, body: 3) }
        _ = peer.sent()
        peer.events = []

        // Stream 1: padded HEADERS and a CONTINUATION, then DATA in two frames, the last ending it.
        let block = responseBlock([(":status", "400"), ("apns-id", "X")])
        try peer.receive(frame(.headers, flags: HTTP2Flags.padded, stream: 1, [2] + block[..<5] + [0, 0])
            + frame(.continuation, flags: HTTP2Flags.endHeaders, stream: 1, Array(block[5...])))
        try peer.receive(frame(.data, stream: 1, Array("{\"re".utf8))
            + frame(.data, flags: HTTP2Flags.endStream, stream: 1, Array("ason\"}".utf8)))
        // Stream 3: refused. Stream 5: answered at once.
        try peer.receive(frame(.rstStream, stream: 3, [0, 0, 0, 7]))
        try peer.receive(frame(.headers, flags: HTTP2Flags.endHeaders | HTTP2Flags.endStream, stream: 5,
                               responseBlock([(":status", "200")])))
        // GOAWAY after stream 5: stream 7 was never processed, and nothing more is sent.
        try peer.receive(frame(.goAway, stream: 0, [0, 0, 0, 5, 0, 0, 0, 0] + Array("bye".utf8)))
        try peer.submit(entry: 9, body: 3)
        #expect(peer.events == [
            "status 0 400", "body 0 {\"re", "body 0 ason\"}", "closed 0 0",
            "closed 1 refused 7", "status 2 200", "closed 2 0",
            "goaway 5 0 bye", "closed 3 refused 7", "not sent 9",
        ])
        #expect(peer.sent().isEmpty)
    }

    @Test func pingsAreAnsweredAndOursAcknowledged() throws {
        let peer = Peer()
        try peer.receive(settings([]))
        _ = peer.sent()
        try peer.receive(frame(.ping, stream: 0, [1, 2, 3, 4, 5, 6, 7, 8]))
        #expect(peer.sent().map(\.summary) == ["PING ack 0102030405060708"])
        peer.session.ping()
        #expect(peer.sent().map(\.summary) == ["PING 0000000000000000"])
        try peer.receive(frame(.ping, flags: HTTP2Flags.ack, stream: 0, [0, 0, 0, 0, 0, 0, 0, 0]))
        #expect(peer.events.last == "ping acknowledged")
    }

    @Test(arguments: [
        (frame(.data, stream: 2, [1]), "DATA on stream 2", HTTP2ErrorCode.protocolError),
        (frame(.headers, stream: 9, [0x88]), "HEADERS on stream 9, which we did not open", HTTP2ErrorCode.protocolError),
        (frame(.ping, stream: 0, [1, 2, 3]), "PING of 3 bytes", HTTP2ErrorCode.frameSizeError),
        (frame(.headers, stream: 1, [0x88]) + frame(.ping, stream: 0, [0, 0, 0, 0, 0, 0, 0, 0]), "inside the header block",
         HTTP2ErrorCode.protocolError),
        (frame(.settings, stream: 0, [0, 5, 0, 0, 0, 1]), "SETTINGS_MAX_FRAME_SIZE 1", HTTP2ErrorCode.protocolError),
        (frame(.pushPromise, stream: 1, [0, 0, 0, 2]), "PUSH_PROMISE", HTTP2ErrorCode.protocolError),
        (frame(.headers, flags: HTTP2Flags.endHeaders, stream: 1, [0xFF, 0xFF, 0xFF, 0xFF, 0x0F]), "HPACK cannot decode",
         HTTP2ErrorCode.compressionError),
        (frame(.data, stream: 1, [UInt8](repeating: 0, count: 16_385)), "over our maximum", HTTP2ErrorCode.frameSizeError),
    ])
    func protocolErrorsEndTheSessionWithGoAway(bytes: [UInt8], saying: String, code: UInt32) throws {
        let peer = Peer()
        try peer.receive(settings([]))
        try peer.submit(entry: 0, body: 1)
        _ = peer.sent()
        let error = #expect(throws: HTTP2SessionError.self) { try peer.receive(bytes) }
        #expect(error?.description.contains(saying) == true, "\(error.map(String.init(describing:)) ?? "")")
        #expect(peer.sent().last?.summary == "GOAWAY \(code)")
        #expect(throws: HTTP2SessionError.self) { try peer.receive(settings([])) }
    }

    /// An answer's `apns-id` differs every time: a header table would only make us decode
    /// and keep each one (what the gateway's encoder does then: HPACKDecoderTests).
    @Test func ourSettingsAskForNoHeaderTableNoPushAndAWideWindow() {
        let peer = Peer()
        _ = peer.sent()
        #expect(peer.ourSettings.map { "\($0.0)=\($0.1)" } == ["1=0", "2=0", "4=\(1 << 30)"])
    }

    @Test func theFirstFrameMustBeSettings() throws {
        let peer = Peer()
        #expect(throws: HTTP2SessionError.self) { try peer.receive(frame(.ping, stream: 0, [0, 0, 0, 0, 0, 0, 0, 0])) }
    }
}

// MARK: - Helpers

private func frame(_ type: HTTP2FrameType, flags: UInt8 = 0, stream: Int32, _ payload: [UInt8]) -> [UInt8] {
    var header = [UInt8](repeating: 0, count: HTTP2FrameHeader.byteCount)
    header.withUnsafeMutableBytes {
        HTTP2FrameHeader(length: payload.count, type: type, flags: flags, streamID: stream).write(to: $0.baseAddress!)
    }
    return header + payload
}

private func settings(_ entries: [(UInt16, UInt32)]) -> [UInt8] {
    frame(.settings, stream: 0, entries.flatMap { id, value in
        [UInt8(id >> 8), UInt8(id & 0xFF)] + withUnsafeBytes(of: value.bigEndian, Array.init)
    })
}

/// A response header block, encoded by our own encoder (a fresh table each time: literals
/// without indexing, so the session's inflater keeps nothing).
private func responseBlock(_ fields: [(String, String)]) -> [UInt8] {
    var encoder = HPACKEncoder()
    var block = [UInt8](repeating: 0, count: 512)
    let count = block.withUnsafeMutableBytes { space in
        var writer = ByteWriter(space)
        for (name, value) in fields {
            Array(name.utf8).withUnsafeBytes { name in
                Array(value.utf8).withUnsafeBytes { value in encoder.encode(name: name, value: value, .neverIndexed, into: &writer) }
            }
        }
        return writer.count
    }
    return Array(block[..<count])
}

/// A frame the session wrote, summed up.
private struct SentFrame {
    var header: HTTP2FrameHeader
    var payload: [UInt8]

    var summary: String {
        let end = header.flags & HTTP2Flags.endStream != 0 ? " end" : ""
        let ack = header.flags & HTTP2Flags.ack != 0 ? " ack" : ""
        switch header.type {
        case .headers: return "HEADERS \(header.streamID)" + end
        case .data: return "DATA \(header.streamID) \(header.length)" + end
        case .settings: return "SETTINGS" + ack
        case .ping: return "PING" + ack + " " + payload.map { String(format: "%02x", $0) }.joined()
        case .goAway: return "GOAWAY \(payload.suffix(4).reduce(0) { $0 << 8 | UInt32($1) })"
        case .rstStream: return "RST_STREAM \(header.streamID) \(payload.reduce(0) { $0 << 8 | UInt32($1) })"
        default: return "type \(header.type.rawValue)"
        }
    }
}

/// A session with a delegate that records what it hears and serves bodies of counting bytes.
private final class Peer: ClientSessionDelegate {
    var session: ClientSession<Peer>!
    var events: [String] = []
    var bodyTaken: [Int32: Int] = [:]
    /// The kept bodies the session released, in order.
    var released: [Int32] = []
    private var bodyLength: [Int32: Int] = [:]
    private var parser = HTTP2FrameParser()
    private var prefaceSeen = false
    /// Our SETTINGS, as the session first wrote them.
    var ourSettings: [(UInt16, UInt32)] = []
    private var fields = HeaderFields(capacity: 4)

    init() { session = try! ClientSession(delegate: self) }

    func receive(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try session.receive($0) }
    }

    func submit(entry: Int32, body: Int) throws {
        bodyLength[entry] = body
        fields.removeAll()
        fields.add(":method", "POST")
        fields.add(":path", "/")
        let bytes = (0..<body).map { UInt8(truncatingIfNeeded: $0) }
        try bytes.withUnsafeBytes { try session.submit(fields, body: $0, entry: entry) }
        if bodyTaken[entry] == nil { bodyTaken[entry] = body }
    }

    /// The frames written since the last call (the preface, our SETTINGS and the
    /// connection's WINDOW_UPDATE left out; the settings are kept in `ourSettings`).
    func sent() -> [SentFrame] {
        var bytes = Array(session.output)
        session.consumeOutput(bytes.count)
        if !prefaceSeen { bytes.removeFirst(HTTP2.clientPreface.utf8CodeUnitCount) }
        var frames: [SentFrame] = []
        try! bytes.withUnsafeBytes { bytes in
            try parser.parse(bytes) { header, payload in frames.append(SentFrame(header: header, payload: Array(payload))) }
        }
        if !prefaceSeen {
            prefaceSeen = true
            let payload = frames.removeFirst().payload
            ourSettings = stride(from: 0, to: payload.count, by: 6).map { (offset: Int) -> (UInt16, UInt32) in
                let identifier = UInt16(payload[offset]) << 8 | UInt16(payload[offset + 1])
                let value = payload[(offset + 2)..<(offset + 6)].reduce(UInt32(0)) { $0 << 8 | UInt32($1) }
                return (identifier, value)
            }
            frames.removeFirst()
        }
        return frames
    }

    /// The windows let `rest` wait: what was sent went with the request; counting on from
    /// there. A body's number is its entry.
    func keepBody(entry: Int32, _ rest: UnsafeRawBufferPointer) -> UInt64 {
        bodyTaken[entry] = bodyLength[entry]! - rest.count
        return UInt64(entry)
    }

    func requestBody(_ body: UInt64, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool) {
        let entry = Int32(body)
        #expect(!released.contains(entry), "body \(entry) asked for after its release")
        let taken = bodyTaken[entry, default: 0]
        let count = min(destination.count, bodyLength[entry]! - taken)
        for i in 0..<count { destination[i] = UInt8(truncatingIfNeeded: taken + i) }
        bodyTaken[entry] = taken + count
        return (count, taken + count == bodyLength[entry]!)
    }

    func responseStatus(entry: Int32, value: UnsafeRawBufferPointer) {
        events.append("status \(entry) \(String(decoding: value, as: UTF8.self))")
    }
    func responseBody(entry: Int32, chunk: UnsafeRawBufferPointer) {
        events.append("body \(entry) \(String(decoding: chunk, as: UTF8.self))")
    }
    func streamClosed(entry: Int32, refused: Bool, errorCode: UInt32) {
        events.append("closed \(entry) " + (refused ? "refused " : "") + "\(errorCode)")
    }
    func requestNotSent(entry: Int32) { events.append("not sent \(entry)") }
    func releaseBody(_ body: UInt64) {
        #expect(!released.contains(Int32(body)), "body \(body) released twice")
        released.append(Int32(body))
    }
    func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {
        events.append("goaway \(lastStreamID) \(errorCode) \(String(decoding: debugData, as: UTF8.self))")
    }
    func pingAcknowledged() { events.append("ping acknowledged") }
    func settingsReceived(streamLimit: Int) { events.append("settings \(streamLimit)") }
}
