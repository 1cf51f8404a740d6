#if canImport(Glibc)
import Glibc
#endif

/// Why a header block could not be decoded, and where: `offset` is the byte of the block
/// at which the representation (or string) that failed starts.
public struct HPACKDecodingError: Error, Equatable, CustomStringConvertible {
    /// What is wrong with the block.
    public enum Reason: Equatable, Sendable {
        /// The block ends inside a representation (an integer, a string or its length).
        case truncated
        /// An integer beyond 2^32 - 1 (no field or table is that large), or of more than 5
        /// continuation bytes.
        case integerOverflow
        /// Index 0, which RFC 7541 §6.1 reserves.
        case indexZero
        /// An index past the static table and the dynamic table's `entryCount` entries.
        case indexOutOfRange(index: Int, entryCount: Int)
        /// A dynamic table size update above the limit we announced (SETTINGS_HEADER_TABLE_SIZE).
        case tableSizeAboveLimit(size: Int, limit: Int)
        /// A dynamic table size update after the block's first field (RFC 7541 §4.2).
        case tableSizeUpdateAfterField
        /// A Huffman-coded string holding EOS (RFC 7541 §5.2).
        case huffmanEOS
        /// A Huffman-coded string whose padding is longer than 7 bits or not all ones.
        case huffmanPadding
    }

    /// What is wrong.
    public var reason: Reason
    /// Where in the block: the first byte of what failed.
    public var offset: Int

    /// An error for `reason`, at byte `offset` of the block.
    public init(_ reason: Reason, at offset: Int) { (self.reason, self.offset) = (reason, offset) }

    /// What is wrong and where, in a sentence.
    public var description: String {
        let what = switch reason {
        case .truncated: "the block ends inside a representation"
        case .integerOverflow: "an integer beyond 2^32 - 1 or of more than 5 continuation bytes"
        case .indexZero: "index 0"
        case .indexOutOfRange(let index, let count): "index \(index), past the static table and \(count) dynamic entries"
        case .tableSizeAboveLimit(let size, let limit): "a table size update to \(size), above our limit of \(limit)"
        case .tableSizeUpdateAfterField: "a table size update after a field"
        case .huffmanEOS: "a Huffman string holding EOS"
        case .huffmanPadding: "a Huffman string whose padding is longer than 7 bits or not all ones"
        }
        return "HPACK: \(what), at byte \(offset) of the block"
    }
}

/// One connection's HPACK decoder (RFC 7541), the receiving side of the peer's encoder:
/// every representation, Huffman-coded strings, and a dynamic table kept exactly as the
/// peer keeps its copy (an entry counts its name and value plus 32 bytes; the oldest go
/// first when a new one needs room).
///
/// Nothing is allocated per block once the scratch buffer has grown to the largest block
/// seen: the table lives in storage made once (a byte ring plus a ring of entries), and
/// fields are handed out as views of the block, the table or the scratch buffer.
public struct HPACKDecoder: ~Copyable {
    /// The protocol's default SETTINGS_HEADER_TABLE_SIZE, which a client that never sends
    /// that setting is held to.
    public static let defaultTableSizeLimit = 4096

    /// An entry of the dynamic table: its name, then its value, at `start` of `bytes`.
    private struct Entry {
        var start: Int32
        var nameCount: Int32
        var valueCount: Int32
    }

    /// The most the peer may make the table: our SETTINGS_HEADER_TABLE_SIZE.
    public let tableSizeLimit: Int
    /// The table's current maximum size, as the peer's last size update set it (RFC 7541 §4.2).
    public private(set) var capacity: Int
    /// The table's size: its entries' names and values, 32 bytes more each (RFC 7541 §4.1).
    public private(set) var size = 0
    /// How many fields the dynamic table holds.
    public private(set) var entryCount = 0

    /// The entries' bytes. Twice the limit, so that every entry is contiguous: one that
    /// would cross the end starts at 0 instead, and the live bytes (at most the limit less
    /// the new entry) always leave room for it there (see `insert`). Allocated, with
    /// `entries`, at the first insertion: a client that asks for no table (a size of 0)
    /// keeps a decoder per connection, and its peer mostly never inserts.
    private var bytes = UnsafeMutableRawBufferPointer(start: nil, count: 0)
    /// Where the next entry goes in `bytes`.
    private var head = 0
    /// The entries, a ring of `slotCount` (an entry takes 32 bytes of the table at least).
    private var entries: UnsafeMutablePointer<Entry>?
    private let slotCount: Int
    /// The oldest entry's slot.
    private var oldest = 0
    /// Huffman-decoded strings: a block decodes to at most 8/5 of its length.
    private var scratch: UnsafeMutableRawBufferPointer
    /// The names last spelled out in literals, decoded once: a peer that indexes nothing
    /// (as ours may not, at SETTINGS_HEADER_TABLE_SIZE 0) spells the same few names out in
    /// every block.
    private let names = SpelledNames()

