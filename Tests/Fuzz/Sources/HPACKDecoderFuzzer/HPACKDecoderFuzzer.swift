// The HPACK decoder on arbitrary bytes, against nghttp2's inflater on the same bytes.
//
// The input is a connection's header blocks, each a length byte and that many bytes (the
// last one cut short by the input's end). Both decoders, each with its own table (limit
// 4,096), take the blocks in turn until one rejects a block. Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - a block is accepted by both or rejected by both;
// - an accepted block gives the same fields, in order, and leaves tables of the same size;
// - a third decoder, reading only the fields whose name starts with ':' (as the sender
//   reads `:status` only), gives those fields and the same table size, or rejects the
//   block where the others do (it may accept one whose only fault is in a value it steps over).

import CNghttp2Fuzz
import FuzzSupport
import SalvoWire

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    var decoder = HPACKDecoder()
    var reader = HPACKDecoder()
    var inflater: OpaquePointer?
    require(nghttp2_hd_inflate_new(&inflater) == 0, "nghttp2_hd_inflate_new failed")
    defer { nghttp2_hd_inflate_del(inflater) }
    var at = 0
    var number = 0
    while at < input.count {
        let count = min(Int(input[at]), input.count - at - 1)
        let block = UnsafeRawBufferPointer(rebasing: input[(at + 1)..<(at + 1 + count)])
        at += 1 + count
        number += 1

        var ours: [Field] = []
        var failure: HPACKDecodingError?
        do throws(HPACKDecodingError) {
            try decoder.decode(block) { name, value in ours.append(Field(name: Array(name), value: Array(value))) }
        } catch { failure = error }
        let theirs = inflate(block, with: inflater)
        var read: [Field] = []
        var readFailure: HPACKDecodingError?
        do throws(HPACKDecodingError) {
            try reader.decode(block, reading: { $0.first == UInt8(ascii: ":") }) { name, value in
                read.append(Field(name: Array(name), value: Array(value)))
            }
        } catch { readFailure = error }
        if failure == nil {
            require(readFailure == nil, "block \(number): reading some fields fails (\(readFailure!)), all of them does not")
            require(read == ours.filter { $0.name.first == UInt8(ascii: ":") }, "block \(number): read \(read) of \(ours)")
            require(reader.size == decoder.size, "block \(number): reading some fields leaves \(reader.size) table bytes, all \(decoder.size)")
        }
        switch (failure, theirs) {
        case (nil, let fields?):
            require(ours == fields, "block \(number): our fields \(ours), nghttp2's \(fields)")
            let theirSize = nghttp2_hd_inflate_get_dynamic_table_size(inflater)
            require(decoder.size == theirSize, "block \(number): our table \(decoder.size) bytes, nghttp2's \(theirSize)")
        case (let failure?, nil):
            require(!failure.description.isEmpty, "an error without a description")
            return
        case (let failure?, let fields?):
            require(false, "block \(number): we reject it (\(failure)), nghttp2 decodes \(fields)")
        case (nil, nil):
            require(false, "block \(number): we decode \(ours), nghttp2 rejects it")
        }
    }
}

struct Field: Equatable, CustomStringConvertible {
    var name: [UInt8], value: [UInt8]
    var description: String { "\(name): \(value)" }
}

/// nghttp2's fields of one whole block, or nil if it rejects the block.
func inflate(_ block: UnsafeRawBufferPointer, with inflater: OpaquePointer?) -> [Field]? {
    var fields: [Field] = []
    var rest = block
    while true {
        var field = nghttp2_nv()
        var flags: Int32 = 0
        let used = nghttp2_hd_inflate_hd2(inflater, &field, &flags, rest.baseAddress?.assumingMemoryBound(to: UInt8.self),
                                          rest.count, 1)
        guard used >= 0 else { return nil }
        rest = UnsafeRawBufferPointer(rebasing: rest[used...])
        if flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) != 0 {
            fields.append(Field(name: Array(UnsafeBufferPointer(start: field.name, count: field.namelen)),
                                value: Array(UnsafeBufferPointer(start: field.value, count: field.valuelen))))
        }
        if flags & Int32(NGHTTP2_HD_INFLATE_FINAL.rawValue) != 0 {
            nghttp2_hd_inflate_end_headers(inflater)
            return rest.isEmpty ? fields : nil
        }
        if used == 0 && flags & Int32(NGHTTP2_HD_INFLATE_EMIT.rawValue) == 0 { return nil }
    }
}
