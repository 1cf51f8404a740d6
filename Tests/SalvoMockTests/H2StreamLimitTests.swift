import Foundation
import SalvoIO
import Testing
@testable import SalvoMock

/// A client that opens more streams than the gateway allows, written frame by frame (real
/// clients follow SETTINGS, so none would): answered as RFC 9113 §5.1.2 says, by nghttp2.
// Three minutes, not one: in the full suite, tests that block the cooperative pool can
// stretch a few seconds of work past a minute of wall time.
@Suite(.serialized, .timeLimit(.minutes(3))) struct H2StreamLimitTests {
    @Test func aStreamBeyondAnUnacknowledgedLimitIsRefused() throws {
        let rig = try H2Rig(tokenAuthentication: true)
        let client = try RawH2Client(port: rig.gateway.port)
        // The gateway's SETTINGS (one stream: no token yet) is never acknowledged.
        try client.send(RawH2Client.preface + RawH2Client.frame(type: 4, flags: 0, stream: 0, [])
                        + client.openRequest(stream: 1) + client.openRequest(stream: 3))
        let frames = try client.readFrames { $0.contains { $0.type == 3 } }
        let reset = try #require(frames.first { $0.type == 3 })
        #expect(reset.stream == 3)
        #expect(reset.payload == [0, 0, 0, 7], "REFUSED_STREAM: the client may retry it")
        #expect(!frames.contains { $0.type == 7 }, "the connection stays up")
    }

    @Test func aStreamBeyondAnAcknowledgedLimitEndsTheConnection() throws {
        let rig = try H2Rig(tokenAuthentication: true)
        let client = try RawH2Client(port: rig.gateway.port)
        try client.send(RawH2Client.preface + RawH2Client.frame(type: 4, flags: 0, stream: 0, []))
        let settings = try client.readFrames { $0.contains { $0.type == 4 && $0.flags & 1 == 0 } }
        let limit = try #require(settings.first { $0.type == 4 && $0.flags & 1 == 0 })
        #expect(limit.settings[3] == 1, "one stream until a valid token")
        // Acknowledged, then two streams at once.
        try client.send(RawH2Client.frame(type: 4, flags: 1, stream: 0, []) + client.openRequest(stream: 1)
                        + client.openRequest(stream: 3))
        let frames = try client.readFrames { $0.contains { $0.type == 7 } }
        let goaway = try #require(frames.first { $0.type == 7 })
        #expect(Array(goaway.payload[4..<8]) == [0, 0, 0, 1], "PROTOCOL_ERROR")
    }
}

/// Just enough HTTP/2 to misbehave: the preface, frames, and request headers in HPACK
/// literals (no dynamic table, no Huffman).
struct RawH2Client {
    struct Frame {
        var type: UInt8
        var flags: UInt8
        var stream: UInt32
        var payload: [UInt8]

        /// A SETTINGS frame's values by identifier.
        var settings: [UInt16: UInt32] {
            stride(from: 0, to: payload.count - 5, by: 6).reduce(into: [:]) { values, offset in
                let id = UInt16(payload[offset]) << 8 | UInt16(payload[offset + 1])
                values[id] = payload[offset + 2..<offset + 6].reduce(0) { $0 << 8 | UInt32($1) }
            }
        }
    }

    static let preface = Array("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n".utf8)
    let stream: TLSStream
    let port: Int

    /// How a request names the server: `:authority` (what most clients send) or `host`
    /// (what RFC 9113 also allows).
    enum Authority { case authority, host }

    /// - Parameter applicationProtocols: the ALPN list to offer; empty offers none.
    init(port: Int, applicationProtocols: [String] = ["h2"]) throws {
        var configuration = TLSConfiguration.client(trustRoots: .certificates(H2Rig.pki.authority.certificate))
        configuration.applicationProtocols = applicationProtocols
        stream = try TLSStream.connect(host: "127.0.0.1", port: port, context: TLSContext(configuration, role: .client))
        self.port = port
    }

    static func frame(type: UInt8, flags: UInt8, stream: UInt32, _ payload: [UInt8]) -> [UInt8] {
        let length = payload.count
        return [UInt8(length >> 16 & 0xff), UInt8(length >> 8 & 0xff), UInt8(length & 0xff), type, flags]
            + withUnsafeBytes(of: stream.bigEndian, Array.init) + payload
    }

    /// The pseudo-headers of a POST to the test token. Static table: 3 = :method POST,
    /// 7 = :scheme https; literals with indexed names 1 (:authority) and 4 (:path), without
    /// indexing; `host` (a regular header, after them) as a new-name literal.
    private func pseudoHeaders(_ authority: Authority = .authority) -> [UInt8] {
        func literal(nameIndex: UInt8, _ value: String) -> [UInt8] { [nameIndex, UInt8(value.utf8.count)] + Array(value.utf8) }
        let server = "127.0.0.1:\(port)"
        return [0x83, 0x87] + (authority == .authority ? literal(nameIndex: 0x01, server) : [])
            + literal(nameIndex: 0x04, "/3/device/\(h2Token)")
            + (authority == .host ? [0x00, 4] + Array("host".utf8) + [UInt8(server.utf8.count)] + Array(server.utf8) : [])
    }

    /// HEADERS of a POST that stays open (no END_STREAM): the stream counts against the limit.
    func openRequest(stream id: UInt32) -> [UInt8] { Self.frame(type: 1, flags: 0x04, stream: id, pseudoHeaders()) }

    /// A whole well-formed request: HEADERS (the topic and push type as new-name literals)
    /// and a DATA frame with the alert payload that ends the stream.
    func request(stream id: UInt32, authority: Authority = .authority) -> [UInt8] {
        func literal(_ name: String, _ value: String) -> [UInt8] {
            [0x00, UInt8(name.utf8.count)] + Array(name.utf8) + [UInt8(value.utf8.count)] + Array(value.utf8)
        }
        let block = pseudoHeaders(authority) + literal("apns-topic", "com.example.app") + literal("apns-push-type", "alert")
        return Self.frame(type: 1, flags: 0x04, stream: id, block)
            + Self.frame(type: 0, flags: 0x01, stream: id, Array(#"{"aps":{"alert":"hi"}}"#.utf8))
    }

    /// RST_STREAM with CANCEL.
    static func cancel(stream id: UInt32) -> [UInt8] { frame(type: 3, flags: 0, stream: id, [0, 0, 0, 8]) }

    func send(_ bytes: [UInt8]) throws { try bytes.withUnsafeBytes { try stream.writeAll($0) } }

    /// Reads frames until `done` says so, the server closes, or 10 s pass.
    func readFrames(until done: ([Frame]) -> Bool) throws -> [Frame] {
        var bytes: [UInt8] = []
        var frames: [Frame] = []
        var buffer = [UInt8](repeating: 0, count: 16384)
        let deadline = Instant.now() + .seconds(10)
        while !done(frames) && Instant.now() < deadline {
            let result = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0, timeout: deadline.since(.now())) }
            guard case .bytes(let count) = result else { break }
            bytes += buffer[..<count]
            while bytes.count >= 9 {
                let length = Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])
                guard bytes.count >= 9 + length else { break }
                let stream = bytes[5..<9].reduce(0) { $0 << 8 | UInt32($1) } & 0x7fff_ffff
                frames.append(Frame(type: bytes[3], flags: bytes[4], stream: stream, payload: Array(bytes[9..<9 + length])))
                bytes.removeFirst(9 + length)
            }
        }
        return frames
    }
}