    /// A decoder with an empty table, for a connection whose SETTINGS_HEADER_TABLE_SIZE is
    /// `tableSizeLimit`.
    public init(tableSizeLimit: Int = HPACKDecoder.defaultTableSizeLimit) {
        precondition(tableSizeLimit >= 0 && tableSizeLimit <= 1 << 24, "HPACKDecoder: table size limit \(tableSizeLimit)")
        self.tableSizeLimit = tableSizeLimit
        capacity = tableSizeLimit
        slotCount = max(tableSizeLimit / 32, 1)
        scratch = .allocate(byteCount: 4096, alignment: 16)
    }

    deinit {
        bytes.deallocate()
        entries?.deallocate()
        scratch.deallocate()
    }

    /// Decodes one whole header block and hands each field to `field`, in order. The views
    /// are valid during the call only. A block that fails leaves the table as far as it
    /// got, which is why the connection must end (RFC 9113 §4.3: COMPRESSION_ERROR).
    public mutating func decode(_ block: UnsafeRawBufferPointer,
                                field: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void)
        throws(HPACKDecodingError) {
        try decode(block, reading: { _ in true }, field: field)
    }

    /// Decodes one whole header block and hands `field` the fields whose name `reading`
    /// accepts, in order. The value of a field it declines, sent without indexing, is not
    /// even Huffman-decoded: nothing needs it, as it never enters the table. (So a bad
    /// Huffman string there goes unnoticed; its length, in the clear, still delimits it.)
    /// A client that reads one header of a response saves most of its decoding so, once the
    /// peer indexes nothing (our SETTINGS_HEADER_TABLE_SIZE 0).
    public mutating func decode(_ block: UnsafeRawBufferPointer,
                                reading: (_ name: UnsafeRawBufferPointer) -> Bool,
                                field: (_ name: UnsafeRawBufferPointer, _ value: UnsafeRawBufferPointer) -> Void)
        throws(HPACKDecodingError) {
        // A Huffman code is 5 bits at least: 8 bytes decode to 12.8 at most.
        let scratchNeeded = block.count * 8 / 5 + 8
        if scratch.count < scratchNeeded {
            scratch.deallocate()
            scratch = .allocate(byteCount: scratchNeeded, alignment: 16)
        }
        var reader = Reader(block: block)
        var seenField = false
        while reader.position < block.count {
            let start = reader.position
            let first = block[start]
            if first & 0x80 != 0 {
                // Indexed field (§6.1).
                let index = try reader.integer(prefixBits: 7)
                let (name, value) = try lookup(index, at: start)
                if reading(name) { field(name, value) }
                seenField = true
            } else if first & 0xE0 == 0x20 {
                // Dynamic table size update (§6.3): only before the first field.
                guard !seenField else { throw HPACKDecodingError(.tableSizeUpdateAfterField, at: start) }
                let newCapacity = try reader.integer(prefixBits: 5)
                guard newCapacity <= tableSizeLimit else {
                    throw HPACKDecodingError(.tableSizeAboveLimit(size: newCapacity, limit: tableSizeLimit), at: start)
                }
                capacity = newCapacity
                evict(toFit: 0)
            } else {
                // Literals (§6.2): with incremental indexing (01), without indexing (0000)
                // or never indexed (0001); the name indexed, or spelled out after index 0.
                let indexing = first & 0x40 != 0
                let index = try reader.integer(prefixBits: indexing ? 6 : 4)
                var scratchUsed = 0
                let name = index == 0
                    ? try readName(&reader, scratchUsed: &scratchUsed)
                    : try lookup(index, at: start).name
                seenField = true
                // The table needs an indexed field's value whether it is read or not.
                guard indexing || reading(name) else {
                    _ = try reader.string()  // Stepped over, undecoded.
                    continue
                }
                let value = try readString(&reader, scratchUsed: &scratchUsed)
                let (keptName, keptValue) = indexing ? insert(name: name, value: value) ?? (name, value) : (name, value)
                if reading(keptName) { field(keptName, keptValue) }
            }
        }
    }

