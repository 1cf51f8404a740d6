/// HTTP/2 framing (RFC 9113 §4, §6): the frame header, the constants a client needs, the
/// frames it writes, and an incremental parser for the frames it reads.

/// A frame type (RFC 9113 §6). A struct, not an enum: types we do not know must pass
/// through (they are ignored, not errors).
public struct HTTP2FrameType: RawRepresentable, Hashable, Sendable {
    /// The type byte of the frame header.
    public var rawValue: UInt8
    /// The type with this byte, known or not.
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    /// A piece of a request or response body.
    public static let data = Self(rawValue: 0x0)
    /// The start of a header block.
    public static let headers = Self(rawValue: 0x1)
    /// A stream's priority (deprecated; ignored).
    public static let priority = Self(rawValue: 0x2)
    /// A stream ended by one side, with an error code.
    public static let rstStream = Self(rawValue: 0x3)
    /// A side's settings, or the acknowledgement of the other's.
    public static let settings = Self(rawValue: 0x4)
    /// A server push (never to a client that disabled push).
    public static let pushPromise = Self(rawValue: 0x5)
    /// A round trip, or its answer.
    public static let ping = Self(rawValue: 0x6)
    /// The sender stops: the last stream it processed, an error code, debug data.
    public static let goAway = Self(rawValue: 0x7)
    /// More flow-control window, for a stream or the connection.
    public static let windowUpdate = Self(rawValue: 0x8)
    /// The rest of a header block.
    public static let continuation = Self(rawValue: 0x9)
}

/// Frame flags; which ones a frame may carry depends on its type.
public enum HTTP2Flags {
    /// DATA and HEADERS: the last frame the sender sends on the stream.
    public static let endStream: UInt8 = 0x1
    /// SETTINGS and PING: the answer to the other side's.
    public static let ack: UInt8 = 0x1
    /// HEADERS and CONTINUATION: the header block ends with this frame.
    public static let endHeaders: UInt8 = 0x4
    /// DATA and HEADERS: a pad length byte first, that much padding last.
    public static let padded: UInt8 = 0x8
    /// HEADERS: five bytes of priority fields before the block.
    public static let priority: UInt8 = 0x20
}

/// Error codes of RST_STREAM and GOAWAY (RFC 9113 §7).
public enum HTTP2ErrorCode {
    /// A graceful end.
    public static let noError: UInt32 = 0x0
    /// A rule of the protocol broken.
    public static let protocolError: UInt32 = 0x1
    /// Flow control broken: a window overflowed or was overrun.
    public static let flowControlError: UInt32 = 0x3
    /// A frame of the wrong size.
    public static let frameSizeError: UInt32 = 0x6
    /// The stream was not processed: it may be sent again.
    public static let refusedStream: UInt32 = 0x7
    /// The stream is no longer needed.
    public static let cancel: UInt32 = 0x8
    /// A header block that HPACK cannot decode.
    public static let compressionError: UInt32 = 0x9
}

/// SETTINGS identifiers (RFC 9113 §6.5.2).
public enum HTTP2Setting {
    /// The most the sender's HPACK decoder keeps in its dynamic table (default 4,096).
    public static let headerTableSize: UInt16 = 0x1
    /// Whether the server may push (a client's setting; default 1).
    public static let enablePush: UInt16 = 0x2
    /// The most streams the receiver may open to the sender at once (default unlimited).
    public static let maxConcurrentStreams: UInt16 = 0x3
    /// Every stream's first send window toward the sender (default 65,535).
    public static let initialWindowSize: UInt16 = 0x4
    /// The longest frame payload the sender accepts (default 16,384).
    public static let maxFrameSize: UInt16 = 0x5
}

/// The protocol's fixed numbers.
public enum HTTP2 {
    /// What a client sends before anything else.
    public static let clientPreface: StaticString = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"
    /// Every flow-control window starts at this (connection and streams).
    public static let defaultWindowSize = 65_535
    /// The largest window, and the largest window increment.
    public static let maximumWindowSize = Int(Int32.max)
    /// SETTINGS_MAX_FRAME_SIZE's default, and the least a peer may set it to.
    public static let defaultMaxFrameSize = 16_384
    /// The most SETTINGS_MAX_FRAME_SIZE may be.
    public static let maximumMaxFrameSize = (1 << 24) - 1
}

/// The peer broke the protocol in a way that ends the connection (RFC 9113 §5.4.1).
public struct HTTP2ConnectionError: Error, Equatable, CustomStringConvertible {
    /// What GOAWAY says (`HTTP2ErrorCode`).
    public var code: UInt32
    /// What was wrong, for the user.
    public var description: String

