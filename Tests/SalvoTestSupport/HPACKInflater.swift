import CNghttp2

/// A header field as the tests compare them.
public struct HeaderPair: Equatable, Sendable, CustomStringConvertible {
    public var name: String
    public var value: String

    public init(name: String, value: String) {
        self.name = name
        self.value = value
    }

    public init(_ name: String, _ value: String) { self.init(name: name, value: value) }

    public var description: String { "\(name): \(value)" }
}

/// Why nghttp2's inflater refused a block.
public struct InflateError: Error, CustomStringConvertible {
    public var description: String
}

/// nghttp2's HPACK inflater, on its own: one dynamic table for a connection's blocks. The
/// independent decoder the tests hold Salvo's HPACK encoder and decoder to.
public final class Inflater {
    private var inflater: OpaquePointer?

    public init() { precondition(nghttp2_hd_inflate_new(&inflater) == 0, "nghttp2: out of memory") }

    deinit { nghttp2_hd_inflate_del(inflater) }

    public var tableSize: Int { nghttp2_hd_inflate_get_dynamic_table_size(inflater) }
    public var maximumTableSize: Int { nghttp2_hd_inflate_get_max_dynamic_table_size(inflater) }

    /// The fields of one whole header block.
    public func decode(_ block: [UInt8]) throws -> [HeaderPair] {
        try decodeBlock(block).get()
    }

    /// The fields of one whole header block, or nil where nghttp2 rejects it.
    public func decodeIfValid(_ block: [UInt8]) -> [HeaderPair]? {
        try? decodeBlock(block).get()
    }

    private func decodeBlock(_ block: [UInt8]) -> Result<[HeaderPair], InflateError> {
        block.withUnsafeBufferPointer { buffer in
            var fields: [HeaderPair] = []
            var at = 0
            while true {
                var field = nghttp2_nv()
                var flags: Int32 = 0
                let used = nghttp2_hd_inflate_hd2(inflater, &field, &flags, buffer.baseAddress.map { $0 + at },
                                                  buffer.count - at, 1)
                guard used >= 0 else {
                    return .failure(InflateError(description: "HPACK error: \(String(cString: nghttp2_strerror(Int32(used))))"))
                }
                at += used
                if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
                    fields.append(HeaderPair(
                        name: String(decoding: UnsafeBufferPointer(start: field.name, count: field.namelen), as: UTF8.self),
                        value: String(decoding: UnsafeBufferPointer(start: field.value, count: field.valuelen), as: UTF8.self)))
                }
                if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
                    nghttp2_hd_inflate_end_headers(inflater)
                    return at == buffer.count ? .success(fields)
                        : .failure(InflateError(description: "the block has bytes the inflater did not take"))
                }
                if used == 0 && flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 {
                    return .failure(InflateError(description: "the block ended inside a field"))
                }
            }
        }
    }
}
