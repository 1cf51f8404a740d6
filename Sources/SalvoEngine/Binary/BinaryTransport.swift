import SalvoIO
import SalvoWire
import Synchronization

/// The binary protocol as a connection's transport, on its shard's thread: writes frames
/// (rewound ones read again from their sources first, then new ones from the staging ring),
/// reads error responses, settles by the error wait and drains at the end. The connection's
/// sockets themselves (connect, standby, close, stalls) and the settling's effects are its
/// `Connection`'s.
final class BinaryTransport: ConnectionTransport {
    // Not counted: the connection owns its transport and sets this (`Connection.init`).
    unowned(unsafe) var connection: Connection<BinaryTransport>!
    let window: InFlightWindow
    private let frames: FrameBuilder
    private var rebuild: RebuildChunk
    private var sendBuffer: SendBufferLimit
    private var settleTimer: TimerID?
    private var settleDeadline: UInt64 = .max
    private var flushTimer: TimerID?
    /// Error-response bytes read so far (the gateway's only message is 6 bytes).
    private var response = [UInt8](repeating: 0, count: ErrorResponse.byteCount)
    private var responseCount = 0

    init(configuration: SenderConfiguration, frames: FrameBuilder, shard: Shard, lane: Lane) {
        self.shard = shard
        self.lane = lane
        self.frames = frames
        sendBuffer = SendBufferLimit(configured: configuration.socketSendBuffer)
        rebuild = RebuildChunk(capacity: Self.recordSize + frames.encoder.encodedLength(
            payloadLength: configuration.maximumPayloadLength))
        window = InFlightWindow(maximumRunSpan: min(5_000_000, max(1, configuration.errorWait.nanosecondsClamped / 8)))
    }

    // Its connection's shard and lane, which outlive it, held here rather than read through
    // the connection: unowned(unsafe), these reads on the hot path cost no reference counting.
    private unowned(unsafe) let shard: Shard
    private unowned(unsafe) let lane: Lane
    private var ledger: DeliveryLedger { shard.ledger }

    /// Whether there is anything to write.
    var hasWork: Bool { lane.staging.hasUnwritten || window.needsRebuild }

    // MARK: Writing

    /// The most one SSL_write takes: one full TLS record.
    static let recordSize = TLSStream.recordPayloadLimit
    /// How long a partial record may wait for more frames.
    private static let coalescingDelay: Duration = .milliseconds(1)