    /// The error with its GOAWAY code and what was wrong.
    public init(_ code: UInt32, _ description: String) {
        self.code = code
        self.description = description
    }
}

/// The 9 bytes before every frame's payload.
public struct HTTP2FrameHeader: Hashable, Sendable {
    /// A frame header's length on the wire.
    public static let byteCount = 9

    /// The payload's length.
    public var length: Int
    /// What the frame is.
    public var type: HTTP2FrameType
    /// `HTTP2Flags`, by type.
    public var flags: UInt8
    /// 0: the connection.
    public var streamID: Int32

    /// A header with these fields.
    public init(length: Int, type: HTTP2FrameType, flags: UInt8 = 0, streamID: Int32) {
        self.length = length
        self.type = type
        self.flags = flags
        self.streamID = streamID
    }

    /// Reads the header at the start of `bytes` (at least 9 of them). The stream id's
    /// reserved top bit is ignored, as the protocol asks.
    public init(_ bytes: UnsafeRawBufferPointer) {
        length = Int(bytes[0]) << 16 | Int(bytes[1]) << 8 | Int(bytes[2])
        type = HTTP2FrameType(rawValue: bytes[3])
        flags = bytes[4]
        streamID = Int32(bitPattern: bytes.loadUnaligned(fromByteOffset: 5, as: UInt32.self).bigEndian & 0x7FFF_FFFF)
    }

    /// Writes the 9 bytes at `destination`.
    public func write(to destination: UnsafeMutableRawPointer) {
        destination.storeBytes(of: UInt8(truncatingIfNeeded: length >> 16), as: UInt8.self)
        destination.storeBytes(of: UInt16(truncatingIfNeeded: length).bigEndian, toByteOffset: 1, as: UInt16.self)
        destination.storeBytes(of: type.rawValue, toByteOffset: 3, as: UInt8.self)
        destination.storeBytes(of: flags, toByteOffset: 4, as: UInt8.self)
        destination.storeBytes(of: UInt32(bitPattern: streamID).bigEndian, toByteOffset: 5, as: UInt32.self)
    }

    /// Writes the 9 bytes through `writer`.
    public func write(into writer: inout ByteWriter) { write(to: writer.reserve(Self.byteCount)) }
}

/// The frames a client writes, other than DATA (whose payload the caller copies in place,
/// after `HTTP2FrameHeader`). Each writes one whole frame.
public enum HTTP2FrameWriter {
    /// SETTINGS with `entries` (identifier, value), or SETTINGS ACK when there are none and
    /// `ack` is set.
    public static func settings(_ entries: [(UInt16, UInt32)], ack: Bool = false, into writer: inout ByteWriter) {
        HTTP2FrameHeader(length: 6 * entries.count, type: .settings, flags: ack ? HTTP2Flags.ack : 0, streamID: 0)
            .write(into: &writer)
        for (identifier, value) in entries {
            writer.write(bigEndian: identifier)
            writer.write(bigEndian: value)
        }
    }

    /// WINDOW_UPDATE of `increment` bytes for `stream` (0: the connection).
    public static func windowUpdate(stream: Int32, increment: UInt32, into writer: inout ByteWriter) {
        HTTP2FrameHeader(length: 4, type: .windowUpdate, streamID: stream).write(into: &writer)
        writer.write(bigEndian: increment)
    }

    /// PING with 8 opaque bytes, or its answer (`ack`), which repeats them.
    public static func ping(_ payload: UInt64, ack: Bool, into writer: inout ByteWriter) {
        HTTP2FrameHeader(length: 8, type: .ping, flags: ack ? HTTP2Flags.ack : 0, streamID: 0).write(into: &writer)
        writer.write(bigEndian: payload)
    }

    /// GOAWAY without debug data.
    public static func goAway(lastStreamID: Int32, errorCode: UInt32, into writer: inout ByteWriter) {
        HTTP2FrameHeader(length: 8, type: .goAway, streamID: 0).write(into: &writer)
        writer.write(bigEndian: lastStreamID)
        writer.write(bigEndian: errorCode)
    }

    /// RST_STREAM: `stream` ends with `errorCode`.
    public static func rstStream(_ stream: Int32, errorCode: UInt32, into writer: inout ByteWriter) {
        HTTP2FrameHeader(length: 4, type: .rstStream, streamID: stream).write(into: &writer)
        writer.write(bigEndian: errorCode)
    }

