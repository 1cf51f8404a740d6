import SalvoWire
import Synchronization

/// How a notification ended.
public enum Outcome: Sendable, Hashable {
    /// No error named it (or anything before it) within the error wait; or a later
    /// error, or a shutdown naming it, proved it was processed.
    case accepted
    /// The gateway named it in an error response.
    case rejected(Status)
    /// Salvo gave up on it.
    case failed(FailureReason)
}

/// Why a notification ended as failed.
public enum FailureReason: String, Sendable, Hashable, CaseIterable {
    /// The connection dropped without an error response while it was in flight, and the
    /// drop policy is at-most-once: it may or may not have been delivered.
    case deliveryUnknown = "delivery_unknown"
    /// It was in flight on more dropped connections than the retry budget allows.
    case retryBudgetExhausted = "retry_budget_exhausted"
    /// No connection to the gateway could be made (refused, TLS verification failed, ...).
    case gatewayUnreachable = "gateway_unreachable"
    /// The sender was shut down before it was settled.
    case cancelled
}

/// What the ring tells its connection about settled frames, one call per frame or batch.
protocol SettlementSink: AnyObject {
    /// `count` frames were settled as accepted.
    func accepted(count: Int)
    /// One frame was rejected; `frame` holds its encoded bytes.
    func rejected(status: Status, identifier: UInt32, sequence: UInt64, frame: UnsafeRawBufferPointer)
    /// One frame failed; `frame` holds its encoded bytes.
    func failed(reason: FailureReason, sequence: UInt64, frame: UnsafeRawBufferPointer)
}

/// A connection's send buffer and in-flight window in one: a fixed-capacity byte ring of
/// encoded frames plus a ring of frame records.
///
/// Frames are encoded straight into it by producers (any thread, serialized by a lock),
/// handed to `SSL_write` in contiguous slices by the loop thread, and kept until settled.
/// Every frame is in exactly one of these ranges of frame indices:
///
/// ```
///   released ≤ settled ≤ written ≤ published
///   [released, settled): settled, bytes about to be reused (collapsed: always empty between calls)
///   [settled, written):  on the wire, waiting out the error wait (which restarts while
///                        the gateway's TCP has not acknowledged them)
///   [written, published): not yet (completely) written to the current connection
/// ```
///
/// On an error response the frames after the named one are "moved to a fresh
/// connection": `written` is rewound, and the same bytes are written again once the
/// connection is re-established. Nothing is re-encoded and nothing is lost: a full ring
/// is backpressure.
///
/// Identifiers are the frame index plus one, truncated to 32 bits, so the gateway's
/// identifier maps back to a frame in O(1).
final class SendRing: @unchecked Sendable {
    struct Record {
        var start: UInt64  // virtual byte offset; physical = start % byteCapacity
        var sequence: UInt64  // the producer's sequence number (campaign line)
        var writtenAt: UInt64  // monotonic ns its error wait runs from: written, or last seen unacknowledged
        var length: UInt32
        var drops: UInt16  // silent drops it was in flight for
        var isFailed: Bool  // gave up; its bytes are skipped
    }

    let byteCapacity: Int
    let recordCapacity: Int
    let format: FrameFormat
    private let bytes: UnsafeMutableRawPointer
    private let records: UnsafeMutablePointer<Record>

    // Producer side, guarded by `producerLock`.
    private let producerLock = Mutex<Void>(())
    private var writeOffset: UInt64 = 0  // virtual byte offset of the next frame
    private var bytesSinceWake = 0
    // What the producer last read of the loop's release cursors. Reading the atomics
    // themselves costs a cache miss (the loop's core wrote them), so they are re-read
    // only when the cached values say the ring is full.
    private var knownReleasedIndex: UInt64 = 0
    private var knownReleasedOffset: UInt64 = 0

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
    /// Set by the loop when its connection gave up on the gateway; producers skip the ring.
    let gaveUp = Atomic<Bool>(false)

    // Loop side.
    private(set) var settled: UInt64 = 0
    private(set) var written: UInt64 = 0
    private var partialBytes = 0  // bytes of frame `written` already taken by SSL_write
    /// The most frames allowed in flight. Unlimited until a silent drop; then halved per
    /// drop and grown by what settles (additive increase, multiplicative decrease, as TCP
    /// does), so that a gateway that drops connections every N notifications still sees
    /// progress instead of the same window resent forever.
    private(set) var inFlightLimit: UInt64 = .max
    static let smallestInFlightLimit: UInt64 = 16

