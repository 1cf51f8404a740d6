import SalvoTestSupport
import SalvoWire
import Testing

/// The HPACK encoder, checked byte for byte on the first requests of a connection and by an
/// independent decoder (nghttp2's inflater, which keeps its own dynamic table) over many.
@Suite struct HPACKEncoderTests {
    /// As long as a real provider token's (167 bytes): its length takes two bytes.
    static let authorization = "bearer eyJhbGciOiJFUzI1NiIsImtpZCI6IkFCQzEyMyJ9." + String(repeating: "eyJpc3MiOiJURUFNIn0", count: 5)
        + ".MEUCIQDx"

    static func request(path: String, id: String, topic: String = "com.example.app",
                        pushType: String = "alert") -> [TestField] {
        [TestField(":method", "POST"), TestField(":scheme", "https"), TestField(":authority", "api.push.apple.com"),
         TestField(":path", path, .neverIndexed), TestField("authorization", authorization),
         TestField("apns-topic", topic), TestField("apns-push-type", pushType), TestField("apns-id", id, .neverIndexed)]
    }

    @Test func theFirstRequestAddsWhatRepeatsAndTheSecondIndexesIt() throws {
        var encoder = HPACKEncoder()
        let first = encode(Self.request(path: "/3/device/ab", id: "id-1"), with: &encoder)
        let literal = { (text: String) in [UInt8(text.utf8.count)] + Array(text.utf8) }
        let expectedFirst: [UInt8] = [0x83, 0x87]  // :method POST, :scheme https: static table
            + [0x41] + literal("api.push.apple.com")  // incremental indexing, name :authority (1)
            + [0x14] + literal("/3/device/ab")  // never indexed, name :path (4)
            + [0x40 | 23, 0x7F, UInt8(Self.authorization.utf8.count - 127)] + Array(Self.authorization.utf8)
            + [0x40] + literal("apns-topic") + literal("com.example.app")
            + [0x40] + literal("apns-push-type") + literal("alert")
            + [0x40] + literal("apns-id") + literal("id-1")  // the name's first use: indexed with its value
        #expect(first == expectedFirst)
        #expect(encoder.entryCount == 5)
        #expect(encoder.size == [(10, 18), (13, Self.authorization.utf8.count), (10, 15), (14, 5), (7, 4)]
            .reduce(0) { $0 + $1.0 + $1.1 + 32 })

        let second = encode(Self.request(path: "/3/device/cd", id: "id-2"), with: &encoder)
        // Newest first from 62: apns-id 62, push type 63, topic 64, authorization 65, authority 66.
        let expectedSecond: [UInt8] = [0x83, 0x87, 0x80 | 66, 0x14] + literal("/3/device/cd") + [0x80 | 65, 0x80 | 64, 0x80 | 63]
            + [0x1F, 62 - 15] + literal("id-2")  // never indexed, name apns-id (62)
        #expect(second == expectedSecond)

