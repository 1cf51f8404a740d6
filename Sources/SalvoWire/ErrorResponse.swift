/// The gateway's error response: `08 status:u8 identifier:u32`, 6 bytes, after which the
/// gateway closes the connection.
///
/// Everything written after the named notification was discarded and must be resent on a
/// new connection. For `Status.shutdown` the named notification itself was accepted.
public struct ErrorResponse: FixedLengthRecord, Hashable, Sendable, CustomStringConvertible {
    /// The length of an error response on the wire.
    public static let byteCount = 6
    /// The command byte that starts an error response.
    public static let command: UInt8 = 8

    /// What went wrong.
    public var status: Status
    /// The identifier of the failed notification (for `shutdown`: the last one accepted).
    public var identifier: UInt32

    /// Creates a response.
    @inlinable
    public init(status: Status, identifier: UInt32) {
        self.status = status
        self.identifier = identifier
    }

    /// Writes the 6 bytes to `destination`, which must have room for them.
    @inlinable
    public func encode(to destination: UnsafeMutableRawPointer) {
        destination.storeBytes(of: Self.command, as: UInt8.self)
        destination.storeBytes(of: status.rawValue, toByteOffset: 1, as: UInt8.self)
        destination.storeBytes(of: identifier.bigEndian, toByteOffset: 2, as: UInt32.self)
    }

    /// Reads a response from the start of `bytes`.
    ///
    /// - Returns: nil when fewer than 6 bytes are available yet (read more and retry);
    ///   bytes after the first 6 are ignored (the gateway sends nothing after them).
    /// - Throws: `ErrorResponseDecodingError.unexpectedCommand` when the first byte is
    ///   not 8: the peer is not speaking the protocol; close the connection.
    ///   `.http2Frame` when the bytes are an HTTP/2 server's first frame: the gateway
    ///   speaks HTTP/2.
    @inlinable
    public static func decode(_ bytes: UnsafeRawBufferPointer) throws(ErrorResponseDecodingError) -> ErrorResponse? {
        guard !bytes.isEmpty, let base = bytes.baseAddress else { return nil }
        let command = base.load(as: UInt8.self)
        // Judge the command byte as soon as it is there: waiting for 6 bytes from a peer
        // that sends garbage would only delay the diagnosis.
        guard command == Self.command else {
            if let type = Self.http2FrameType(bytes) { throw .http2Frame(type: type) }
            throw .unexpectedCommand(command)
        }
        guard bytes.count >= byteCount else { return nil }
        return ErrorResponse(
            status: Status(rawValue: base.load(fromByteOffset: 1, as: UInt8.self)),
            identifier: UInt32(bigEndian: base.loadUnaligned(fromByteOffset: 2, as: UInt32.self)))
    }

    /// The frame type when `bytes` start like what an HTTP/2 server sends first (RFC 9113,
    /// 3.4): a SETTINGS frame (or a GOAWAY, refusing what it read) on stream 0, its header
    /// read as far as 6 bytes go. A gateway that speaks the binary protocol starts with 8.
    @usableFromInline
    static func http2FrameType(_ bytes: UnsafeRawBufferPointer) -> UInt8? {
        // A server's first SETTINGS or GOAWAY is short: its 24-bit length starts with 0.
        guard bytes.count >= byteCount, bytes[0] == 0 else { return nil }
        let length = Int(bytes[1]) << 8 | Int(bytes[2])
        let (type, flags, streamHigh) = (bytes[3], bytes[4], bytes[5] & 0x7F)
        switch type {
        case 0x04 where length % 6 == 0 && flags & 0xFE == 0 && streamHigh == 0: return type  // SETTINGS
        case 0x07 where length >= 8 && flags == 0 && streamHigh == 0: return type  // GOAWAY
        default: return nil
        }
    }

    /// Reads a response from the start of `bytes`; see `decode(_:)` for an unsafe buffer.
    public static func decode(_ bytes: [UInt8]) throws(ErrorResponseDecodingError) -> ErrorResponse? {
        let result = bytes.withUnsafeBytes { raw -> Result<ErrorResponse?, ErrorResponseDecodingError> in
            do throws(ErrorResponseDecodingError) {
                return .success(try decode(raw))
            } catch {
                return .failure(error)
            }
        }
        return try result.get()
    }

    /// The status by name and number, and the identifier, for logs.
    public var description: String {
        "error response: \(status.name) (status \(status.rawValue)) for identifier \(identifier)"
    }
}

/// Why bytes from the gateway are not an error response.
public enum ErrorResponseDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// The first byte was this instead of 8; the peer is not an APNs binary gateway, or
    /// the stream lost its framing. Close the connection and treat the window as unknown.
    case unexpectedCommand(UInt8)
    /// The peer sent an HTTP/2 frame of this type (SETTINGS 4, GOAWAY 7) first: it speaks
    /// HTTP/2, Apple's provider API, and will on every connection.
    case http2Frame(type: UInt8)

    /// Whether another connection cannot do better: the gateway speaks another protocol.
    public var isPermanent: Bool {
        if case .http2Frame = self { return true }
        return false
    }

    /// The problem in a sentence, for error messages.
    public var description: String {
        switch self {
        case .unexpectedCommand(let byte):
            return "expected an error response (command 8) from the gateway, got byte \(byte); the peer is not speaking the APNs binary protocol"
        case .http2Frame(let type):
            return "the gateway answered with an HTTP/2 \(type == 0x04 ? "SETTINGS" : "GOAWAY") frame: it speaks HTTP/2 "
                + "(Apple's provider API), not the binary protocol"
        }
    }
}
