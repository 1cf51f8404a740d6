import CNghttp2
import SalvoTestSupport
import SalvoWire
import Testing

/// The HPACK decoder: RFC 7541's examples byte for byte, nghttp2's deflater and our encoder
/// over many blocks (the tables in step), and malformed blocks, which fail with the reason.
@Suite struct HPACKDecoderTests {
    static func bytes(_ hex: String) -> [UInt8] {
        let digits = Array(hex.utf8)
        return stride(from: 0, to: digits.count, by: 2).map { UInt8(String(decoding: digits[$0...$0 + 1], as: UTF8.self), radix: 16)! }
    }

    /// One block through `decoder`, its fields as strings.
    static func decode(_ block: [UInt8], with decoder: inout HPACKDecoder) throws(HPACKDecodingError) -> [HeaderPair] {
        var fields: [HeaderPair] = []
        let failure = block.withUnsafeBytes { buffer -> HPACKDecodingError? in
            do throws(HPACKDecodingError) {
                try decoder.decode(buffer) { name, value in
                    fields.append(HeaderPair(name: String(decoding: name, as: UTF8.self), value: String(decoding: value, as: UTF8.self)))
                }
                return nil
            } catch { return error }
        }
        if let failure { throw failure }
        return fields
    }

    static func pairs(_ list: [(String, String)]) -> [HeaderPair] { list.map { HeaderPair(name: $0.0, value: $0.1) } }

    // MARK: RFC 7541 Appendix C

    @Test func appendixC2SingleRepresentations() throws {
        let cases: [(hex: String, field: (String, String), size: Int)] = [
            ("400a637573746f6d2d6b65790d637573746f6d2d686561646572", ("custom-key", "custom-header"), 55),  // C.2.1
            ("040c2f73616d706c652f70617468", (":path", "/sample/path"), 0),  // C.2.2
            ("100870617373776f726406736563726574", ("password", "secret"), 0),  // C.2.3
            ("82", (":method", "GET"), 0),  // C.2.4
        ]
        for example in cases {
            var decoder = HPACKDecoder()
            #expect(try Self.decode(Self.bytes(example.hex), with: &decoder) == Self.pairs([example.field]))
            #expect(decoder.size == example.size)
        }
    }