        let inflater = Inflater()
        #expect(try inflater.decode(first) == Self.request(path: "/3/device/ab", id: "id-1").map(\.pair))
        #expect(try inflater.decode(second) == Self.request(path: "/3/device/cd", id: "id-2").map(\.pair))
        #expect(inflater.tableSize == encoder.size)
    }

    @Test func aNeverIndexedNameEntersTheTableOnlyWhereItPushesNothingOut() throws {
        var encoder = HPACKEncoder()
        encoder.setPeerTableSize(60)
        let inflater = Inflater()
        let literal = { (text: String) in [UInt8(text.utf8.count)] + Array(text.utf8) }
        let fields = [TestField("apns-topic", "com.example.app"), TestField("apns-id", "id-1", .neverIndexed)]
        // 57 bytes of topic leave no room for the id's 43: its name stays spelled out.
        let block = encode(fields, with: &encoder)
        #expect(block == [0x3F, 60 - 31] + [0x40] + literal("apns-topic") + literal("com.example.app")
            + [0x10] + literal("apns-id") + literal("id-1"))
        #expect(encoder.entryCount == 1)
        #expect(try inflater.decode(block) == fields.map(\.pair))
    }

    @Test(arguments: [4096, 400, 150, 0])
    func manyRequestsDecodeToTheirFieldsWithTheTablesInStep(tableSize: Int) throws {
        var encoder = HPACKEncoder()
        encoder.setPeerTableSize(tableSize)
        let inflater = Inflater()
        var random = SplitMix64(seed: UInt64(tableSize))
        let topics = ["com.example.app", "com.example.app.voip", "com.other.app.push-type.liveactivity", "com.third"]
        let types = ["alert", "background", "voip", "liveactivity", "complication"]
        for n in 0..<500 {
            let fields = Self.request(path: "/3/device/\(random.next())", id: "id-\(n)",
                                      topic: topics[Int(random.next() % 4)], pushType: types[Int(random.next() % 5)])
                + (random.next() % 3 == 0 ? [TestField("apns-priority", ["10", "5", "1"][Int(random.next() % 3)])] : [])
            let block = encode(fields, with: &encoder)
            #expect(try inflater.decode(block) == fields.map(\.pair), "request \(n)")
            #expect(inflater.tableSize == encoder.size, "request \(n)")
            #expect(encoder.size <= min(tableSize, HPACKEncoder.maximumTableSize))
        }
        // Below 4,096, the first block announced the size.
        #expect(inflater.maximumTableSize == min(tableSize, 4096))
    }

    @Test func aSmallerTableIsAnnouncedAndEvictsAndALargerOneAfterIsAnnouncedToo() throws {
        var encoder = HPACKEncoder()
        let inflater = Inflater()
        _ = try inflater.decode(encode(Self.request(path: "/a", id: "1"), with: &encoder))
        #expect(encoder.entryCount == 5)

        // Lowered to 0 and raised to 300 between two blocks: both are announced, smallest first.
        encoder.setPeerTableSize(0)
        #expect(encoder.entryCount == 0 && encoder.size == 0)
        encoder.setPeerTableSize(300)
        let block = encode(Self.request(path: "/b", id: "2"), with: &encoder)
        #expect(Array(block.prefix(4)) == [0x20, 0x3F, 0x80 | 13, 2])  // 300 = 31 + 13 + 2 · 128
        #expect(try inflater.decode(block) == Self.request(path: "/b", id: "2").map(\.pair))
        #expect(inflater.maximumTableSize == 300)
        #expect(inflater.tableSize == encoder.size)

        // A larger value than ours changes nothing: our table stays at 4,096 at most.
        encoder.setPeerTableSize(4096)
        encoder.setPeerTableSize(65536)
        let next = encode(Self.request(path: "/c", id: "3"), with: &encoder)
        #expect(Array(next.prefix(3)) == [0x3F, 0xE1, 0x1F])
        #expect(try inflater.decode(next) == Self.request(path: "/c", id: "3").map(\.pair))
        #expect(inflater.tableSize == encoder.size)
    }

    /// A run is written as the bytes it encoded to while the table stays as it was, and
    /// encoded again once the table changed (an entry added, the peer's table smaller): an
    /// encoder writing runs writes what one encoding every field writes, block for block.
    @Test func aRunIsWrittenAgainAsItWasEncodedWhileTheTableIsUnchanged() throws {
        var plain = HPACKEncoder(), runs = HPACKEncoder()
        let inflater = Inflater()
        func fixed(_ authorization: String) -> [TestField] {
            [TestField(":method", "POST"), TestField(":authority", "api.push.apple.com"), TestField("authorization", authorization),
             TestField("apns-push-type", "alert")]
        }
        // (the run's key and fields, the peer's table size before the block)
        let blocks: [(key: UInt64, run: [TestField], tableSize: Int?)] = [
            (1, fixed("bearer one"), nil),  // first use: entries added, nothing kept
            (1, fixed("bearer one"), nil),  // all indexed: kept
            (1, fixed("bearer one"), nil),  // written from what was kept
            (2, fixed("bearer two"), nil),  // a new token: added, and the others' indices move
            (1, fixed("bearer one"), nil),
            (1, fixed("bearer one"), 120),  // a smaller table evicts
            (1, fixed("bearer one"), nil),
        ]
        for (number, block) in blocks.enumerated() {
            if let size = block.tableSize {
                plain.setPeerTableSize(size)
                runs.setPeerTableSize(size)
            }
            let unique = [TestField(":path", "/3/device/\(number)", .neverIndexed)]
            let expected = encode(block.run + unique, with: &plain)
            let written = encode(block.run + unique, with: &runs, runKey: block.key)
            #expect(written == expected, "block \(number)")
            #expect(try inflater.decode(written) == (block.run + unique).map(\.pair), "block \(number)")
        }
        // Equal keys stand for equal fields: once kept, the encoder does not look at them again.
        var trusting = HPACKEncoder()
        _ = encode(fixed("bearer one"), with: &trusting, runKey: 1)
        let kept = encode(fixed("bearer one"), with: &trusting, runKey: 1)
        #expect(encode(fixed("bearer else"), with: &trusting, runKey: 1) == kept)
        #expect(encode(fixed("bearer else"), with: &trusting, runKey: 3) != kept)
    }

    /// `fields` as one block, through `encodeRun` (slot 0) when `runKey` is set.
    func encode(_ fields: [TestField], with encoder: inout HPACKEncoder, runKey: UInt64) -> [UInt8] {
        let bound = HPACKEncoder.maximumBlockPrefixLength
            + fields.reduce(0) { $0 + HPACKEncoder.maximumEncodedLength(nameCount: $1.name.utf8.count, valueCount: $1.value.utf8.count) }
        var block = [UInt8](repeating: 0, count: bound)
        let run = fields.filter { $0.indexing == .indexed }, rest = fields.filter { $0.indexing != .indexed }
        let count = block.withUnsafeMutableBytes { space in
            var writer = ByteWriter(space)
            encoder.beginBlock(into: &writer)
            encoder.encodeRun(slot: 0, key: runKey, into: &writer) { encoder, writer in
                for field in run { Self.encode(field, with: &encoder, into: &writer) }
            }
            for field in rest { Self.encode(field, with: &encoder, into: &writer) }
            return writer.count
        }
        return Array(block[..<count])
    }

    static func encode(_ field: TestField, with encoder: inout HPACKEncoder, into writer: inout ByteWriter) {
        Array(field.name.utf8).withUnsafeBytes { name in
            Array(field.value.utf8).withUnsafeBytes { value in encoder.encode(name: name, value: value, field.indexing, into: &writer) }
        }
    }

    func encode(_ fields: [TestField], with encoder: inout HPACKEncoder) -> [UInt8] {
        let bound = HPACKEncoder.maximumBlockPrefixLength
            + fields.reduce(0) { $0 + HPACKEncoder.maximumEncodedLength(nameCount: $1.name.utf8.count, valueCount: $1.value.utf8.count) }
        var block = [UInt8](repeating: 0, count: bound)
        let count = block.withUnsafeMutableBytes { space in
            var writer = ByteWriter(space)
            encoder.beginBlock(into: &writer)
            for field in fields {
                Array(field.name.utf8).withUnsafeBytes { name in
                    Array(field.value.utf8).withUnsafeBytes { value in
                        encoder.encode(name: name, value: value, field.indexing, into: &writer)
                    }
                }
            }
            return writer.count
        }
        return Array(block[..<count])
    }
}

struct TestField {
    var name: String, value: String, indexing: HPACKIndexing
    init(_ name: String, _ value: String, _ indexing: HPACKIndexing = .indexed) {
        (self.name, self.value, self.indexing) = (name, value, indexing)
    }
    var pair: HeaderPair { HeaderPair(name: name, value: value) }
}