    /// HEADERS carrying a whole header block (END_HEADERS), which `block` writes; the
    /// caller keeps the block within the peer's largest frame.
    public static func headers(stream: Int32, endStream: Bool, into writer: inout ByteWriter,
                               block: (inout ByteWriter) -> Void) {
        let header = writer.reserve(HTTP2FrameHeader.byteCount)
        let start = writer.count
        block(&writer)
        HTTP2FrameHeader(length: writer.count - start, type: .headers,
                         flags: HTTP2Flags.endHeaders | (endStream ? HTTP2Flags.endStream : 0), streamID: stream)
            .write(to: header)
    }
}

/// Cuts a byte stream into frames, however the reads split it. Whole frames inside one
/// read are handed over in place; only a frame cut by the end of a read is copied, into a
/// buffer that grows to the longest frame cut so far (a client's are answers of a few dozen
/// bytes, and it keeps one parser per connection).
public struct HTTP2FrameParser: ~Copyable {
    /// Our SETTINGS_MAX_FRAME_SIZE: longer frames are a FRAME_SIZE_ERROR.
    public let maximumFrameSize: Int
    private var partial: UnsafeMutableRawBufferPointer
    private var partialCount = 0

    /// A parser at the start of a stream of frames (after any connection preface).
    public init(maximumFrameSize: Int = HTTP2.defaultMaxFrameSize) {
        self.maximumFrameSize = maximumFrameSize
        partial = .allocate(byteCount: 256, alignment: 16)
    }

    deinit { partial.deallocate() }

    /// Calls `frame` with each frame completed by `bytes`: its header and its payload
    /// (valid during the call). After an error, the stream is not parseable any more.
    public mutating func parse(
        _ bytes: UnsafeRawBufferPointer,
        _ frame: (HTTP2FrameHeader, UnsafeRawBufferPointer) throws(HTTP2ConnectionError) -> Void
    ) throws(HTTP2ConnectionError) {
        var input = bytes
        if partialCount > 0 {
            // Finish the frame the last read cut: its header first, then its payload.
            fill(upTo: HTTP2FrameHeader.byteCount, from: &input)
            guard partialCount >= HTTP2FrameHeader.byteCount else { return }
            let header = try checked(HTTP2FrameHeader(UnsafeRawBufferPointer(partial)))
            let end = HTTP2FrameHeader.byteCount + header.length
            fill(upTo: end, from: &input)
            guard partialCount == end else { return }
            partialCount = 0
            try frame(header, UnsafeRawBufferPointer(rebasing: partial[HTTP2FrameHeader.byteCount..<end]))
        }
        while input.count >= HTTP2FrameHeader.byteCount {
            let header = try checked(HTTP2FrameHeader(input))
            let end = HTTP2FrameHeader.byteCount + header.length
            guard input.count >= end else { break }
            try frame(header, UnsafeRawBufferPointer(rebasing: input[HTTP2FrameHeader.byteCount..<end]))
            input = UnsafeRawBufferPointer(rebasing: input[end...])
        }
        fill(upTo: input.count, from: &input)
    }

    private func checked(_ header: HTTP2FrameHeader) throws(HTTP2ConnectionError) -> HTTP2FrameHeader {
        guard header.length <= maximumFrameSize else {
            throw HTTP2ConnectionError(HTTP2ErrorCode.frameSizeError,
                                       "a frame of \(header.length) bytes, over our maximum of \(maximumFrameSize)")
        }
        return header
    }

    /// Moves bytes from the front of `input` into `partial` until it holds `target`.
    private mutating func fill(upTo target: Int, from input: inout UnsafeRawBufferPointer) {
        let count = min(max(target - partialCount, 0), input.count)
        guard count > 0 else { return }
        if partialCount + count > partial.count { grow(to: partialCount + count) }
        UnsafeMutableRawBufferPointer(rebasing: partial[partialCount..<partialCount + count])
            .copyMemory(from: UnsafeRawBufferPointer(rebasing: input[..<count]))
        partialCount += count
        input = UnsafeRawBufferPointer(rebasing: input[count...])
    }

    private mutating func grow(to needed: Int) {
        let larger = UnsafeMutableRawBufferPointer.allocate(
            byteCount: min(max(needed, 2 * partial.count), HTTP2FrameHeader.byteCount + maximumFrameSize), alignment: 16)
        larger.copyMemory(from: UnsafeRawBufferPointer(rebasing: partial[..<partialCount]))
        partial.deallocate()
        partial = larger
    }
}