    static let requests: [[(String, String)]] = [
        [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com")],
        [(":method", "GET"), (":scheme", "http"), (":path", "/"), (":authority", "www.example.com"), ("cache-control", "no-cache")],
        [(":method", "GET"), (":scheme", "https"), (":path", "/index.html"), (":authority", "www.example.com"),
         ("custom-key", "custom-value")],
    ]
    static let responses: [[(String, String)]] = [
        [(":status", "302"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
         ("location", "https://www.example.com")],
        [(":status", "307"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
         ("location", "https://www.example.com")],
        [(":status", "200"), ("cache-control", "private"), ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
         ("location", "https://www.example.com"), ("content-encoding", "gzip"),
         ("set-cookie", "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1")],
    ]

    /// C.3 and C.4 (requests, 4,096-byte table), C.5 and C.6 (responses, a 256-byte table,
    /// so that entries are evicted): without and with Huffman coding.
    @Test(arguments: [
        ("C.3", 4096, ["828684410f7777772e6578616d706c652e636f6d", "828684be58086e6f2d6361636865",
                       "828785bf400a637573746f6d2d6b65790c637573746f6d2d76616c7565"]),
        ("C.4", 4096, ["828684418cf1e3c2e5f23a6ba0ab90f4ff", "828684be5886a8eb10649cbf",
                       "828785bf408825a849e95ba97d7f8925a849e95bb8e8b4bf"]),
        ("C.5", 256, ["4803333032580770726976617465611d4d6f6e2c203231204f637420323031332032303a31333a323120474d546e1768747470733a2f2f7777772e6578616d706c652e636f6d",
                      "4803333037c1c0bf",
                      "88c1611d4d6f6e2c203231204f637420323031332032303a31333a323220474d54c05a04677a69707738666f6f3d4153444a4b48514b425a584f5157454f50495541585157454f49553b206d61782d6167653d333630303b2076657273696f6e3d31"]),
        ("C.6", 256, ["488264025885aec3771a4b6196d07abe941054d444a8200595040b8166e082a62d1bff6e919d29ad171863c78f0b97c8e9ae82ae43d3",
                      "4883640effc1c0bf",
                      "88c16196d07abe941054d444a8200595040b8166e084a62d1bffc05a839bd9ab77ad94e7821dd7f2e6c7b335dfdfcd5b3960d5af27087f3672c1ab270fb5291f9587316065c003ed4ee5b1063d5007"]),
    ])
    func appendixCExamples(name: String, tableSize: Int, blocks: [String]) throws {
        let expected = tableSize == 4096 ? Self.requests : Self.responses
        let sizes = tableSize == 4096 ? [57, 110, 164] : [222, 222, 215]
        let entryCounts = tableSize == 4096 ? [1, 2, 3] : [4, 4, 3]
        // The RFC's decoder has SETTINGS_HEADER_TABLE_SIZE 256 for C.5 and C.6.
        var decoder = HPACKDecoder(tableSizeLimit: tableSize)
        for (n, hex) in blocks.enumerated() {
            #expect(try Self.decode(Self.bytes(hex), with: &decoder) == Self.pairs(expected[n]), "\(name).\(n + 1)")
            #expect(decoder.size == sizes[n], "\(name).\(n + 1)")
            #expect(decoder.entryCount == entryCounts[n], "\(name).\(n + 1)")
        }
    }

    // MARK: Round trips

    /// nghttp2's deflater (Huffman where shorter, indexing as it sees fit, never-indexed
    /// where asked) over random header lists: every field comes back, and the tables agree.
    @Test(arguments: [4096, 256, 0])
    func nghttp2DeflaterOutputDecodesToItsInput(tableSize: Int) throws {
        let deflater = try Deflater(tableSize: tableSize)
        var decoder = HPACKDecoder()
        var random = SplitMix64(seed: UInt64(tableSize) + 1)
        let names = [":status", "content-type", "apns-id", "apns-unique-id", "date", "x-custom", "set-cookie", "server"]
        for n in 0..<2000 {
            var fields: [(name: [UInt8], value: [UInt8], noIndex: Bool)] = []
            for _ in 0..<Int(random.next() % 8) {
                let name = random.next() % 4 == 0
                    ? (0..<Int(1 + random.next() % 20)).map { _ in UInt8(97 + random.next() % 26) }
                    : Array(names[Int(random.next() % UInt64(names.count))].utf8)
                let length = random.next() % 10 == 0 ? Int(random.next() % 300) : Int(random.next() % 40)
                // Mostly text, sometimes any byte (the long Huffman codes).
                let anyByte = random.next() % 5 == 0
                let value = (0..<length).map { _ in anyByte ? UInt8(truncatingIfNeeded: random.next()) : UInt8(32 + random.next() % 95) }
                fields.append((name, value, random.next() % 6 == 0))
                // Repeats, which the deflater indexes.
                if random.next() % 3 == 0, let last = fields.last { fields.append(last) }
            }
            let block = try deflater.deflate(fields)
            var decoded: [(name: [UInt8], value: [UInt8])] = []
            try block.withUnsafeBytes { buffer in
                try decoder.decode(buffer) { name, value in decoded.append((Array(name), Array(value))) }
            }
            #expect(decoded.count == fields.count, "block \(n)")
            for (got, sent) in zip(decoded, fields) {
                #expect(got.name == sent.name && got.value == sent.value, "block \(n)")
            }
            #expect(decoder.size == deflater.tableSize, "block \(n)")
        }
        #expect(decoder.capacity == tableSize)
    }

    @Test(arguments: [4096, 150, 0])
    func ourEncodersOutputDecodesToItsInput(tableSize: Int) throws {
        var encoder = HPACKEncoder()
        encoder.setPeerTableSize(tableSize)
        var decoder = HPACKDecoder()
        var random = SplitMix64(seed: 23)
        for n in 0..<500 {
            let fields = HPACKEncoderTests.request(path: "/3/device/\(random.next())", id: "id-\(n)",
                                                   topic: ["com.example.app", "com.example.voip"][Int(random.next() % 2)])
            let block = HPACKEncoderTests().encode(fields, with: &encoder)
            #expect(try Self.decode(block, with: &decoder) == fields.map(\.pair), "request \(n)")
            #expect(decoder.size == encoder.size && decoder.entryCount == encoder.entryCount, "request \(n)")
        }
    }

    // MARK: Reading some fields only

    /// The fields `reading` declines are left out, and the table still follows every
    /// indexed one, read or not.
    @Test(arguments: [4096, 0])
    func fieldsNotReadAreLeftOutAndTheTableStillKeepsStep(tableSize: Int) throws {
        let deflater = try Deflater(tableSize: tableSize)
        var decoder = HPACKDecoder()
        var random = SplitMix64(seed: 7)
        let names = [":status", "apns-id", "apns-unique-id", "content-type", "x-custom"]
        for n in 0..<500 {
            let fields = (0..<Int(1 + random.next() % 4)).map { _ in
                (name: Array(names[Int(random.next() % UInt64(names.count))].utf8),
                 value: Array(String(random.next() % 1000).utf8), noIndex: random.next() % 4 == 0)
            }
            let block = try deflater.deflate(fields)
            var read: [[UInt8]] = []
            try block.withUnsafeBytes { buffer in
                try decoder.decode(buffer, reading: { $0.first == UInt8(ascii: ":") }) { name, value in read.append(Array(name) + Array(value)) }
            }
            #expect(read == fields.filter { $0.name.first == UInt8(ascii: ":") }.map { $0.name + $0.value }, "block \(n)")
            #expect(decoder.size == deflater.tableSize, "block \(n)")
        }
    }

    /// A value neither read nor indexed is not Huffman-decoded: one with bad padding passes.
    @Test func aValueNeitherReadNorIndexedIsNotDecoded() throws {
        // Without indexing, the name x, a 1-byte Huffman value: '0' (00000) then 000.
        let block: [UInt8] = [0x00, 0x01, UInt8(ascii: "x"), 0x81, 0x00]
        var decoder = HPACKDecoder()
        #expect(throws: HPACKDecodingError(.huffmanPadding, at: 3)) { try Self.decode(block, with: &decoder) }
        var read = 0
        try block.withUnsafeBytes { buffer in try decoder.decode(buffer, reading: { _ in false }) { _, _ in read += 1 } }
        #expect(read == 0)
        // With incremental indexing (0x40) it enters the table, so it is decoded, and fails.
        #expect(throws: HPACKDecodingError(.huffmanPadding, at: 3)) {
            try ([0x40] + block.dropFirst()).withUnsafeBytes { buffer in try decoder.decode(buffer, reading: { _ in false }) { _, _ in } }
        }
    }

    /// What the session's SETTINGS_HEADER_TABLE_SIZE 0 buys: nghttp2 (the mock's encoder)
    /// then announces the empty table and sends each `apns-id` without indexing, with its
    /// name spelled out, so a decoder reading `:status` only decodes no Huffman value.
    @Test func withNoTableAnAnswersAPNsIDIsSentWithoutIndexing() throws {
        let deflater = try Deflater(tableSize: 0)
        for n in 0..<3 {
            let answer = [(name: Array(":status".utf8), value: Array("200".utf8), noIndex: false),
                          (name: Array("apns-id".utf8), value: Array("6E1A2F3C-55AB-4C3D-9E2F-00000000000\(n)".utf8), noIndex: false)]
            let block = try deflater.deflate(answer)
            // A size update to 0 in the first block only, :status 200 (static index 8), then
            // a literal without indexing (0000) and a new name (index 0).
            #expect(Array(block.prefix(n == 0 ? 3 : 2)) == (n == 0 ? [0x20, 0x88, 0x00] : [0x88, 0x00]), "answer \(n)")
        }
    }

    /// Names spelled out again and again (the answers of a peer that indexes nothing) are
    /// decoded once and then found by their coded bytes: more names than are kept, names
    /// of one coded length, and a bad one between them, decode as nghttp2 decodes them.
    @Test func namesSpelledOutAgainDecodeAsTheFirstTime() throws {
        let deflater = try Deflater(tableSize: 0)
        var decoder = HPACKDecoder(tableSizeLimit: 0)
        let names = ["apns-id", "apns-request-id", "apns-unique-id", "apns-channel-id"] + (0..<9).map { "x-name-\($0)" }
        for n in 0..<200 {
            let fields = (0..<1 + n % 4).map { k in
                (name: Array(names[(n * 3 + k * 5) % names.count].utf8), value: Array("value \(n) \(k)".utf8), noIndex: false)
            }
            let block = try deflater.deflate(fields)
            #expect(try Self.decode(block, with: &decoder) == fields.map { HeaderPair(name: String(decoding: $0.name, as: UTF8.self),
                                                                                    value: String(decoding: $0.value, as: UTF8.self)) },
                    "block \(n)")
            // A name whose Huffman padding is wrong fails each time, and is not kept.
            if n % 50 == 0 {
                #expect(throws: HPACKDecodingError(.huffmanPadding, at: 1)) { try Self.decode([0x00, 0x81, 0x00, 0x00], with: &decoder) }
            }
        }
    }

    /// §4.4: a new entry may name an entry that its own insertion evicts.
    @Test func anEntryNamedByTheEntryItEvicts() throws {
        var decoder = HPACKDecoder()
        let literal = { (text: String) in [UInt8(text.utf8.count)] + Array(text.utf8) }
        // Size update to 60, then custom-key: x (43 bytes).
        #expect(try Self.decode([0x3F, 0x1D, 0x40] + literal("custom-key") + literal("x"), with: &decoder)
            == Self.pairs([("custom-key", "x")]))
        #expect(decoder.size == 43)
        // Name 62 (custom-key), value yy: 44 bytes, so the entry it names goes.
        #expect(try Self.decode([0x40 | 62] + literal("yy") + [0x80 | 62], with: &decoder)
            == Self.pairs([("custom-key", "yy"), ("custom-key", "yy")]))
        #expect(decoder.size == 44 && decoder.entryCount == 1)
        // Larger than the table: it empties the table and is not added, but is a field.
        #expect(try Self.decode([0x40] + literal("a-long-name-of-sorts") + literal("and-a-value"), with: &decoder)
            == Self.pairs([("a-long-name-of-sorts", "and-a-value")]))
        #expect(decoder.size == 0 && decoder.entryCount == 0)
    }

    // MARK: Malformed blocks

    @Test(arguments: [
        ([0x3F, 0xFF], HPACKDecodingError(.truncated, at: 0)),  // an integer cut short
        ([0x82, 0x40, 0x05, 0x61], HPACKDecodingError(.truncated, at: 2)),  // a name longer than the block
        ([0x82, 0x04], HPACKDecodingError(.truncated, at: 2)),  // no value
        ([0x80], HPACKDecodingError(.indexZero, at: 0)),
        ([0x82, 0x80 | 62], HPACKDecodingError(.indexOutOfRange(index: 62, entryCount: 0), at: 1)),
        ([0x0F, 0x30, 0x00], HPACKDecodingError(.indexOutOfRange(index: 63, entryCount: 0), at: 0)),
        ([0x00, 0x81, 0x00, 0x00], HPACKDecodingError(.huffmanPadding, at: 1)),  // '0' then 000
        ([0x00, 0x81, 0xFF, 0x00], HPACKDecodingError(.huffmanPadding, at: 1)),  // 8 bits of padding
        ([0x00, 0x00, 0x84, 0xFF, 0xFF, 0xFF, 0xFF], HPACKDecodingError(.huffmanEOS, at: 2)),  // EOS, 30 ones
        ([0x3F, 0xE2, 0x1F], HPACKDecodingError(.tableSizeAboveLimit(size: 4097, limit: 4096), at: 0)),
        ([0x82, 0x20], HPACKDecodingError(.tableSizeUpdateAfterField, at: 1)),
        ([0x3F, 0xFF, 0xFF, 0xFF, 0xFF, 0xFF, 0x01], HPACKDecodingError(.integerOverflow, at: 0)),
        // Found by HPACKDecoderFuzzer: 6 continuation bytes (of zeros), which nghttp2 rejects.
        ([0x0F, 0x80, 0x80, 0x80, 0x80, 0x80, 0x00], HPACKDecodingError(.integerOverflow, at: 0)),
    ] as [([UInt8], HPACKDecodingError)])
    func malformedBlocksFail(block: [UInt8], error: HPACKDecodingError) {
        var decoder = HPACKDecoder()
        #expect(throws: error) { try Self.decode(block, with: &decoder) }
        #expect(!error.description.isEmpty)
    }

    @Test func theErrorSaysWhatAndWhere() {
        #expect(HPACKDecodingError(.indexOutOfRange(index: 70, entryCount: 3), at: 12).description
            == "HPACK: index 70, past the static table and 3 dynamic entries, at byte 12 of the block")
    }

    /// Random bytes: errors or fields, never a crash, and nghttp2 agrees on which.
    @Test func randomBytesDecodeAsNghttp2DecodesThem() throws {
        var random = SplitMix64(seed: 7541)
        for n in 0..<20000 {
            let block = (0..<Int(random.next() % 24)).map { _ in
                random.next() % 3 == 0 ? UInt8(0x80 | random.next() % 70) : UInt8(truncatingIfNeeded: random.next())
            }
            var decoder = HPACKDecoder()
            let ours = try? Self.decode(block, with: &decoder)
            let theirs = Inflater().decodeIfValid(block)
            #expect(ours == theirs, "block \(n): \(block)")
        }
    }
}

