import SalvoWire
import Testing

@Suite("ErrorResponse")
struct ErrorResponseTests {
    @Test("golden bytes: invalid token for identifier 0xdeadbeef")
    func golden() throws {
        let response = ErrorResponse(status: .invalidToken, identifier: 0xDEAD_BEEF)
        #expect(response.bytes == wireHex("08 08 deadbeef"))
        #expect(try ErrorResponse.decode(wireHex("08 0a 00000102")) == ErrorResponse(status: .shutdown, identifier: 258))
        var raw = [UInt8](repeating: 0, count: 6)
        raw.withUnsafeMutableBytes { response.encode(to: $0.baseAddress!) }
        #expect(raw == response.bytes)
    }

    @Test("round trip every status with assorted identifiers")
    func roundTrip() throws {
        var rng = SplitMix64(seed: 8)
        for code in 0...255 {
            let response = ErrorResponse(status: Status(rawValue: UInt8(code)), identifier: UInt32.random(in: 0...UInt32.max, using: &rng))
            #expect(try ErrorResponse.decode(response.bytes) == response)
        }
    }

    @Test("fewer than 6 bytes: nil, wait for more; trailing bytes ignored")
    func shortInput() throws {
        let bytes = wireHex("08 08 00000001")
        for count in 0..<6 {
            #expect(try ErrorResponse.decode(Array(bytes[..<count])) == nil)
        }
        #expect(try ErrorResponse.decode(bytes + [0xFF]) == ErrorResponse(status: .invalidToken, identifier: 1))
    }

    @Test("a first byte other than 8 is a typed error, even before 6 bytes arrive")
    func wrongCommand() {
        #expect(throws: ErrorResponseDecodingError.unexpectedCommand(2)) {
            try ErrorResponse.decode(wireHex("02 00000001"))
        }
        #expect(throws: ErrorResponseDecodingError.unexpectedCommand(0x48)) {
            try ErrorResponse.decode(Array("HTTP/1.1 400".utf8))
        }
    }

    /// A gateway that speaks HTTP/2 starts with its SETTINGS frame (or a GOAWAY refusing
    /// what it read): told apart from other garbage, and permanent, since every connection
    /// will meet the same.
    @Test("an HTTP/2 server's first frame says the gateway speaks HTTP/2")
    func http2Frames() {
        let settings = wireHex("00000c 04 00 00000000")  // 12 bytes of settings on stream 0
        #expect(throws: ErrorResponseDecodingError.http2Frame(type: 4)) { try ErrorResponse.decode(settings) }
        #expect(throws: ErrorResponseDecodingError.http2Frame(type: 4)) { try ErrorResponse.decode(wireHex("000000 04 01 000000")) }
        #expect(throws: ErrorResponseDecodingError.http2Frame(type: 7)) { try ErrorResponse.decode(wireHex("000008 07 00 000000")) }
        // Before 6 bytes, a SETTINGS on another stream, an odd length: plain garbage.
        #expect(throws: ErrorResponseDecodingError.unexpectedCommand(0)) { try ErrorResponse.decode(Array(settings[..<4])) }
        #expect(throws: ErrorResponseDecodingError.unexpectedCommand(0)) { try ErrorResponse.decode(wireHex("00000c 04 00 010000")) }
        #expect(throws: ErrorResponseDecodingError.unexpectedCommand(0)) { try ErrorResponse.decode(wireHex("000005 04 00 000000")) }
        // A GOAWAY's shape with a length of megabytes (found by GatewayReplyFuzzer): garbage.
        #expect(throws: ErrorResponseDecodingError.unexpectedCommand(0x8d)) { try ErrorResponse.decode(wireHex("8d8d08 07 00 000000")) }
        #expect(ErrorResponseDecodingError.http2Frame(type: 4).isPermanent)
        #expect(!ErrorResponseDecodingError.unexpectedCommand(0).isPermanent)
        #expect(ErrorResponseDecodingError.http2Frame(type: 4).description
            == "the gateway answered with an HTTP/2 SETTINGS frame: it speaks HTTP/2 (Apple's provider API), not the binary protocol")
    }
}