    init(byteCapacity: Int, format: FrameFormat, maximumFrameLength: Int) {
        precondition(byteCapacity >= 2 * maximumFrameLength, "a ring must hold at least two of the largest frames")
        self.byteCapacity = byteCapacity
        self.format = format
        // One record per 64 bytes of ring: real frames are 80 bytes and up (a 32-byte token
        // and a minimal payload), so the bytes run out first; rings of tiny frames hit this
        // bound instead, which is backpressure too. Records cost 32 bytes each.
        recordCapacity = max(16, byteCapacity / 64)
        bytes = .allocate(byteCount: byteCapacity, alignment: 64)
        records = .allocate(capacity: recordCapacity)
    }

    deinit {
        bytes.deallocate()
        records.deallocate()
    }

    var published: UInt64 { publishedIndex.load(ordering: .acquiring) }

    @inline(__always)
    static func identifier(ofIndex index: UInt64) -> UInt32 { UInt32(truncatingIfNeeded: index &+ 1) }

    @inline(__always)
    private func record(_ index: UInt64) -> UnsafeMutablePointer<Record> {
        records + Int(index % UInt64(recordCapacity))
    }

    // MARK: Producer side (any thread)

    enum PublishResult: Equatable {
        /// Taken; when `wake`, the caller must wake the ring's loop.
        case published(identifier: UInt32, wake: Bool)
        case full
        /// The ring's connection gave up on the gateway.
        case unavailable
    }

    /// Encodes one notification into the ring and publishes it to the loop.
    func publish(
        encoder: FrameEncoder, token: DeviceToken, payload: UnsafeRawBufferPointer,
        expiry: UInt32?, priority: UInt8?, sequence: UInt64
    ) throws(FrameEncodingError) -> PublishResult {
        let length = encoder.encodedLength(payloadLength: payload.count, hasExpiry: expiry != nil, hasPriority: priority != nil)
        return try producerLock.withLock { _ throws(FrameEncodingError) -> PublishResult in
            // Checked under the lock that `failAllUnsettled` takes to set it: a frame is
            // either published before the ring gave up (and failed with the rest) or refused.
            guard !gaveUp.load(ordering: .relaxed) else { return .unavailable }
            let index = publishedIndex.load(ordering: .relaxed)
            if index - knownReleasedIndex >= UInt64(recordCapacity) {
                knownReleasedIndex = releasedIndex.load(ordering: .acquiring)
                guard index - knownReleasedIndex < UInt64(recordCapacity) else { return .full }
            }
            // Frames never wrap: one that would cross the end starts at the beginning instead.
            var start = writeOffset
            let physical = Int(start % UInt64(byteCapacity))
            if physical + length > byteCapacity { start += UInt64(byteCapacity - physical) }
            if start + UInt64(length) - knownReleasedOffset > UInt64(byteCapacity) {
                knownReleasedOffset = releasedOffset.load(ordering: .acquiring)
                guard start + UInt64(length) - knownReleasedOffset <= UInt64(byteCapacity) else { return .full }
            }
            let identifier = Self.identifier(ofIndex: index)
            let region = UnsafeMutableRawBufferPointer(start: bytes + Int(start % UInt64(byteCapacity)), count: length)
            guard case .written = try encoder.encode(
                token: token, payload: payload, identifier: identifier, expiry: expiry, priority: priority, into: region)
            else { preconditionFailure("encodedLength and encode disagree") }
            record(index).initialize(to: Record(start: start, sequence: sequence, writtenAt: 0, length: UInt32(length),
                                                drops: 0, isFailed: false))
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
            return .published(identifier: identifier, wake: wake)
        }
    }

    /// The producer's sequence number of the oldest frame not yet settled, or nil when
    /// every published frame is settled. May lag behind the loop (it then reports an
    /// older frame), never ahead of it: safe for checkpoints.
    func oldestUnsettledSequence() -> UInt64? {
        producerLock.withLock { _ in
            let released = releasedIndex.load(ordering: .acquiring)
            // Holding the lock keeps producers from reusing the slot while we read it.
            return released < publishedIndex.load(ordering: .relaxed) ? record(released).pointee.sequence : nil
        }
    }

    // MARK: Loop side

    /// Whether any frame waits to be written.
    var hasUnwritten: Bool { written < published }

    /// Bytes published and not yet written (including any padding before a wrap), in O(1).
    var unwrittenBytes: Int {
        guard written < published else { return 0 }
        return Int(publishedEnd.load(ordering: .acquiring) - record(written).pointee.start) - partialBytes
    }

    /// The loop wrote everything it could see: producers should wake it for the next
    /// frame. Returns false when a frame arrived meanwhile (keep writing instead).
    func loopWentIdle() -> Bool {
        loopIsIdle.store(true, ordering: .sequentiallyConsistent)
        guard written < publishedIndex.load(ordering: .sequentiallyConsistent) else { return true }
        loopIsIdle.store(false, ordering: .sequentiallyConsistent)
        return false
    }
    /// Whether any frame is unsettled (written or not).
    var hasUnsettled: Bool { settled < published }