    /// New frames were published, or rewound ones wait: connect if needed, then write.
    ///
    /// Writes go out in full 16 KiB records while frames keep coming; a partial record
    /// waits up to `coalescingDelay` for more (or goes at once with `flush`). Each record
    /// costs a fixed amount of work (and, in OpenSSL 3.0, a few allocations), so full
    /// records are what keeps the cost per notification low.
    func pump(flush: Bool = false) {
        shard.loop.assertInLoop()
        if let failing = connection.machine.givenUpFailure {
            connection.failUnwritten(failing)
            return
        }
        guard let link = connection.machine.openTransport else {
            // (A draining connection is waited for: what comes next goes on the next one.)
            if hasWork { connection.perform(connection.machine.start()) }
            return
        }
        let stream = link.stream
        var records = 0
        // Written frames free staging space: wake producers waiting for it once there is
        // room for a few records (see `hasRoomForProducers`).
        defer { if records > 0 && lane.staging.hasRoomForProducers { shard.notifyProgress() } }
        do {
            while true {
                if records > 0 && shard.turns.turnEnds(after: records, gatewaySpoke: { link.stream.socket.isReadable },
                                                        othersWaiting: { shard.hasWork(besides: connection) }) {
                    // Back to the loop (it reads first), and again while the socket is writable.
                    connection.setInterest(link, [.read, .write])
                    armSettleTimer()
                    return
                }
                // Held back by the in-flight limit: settling calls pump again.
                if !rebuild.hasPending && window.writeBudget == 0 { break }
                let slice: UnsafeRawBufferPointer
                let isRebuilt = rebuild.hasPending || window.needsRebuild
                if isRebuilt {
                    guard let next = rebuildSlice() else { continue }
                    slice = next
                } else {
                    // A full window takes nothing new: settling makes room.
                    if window.isFull { break }
                    // A partial record waits (at most `coalescingDelay`) for more frames.
                    if !flush && lane.staging.unwrittenBytes < Self.recordSize && lane.staging.hasUnwritten {
                        if flushTimer == nil { flushTimer = shard.loop.schedule(at: shard.loop.now + Self.coalescingDelay, flushAction) }
                        break
                    }
                    guard let next = lane.staging.nextSlice(limit: Self.recordSize, frames: window.writeBudget) else {
                        if lane.staging.loopWentIdle() { break }
                        continue
                    }
                    slice = next
                }
                switch try stream.write(slice) {
                case .wrote(let count):
                    ledger.instruments.writeBatch.record(count)
                    let now = shard.loop.now.nanoseconds
                    if isRebuilt {
                        rebuild.markWritten(count) { index, length in window.recordRebuilt(index: index, length: length, now: now) }
                    } else {
                        lane.staging.markWritten(count) { index, origin, length in
                            let wasEmpty = window.isEmpty
                            window.recordNew(index: index, origin: origin, length: length, now: now)
                            if wasEmpty { connection.publishOldestSequence() }
                        }
                    }
                    ledger.noteWrite(at: now)
                    if let grown = sendBuffer.wrote(count) { stream.socket.setBufferSizes(send: grown, receive: nil) }
                    records += 1
                    shard.turns.recordWritten()
                case .wouldBlock(let progress):
                    connection.setInterest(link, progress == .wantWrite ? [.read, .write] : .read)
                    armSettleTimer()
                    return
                }
            }
            connection.setInterest(link, .read)
            armSettleTimer()
            finishWritingIfDone()
        } catch {
            // The gateway may have written an error response and closed before our write
            // failed: read what is there before deciding it was a silent drop.
            readResponse(link, ifClosed: "write failed: \(error)")
            if connection.machine.openTransport === link { connection.connectionLost(link, "write failed: \(error)", permanent: nil) }
        }
    }

    /// The pending rebuilt bytes, refilled from the sources when empty; nil when there is
    /// nothing (more) to rebuild, or a run could not be read (it failed; look again).
    private func rebuildSlice() -> UnsafeRawBufferPointer? {
        if !rebuild.hasPending {
            rebuild.reset(nextIndex: window.written)
            var budget = window.writeBudget
            while !rebuild.isFull, budget > 0, let (run, done) = window.rebuildRun(atOrAfter: rebuild.nextIndex) {
                do {
                    try shard.replayer.read(run.sourceRun, items: run.skip + done..<run.skip + run.count, retained: lane.retained) {
                        notification throws(ReplayError) in
                        do {
                            try rebuild.append(notification, index: max(rebuild.nextIndex, run.first), builder: frames)
                        } catch {
                            throw ReplayError(description: "it no longer encodes: \(error)")
                        }
                        budget -= 1
                        return !rebuild.isFull && budget > 0
                    }
                } catch {
                    if rebuild.hasPending { break }  // write what was read; the failure shows again next time
                    connection.apply(window.failRun(from: max(run.first, rebuild.nextIndex), reason: .sourceUnreadable),
                          unreadable: "\(error)")
                    return nil
                }
            }
            if !rebuild.hasPending && budget > 0 { window.finishRebuild() }
        }
        return rebuild.pendingBytes
    }

    // MARK: Events

    func linkEvents(_ events: IOEvents, on link: Link) {
        if events.contains(.read) || events.contains(.hangup) { readResponse(link) }
        if connection.machine.openTransport === link, events.contains(.write) { pump() }
    }

    func handshakeProblem(_ link: Link) -> String? { nil }

    func willClose(_ link: Link, notifying: Bool) {}

    /// The new connection starts with a clean slate: what the last one had half written or
    /// read is void (the window rewound).
    func didActivate(_ link: Link) {
        rebuild.reset(nextIndex: window.written)
        responseCount = 0
        if let limit = sendBuffer.current { link.stream.socket.setBufferSizes(send: limit, receive: nil) }
    }

