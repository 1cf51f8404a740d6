#if canImport(Glibc)
import Glibc
#endif

/// How a header field is encoded (RFC 7541 §6.2).
public enum HPACKIndexing: Sendable {
    /// The value repeats from request to request: it goes into the dynamic table the first
    /// time, and is a one- or two-byte index after.
    case indexed
    /// The value is new every time (`:path`, `apns-id`) or may be: a literal that stays out
    /// of the table, where it would only push out the fields that repeat. Its name is an
    /// index all the same: the static table's, or the dynamic table's, where the name's
    /// first field goes when it fits without pushing anything out.
    case neverIndexed
}

/// One connection's HPACK encoder (RFC 7541), made for a client whose requests repeat most
/// of their fields: full matches in the static table are indices, repeating fields are
/// added to the dynamic table once and indexed after, and everything else is a literal
/// (never Huffman coded: it would save a few bytes of hex and cost CPU for every request).
///
/// The dynamic table is kept exactly as the peer's decoder keeps it: an entry counts its
/// name and value plus 32 bytes, the oldest go first when a new one needs room, and the
/// table's size follows the peer's SETTINGS_HEADER_TABLE_SIZE (at most 4,096 bytes; a
/// change is announced at the start of the next block). Nothing is allocated per field:
/// entries are copied into storage made once.
public struct HPACKEncoder: ~Copyable {
    /// The most our table uses, the protocol's default: a peer that allows more gains
    /// nothing, the fields that repeat take about 500 bytes.
    public static let maximumTableSize = 4096
    /// What a field costs in the table beyond its name and value (RFC 7541 §4.1).
    public static let entryOverhead = 32

    /// The most bytes `encode` writes for a field with a name and value of these lengths.
    public static func maximumEncodedLength(nameCount: Int, valueCount: Int) -> Int { nameCount + valueCount + 16 }
    /// The most bytes `beginBlock` writes.
    public static let maximumBlockPrefixLength = 6

    /// An entry of the dynamic table: its name, then its value, at `start` of `storage`,
    /// and the first eight bytes of each (`head`): a field is looked up among entries whose
    /// names are often as long as its own, and the heads tell them apart without comparing
    /// the bytes.
    private struct Entry {
        var start: Int
        var nameCount: Int
        var valueCount: Int
        var nameHead: UInt64
        var valueHead: UInt64
        var size: Int { nameCount + valueCount + HPACKEncoder.entryOverhead }
    }

    /// Oldest first: the newest has dynamic index 62.
    private var entries: [Entry] = []
    /// The entries' names and values, oldest first, back to back.
    private let storage: UnsafeMutableRawBufferPointer
    private var storageCount = 0
    /// The table's current maximum size (RFC 7541 §4.2).
    public private(set) var capacity = HPACKEncoder.maximumTableSize
    /// The table's size: its entries' names and values, 32 bytes more each (RFC 7541 §4.1).
    public private(set) var size = 0
    /// Size changes to announce at the start of the next block: the smallest since the
    /// last block, then the final one (RFC 7541 §4.2).
    private var pendingUpdate: (smallest: Int, final: Int)?
    /// Changes whenever the dynamic table does (an entry added or dropped, its size
    /// changed): while it stays, the same fields encode to the same bytes.
    private var generation: UInt64 = 0
    /// What `encodeRun` wrote last for each of its slots.
    private var runs = [CachedRun](repeating: CachedRun(), count: HPACKEncoder.runSlots)

    /// How many runs of fields `encodeRun` keeps: a request's pseudo-header fields and its
    /// fixed ones.
    public static let runSlots = 2

    /// The bytes of a run of fields, as encoded with the table at `generation`.
    private struct CachedRun {
        var key: UInt64 = 0
        var generation: UInt64 = .max
        var count = 0
        var bytes: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    }

    /// An encoder with an empty table of the default size, as a connection starts.
    public init() {
        storage = .allocate(byteCount: Self.maximumTableSize, alignment: 16)
        entries.reserveCapacity(Self.maximumTableSize / Self.entryOverhead)
    }

    deinit { storage.deallocate() }

    /// How many fields the dynamic table holds.
    public var entryCount: Int { entries.count }

    /// The peer's SETTINGS_HEADER_TABLE_SIZE: the table may use at most that much from the
    /// next block on (the peer sees it after our SETTINGS ACK, which goes out first).
    public mutating func setPeerTableSize(_ limit: Int) {
        let newCapacity = min(limit, Self.maximumTableSize)
        guard newCapacity != capacity else { return }
        capacity = newCapacity
        generation &+= 1
        evict(toFit: 0)
        pendingUpdate = (min(pendingUpdate?.smallest ?? newCapacity, newCapacity), newCapacity)
    }

    /// Starts a header block: announces a table size change, if there was one.
    public mutating func beginBlock(into writer: inout ByteWriter) {
        guard let update = pendingUpdate else { return }
        pendingUpdate = nil
        if update.smallest < update.final { Self.writeInteger(update.smallest, prefixBits: 5, pattern: 0x20, into: &writer) }
        Self.writeInteger(update.final, prefixBits: 5, pattern: 0x20, into: &writer)
    }

