import SalvoWire
import Testing

/// The frame parser hands over the same frames however the reads cut the bytes.
@Suite struct HTTP2FrameParserTests {
    struct Frame: Equatable {
        var header: HTTP2FrameHeader
        var payload: [UInt8]
    }

    /// SETTINGS, an empty SETTINGS ACK, HEADERS, DATA of 300 bytes, PING, a frame of an
    /// unknown type, an empty DATA: back to back.
    static let frames: [Frame] = [
        Frame(header: .init(length: 12, type: .settings, streamID: 0), payload: [0, 3, 0, 0, 3, 0xE8, 0, 4, 0, 1, 0, 0]),
        Frame(header: .init(length: 0, type: .settings, flags: HTTP2Flags.ack, streamID: 0), payload: []),
        Frame(header: .init(length: 4, type: .headers, flags: HTTP2Flags.endHeaders, streamID: 1), payload: [0x88, 0x40, 0, 0]),
        Frame(header: .init(length: 300, type: .data, flags: HTTP2Flags.endStream, streamID: 0x7FFF_FFFF),
              payload: (0..<300).map { UInt8($0 % 251) }),
        Frame(header: .init(length: 8, type: .ping, streamID: 0), payload: [1, 2, 3, 4, 5, 6, 7, 8]),
        Frame(header: .init(length: 3, type: HTTP2FrameType(rawValue: 0xEE), flags: 0xFF, streamID: 5), payload: [9, 9, 9]),
        Frame(header: .init(length: 0, type: .data, streamID: 3), payload: []),
    ]

    static var bytes: [UInt8] {
        frames.flatMap { frame in
            var header = [UInt8](repeating: 0, count: HTTP2FrameHeader.byteCount)
            header.withUnsafeMutableBytes { frame.header.write(to: $0.baseAddress!) }
            return header + frame.payload
        }
    }

    @Test func aStreamCutAtAnyByteGivesTheSameFrames() throws {
        let bytes = Self.bytes
        #expect(try parse([bytes]) == Self.frames)
        for cut in 0...bytes.count {
            #expect(try parse([Array(bytes[..<cut]), Array(bytes[cut...])]) == Self.frames, "cut at \(cut)")
        }
        #expect(try parse(bytes.map { [$0] }) == Self.frames)
    }

    /// A cut frame is kept in a buffer that starts small: it grows to the largest frame.
    @Test func aLargestFrameCutTwiceArrivesWhole() throws {
        let payload = (0..<HTTP2.defaultMaxFrameSize).map { UInt8($0 % 253) }
        let frame = Frame(header: .init(length: payload.count, type: .data, streamID: 1), payload: payload)
        var bytes = [UInt8](repeating: 0, count: HTTP2FrameHeader.byteCount)
        bytes.withUnsafeMutableBytes { frame.header.write(to: $0.baseAddress!) }
        bytes += payload
        #expect(try parse([Array(bytes[..<100]), Array(bytes[100..<9000]), Array(bytes[9000...])]) == [frame])
        #expect(try parse([Array(bytes[..<5]), Array(bytes[5...])] + Self.bytes.map { [$0] }) == [frame] + Self.frames)
    }

    @Test func theReservedBitOfTheStreamIDIsIgnored() throws {
        let bytes: [UInt8] = [0, 0, 0, 0x6, 0, 0x80, 0, 0, 1]
        #expect(try parse([bytes]).map(\.header.streamID) == [1])
    }

    @Test func aFrameOverTheMaximumIsAFrameSizeErrorAsSoonAsItsHeaderIsIn() throws {
        var parser = HTTP2FrameParser()
        let header: [UInt8] = [0, 0x40, 0x01, 0x0, 0, 0, 0, 0, 1]  // 16,385 bytes of DATA
        #expect(throws: HTTP2ConnectionError.self) {
            try header.withUnsafeBytes { bytes in try parser.parse(bytes) { _, _ in } }
        }
    }

    func parse(_ reads: [[UInt8]]) throws -> [Frame] {
        var parser = HTTP2FrameParser()
        var frames: [Frame] = []
        for read in reads {
            try read.withUnsafeBytes { bytes in
                try parser.parse(bytes) { header, payload in frames.append(Frame(header: header, payload: Array(payload))) }
            }
        }
        return frames
    }
}
