import SalvoWire
import Testing

@Suite("Feedback")
struct FeedbackTests {
    @Test("golden bytes: time, token length 32, token")
    func golden() {
        let tuple = FeedbackTuple(timestamp: WireFixture.expiry, token: WireFixture.token)
        let golden = wireHex("6553f100 0020 000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f")
        #expect(tuple.bytes == golden)
        var raw = [UInt8](repeating: 0, count: 38)
        raw.withUnsafeMutableBytes { tuple.encode(to: $0.baseAddress!) }
        #expect(raw == golden)
    }

    static func decode(_ stream: [UInt8], chunkSizes: [Int]) throws(FeedbackDecodingError) -> (tuples: [FeedbackTuple], pending: Int) {
        var decoder = FeedbackDecoder()
        var tuples: [FeedbackTuple] = []
        var offset = 0
        var sizes = chunkSizes.makeIterator()
        while offset < stream.count {
            let size = min(sizes.next() ?? stream.count, stream.count - offset)
            let chunk = Array(stream[offset..<offset + size])
            offset += size
            let result = chunk.withUnsafeBytes { bytes -> Result<Void, FeedbackDecodingError> in
                do throws(FeedbackDecodingError) {
                    try decoder.decode(bytes) { tuples.append($0) }
                    return .success(())
                } catch {
                    return .failure(error)
                }
            }
            try result.get()
        }
        return (tuples, decoder.pendingByteCount)
    }

    @Test("seeded round trips in any split", arguments: [11, 12, 13] as [UInt64])
    func roundTrip(seed: UInt64) throws {
        var rng = SplitMix64(seed: seed)
        let tuples = (0..<200).map { _ in
            FeedbackTuple(timestamp: UInt32.random(in: 0...UInt32.max, using: &rng), token: WireFixture.randomToken(&rng))
        }
        let stream = tuples.flatMap(\.bytes)
        #expect(stream.count == 200 * 38)
        let whole = try Self.decode(stream, chunkSizes: [stream.count])
        #expect(whole.tuples == tuples)
        #expect(whole.pending == 0)
        let byteByByte = try Self.decode(stream, chunkSizes: Array(repeating: 1, count: stream.count))
        #expect(byteByByte.tuples == tuples)
        for limit in [5, 39, 100, 1000] {
            let splits = (0..<stream.count).map { _ in Int.random(in: 1...limit, using: &rng) }
            let split = try Self.decode(stream, chunkSizes: splits)
            #expect(split.tuples == tuples)
            #expect(split.pending == 0)
        }
    }

    @Test("a partial tuple is carried and reported as pending")
    func partial() throws {
        let tuple = FeedbackTuple(timestamp: 1, token: WireFixture.token)
        let stream = tuple.bytes + tuple.bytes.prefix(20)
        let result = try Self.decode(stream, chunkSizes: [stream.count])
        #expect(result.tuples == [tuple])
        #expect(result.pending == 20)
    }

    @Test("a token length other than 32 is a typed error, and stays one")
    func invalidTokenLength() {
        let good = FeedbackTuple(timestamp: 7, token: WireFixture.token).bytes
        let bad = wireHex("00000001 0040") + Array(repeating: 0xAB, count: 64)
        for splits in [[good.count + bad.count], Array(repeating: 1, count: good.count + bad.count), [40, 3, 1]] {
            #expect(throws: FeedbackDecodingError.invalidTokenLength(64)) {
                try Self.decode(good + bad, chunkSizes: splits)
            }
        }
        var decoder = FeedbackDecoder()
        var delivered: [FeedbackTuple] = []
        (good + bad).withUnsafeBytes { bytes in
            #expect(throws: FeedbackDecodingError.invalidTokenLength(64)) { try decoder.decode(bytes) { delivered.append($0) } }
            #expect(throws: FeedbackDecodingError.invalidTokenLength(64)) { try decoder.decode(bytes) { delivered.append($0) } }
        }
        #expect(delivered.count == 1)
    }
}