    /// Writes a run of fields that repeat together from block to block (a request's fixed
    /// fields), which `encode` writes with `encode(name:value:_:into:)`. `key` stands for
    /// the run's fields and values: equal keys in the same `slot`, equal fields. While the
    /// table is unchanged, a run whose key was encoded last in its slot is written as the
    /// bytes it encoded to then (the same bytes, without a table lookup per field); a run
    /// that changed the table as it was encoded (a field's first use) is encoded afresh
    /// next time.
    public mutating func encodeRun(slot: Int, key: UInt64, into writer: inout ByteWriter,
                                   _ encode: (inout HPACKEncoder, inout ByteWriter) -> Void) {
        let cached = runs[slot]
        if cached.key == key && cached.generation == generation {
            withUnsafeBytes(of: cached.bytes) { writer.write(UnsafeRawBufferPointer(rebasing: $0[..<cached.count])) }
            return
        }
        let (before, start) = (generation, writer.count)
        encode(&self, &writer)
        let count = writer.count - start
        guard generation == before, count <= MemoryLayout.size(ofValue: cached.bytes) else {
            runs[slot].generation = .max
            return
        }
        var run = CachedRun(key: key, generation: generation, count: count)
        withUnsafeMutableBytes(of: &run.bytes) { $0.copyMemory(from: UnsafeRawBufferPointer(rebasing: writer.buffer[start..<writer.count])) }
        runs[slot] = run
    }

    /// Writes one field of the block begun by `beginBlock`.
    public mutating func encode(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer, _ indexing: HPACKIndexing,
                                into writer: inout ByteWriter) {
        let known = Self.staticEntry(name: name, value: value)
        switch indexing {
        case .indexed:
            if let index = known?.fieldIndex ?? dynamicIndex(name: name, value: value) {
                Self.writeInteger(index, prefixBits: 7, pattern: 0x80, into: &writer)
            } else if name.count + value.count + Self.entryOverhead <= capacity {
                // Literal with incremental indexing: the peer adds it to its table as we do.
                writeLiteral(name: name, nameIndex: known?.nameIndex, value: value, prefixBits: 6, pattern: 0x40,
                             into: &writer)
                insert(name: name, value: value)
            } else {
                // Larger than the whole table (which it would only empty): literal without indexing.
                writeLiteral(name: name, nameIndex: known?.nameIndex, value: value, prefixBits: 4, pattern: 0x00,
                             into: &writer)
            }
        case .neverIndexed:
            if let nameIndex = known?.nameIndex ?? dynamicIndex(name: name) {
                writeLiteral(name: name, nameIndex: nameIndex, value: value, prefixBits: 4, pattern: 0x10, into: &writer)
            } else if size + name.count + value.count + Self.entryOverhead <= capacity {
                // The name's first use: this one value goes into the table with it (where it
                // pushes out nothing), so that every later value refers to the name by index
                // and the peer neither reads nor checks it again.
                writeLiteral(name: name, nameIndex: nil, value: value, prefixBits: 6, pattern: 0x40, into: &writer)
                insert(name: name, value: value)
            } else {
                writeLiteral(name: name, nameIndex: nil, value: value, prefixBits: 4, pattern: 0x10, into: &writer)
            }
        }
    }

    // MARK: The dynamic table

    /// The dynamic index of the field, if the table holds it.
    private func dynamicIndex(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) -> Int? {
        let nameHead = Self.head(name), valueHead = Self.head(value)
        return newestIndex { entry, base in
            entry.nameHead == nameHead && entry.valueHead == valueHead
                && entry.nameCount == name.count && entry.valueCount == value.count
                && Self.equalBeyondHead(base + entry.start + entry.nameCount, value)
                && Self.equalBeyondHead(base + entry.start, name)
        }
    }

    /// The dynamic index of an entry named `name`, whatever its value, if the table holds one.
    private func dynamicIndex(name: UnsafeRawBufferPointer) -> Int? {
        let nameHead = Self.head(name)
        return newestIndex { entry, base in
            entry.nameHead == nameHead && entry.nameCount == name.count && Self.equalBeyondHead(base + entry.start, name)
        }
    }

    /// The dynamic index of the newest entry that `matches` (given the entry and the start of
    /// the storage): newest first, for the entries that repeat were added together, at the
    /// start of the connection.
    @inline(__always)
    private func newestIndex(where matches: (Entry, UnsafeRawPointer) -> Bool) -> Int? {
        let base = UnsafeRawPointer(storage.baseAddress!)
        var position = entries.count - 1
        while position >= 0 {
            if matches(entries[position], base) { return 62 + (entries.count - 1 - position) }
            position -= 1
        }
        return nil
    }

    /// The first eight bytes of `bytes` as a word, zero past its end: equal heads and
    /// lengths leave only the bytes after the eighth to compare.
    @inline(__always)
    private static func head(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
        if bytes.count >= 8 { return bytes.loadUnaligned(as: UInt64.self) }
        var word: UInt64 = 0
        for index in 0 ..< bytes.count { word |= UInt64(bytes[index]) << (8 * index) }
        return word
    }