/// nghttp2's HPACK deflater (the mock's encoder), told that its peer's table is
/// `tableSize`: it announces that in its first block, as a peer whose decoder allows less
/// would have it.
private final class Deflater {
    let pointer: OpaquePointer

    init(tableSize: Int) throws {
        var deflater: OpaquePointer?
        try #require(nghttp2_hd_deflate_new(&deflater, 4096) == 0)
        pointer = try #require(deflater)
        try #require(nghttp2_hd_deflate_change_table_size(pointer, tableSize) == 0)
    }

    deinit { nghttp2_hd_deflate_del(pointer) }

    /// Its dynamic table's size.
    var tableSize: Int { nghttp2_hd_deflate_get_dynamic_table_size(pointer) }

    /// The block nghttp2 makes of `fields` (`noIndex`: never indexed).
    func deflate(_ fields: [(name: [UInt8], value: [UInt8], noIndex: Bool)]) throws -> [UInt8] {
        var names = fields.map(\.name), values = fields.map(\.value)
        var list: [nghttp2_nv] = []
        for index in fields.indices {
            names[index].withUnsafeMutableBufferPointer { name in
                values[index].withUnsafeMutableBufferPointer { value in
                    // The arrays outlive the call below (they are not moved meanwhile).
                    list.append(nghttp2_nv(name: name.baseAddress ?? UnsafeMutablePointer(bitPattern: 1)!, value: value.baseAddress ?? UnsafeMutablePointer(bitPattern: 1)!,
                                           namelen: name.count, valuelen: value.count,
                                           flags: UInt8(fields[index].noIndex ? NGHTTP2_NV_FLAG_NO_INDEX.rawValue : 0)))
                }
            }
        }
        let bound = nghttp2_hd_deflate_bound(pointer, list, list.count)
        var block = [UInt8](repeating: 0, count: bound)
        let used = nghttp2_hd_deflate_hd(pointer, &block, bound, list, list.count)
        try #require(used >= 0)
        withExtendedLifetime((names, values)) {}
        return Array(block[..<used])
    }
}