    /// The next bytes to hand to SSL_write: a run of physically contiguous frames starting
    /// where the last write stopped, at most `limit` bytes. Calling again without
    /// `markWritten` returns the same bytes (possibly followed by more), which is what
    /// OpenSSL's retry contract needs.
    func nextSlice(limit: Int) -> UnsafeRawBufferPointer? {
        let end = published
        skipFailed(upTo: end)
        guard written < end, written - settled < inFlightLimit else { return nil }
        let frameBudget = inFlightLimit == .max ? end : min(end, settled + inFlightLimit)
        let first = record(written).pointee
        let sliceStart = first.start + UInt64(partialBytes)
        var sliceEnd = first.start + UInt64(first.length)
        var index = written + 1
        while index < frameBudget, sliceEnd - sliceStart < UInt64(limit) {
            let next = record(index).pointee
            // Stop at a failed frame, at the wrap point, or when the slice would exceed the limit.
            guard !next.isFailed, next.start == sliceEnd,
                  next.start % UInt64(byteCapacity) != 0,
                  sliceEnd + UInt64(next.length) - sliceStart <= UInt64(limit) else { break }
            sliceEnd += UInt64(next.length)
            index += 1
        }
        return UnsafeRawBufferPointer(start: bytes + Int(sliceStart % UInt64(byteCapacity)), count: Int(sliceEnd - sliceStart))
    }

    private func skipFailed(upTo end: UInt64) {
        while written < end, partialBytes == 0, record(written).pointee.isFailed { written += 1 }
    }

    /// Records that SSL_write took `count` bytes of the last slice at time `now`.
    func markWritten(_ count: Int, now: UInt64) {
        var remaining = count
        while remaining > 0 {
            let frame = record(written)
            let left = Int(frame.pointee.length) - partialBytes
            if remaining >= left {
                remaining -= left
                frame.pointee.writtenAt = now
                written += 1
                partialBytes = 0
            } else {
                partialBytes += remaining
                remaining = 0
            }
        }
    }

    /// When the oldest in-flight frame settles, or nil when none is in flight.
    func nextSettleTime(errorWait: UInt64) -> UInt64? {
        settled < written ? record(settled).pointee.writtenAt + errorWait : nil
    }

    /// Restarts the error wait of the newest written frames that make up the last
    /// `unacknowledgedBytes` of the stream: the peer's TCP has not even received them, so
    /// the gateway cannot have judged them. Without this, a gateway that reads slowly
    /// (its socket buffers full) would see frames settled as accepted before it read them.
    func holdUnacknowledged(_ unacknowledgedBytes: Int, now: UInt64) {
        var remaining = unacknowledgedBytes - partialBytes
        var index = written
        while remaining > 0, index > settled {
            index -= 1
            let frame = record(index)
            frame.pointee.writtenAt = max(frame.pointee.writtenAt, now)
            remaining -= Int(frame.pointee.length)
        }
    }

    /// Settles as accepted every written frame older than the error wait.
    func settleExpired(now: UInt64, errorWait: UInt64, sink: SettlementSink) {
        var count = 0
        while settled < written {
            let frame = record(settled).pointee
            guard frame.isFailed || frame.writtenAt + errorWait <= now else { break }
            if !frame.isFailed { count += 1 }
            settled += 1
        }
        if count > 0 {
            sink.accepted(count: count)
            if inFlightLimit != .max { inFlightLimit += UInt64(count) }
        }
        release()
    }

    /// What an error response did to the window.
    enum ErrorOutcome: Equatable {
        /// The named frame was found; `resent` frames after it will be written again.
        case applied(resent: Int)
        /// The identifier named no frame in flight: the window was too short (or the
        /// gateway is confused). The in-flight frames are handled as after a silent drop.
        case windowOverrun(resent: Int, failed: Int)
    }