    /// Whether the bytes at `pointer` are `bytes` past the first eight (whose heads matched).
    @inline(__always)
    private static func equalBeyondHead(_ pointer: UnsafeRawPointer, _ bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count <= 8 || memcmp(pointer + 8, bytes.baseAddress! + 8, bytes.count - 8) == 0
    }

    private mutating func insert(name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        evict(toFit: name.count + value.count + Self.entryOverhead)
        // After the eviction, which moved the survivors to the front.
        let entry = Entry(start: storageCount, nameCount: name.count, valueCount: value.count,
                          nameHead: Self.head(name), valueHead: Self.head(value))
        UnsafeMutableRawBufferPointer(rebasing: storage[entry.start...]).copyMemory(from: name)
        UnsafeMutableRawBufferPointer(rebasing: storage[(entry.start + name.count)...]).copyMemory(from: value)
        storageCount += name.count + value.count
        entries.append(entry)
        size += entry.size
        generation &+= 1
    }

    /// Drops the oldest entries until `incoming` more bytes fit in `capacity`. Rare (the
    /// fields that repeat fit), so the survivors are simply moved to the front.
    private mutating func evict(toFit incoming: Int) {
        var dropped = 0, droppedBytes = 0
        while size + incoming > capacity && dropped < entries.count {
            size -= entries[dropped].size
            droppedBytes += entries[dropped].nameCount + entries[dropped].valueCount
            dropped += 1
        }
        guard dropped > 0 else { return }
        entries.removeFirst(dropped)
        storageCount -= droppedBytes
        if storageCount > 0 {
            storage.baseAddress!.copyMemory(from: storage.baseAddress! + droppedBytes, byteCount: storageCount)
        }
        for position in entries.indices { entries[position].start -= droppedBytes }
    }

    // MARK: Representations

    /// A literal field: the name as a static-table index when it has one, else spelled out.
    private func writeLiteral(name: UnsafeRawBufferPointer, nameIndex: Int?, value: UnsafeRawBufferPointer,
                              prefixBits: Int, pattern: UInt8, into writer: inout ByteWriter) {
        if let nameIndex {
            Self.writeInteger(nameIndex, prefixBits: prefixBits, pattern: pattern, into: &writer)
        } else {
            writer.write(pattern)
            Self.writeString(name, into: &writer)
        }
        Self.writeString(value, into: &writer)
    }

    /// A string literal, not Huffman coded (RFC 7541 §5.2).
    private static func writeString(_ bytes: UnsafeRawBufferPointer, into writer: inout ByteWriter) {
        writeInteger(bytes.count, prefixBits: 7, pattern: 0x00, into: &writer)
        writer.write(bytes)
    }

    /// An integer in the low `prefixBits` of a byte whose high bits are `pattern`, and as
    /// many continuation bytes as it needs (RFC 7541 §5.1).
    static func writeInteger(_ value: Int, prefixBits: Int, pattern: UInt8, into writer: inout ByteWriter) {
        let limit = (1 << prefixBits) - 1
        guard value >= limit else {
            writer.write(pattern | UInt8(value))
            return
        }
        writer.write(pattern | UInt8(limit))
        var rest = value - limit
        while rest >= 0x80 {
            writer.write(UInt8(rest & 0x7F) | 0x80)
            rest >>= 7
        }
        writer.write(UInt8(rest))
    }

    // MARK: The static table

    /// Where the static table (RFC 7541 Appendix A) has `name`, and the whole field if it
    /// has that too: only the rows of the names a client of APNs sends.
    private static func staticEntry(name: UnsafeRawBufferPointer,
                                    value: UnsafeRawBufferPointer) -> (nameIndex: Int, fieldIndex: Int?)? {
        switch name.count {
        case 5 where equal(name, ":path"): return (4, equal(value, "/") ? 4 : nil)
        case 7 where equal(name, ":method"): return (2, equal(value, "GET") ? 2 : equal(value, "POST") ? 3 : nil)
        case 7 where equal(name, ":scheme"): return (6, equal(value, "http") ? 6 : equal(value, "https") ? 7 : nil)
        case 10 where equal(name, ":authority"): return (1, nil)
        case 13 where equal(name, "authorization"): return (23, nil)
        case 14 where equal(name, "content-length"): return (28, nil)
        default: return nil
        }
    }

    /// The first byte first: most names a request sends are as long as some row's, but
    /// `apns-` names and pseudo-headers part at once.
    private static func equal(_ bytes: UnsafeRawBufferPointer, _ text: StaticString) -> Bool {
        bytes.count == text.utf8CodeUnitCount && (bytes.isEmpty || bytes[0] == text.utf8Start.pointee)
            && equal(UnsafeRawPointer(text.utf8Start), bytes)
    }

    /// Whether the `bytes.count` bytes at `pointer` are `bytes`.
    private static func equal(_ pointer: UnsafeRawPointer, _ bytes: UnsafeRawBufferPointer) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        return memcmp(pointer, base, bytes.count) == 0
    }
}