    // MARK: Strings and integers

    /// The block's bytes, read front to back.
    private struct Reader {
        let block: UnsafeRawBufferPointer
        var position = 0

        /// An integer in the low `prefixBits` of the current byte and its continuation
        /// bytes (RFC 7541 §5.1), at most 2^32 - 1 in at most 5 continuation bytes (as
        /// nghttp2 allows: more could only be padding with zeros).
        mutating func integer(prefixBits: Int) throws(HPACKDecodingError) -> Int {
            let start = position
            guard position < block.count else { throw HPACKDecodingError(.truncated, at: start) }
            let limit = (1 << prefixBits) - 1
            var value = Int(block[position]) & limit
            position += 1
            guard value == limit else { return value }
            var shift = 0
            while true {
                guard position < block.count else { throw HPACKDecodingError(.truncated, at: start) }
                let byte = block[position]
                position += 1
                guard shift < 32 else { throw HPACKDecodingError(.integerOverflow, at: start) }
                value += Int(byte & 0x7F) << shift
                guard value <= Int(UInt32.max) else { throw HPACKDecodingError(.integerOverflow, at: start) }
                if byte & 0x80 == 0 { return value }
                shift += 7
            }
        }

        /// A string literal's bytes as sent (§5.2), and whether they are Huffman-coded.
        mutating func string() throws(HPACKDecodingError) -> (bytes: UnsafeRawBufferPointer, huffman: Bool) {
            let start = position
            guard start < block.count else { throw HPACKDecodingError(.truncated, at: start) }
            let huffman = block[start] & 0x80 != 0
            let count = try integer(prefixBits: 7)
            guard count <= block.count - position else { throw HPACKDecodingError(.truncated, at: start) }
            defer { position += count }
            return (UnsafeRawBufferPointer(rebasing: block[position ..< position + count]), huffman)
        }
    }

    /// A string literal (§5.2): a view of the block, or its Huffman decoding in `scratch`
    /// after the `scratchUsed` bytes the field's name took.
    private func readString(_ reader: inout Reader,
                            scratchUsed: inout Int) throws(HPACKDecodingError) -> UnsafeRawBufferPointer {
        let start = reader.position
        let (encoded, huffman) = try reader.string()
        guard huffman else { return encoded }
        let output = UnsafeMutableRawBufferPointer(rebasing: scratch[scratchUsed...])
        let decodedCount = try HPACKHuffman.decode(encoded, into: output, at: start)
        scratchUsed += decodedCount
        return UnsafeRawBufferPointer(rebasing: output[..<decodedCount])
    }

    /// A spelled-out name: from `names` when it was decoded before, else as `readString`
    /// reads it (and remembered, if short enough).
    private func readName(_ reader: inout Reader, scratchUsed: inout Int) throws(HPACKDecodingError) -> UnsafeRawBufferPointer {
        let start = reader.position
        var peek = reader
        let (encoded, huffman) = try peek.string()
        guard huffman, (1...SpelledNames.encodedLimit).contains(encoded.count) else { return try readString(&reader, scratchUsed: &scratchUsed) }
        reader = peek
        if let known = names.decoded(encoded) { return known }
        return try names.remember(encoded) { output throws(HPACKDecodingError) in
            try HPACKHuffman.decode(encoded, into: output, at: start)
        }
    }

    // MARK: The tables

    /// The field at `index`: the static table's 1...61, then the dynamic table's newest first.
    private func lookup(_ index: Int, at offset: Int) throws(HPACKDecodingError)
        -> (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        guard index != 0 else { throw HPACKDecodingError(.indexZero, at: offset) }
        if index <= HPACKStaticTable.count { return HPACKStaticTable.field(index) }
        let dynamicIndex = index - HPACKStaticTable.count - 1
        guard dynamicIndex < entryCount else {
            throw HPACKDecodingError(.indexOutOfRange(index: index, entryCount: entryCount), at: offset)
        }
        return view(of: entries![(oldest + entryCount - 1 - dynamicIndex) % slotCount])
    }

    private func view(of entry: Entry) -> (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let start = Int(entry.start), nameCount = Int(entry.nameCount)
        return (UnsafeRawBufferPointer(rebasing: bytes[start ..< start + nameCount]),
                UnsafeRawBufferPointer(rebasing: bytes[start + nameCount ..< start + nameCount + Int(entry.valueCount)]))
    }