    /// Applies the gateway's `08 status identifier`: frames before the named one are
    /// accepted; the named one is rejected (status 10: accepted, it was the last success);
    /// every later frame is rewound to be written again on the next connection.
    func applyErrorResponse(_ response: ErrorResponse, dropBudget: Int, atMostOnce: Bool, sink: SettlementSink) -> ErrorOutcome {
        // Identifiers wrap at 32 bits; so does the distance from the oldest unsettled frame.
        let distance = UInt64(response.identifier &- Self.identifier(ofIndex: settled))
        if response.status == .shutdown && distance == UInt64(UInt32.max) {
            // The last success is the frame just before the window: nothing in flight was processed.
            let resent = rewind()
            release()
            return .applied(resent: resent)
        }
        guard distance < written - settled else {
            let (resent, failed) = handleDrop(dropBudget: dropBudget, atMostOnce: atMostOnce, sink: sink)
            return .windowOverrun(resent: resent, failed: failed)
        }
        let named = settled + distance
        // Frames before the named one are proven processed.
        var accepted = 0
        while settled < named {
            if !record(settled).pointee.isFailed { accepted += 1 }
            settled += 1
        }
        if settled == named && named < written {
            let frame = record(named).pointee
            if response.status == .shutdown {
                if !frame.isFailed { accepted += 1 }
            } else if !frame.isFailed {
                if accepted > 0 { sink.accepted(count: accepted); accepted = 0 }
                sink.rejected(status: response.status, identifier: response.identifier, sequence: frame.sequence,
                              frame: frameBytes(frame))
            }
            settled += 1
        }
        if accepted > 0 { sink.accepted(count: accepted) }
        let resent = rewind()
        release()
        return .applied(resent: resent)
    }

    /// The connection closed with no error response: the in-flight frames' fate is
    /// unknown. At-least-once rewinds them to be written again (each may be a duplicate);
    /// at-most-once fails them as `deliveryUnknown`. Frames that were in flight on more
    /// than `dropBudget` dropped connections fail as `retryBudgetExhausted`.
    /// Returns (rewound, failed).
    @discardableResult
    func handleDrop(dropBudget: Int, atMostOnce: Bool, sink: SettlementSink) -> (resent: Int, failed: Int) {
        inFlightLimit = max(Self.smallestInFlightLimit, min(inFlightLimit, written - settled) / 2)
        var failed = 0
        var index = settled
        while index < written {
            let frame = record(index)
            if !frame.pointee.isFailed {
                frame.pointee.drops += 1
                let reason: FailureReason? = atMostOnce ? .deliveryUnknown
                    : Int(frame.pointee.drops) > dropBudget ? .retryBudgetExhausted : nil
                if let reason {
                    frame.pointee.isFailed = true
                    failed += 1
                    sink.failed(reason: reason, sequence: frame.pointee.sequence, frame: frameBytes(frame.pointee))
                }
            }
            index += 1
        }
        let rewound = rewind() - failed
        release()
        return (rewound, failed)
    }

    /// Fails every unsettled frame (written or not) with `reason`: the gateway is out of
    /// reach or the sender is shutting down.
    func failAllUnsettled(reason: FailureReason, sink: SettlementSink) -> Int {
        if reason == .gatewayUnreachable { producerLock.withLock { _ in gaveUp.store(true, ordering: .relaxed) } }
        let end = published
        var failed = 0
        var index = settled
        while index < end {
            let frame = record(index)
            if !frame.pointee.isFailed {
                frame.pointee.isFailed = true
                failed += 1
                sink.failed(reason: reason, sequence: frame.pointee.sequence, frame: frameBytes(frame.pointee))
            }
            index += 1
        }
        written = end
        partialBytes = 0
        settled = end
        release()
        return failed
    }

    /// Moves the write position back to the oldest unsettled frame (past any failed ones);
    /// returns how many frames had been written and will be written again (failed ones included).
    private func rewind() -> Int {
        let count = Int(written - settled)
        written = settled
        partialBytes = 0
        let end = published
        while settled < end, record(settled).pointee.isFailed {
            settled += 1
            written = settled
        }
        return count
    }

    /// Hands settled frames' space back to producers.
    private func release() {
        guard releasedIndex.load(ordering: .relaxed) != settled else { return }
        // Space is free up to the start of the oldest unsettled frame (or everything
        // published, when all are settled).
        let offset = settled < published
            ? record(settled).pointee.start
            : record(settled - 1).pointee.start + UInt64(record(settled - 1).pointee.length)
        releasedOffset.store(offset, ordering: .releasing)
        releasedIndex.store(settled, ordering: .releasing)
    }

    private func frameBytes(_ frame: Record) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(start: bytes + Int(frame.start % UInt64(byteCapacity)), count: Int(frame.length))
    }

    /// The device token inside an encoded frame of this ring's format.
    func token(inFrame frame: UnsafeRawBufferPointer) -> DeviceToken? {
        let offset = switch format {
        case .simple: 3  // 00 len:u16
        case .enhanced: 11  // 01 id:u32 expiry:u32 len:u16
        case .frame: 8  // 02 frameLength:u32 itemId:u8 itemLen:u16 (the encoder writes the token item first)
        }
        return try? DeviceToken(bytes: UnsafeRawBufferPointer(rebasing: frame[offset..<offset + DeviceToken.byteCount]))
    }
}