    /// Reads whatever the gateway sent: an error response, or the end of the stream.
    /// `closedReason` is why the connection ended if it turns out closed (a failed write
    /// says more than the read after it).
    private func readResponse(_ link: Link, ifClosed closedReason: String? = nil) {
        while true {
            let result: TLSReadResult
            do {
                result = try response.withUnsafeMutableBytes { buffer in
                    try link.stream.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[responseCount...]))
                }
            } catch {
                connection.connectionLost(link, "\(error)", permanent: connection.isPermanent(error) ? "\(error)" : nil)
                return
            }
            switch result {
            case .bytes(let count):
                responseCount += count
                let decoded = response.withUnsafeBytes { buffer in
                    Result { () throws(ErrorResponseDecodingError) in
                        try ErrorResponse.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<responseCount]))
                    }
                }
                switch decoded {
                case .success(let errorResponse?):
                    shard.turns.errorResponseArrived()
                    _ = sendBuffer.errorResponse()
                    let (actions, evidence) = connection.machine.errorResponse(
                        errorResponse, now: shard.loop.now.nanoseconds, errorWait: ledger.errorWait)
                    connection.perform(actions)
                    if let evidence { apply(evidence) }
                    return
                case .success(nil):
                    continue
                case .failure(let error):
                    // A gateway that speaks something else: handled as a drop, or given up
                    // on when it speaks HTTP/2 (no connection will do better).
                    connection.connectionLost(link, "\(error)", permanent: error.isPermanent ? "\(error)" : nil)
                    return
                }
            case .wouldBlock:
                return
            case .closed(let clean):
                let closed = clean ? "closed" : "closed (no TLS close_notify)"
                if let closedReason {
                    connection.connectionLost(link, closedReason, permanent: nil)
                } else if responseCount > 0 {
                    connection.connectionLost(link, "the gateway \(closed) after \(responseCount) of the \(ErrorResponse.byteCount) bytes "
                                   + "of an error response", permanent: nil)
                } else {
                    // The end of a drain (the gateway's close_notify after ours), or a drop.
                    connection.perform(connection.machine.endOfStream(link, clean: clean,
                                                "connection \(closed) by the gateway without an error response"))
                    if hasWork { pump() }
                }
                return
            }
        }
    }

    /// What an error response showed about the error wait: its latency (and a raised wait
    /// when it came late), or notifications released as accepted too early.
    private func apply(_ evidence: ErrorResponseEvidence) {
        if evidence.isBeyondWindow {
            ledger.windowOverruns.add(1, ordering: .relaxed)
            if evidence.acceptedToUnknown > 0 {
                ledger.reclassifyAcceptedAsUnknown(evidence.acceptedToUnknown)
                shard.emit(.failedUnnamed(
                    count: evidence.acceptedToUnknown, reason: .deliveryUnknown, firstSequence: nil,
                    detail: "an error response named a notification written before every record kept; the "
                        + "notifications between it and the oldest record were released as accepted too early"))
            }
        }
        if evidence.latency != nil || evidence.isBeyondWindow,
           let raise = ledger.recordErrorResponse(latency: evidence.latency, isLate: evidence.isLate) {
            shard.emit(.errorWaitRaised(raise))
        }
    }

    func finishWriting(on link: Link) {
        link.stream.shutdown(notifyingPeer: true)
        link.stream.socket.shutdownWrite()
    }

    /// Drains the open connection once it has nothing more to write, nothing more will come
    /// (every source was read to its end, or the sender is finishing) and what it wrote is
    /// past its error wait: see `ConnectionMachine.finishWriting`.
    func finishWritingIfDone() {
        shard.loop.assertInLoop()
        // The window first: false at the end of nearly every pump, and the registry locks.
        guard !hasWork, !window.isEmpty, window.isAllPresumed,
              shard.isFinishing || shard.sources.areAllExhausted else { return }
        connection.perform(connection.machine.finishWriting())
    }

    private func settlePolicy() -> SettlePolicy {
        let retained = lane.retained
        return SettlePolicy(
            errorWait: ledger.errorWait, retention: ledger.retention,
            isUrgent: { $0 == RetainedStore.sourceID && retained.isUnderPressure.load(ordering: .relaxed) })
    }

    /// Arms the settle timer for the next time the window has something to settle,
    /// unless one is armed for earlier. With `again`, re-derives the deadline (urgency or
    /// the error wait changed).
    func armSettleTimer(again: Bool = false) {
        shard.loop.assertInLoop()
        if again, let settleTimer {
            shard.loop.cancel(settleTimer)
            self.settleTimer = nil
            settleDeadline = .max
        }
        guard let due = window.nextSettleTime(policy: settlePolicy()) else { return }
        // Settling a little late lets one timer settle a large batch: fewer wake-ups for
        // the loop and for producers waiting on backpressure.
        let deadline = due &+ max(1_000_000, ledger.errorWait / 8)
        guard deadline < settleDeadline else { return }
        if let settleTimer { shard.loop.cancel(settleTimer) }
        settleDeadline = deadline
        settleTimer = shard.loop.schedule(at: Instant(nanoseconds: deadline), settleAction)
    }

    /// Made once: scheduling them allocates nothing on the hot path.
    private lazy var flushAction = TimerAction { [unowned self] in
        self.flushTimer = nil
        self.pump(flush: true)
    }
    private lazy var settleAction = TimerAction { [unowned self] in self.settleTimerFired() }

    private func settleTimerFired() {
        settleTimer = nil
        settleDeadline = .max
        let now = shard.loop.now.nanoseconds
        if let link = connection.machine.activeTransport {
            window.holdUnacknowledged(link.stream.socket.unacknowledgedBytes, now: now)
        }
        let settlement = window.settle(now: now, policy: settlePolicy())
        if !settlement.isEmpty { connection.apply(settlement) }
        connection.perform(connection.machine.drainOutlived())
        armSettleTimer()
        if hasWork { pump() } else { finishWritingIfDone() }
    }
}