    /// Adds a field as the newest entry, evicting what it needs, and returns its views in
    /// the table; nil if it is larger than the whole table, which it empties (§4.4). The
    /// name may be a view of an entry it evicts (§4.4 allows that): the evicted bytes stay
    /// where they are until overwritten, and the name is moved first.
    private mutating func insert(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)
        -> (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer)? {
        let entrySize = name.count + value.count + 32
        evict(toFit: entrySize)
        guard entrySize <= capacity else { return nil }
        if entries == nil {
            bytes = .allocate(byteCount: 2 * tableSizeLimit, alignment: 16)
            entries = .allocate(capacity: slotCount)
        }
        // The live bytes are at most capacity - entrySize (≤ limit - count), so with twice
        // the limit there is room at `head` or, if the entry would cross the end, at 0.
        let count = name.count + value.count
        if head + count > bytes.count { head = 0 }
        let start = head
        if let source = name.baseAddress { (bytes.baseAddress! + start).copyMemory(from: source, byteCount: name.count) }
        if let source = value.baseAddress {
            (bytes.baseAddress! + start + name.count).copyMemory(from: source, byteCount: value.count)
        }
        head += count
        let entry = Entry(start: Int32(start), nameCount: Int32(name.count), valueCount: Int32(value.count))
        entries![(oldest + entryCount) % slotCount] = entry
        entryCount += 1
        size += entrySize
        return view(of: entry)
    }

    /// Drops the oldest entries until `incoming` more bytes fit in `capacity`.
    private mutating func evict(toFit incoming: Int) {
        while size + incoming > capacity && entryCount > 0 {
            let entry = entries![oldest]
            size -= Int(entry.nameCount) + Int(entry.valueCount) + 32
            oldest = (oldest + 1) % slotCount
            entryCount -= 1
        }
        // Empty: start again at the front, where the most room is.
        if entryCount == 0 { head = 0 }
    }
}

// MARK: Names spelled out

/// The last few Huffman-coded names a peer spelled out, with their decodings: a small ring
/// of fixed slots, searched by the coded bytes, in storage made once.
private final class SpelledNames {
    /// The longest coded name kept: longer ones are decoded each time.
    static let encodedLimit = 48
    private static let slotCount = 8
    /// A slot: the coded length, the decoded length, the coded bytes, then the decoded.
    private static let decodedStart = 2 + encodedLimit
    private static let slotSize = decodedStart + encodedLimit * 8 / 5 + 8

    private let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: slotCount * slotSize, alignment: 16)
    /// The slot the next new name takes, the oldest.
    private var next = 0

    init() { storage.initializeMemory(as: UInt8.self, repeating: 0) }
    deinit { storage.deallocate() }

    private func slot(_ index: Int) -> UnsafeMutableRawBufferPointer {
        UnsafeMutableRawBufferPointer(rebasing: storage[index * Self.slotSize ..< (index + 1) * Self.slotSize])
    }

    /// The decoding of `encoded`, if it is kept.
    func decoded(_ encoded: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        for index in 0 ..< Self.slotCount {
            let slot = slot(index)
            guard Int(slot[0]) == encoded.count,
                  memcmp(slot.baseAddress! + 2, encoded.baseAddress!, encoded.count) == 0 else { continue }
            return UnsafeRawBufferPointer(rebasing: slot[Self.decodedStart ..< Self.decodedStart + Int(slot[1])])
        }
        return nil
    }

    /// Decodes `encoded` with `decode` into the oldest slot and keeps it there; returns the
    /// decoding. A name that fails to decode is not kept.
    func remember(_ encoded: UnsafeRawBufferPointer,
                  decode: (UnsafeMutableRawBufferPointer) throws(HPACKDecodingError) -> Int) throws(HPACKDecodingError)
        -> UnsafeRawBufferPointer {
        let slot = slot(next)
        (slot[0], slot[1]) = (0, 0)
        let count = try decode(UnsafeMutableRawBufferPointer(rebasing: slot[Self.decodedStart...]))
        slot[0] = UInt8(encoded.count)
        slot[1] = UInt8(count)
        UnsafeMutableRawBufferPointer(rebasing: slot[2 ..< 2 + encoded.count]).copyMemory(from: encoded)
        next = (next + 1) % Self.slotCount
        return UnsafeRawBufferPointer(rebasing: slot[Self.decodedStart ..< Self.decodedStart + count])
    }
}

