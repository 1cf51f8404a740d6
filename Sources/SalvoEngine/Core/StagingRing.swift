import SalvoIO
import SalvoWire
import Synchronization

/// Which source a notification came from: an index into the sender's source registry.
typealias SourceID = UInt16

/// Where a staged notification came from: what the in-flight window keeps once its frame
/// has been written.
struct Origin {
    var position: SourcePosition
    var source: SourceID
    /// Published right after the previous notification of the same reader on this lane:
    /// the window may extend that notification's run instead of starting a new one.
    var continuesRun: Bool
}

/// A write queue: records (binary frames, or HTTP/2 request records; see `RecordBuilder`)
/// encoded by producers (any thread, serialized by a lock) and taken by the loop thread in
/// contiguous slices. A frame's bytes are free again the moment `SSL_write` (or, over
/// HTTP/2, a stream) has taken them: what a resend needs is kept by the in-flight window as
/// source positions, not as bytes, so this ring only has to absorb the producer's bursts.
///
/// Each connection has one (its `Lane`'s). Over HTTP/2 its shard has one more, which every
/// connection of the shard draws from as its streams free up (`Shard.staging`): answers
/// held long free a stream limit of streams at once, and a ring per connection that could
/// absorb such a burst would hold that many records for every connection, most of them
/// waiting on answers.
///
/// Notifications are numbered per ring from 0 (their *index*); the identifier written
/// into a binary frame is the index plus one, truncated to 32 bits, so the gateway's
/// identifier maps back to an index in O(1).
///
/// ```
///   released == written ≤ published
///   [written, published): encoded, not yet (completely) handed to SSL_write
/// ```
///
/// Thread rule: producers on any thread, under `producerLock`; the loop side on one thread at a time (debug builds check).
final class StagingRing: @unchecked Sendable {
    /// In this order, the length fills the origin's tail padding (a smaller stride).
    struct Slot {
        var origin: Origin
        var length: UInt32
        var start: UInt64  // virtual byte offset; physical = start % byteCapacity
    }

    let byteCapacity: Int
    let slotCapacity: Int
    private let bytes: UnsafeMutableRawPointer
    private let slots: UnsafeMutablePointer<Slot>
    /// Free bytes and slots after which waiting producers are woken (`hasRoomForProducers`).
    private let byteSlack: Int
    private let slotSlack: Int
    /// The most records it holds unwritten, at most `slotCapacity`: a shard's ring holds
    /// what its connections in use can take soon (`limitRecords`), so that what a slow
    /// gateway has not taken when the run stops is not the whole ring.
    private let recordLimit: Atomic<Int>

    // Producer side, guarded by `producerLock`.
    private let producerLock = Locked<Void>(())
    private var writeOffset: UInt64 = 0  // virtual byte offset of the next frame
    private var bytesSinceWake = 0
    // What the producer last read of the loop's release cursors. Reading the atomics
    // themselves costs a cache miss (the loop's core wrote them), so they are re-read
    // only when the cached values say the ring is full.
    private var knownReleasedIndex: UInt64 = 0
    private var knownReleasedOffset: UInt64 = 0
    private var refusing = false

    // Shared: published by producers, released by the loop.
    private let publishedIndex = Atomic<UInt64>(0)
    /// Virtual byte offset just past the last published frame.
    private let publishedEnd = Atomic<UInt64>(0)
    /// Set by the loop when it has written everything it saw and waits to be woken; the
    /// next publish wakes it. Otherwise producers wake it once per full record of new
    /// bytes, and a partial record is the loop's own flush timer's business.
    private let loopIsIdle = Atomic<Bool>(true)
    /// New bytes after which a producer wakes a busy loop: one full TLS record.
    static let wakeBytes = 16384
    private let releasedIndex = Atomic<UInt64>(0)
    private let releasedOffset = Atomic<UInt64>(0)

    // Loop side.
    /// The index of the next frame to hand to SSL_write.
    private(set) var written: UInt64 = 0
    /// What the loop last read of `publishedIndex`. The producer's core writes that cache
    /// line on every publish, so the loop reads it again only once it has taken all it knew
    /// of: a shard's ring is asked by each of its connections on every wake-up.
    private var knownPublished: UInt64 = 0
    private var partialBytes = 0  // bytes of frame `written` already taken by SSL_write
    /// Debug builds: stops a second thread on the loop side while one is there.
    private let loopSide = OneThreadAtATime()

    /// - Parameters:
    ///   - byteCapacity: the ring's bytes.
    ///   - bytesPerSlot: ring bytes per slot (record): the smallest usual record. Binary
    ///     frames are 80 bytes and up (a 32-byte token and a minimal payload), so at 64 the
    ///     bytes run out first. HTTP/2 records (a 60-byte header, then the payload) are
    ///     often under 100 bytes: at 128, the slots of a ring of them run out first.
    init(byteCapacity: Int, maximumFrameLength: Int, bytesPerSlot: Int = 64) {
        precondition(byteCapacity >= 2 * maximumFrameLength, "a ring must hold at least two of the largest frames")
        self.byteCapacity = byteCapacity
        slotCapacity = max(16, byteCapacity / bytesPerSlot)
        bytes = .allocate(byteCount: byteCapacity, alignment: 64)
        slots = .allocate(capacity: slotCapacity)
        byteSlack = min(max(byteCapacity / 32, Self.smallestSlack), byteCapacity / 4)
        slotSlack = max(1, slotCapacity * byteSlack / byteCapacity)
        recordLimit = Atomic(slotCapacity)
    }