/// Rewound notifications encoded again, waiting to be written: about one TLS record's
/// worth, kept until `SSL_write` has taken all of it (a retried write gets the same bytes).
struct RebuildChunk: ~Copyable {
    private let bytes: UnsafeMutableRawBufferPointer
    /// Lane index and end offset of each frame.
    private var frames: [(index: UInt64, end: Int)] = []
    private var count = 0
    private var writtenBytes = 0
    private var writtenFrames = 0
    /// The index the next rebuilt frame gets (after holes, the run's).
    private(set) var nextIndex: UInt64 = 0

    init(capacity: Int) {
        bytes = .allocate(byteCount: capacity, alignment: 16)
        frames.reserveCapacity(capacity / 64)
    }

    deinit { bytes.deallocate() }

    var hasPending: Bool { writtenBytes < count }
    var isFull: Bool { count >= BinaryTransport.recordSize }
    var pendingBytes: UnsafeRawBufferPointer? {
        hasPending ? UnsafeRawBufferPointer(rebasing: bytes[writtenBytes..<count]) : nil
    }

    mutating func reset(nextIndex: UInt64) {
        frames.removeAll(keepingCapacity: true)
        count = 0
        writtenBytes = 0
        writtenFrames = 0
        self.nextIndex = nextIndex
    }

    mutating func append(_ notification: SourceNotification, index: UInt64, builder: FrameBuilder) throws(FrameEncodingError) {
        let length = builder.length(of: notification)
        precondition(count + length <= bytes.count, "a rebuild chunk holds a record and one frame more")
        try builder.encode(notification, identifier: StagingRing.identifier(ofIndex: index),
                           into: UnsafeMutableRawBufferPointer(rebasing: bytes[count..<count + length]))
        count += length
        frames.append((index, count))
        nextIndex = index + 1
    }

    /// SSL_write took `written` more bytes: reports each frame now completely written.
    mutating func markWritten(_ written: Int, _ frameWritten: (UInt64, Int) -> Void) {
        writtenBytes += written
        while writtenFrames < frames.count, frames[writtenFrames].end <= writtenBytes {
            let start = writtenFrames == 0 ? 0 : frames[writtenFrames - 1].end
            frameWritten(frames[writtenFrames].index, frames[writtenFrames].end - start)
            writtenFrames += 1
        }
    }
}