// MARK: Huffman

/// The Huffman code of RFC 7541 Appendix B, decoded four bits at a time by a state
/// machine: a state is a node of the code's tree (256 inner nodes), and a step takes a
/// nibble to the next state, emitting the symbol it completed, if any (codes are 5 bits at
/// least, so a nibble completes one at most). The table is made once, from the code.
enum HPACKHuffman {
    /// One step: bits 0-7 the next state, 8-15 the symbol, then the flags.
    private static let emits: UInt32 = 1 << 16
    private static let fails: UInt32 = 1 << 17
    /// The next state may end the string: the root, or 1-7 ones into the tree (the
    /// padding, EOS's first bits).
    private static let accepts: UInt32 = 1 << 18

    /// (code, bit length) of symbols 0...256 (256 is EOS).
    static let codes: [(code: UInt32, length: Int)] = [
        (0x1ff8, 13), (0x7fffd8, 23), (0xfffffe2, 28), (0xfffffe3, 28), (0xfffffe4, 28), (0xfffffe5, 28),
        (0xfffffe6, 28), (0xfffffe7, 28), (0xfffffe8, 28), (0xffffea, 24), (0x3ffffffc, 30), (0xfffffe9, 28),
        (0xfffffea, 28), (0x3ffffffd, 30), (0xfffffeb, 28), (0xfffffec, 28), (0xfffffed, 28), (0xfffffee, 28),
        (0xfffffef, 28), (0xffffff0, 28), (0xffffff1, 28), (0xffffff2, 28), (0x3ffffffe, 30), (0xffffff3, 28),
        (0xffffff4, 28), (0xffffff5, 28), (0xffffff6, 28), (0xffffff7, 28), (0xffffff8, 28), (0xffffff9, 28),
        (0xffffffa, 28), (0xffffffb, 28), (0x14, 6), (0x3f8, 10), (0x3f9, 10), (0xffa, 12),
        (0x1ff9, 13), (0x15, 6), (0xf8, 8), (0x7fa, 11), (0x3fa, 10), (0x3fb, 10),
        (0xf9, 8), (0x7fb, 11), (0xfa, 8), (0x16, 6), (0x17, 6), (0x18, 6),
        (0x0, 5), (0x1, 5), (0x2, 5), (0x19, 6), (0x1a, 6), (0x1b, 6),
        (0x1c, 6), (0x1d, 6), (0x1e, 6), (0x1f, 6), (0x5c, 7), (0xfb, 8),
        (0x7ffc, 15), (0x20, 6), (0xffb, 12), (0x3fc, 10), (0x1ffa, 13), (0x21, 6),
        (0x5d, 7), (0x5e, 7), (0x5f, 7), (0x60, 7), (0x61, 7), (0x62, 7),
        (0x63, 7), (0x64, 7), (0x65, 7), (0x66, 7), (0x67, 7), (0x68, 7),
        (0x69, 7), (0x6a, 7), (0x6b, 7), (0x6c, 7), (0x6d, 7), (0x6e, 7),
        (0x6f, 7), (0x70, 7), (0x71, 7), (0x72, 7), (0xfc, 8), (0x73, 7),
        (0xfd, 8), (0x1ffb, 13), (0x7fff0, 19), (0x1ffc, 13), (0x3ffc, 14), (0x22, 6),
        (0x7ffd, 15), (0x3, 5), (0x23, 6), (0x4, 5), (0x24, 6), (0x5, 5),
        (0x25, 6), (0x26, 6), (0x27, 6), (0x6, 5), (0x74, 7), (0x75, 7),
        (0x28, 6), (0x29, 6), (0x2a, 6), (0x7, 5), (0x2b, 6), (0x76, 7),
        (0x2c, 6), (0x8, 5), (0x9, 5), (0x2d, 6), (0x77, 7), (0x78, 7),
        (0x79, 7), (0x7a, 7), (0x7b, 7), (0x7ffe, 15), (0x7fc, 11), (0x3ffd, 14),
        (0x1ffd, 13), (0xffffffc, 28), (0xfffe6, 20), (0x3fffd2, 22), (0xfffe7, 20), (0xfffe8, 20),
        (0x3fffd3, 22), (0x3fffd4, 22), (0x3fffd5, 22), (0x7fffd9, 23), (0x3fffd6, 22), (0x7fffda, 23),
        (0x7fffdb, 23), (0x7fffdc, 23), (0x7fffdd, 23), (0x7fffde, 23), (0xffffeb, 24), (0x7fffdf, 23),
        (0xffffec, 24), (0xffffed, 24), (0x3fffd7, 22), (0x7fffe0, 23), (0xffffee, 24), (0x7fffe1, 23),
        (0x7fffe2, 23), (0x7fffe3, 23), (0x7fffe4, 23), (0x1fffdc, 21), (0x3fffd8, 22), (0x7fffe5, 23),
        (0x3fffd9, 22), (0x7fffe6, 23), (0x7fffe7, 23), (0xffffef, 24), (0x3fffda, 22), (0x1fffdd, 21),
        (0xfffe9, 20), (0x3fffdb, 22), (0x3fffdc, 22), (0x7fffe8, 23), (0x7fffe9, 23), (0x1fffde, 21),
        (0x7fffea, 23), (0x3fffdd, 22), (0x3fffde, 22), (0xfffff0, 24), (0x1fffdf, 21), (0x3fffdf, 22),
        (0x7fffeb, 23), (0x7fffec, 23), (0x1fffe0, 21), (0x1fffe1, 21), (0x3fffe0, 22), (0x1fffe2, 21),
        (0x7fffed, 23), (0x3fffe1, 22), (0x7fffee, 23), (0x7fffef, 23), (0xfffea, 20), (0x3fffe2, 22),
        (0x3fffe3, 22), (0x3fffe4, 22), (0x7ffff0, 23), (0x3fffe5, 22), (0x3fffe6, 22), (0x7ffff1, 23),
        (0x3ffffe0, 26), (0x3ffffe1, 26), (0xfffeb, 20), (0x7fff1, 19), (0x3fffe7, 22), (0x7ffff2, 23),
        (0x3fffe8, 22), (0x1ffffec, 25), (0x3ffffe2, 26), (0x3ffffe3, 26), (0x3ffffe4, 26), (0x7ffffde, 27),
        (0x7ffffdf, 27), (0x3ffffe5, 26), (0xfffff1, 24), (0x1ffffed, 25), (0x7fff2, 19), (0x1fffe3, 21),
        (0x3ffffe6, 26), (0x7ffffe0, 27), (0x7ffffe1, 27), (0x3ffffe7, 26), (0x7ffffe2, 27), (0xfffff2, 24),
        (0x1fffe4, 21), (0x1fffe5, 21), (0x3ffffe8, 26), (0x3ffffe9, 26), (0xffffffd, 28), (0x7ffffe3, 27),
        (0x7ffffe4, 27), (0x7ffffe5, 27), (0xfffec, 20), (0xfffff3, 24), (0xfffed, 20), (0x1fffe6, 21),
        (0x3fffe9, 22), (0x1fffe7, 21), (0x1fffe8, 21), (0x7ffff3, 23), (0x3fffea, 22), (0x3fffeb, 22),
        (0x1ffffee, 25), (0x1ffffef, 25), (0xfffff4, 24), (0xfffff5, 24), (0x3ffffea, 26), (0x7ffff4, 23),
        (0x3ffffeb, 26), (0x7ffffe6, 27), (0x3ffffec, 26), (0x3ffffed, 26), (0x7ffffe7, 27), (0x7ffffe8, 27),
        (0x7ffffe9, 27), (0x7ffffea, 27), (0x7ffffeb, 27), (0xffffffe, 28), (0x7ffffec, 27), (0x7ffffed, 27),
        (0x7ffffee, 27), (0x7ffffef, 27), (0x7fffff0, 27), (0x3ffffee, 26), (0x3fffffff, 30),
    ]