    /// Holds at most `records` unwritten (and never more than its slots). Any thread.
    func limitRecords(to records: Int) {
        recordLimit.store(min(slotCapacity, max(2 * slotSlack, records)), ordering: .relaxed)
    }

    deinit {
        bytes.deallocate()
        slots.deallocate()
    }

    /// The least free space that wakes waiting producers: woken for every record written,
    /// a producer fills one record and sleeps again, a thread switch on both sides each
    /// time; woken for 1/32 of a ring, but never for less than this, it refills in bursts
    /// long enough to keep the loop's core from writing. Measured: the Performance notes
    /// article (SalvoEngine.docc/PerformanceNotes.md).
    static let smallestSlack = 8 << 10

    /// Notifications published so far: the next index.
    var published: UInt64 { publishedIndex.load(ordering: .acquiring) }

    @inline(__always)
    static func identifier(ofIndex index: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: index &+ 1) }

    @inline(__always)
    private func slot(_ index: UInt64) -> UnsafeMutablePointer<Slot> {
        slots + Int(index % UInt64(slotCapacity))
    }

    // MARK: Producer side (any thread)

    enum PublishResult: Equatable {
        /// Taken; when `wake`, the caller must wake the ring's loop.
        case published(wake: Bool)
        case full
        /// The ring's connection gave up on the gateway, or the sender stopped.
        case unavailable
    }

    /// Encodes one notification into the ring and publishes it to the loop.
    func publish(_ notification: SourceNotification, source: SourceID, continuesRun: Bool,
                 builder: RecordBuilder) throws(FrameEncodingError) -> PublishResult {
        let length = builder.length(of: notification)
        return try producerLock.withLock { _ throws(FrameEncodingError) -> PublishResult in
            // Checked under the lock that `refuseAndTakeUnwritten` takes to set it: a frame
            // is either published before the ring stopped (and taken with the rest) or refused.
            guard !refusing else { return .unavailable }
            let index = publishedIndex.load(ordering: .relaxed)
            let limit = UInt64(recordLimit.load(ordering: .relaxed))
            if index - knownReleasedIndex >= limit {
                knownReleasedIndex = releasedIndex.load(ordering: .acquiring)
                guard index - knownReleasedIndex < limit else { return .full }
            }
            // Frames never wrap: one that would cross the end starts at the beginning instead.
            var start = writeOffset
            let physical = Int(start % UInt64(byteCapacity))
            if physical + length > byteCapacity { start += UInt64(byteCapacity - physical) }
            if start + UInt64(length) - knownReleasedOffset > UInt64(byteCapacity) {
                knownReleasedOffset = releasedOffset.load(ordering: .acquiring)
                guard start + UInt64(length) - knownReleasedOffset <= UInt64(byteCapacity) else { return .full }
            }
            let region = UnsafeMutableRawBufferPointer(start: bytes + Int(start % UInt64(byteCapacity)), count: length)
            try builder.encode(notification, identifier: Self.identifier(ofIndex: index), into: region)
            slot(index).initialize(to: Slot(
                origin: Origin(position: notification.position, source: source, continuesRun: continuesRun),
                length: UInt32(length), start: start))
            writeOffset = start + UInt64(length)
            publishedEnd.store(writeOffset, ordering: .releasing)
            // Sequentially consistent, paired with `loopWentIdle`: either the loop sees
            // this frame, or this producer sees the loop idle and wakes it.
            publishedIndex.store(index + 1, ordering: .sequentiallyConsistent)
            bytesSinceWake += length
            var wake = bytesSinceWake >= Self.wakeBytes
            if loopIsIdle.load(ordering: .sequentiallyConsistent) {
                loopIsIdle.store(false, ordering: .sequentiallyConsistent)
                wake = true
            }
            if wake { bytesSinceWake = 0 }
            return .published(wake: wake)
        }
    }

    /// The sequence of the oldest notification not yet written, or nil when none waits.
    /// May lag behind the loop (it then reports an older one), never ahead of it.
    func oldestUnwrittenSequence() -> UInt64? {
        producerLock.withLock { _ in
            let released = releasedIndex.load(ordering: .acquiring)
            // Holding the lock keeps producers from reusing the slot while we read it.
            return released < publishedIndex.load(ordering: .relaxed) ? slot(released).pointee.origin.position.sequence : nil
        }
    }

    // MARK: Loop side

    /// Whether any frame waits to be written.
    var hasUnwritten: Bool {
        if written < knownPublished { return true }
        knownPublished = published
        return written < knownPublished
    }

    /// Bytes published and not yet written (including any padding before a wrap), in O(1).
    var unwrittenBytes: Int {
        guard written < published else { return 0 }
        return Int(publishedEnd.load(ordering: .acquiring) - slot(written).pointee.start) - partialBytes
    }

    /// Whether producers waiting for room should be woken: at least `byteSlack` bytes and
    /// `slotSlack` slots are free again (see `smallestSlack`).
    var hasRoomForProducers: Bool {
        let waitingFrames = published - written
        return waitingFrames == 0
            || (waitingFrames <= UInt64(recordLimit.load(ordering: .relaxed) - slotSlack)
                && unwrittenBytes <= byteCapacity - byteSlack)
    }

    /// The loop wrote everything it could see: producers should wake it for the next
    /// frame. Returns false when a frame arrived meanwhile (keep writing instead).
    func loopWentIdle() -> Bool {
        let entered = loopSide.enter()
        defer { loopSide.leave(entered) }
        loopIsIdle.store(true, ordering: .sequentiallyConsistent)
        guard written < publishedIndex.load(ordering: .sequentiallyConsistent) else { return true }
        loopIsIdle.store(false, ordering: .sequentiallyConsistent)
        return false
    }

    /// The next bytes to hand to SSL_write: a run of physically contiguous frames starting
    /// where the last write stopped, at most `limit` bytes and `frames` frames. Calling
    /// again without `markWritten` returns the same bytes (possibly followed by more),
    /// which is what OpenSSL's retry contract needs.
    func nextSlice(limit: Int, frames: Int = .max) -> UnsafeRawBufferPointer? {
        let entered = loopSide.enter()
        defer { loopSide.leave(entered) }
        // One frame needs only one that is known to be there.
        if frames > 1 || written >= knownPublished { knownPublished = self.published }
        let published = knownPublished
        let end = UInt64(frames) >= published - written ? published : written + UInt64(frames)
        guard written < end else { return nil }
        let first = slot(written).pointee
        let sliceStart = first.start + UInt64(partialBytes)
        var sliceEnd = first.start + UInt64(first.length)
        var index = written + 1
        while index < end, sliceEnd - sliceStart < UInt64(limit) {
            let next = slot(index).pointee
            // Stop at the wrap point, or when the slice would exceed the limit.
            guard next.start == sliceEnd, next.start % UInt64(byteCapacity) != 0,
                  sliceEnd + UInt64(next.length) - sliceStart <= UInt64(limit) else { break }
            sliceEnd += UInt64(next.length)
            index += 1
        }
        return UnsafeRawBufferPointer(start: bytes + Int(sliceStart % UInt64(byteCapacity)), count: Int(sliceEnd - sliceStart))
    }

    /// Records that SSL_write took `count` bytes of the last slice; calls `frameWritten`
    /// with the index, origin and length of every frame now completely written, in order,
    /// and hands their space back to producers.
    @inline(__always)
    func markWritten(_ count: Int, _ frameWritten: (UInt64, Origin, Int) -> Void) {
        let entered = loopSide.enter()
        defer { loopSide.leave(entered) }
        var remaining = count
        while remaining > 0 {
            let frame = slot(written)
            let left = Int(frame.pointee.length) - partialBytes
            if remaining >= left {
                remaining -= left
                frameWritten(written, frame.pointee.origin, Int(frame.pointee.length))
                written += 1
                partialBytes = 0
            } else {
                partialBytes += remaining
                remaining = 0
            }
        }
        release()
    }

    /// Refuses further frames (`unavailable`) and hands every unwritten one to `body`
    /// (its index, origin and bytes), in order: the gateway is out of reach or the sender
    /// is cancelling.
    func refuseAndTakeUnwritten(_ body: (UInt64, Origin, UnsafeRawBufferPointer) -> Void) {
        let entered = loopSide.enter()
        defer { loopSide.leave(entered) }
        let end: UInt64 = producerLock.withLock { _ in
            refusing = true
            return publishedIndex.load(ordering: .relaxed)
        }
        while written < end {
            let frame = slot(written).pointee
            body(written, frame.origin, UnsafeRawBufferPointer(start: bytes + Int(frame.start % UInt64(byteCapacity)),
                                                      count: Int(frame.length)))
            written += 1
        }
        partialBytes = 0
        release()
    }

    /// Hands written frames' space back to producers.
    private func release() {
        guard releasedIndex.load(ordering: .relaxed) != written else { return }
        // Space is free up to the start of the oldest unwritten frame (or everything
        // published, when all are written). A partly written frame keeps its space. (Known
        // to be published is enough: taking one that came since for written keeps the
        // padding before a wrap until the next release.)
        let offset = written < knownPublished
            ? slot(written).pointee.start
            : slot(written - 1).pointee.start + UInt64(slot(written - 1).pointee.length)
        releasedOffset.store(offset, ordering: .releasing)
        releasedIndex.store(written, ordering: .releasing)
    }
}
