import SalvoWire
import Testing
@testable import SalvoEngine

/// The write queue between producers and a connection, and the per-lane store of
/// notifications sent one at a time.
@Suite struct StagingRingTests {
    static let builder = FrameBuilder(encoder: FrameEncoder(format: .frame), defaultExpiry: nil, defaultPriority: nil)
    static let payload = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
    static let frameLength = builder.encoder.encodedLength(payloadLength: payload.count, hasExpiry: false, hasPriority: false)
    static let largestFrame = builder.encoder.encodedLength(payloadLength: 2048)

    static func token(_ n: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0, count: 32)
        withUnsafeBytes(of: UInt32(n).bigEndian) { bytes.replaceSubrange(28..<32, with: $0) }
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }

    func makeRing(frames: Int = 64) -> StagingRing {
        StagingRing(byteCapacity: max(frames * Self.frameLength, 2 * Self.largestFrame), maximumFrameLength: Self.largestFrame)
    }

    /// Publishes notifications `range` (sequence = n); returns how many were taken.
    @discardableResult
    func publish(_ ring: StagingRing, _ range: Range<Int>, continuing: Bool = true) -> Int {
        var taken = 0
        for n in range {
            let result = Self.payload.withUnsafeBytes { payload in
                try! ring.publish(SourceNotification(token: Self.token(n), payload: payload,
                                                     position: SourcePosition(offset: UInt64(n) * 7, sequence: UInt64(n))),
                                  source: 1, continuesRun: continuing, builder: .frame(Self.builder))
            }
            guard case .published = result else { break }
            taken += 1
        }
        return taken
    }

    /// Writes everything in slices of at most `limit` bytes; returns the bytes and the
    /// (index, sequence) of every frame as the window would record it.
    @discardableResult
    func writeAll(_ ring: StagingRing, limit: Int = 16384) -> (bytes: [UInt8], frames: [(UInt64, UInt64)]) {
        var bytes: [UInt8] = []
        var frames: [(UInt64, UInt64)] = []
        while let slice = ring.nextSlice(limit: limit) {
            bytes += slice
            ring.markWritten(slice.count) { index, origin, length in
                #expect(length == Self.frameLength)
                frames.append((index, origin.position.sequence))
            }
        }
        return (bytes, frames)
    }

    static func identifiers(_ bytes: [UInt8]) -> [UInt32] {
        var decoder = FrameDecoder()
        var identifiers: [UInt32] = []
        _ = bytes.withUnsafeBytes { decoder.decode($0) { identifiers.append($0.identifier); return true } }
        return identifiers
    }

    @Test func framesAreWrittenInOrderWithTheirIndexAsIdentifier() {
        let ring = makeRing()
        publish(ring, 0..<10)
        let (bytes, frames) = writeAll(ring)
        #expect(Self.identifiers(bytes) == Array(1...10))
        #expect(frames.map(\.0) == Array(0..<10) && frames.map(\.1) == Array(0..<10))
        #expect(!ring.hasUnwritten)
    }

    @Test func writtenFramesFreeTheirSpaceAtOnce() {
        let ring = makeRing(frames: 32)
        let first = publish(ring, 0..<1000)
        #expect(first < 1000, "a full ring is backpressure")
        writeAll(ring)
        #expect(publish(ring, first..<first + 10) == 10, "written frames left room, no error wait needed")
    }

    /// Writes one frame at a time until waiting producers would be woken; returns how many.
    func writtenUntilRoom(_ ring: StagingRing) -> Int {
        var written = 0
        while !ring.hasRoomForProducers {
            let slice = ring.nextSlice(limit: Self.frameLength)!
            ring.markWritten(slice.count) { _, _, _ in }
            written += 1
        }
        return written
    }

    @Test func producersAreWokenForRoomOnlyOnceAFewFramesAreFree() {
        // Large enough that 1/32 of it is more than `smallestSlack`.
        let ring = makeRing(frames: 4096)
        #expect(ring.hasRoomForProducers)
        let taken = publish(ring, 0..<10_000)
        #expect(taken < 10_000 && !ring.hasRoomForProducers)
        // One frame written is not room enough yet...
        let slice = ring.nextSlice(limit: Self.frameLength)!
        ring.markWritten(slice.count) { _, _, _ in }
        #expect(!ring.hasRoomForProducers)
        // ...1/32 of the ring is.
        let written = 1 + writtenUntilRoom(ring)
        #expect(written >= taken / 32 && written <= taken / 32 + 2, "\(written) of \(taken)")
        #expect(publish(ring, taken..<taken + written) == written, "the room is there")
        writeAll(ring)
        #expect(ring.hasRoomForProducers)
    }

    @Test func aSmallRingWakesProducersForAQuarterOfItAtMost() {
        let ring = makeRing(frames: 128)
        let taken = publish(ring, 0..<1000)
        let written = writtenUntilRoom(ring)
        // 1/32 would be a frame or two: below `smallestSlack`, so a quarter of the ring.
        #expect(written >= taken / 4 - 1 && written <= taken / 4 + 1, "\(written) of \(taken)")
    }

    /// A limited ring takes no more than its limit unwritten, wakes producers only once
    /// it is below the limit by its slack, and takes more once the limit is raised.
    @Test func aRingHoldsNoMoreThanItsRecordLimit() {
        let ring = makeRing(frames: 4096)
        ring.limitRecords(to: 1000)
        #expect(publish(ring, 0..<5000) == 1000)
        #expect(!ring.hasRoomForProducers)
        ring.limitRecords(to: 3000)
        #expect(ring.hasRoomForProducers)
        #expect(publish(ring, 1000..<5000) == 2000)
        let (_, frames) = writeAll(ring)
        #expect(frames.map(\.1) == (0..<3000).map { UInt64($0) })
    }

    @Test func partialWritesResumeMidFrameAndSlicesRespectTheLimit() {
        let ring = makeRing()
        publish(ring, 0..<5)
        let slice = ring.nextSlice(limit: 3 * Self.frameLength)!
        #expect(slice.count == 3 * Self.frameLength)
        var completed: [UInt64] = []
        ring.markWritten(Self.frameLength + 10) { index, _, _ in completed.append(index) }
        #expect(completed == [0])
        // The retry contract: the next slice starts where SSL_write stopped.
        let again = ring.nextSlice(limit: 16384)!
        #expect(again.count == 4 * Self.frameLength - 10)
        ring.markWritten(again.count) { index, _, _ in completed.append(index) }
        #expect(completed == [0, 1, 2, 3, 4])
    }

    @Test func aFrameNeverWrapsAroundTheEnd() {
        let ring = StagingRing(byteCapacity: 2 * Self.largestFrame, maximumFrameLength: Self.largestFrame)
        var sent = 0
        for _ in 0..<50 {
            sent += publish(ring, sent..<sent + 7)
            let (bytes, _) = writeAll(ring)
            #expect(bytes.count % Self.frameLength == 0)
        }
        #expect(sent == 350)
    }

    @Test func theOldestUnwrittenSequenceIsWhatACheckpointNeeds() {
        let ring = makeRing()
        #expect(ring.oldestUnwrittenSequence() == nil)
        publish(ring, 3..<6)
        #expect(ring.oldestUnwrittenSequence() == 3)
        writeAll(ring)
        #expect(ring.oldestUnwrittenSequence() == nil)
    }

    @Test func aRefusingRingHandsBackWhatItHeldAndTakesNothingMore() {
        let ring = makeRing()
        publish(ring, 0..<4)
        var taken: [(UInt64, DeviceToken?)] = []
        ring.refuseAndTakeUnwritten { index, _, frame in taken.append((index, Self.builder.token(inFrame: frame))) }
        #expect(taken.map(\.0) == [0, 1, 2, 3] && taken.map(\.1) == (0..<4).map { Self.token($0) })
        #expect(publish(ring, 4..<5) == 0 && !ring.hasUnwritten)
    }

    @Test func theTokenIsReadBackFromAFrameOfEveryFormat() {
        for format in FrameFormat.allCases {
            let builder = FrameBuilder(encoder: FrameEncoder(format: format), defaultExpiry: 0, defaultPriority: nil)
            var frame = [UInt8](repeating: 0, count: 256)
            Self.payload.withUnsafeBytes { payload in
                frame.withUnsafeMutableBytes {
                    try! builder.encode(SourceNotification(token: Self.token(42), payload: payload,
                                                           position: SourcePosition(offset: 0, sequence: 0)),
                                        identifier: 9, into: $0)
                }
            }
            #expect(frame.withUnsafeBytes { builder.token(inFrame: $0) } == Self.token(42), "\(format)")
        }
    }
}