    /// 256 states x 16 nibbles, made once and never freed (read without bounds checks).
    nonisolated(unsafe) private static let table: UnsafePointer<UInt32> = {
        let steps = makeSteps()
        let table = UnsafeMutablePointer<UInt32>.allocate(capacity: steps.count)
        table.initialize(from: steps, count: steps.count)
        return UnsafePointer(table)
    }()

    private static func makeSteps() -> [UInt32] {
        // The tree: children[2 * node + bit], an inner node's number, or -1 - symbol for a leaf.
        var children = [Int](repeating: Int.min, count: 2 * 256)
        var nodeCount = 1
        for (symbol, (code, length)) in codes.enumerated() {
            var node = 0
            for depth in (0..<length).reversed() {
                let slot = 2 * node + Int((code >> UInt32(depth)) & 1)
                if depth == 0 {
                    children[slot] = -1 - symbol
                } else {
                    if children[slot] == Int.min {
                        children[slot] = nodeCount
                        nodeCount += 1
                    }
                    node = children[slot]
                }
            }
        }
        precondition(nodeCount == 256 && !children.contains(Int.min), "HPACKHuffman: the code is not complete")
        var accepting = [Bool](repeating: false, count: 256)
        var node = 0
        accepting[0] = true
        for _ in 0..<7 {
            node = children[2 * node + 1]
            accepting[node] = true
        }
        var steps = [UInt32](repeating: 0, count: 256 * 16)
        for state in 0..<256 {
            for nibble in 0..<16 {
                var node = state, step: UInt32 = 0
                for bit in (0..<4).reversed() {
                    let child = children[2 * node + (nibble >> bit) & 1]
                    if child >= 0 {
                        node = child
                    } else if -1 - child == 256 {
                        step |= fails
                        break
                    } else {
                        step |= emits | UInt32(-1 - child) << 8
                        node = 0
                    }
                }
                if accepting[node] { step |= accepts }
                steps[state * 16 + nibble] = step | UInt32(node)
            }
        }
        return steps
    }

