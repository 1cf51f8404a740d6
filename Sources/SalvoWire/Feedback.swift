/// One record of the feedback service: `time:u32 tokenLength:u16=32 token`, 38 bytes.
///
/// The token stopped accepting notifications at `timestamp`. A provider should drop it
/// only if the device has not registered the token again since then.
public struct FeedbackTuple: FixedLengthRecord, Hashable, Sendable, CustomStringConvertible {
    /// The length of a tuple on the wire (32-byte token).
    public static let byteCount = 38

    /// When APNs found the token unusable, in UNIX seconds (UTC).
    public var timestamp: UInt32
    /// The token that no longer reaches an app.
    public var token: DeviceToken

    /// Creates a tuple.
    @inlinable
    public init(timestamp: UInt32, token: DeviceToken) {
        self.timestamp = timestamp
        self.token = token
    }

    /// Writes the 38 bytes to `destination`, which must have room for them.
    @inlinable
    public func encode(to destination: UnsafeMutableRawPointer) {
        destination.storeBytes(of: timestamp.bigEndian, as: UInt32.self)
        destination.storeBytes(of: UInt16(32).bigEndian, toByteOffset: 4, as: UInt16.self)
        token.copyBytes(to: destination + 6)
    }

    /// The timestamp and the token in hex, for logs.
    public var description: String { "\(timestamp) \(token.hex)" }
}

/// Why the feedback stream could not be decoded.
public enum FeedbackDecodingError: Error, Hashable, Sendable, CustomStringConvertible {
    /// A tuple declared a token of this many bytes instead of 32. The stream has no
    /// markers to re-synchronise on, so the rest of it is unusable: log it and close.
    /// The tuples delivered before it are valid.
    case invalidTokenLength(Int)

    /// The problem in a sentence, for error messages.
    public var description: String {
        switch self {
        case .invalidTokenLength(let length):
            return "feedback tuple declares a \(length)-byte token; APNs tokens are 32 bytes, so the stream is corrupt"
        }
    }
}

/// Decodes the feedback service's stream incrementally: feed it any split of the bytes.
///
/// A tuple split across calls is kept (at most 37 bytes) until it completes. Check
/// `pendingByteCount` at the end of the stream: nonzero means the server closed mid-tuple.
public struct FeedbackDecoder: Sendable {
    private var pending: [UInt8]
    private var failure: FeedbackDecodingError?

    /// Creates a decoder; its one allocation (the 38-byte carry) happens here.
    public init() {
        pending = []
        pending.reserveCapacity(FeedbackTuple.byteCount)
    }

    /// Bytes of an incomplete tuple held for the next call.
    public var pendingByteCount: Int { pending.count }

    /// Decodes every tuple `input` completes, calling `onTuple` for each in order.
    ///
    /// - Throws: `FeedbackDecodingError.invalidTokenLength` as soon as a tuple header with a
    ///   token length other than 32 is seen (tuples before it were delivered); the decoder
    ///   then throws the same error on every later call.
    public mutating func decode(
        _ input: UnsafeRawBufferPointer,
        _ onTuple: (FeedbackTuple) -> Void
    ) throws(FeedbackDecodingError) {
        if let failure { throw failure }
        var rest = input[...]
        if !pending.isEmpty {
            // Top up the carried tuple to its header, judge it, then to its full length.
            let headerMissing = Swift.max(0, 6 - pending.count)
            let header = rest.prefix(headerMissing)
            pending.append(contentsOf: header)
            rest = rest.dropFirst(header.count)
            if pending.count < 6 { return }
            try check(tokenLength: pending.withUnsafeBytes { Self.tokenLength(at: $0.baseAddress!) })
            let body = rest.prefix(FeedbackTuple.byteCount - pending.count)
            pending.append(contentsOf: body)
            rest = rest.dropFirst(body.count)
            if pending.count < FeedbackTuple.byteCount { return }
            pending.withUnsafeBytes { onTuple(Self.tuple(at: $0.baseAddress!)) }
            pending.removeAll(keepingCapacity: true)
        }
        let bytes = UnsafeRawBufferPointer(rebasing: rest)
        var offset = 0
        while bytes.count - offset >= 6 {
            try check(tokenLength: Self.tokenLength(at: bytes.baseAddress! + offset))
            guard bytes.count - offset >= FeedbackTuple.byteCount else { break }
            onTuple(Self.tuple(at: bytes.baseAddress! + offset))
            offset += FeedbackTuple.byteCount
        }
        pending.append(contentsOf: bytes[offset...])
    }

    private static func tokenLength(at base: UnsafeRawPointer) -> Int {
        Int(UInt16(bigEndian: base.loadUnaligned(fromByteOffset: 4, as: UInt16.self)))
    }

    private mutating func check(tokenLength length: Int) throws(FeedbackDecodingError) {
        if length != 32 {
            failure = .invalidTokenLength(length)
            pending.removeAll()
            throw .invalidTokenLength(length)
        }
    }

    private static func tuple(at base: UnsafeRawPointer) -> FeedbackTuple {
        FeedbackTuple(
            timestamp: UInt32(bigEndian: base.loadUnaligned(as: UInt32.self)),
            // Exactly 32 bytes by construction.
            token: try! DeviceToken(bytes: UnsafeRawBufferPointer(start: base + 6, count: 32)))
    }
}