@Suite struct RetainedStoreTests {
    static let payload = Array(#"{"aps":{"alert":"kept"}}"#.utf8)

    func append(_ store: RetainedStore, _ n: Int, expiry: UInt32? = nil, priority: UInt8? = nil) -> SourcePosition? {
        Self.payload.withUnsafeBytes {
            store.append(token: StagingRingTests.token(n), payload: $0, expiry: expiry, priority: priority, sequence: UInt64(n * 10))
        }
    }

    @Test func entriesAreReadBackFromAnyPosition() throws {
        let store = RetainedStore(byteCapacity: 4096, maximumPayloadLength: 256)
        let positions = try (0..<5).map { try #require(append(store, $0, expiry: $0 == 2 ? 77 : nil, priority: $0 == 3 ? 5 : nil)) }
        #expect(positions.map(\.offset) == [0, 1, 2, 3, 4] && positions.map(\.sequence) == [0, 10, 20, 30, 40])
        let reader = RetainedStore.Reader(store)
        reader.seek(to: positions[2])
        let second = try #require(reader.next())
        #expect(second.token == StagingRingTests.token(2) && second.expiry == 77 && second.priority == nil)
        #expect(Array(second.payload) == Self.payload && second.position == positions[2])
        let third = try #require(reader.next())
        #expect(third.priority == 5 && third.position == positions[3])
    }

    @Test func aFullStoreIsBackpressureUntilEntriesAreFinal() throws {
        let store = RetainedStore(byteCapacity: 1024, maximumPayloadLength: 256)
        var taken = 0
        while append(store, taken) != nil { taken += 1 }
        let pressed = store.isUnderPressure.load(ordering: .relaxed)
        #expect(taken > 0 && pressed)
        store.release(before: 2)
        let relieved = !store.isUnderPressure.load(ordering: .relaxed)
        #expect(relieved)
        #expect(append(store, taken) != nil, "two entries' room came back")
    }

    @Test func anEntryWhoseFrameDidNotFitIsTakenBack() throws {
        let store = RetainedStore(byteCapacity: 1024, maximumPayloadLength: 256)
        _ = try #require(append(store, 0))
        _ = try #require(append(store, 1))
        store.removeLast()
        let again = try #require(append(store, 2))
        #expect(again.offset == 1)
        let reader = RetainedStore.Reader(store)
        reader.seek(to: again)
        #expect(reader.next()?.token == StagingRingTests.token(2))
    }
}

@Suite struct SendBufferLimitTests {
    @Test func errorsHalveTheBufferDownToTheFloor() {
        var limit = SendBufferLimit(configured: 256 << 10)
        #expect(limit.current == nil)
        #expect(limit.errorResponse() == 128 << 10)
        #expect(limit.errorResponse() == 64 << 10)
        for _ in 0..<10 { _ = limit.errorResponse() }
        #expect(limit.current == SendBufferLimit.defaultFloor)
    }

    @Test func writingWithoutErrorsDoublesItBackToTheCeiling() {
        var limit = SendBufferLimit(configured: 64 << 10)
        _ = limit.errorResponse()  // 32 KiB
        #expect(limit.wrote(4 * (32 << 10) - 1) == nil)
        #expect(limit.wrote(1) == 64 << 10)
        #expect(limit.current == 64 << 10)
        #expect(limit.wrote(1 << 30) == 64 << 10, "never above the configured size")
    }

    @Test func withAutotuningTheKernelTakesOverAgainAtTheCeiling() {
        var limit = SendBufferLimit(configured: nil)
        #expect(limit.errorResponse() == SendBufferLimit.autotunedCeiling / 2)
        #expect(limit.wrote(4 * SendBufferLimit.autotunedCeiling) == SendBufferLimit.autotunedCeiling)
        #expect(limit.current == nil)
    }
}