    /// Decodes `input` into `output` (at least 8/5 of its length) and returns the length;
    /// `offset` is where the string starts in its block, for errors.
    static func decode(_ input: UnsafeRawBufferPointer, into output: UnsafeMutableRawBufferPointer,
                       at offset: Int) throws(HPACKDecodingError) -> Int {
        let steps = table
        var state = 0, count = 0
        var step = accepts  // An empty string is well formed.
        for byte in input {
            step = steps[state << 4 | Int(byte >> 4)]
            if step & emits != 0 {
                output[count] = UInt8(truncatingIfNeeded: step >> 8)
                count += 1
            }
            step = step & fails == 0 ? steps[Int(step & 0xFF) << 4 | Int(byte & 0x0F)] : step
            guard step & fails == 0 else { throw HPACKDecodingError(.huffmanEOS, at: offset) }
            if step & emits != 0 {
                output[count] = UInt8(truncatingIfNeeded: step >> 8)
                count += 1
            }
            state = Int(step & 0xFF)
        }
        guard step & accepts != 0 else { throw HPACKDecodingError(.huffmanPadding, at: offset) }
        return count
    }
}

// MARK: The static table

/// The static table of RFC 7541 Appendix A, indices 1...61.
enum HPACKStaticTable {
    static let count = 61

    /// The field at `index` (1...61), as views of static strings.
    static func field(_ index: Int) -> (name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        let (name, value) = fields[index - 1]
        return (UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
                UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount))
    }

    private static let fields: [(StaticString, StaticString)] = [
        (":authority", ""), (":method", "GET"), (":method", "POST"), (":path", "/"), (":path", "/index.html"),
        (":scheme", "http"), (":scheme", "https"), (":status", "200"), (":status", "204"), (":status", "206"),
        (":status", "304"), (":status", "400"), (":status", "404"), (":status", "500"), ("accept-charset", ""),
        ("accept-encoding", "gzip, deflate"), ("accept-language", ""), ("accept-ranges", ""), ("accept", ""),
        ("access-control-allow-origin", ""), ("age", ""), ("allow", ""), ("authorization", ""),
        ("cache-control", ""), ("content-disposition", ""), ("content-encoding", ""), ("content-language", ""),
        ("content-length", ""), ("content-location", ""), ("content-range", ""), ("content-type", ""),
        ("cookie", ""), ("date", ""), ("etag", ""), ("expect", ""), ("expires", ""), ("from", ""), ("host", ""),
        ("if-match", ""), ("if-modified-since", ""), ("if-none-match", ""), ("if-range", ""),
        ("if-unmodified-since", ""), ("last-modified", ""), ("link", ""), ("location", ""), ("max-forwards", ""),
        ("proxy-authenticate", ""), ("proxy-authorization", ""), ("range", ""), ("referer", ""), ("refresh", ""),
        ("retry-after", ""), ("server", ""), ("set-cookie", ""), ("strict-transport-security", ""),
        ("transfer-encoding", ""), ("user-agent", ""), ("vary", ""), ("via", ""), ("www-authenticate", ""),
    ]
}
