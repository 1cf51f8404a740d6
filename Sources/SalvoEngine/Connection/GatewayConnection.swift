import SalvoIO
import SalvoWire
import Synchronization

/// What producers and a connection share: the staging ring new frames are encoded into,
/// and the store of notifications sent one at a time.
final class Lane: Sendable {
    let staging: StagingRing
    let retained: RetainedStore
    /// The sequence of the oldest notification in the connection's window (`.max`: none),
    /// published by the loop before the staging ring lets go of what it moves there, so
    /// that a checkpoint reading the ring first and then this misses nothing.
    let oldestSequenceInWindow = Atomic<UInt64>(.max)

    init(staging: StagingRing, retained: RetainedStore) {
        self.staging = staging
        self.retained = retained
    }
}

/// One socket of a slot, the active connection or the standby, as the event loop sees it.
final class Link: EventHandler {
    let stream: TLSStream
    fileprivate var registration: Registration?
    fileprivate var isHandshakeComplete = false
    /// Fails the attempt if the handshake is not complete by then.
    fileprivate var connectTimer: TimerID?
    private unowned let owner: GatewayConnection

    init(stream: TLSStream, owner: GatewayConnection) {
        self.stream = stream
        self.owner = owner
    }

    func handleEvents(_ events: IOEvents) { owner.handleEvents(events, on: self) }
}

/// One connection slot to the gateway, on its shard's thread (debug builds check): performs
/// what the `ConnectionMachine` decides with real sockets and timers, writes frames (rewound
/// ones read again from their sources first, then new ones from the staging ring), reads
/// error responses, and applies every settlement to the ledger, the events and the sources
/// in one place (`apply`).
final class GatewayConnection {
    let lane: Lane
    private unowned let shard: Shard
    let index: Int
    private var machine: ConnectionMachine<Link>
    /// The machine's window, held here too: the write path touches it for every frame.
    private let window: InFlightWindow
    /// The last closed connection's TLS session: the next connection (one per rejected
    /// notification) resumes it and skips the certificate work of a full handshake.
    private var session: TLSSession?
    private var rebuild: RebuildChunk
    private var sendBuffer: SendBufferLimit
    private var settleTimer: TimerID?
    private var settleDeadline: UInt64 = .max
    private var flushTimer: TimerID?
    private var stallTimer: TimerID?
    /// What the last stall check saw on the active connection: the bytes the gateway's TCP
    /// had acknowledged, and whether bytes were waiting for it.
    private var stallCheck: (acknowledged: UInt64?, waiting: Bool) = (nil, false)
    /// Error-response bytes read so far (the gateway's only message is 6 bytes).
    private var response = [UInt8](repeating: 0, count: ErrorResponse.byteCount)
    private var responseCount = 0
    private var ledger: DeliveryLedger { shard.ledger }

    init(shard: Shard, index: Int, lane: Lane) {
        self.shard = shard
        self.index = index
        self.lane = lane
        let configuration = shard.configuration
        window = InFlightWindow(maximumRunSpan: min(5_000_000, max(1, configuration.errorWait.nanosecondsClamped / 8)))
        machine = ConnectionMachine(
            window: window,
            dropPolicy: .init(atMostOnce: configuration.dropPolicy == .atMostOnce, retryBudget: configuration.retryBudget),
            usesStandby: configuration.usesStandbyConnections, maximumAttempts: configuration.connectAttempts,
            backoff: configuration.reconnectBackoff, seed: configuration.seed &+ UInt64(shard.index * 1000 + index))
        sendBuffer = SendBufferLimit(configured: configuration.socketSendBuffer)
        rebuild = RebuildChunk(capacity: Self.recordSize + shard.builder.encoder.encodedLength(
            payloadLength: configuration.maximumPayloadLength))
    }

    /// Whether there is anything to write.
    var hasWork: Bool { lane.staging.hasUnwritten || window.needsRebuild }

    // MARK: Writing

    /// The most one SSL_write takes: one full TLS record.
    static let recordSize = 16384
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
        if machine.hasGivenUp {
            failUnwritten(.gatewayUnreachable)
            return
        }
        guard let link = machine.openTransport else {
            // (A draining connection is waited for: what comes next goes on the next one.)
            if hasWork { perform(machine.start()) }
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
                                                        othersWaiting: { shard.hasWork(besides: self) }) {
                    // Back to the loop (it reads first), and again while the socket is writable.
                    setInterest(link, [.read, .write])
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
                    let now = shard.loop.now.nanoseconds
                    if isRebuilt {
                        rebuild.markWritten(count) { index, length in window.recordRebuilt(index: index, length: length, now: now) }
                    } else {
                        lane.staging.markWritten(count) { index, origin, length in
                            let wasEmpty = window.isEmpty
                            window.recordNew(index: index, origin: origin, length: length, now: now)
                            if wasEmpty { publishOldestSequence() }
                        }
                    }
                    ledger.noteWrite(at: now)
                    if let grown = sendBuffer.wrote(count) { stream.socket.setBufferSizes(send: grown, receive: nil) }
                    records += 1
                    shard.turns.recordWritten()
                case .wouldBlock(let progress):
                    setInterest(link, progress == .wantWrite ? [.read, .write] : .read)
                    armSettleTimer()
                    return
                }
            }
            setInterest(link, .read)
            armSettleTimer()
            finishWritingIfDone()
        } catch {
            // The gateway may have written an error response and closed before our write
            // failed: read what is there before deciding it was a silent drop.
            readResponse(link, ifClosed: "write failed: \(error)")
            if machine.openTransport === link { connectionLost(link, "write failed: \(error)", permanent: nil) }
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
                    try shard.replayer.read(run, items: run.skip + done..<run.skip + run.count, retained: lane.retained) {
                        notification throws(ReplayError) in
                        do {
                            try rebuild.append(notification, index: max(rebuild.nextIndex, run.first), builder: shard.builder)
                        } catch {
                            throw ReplayError(description: "it no longer encodes: \(error)")
                        }
                        budget -= 1
                        return !rebuild.isFull && budget > 0
                    }
                } catch {
                    if rebuild.hasPending { break }  // write what was read; the failure shows again next time
                    apply(window.failRun(from: max(run.first, rebuild.nextIndex), reason: .sourceUnreadable),
                          unreadable: "\(error)")
                    return nil
                }
            }
            if !rebuild.hasPending && budget > 0 { window.finishRebuild() }
        }
        return rebuild.pendingBytes
    }

    // MARK: Events

    func handleEvents(_ events: IOEvents, on link: Link) {
        shard.loop.assertInLoop()
        if !link.isHandshakeComplete {
            do {
                if events.contains(.write) { try link.stream.socket.finishConnect() }
                advanceHandshake(link)
            } catch {
                perform(machine.connectFailed(link, "\(error)", permanent: false))
            }
        } else if machine.activeTransport === link {
            if events.contains(.read) || events.contains(.hangup) { readResponse(link) }
            if machine.openTransport === link, events.contains(.write) { pump() }
        } else {
            watchStandby(link)
        }
    }

    private func advanceHandshake(_ link: Link) {
        do {
            switch try link.stream.handshake() {
            case .complete:
                link.isHandshakeComplete = true
                cancelConnectTimer(link)
                setInterest(link, .read)  // for a ready standby, only its end is news
                perform(machine.handshakeCompleted(link))
            case .wantRead: setInterest(link, .read)
            case .wantWrite: setInterest(link, .write)
            }
        } catch {
            perform(machine.connectFailed(link, "\(error)", permanent: isPermanent(error)))
        }
    }

    /// `link` became the active connection.
    private func activated(_ link: Link) {
        if machine.opened > 1 {
            ledger.reconnects.add(1, ordering: .relaxed)
            if link.stream.isResumed { ledger.resumedReconnects.add(1, ordering: .relaxed) }
        }
        // What the last connection had half written or read is void: the window rewound.
        rebuild.reset(nextIndex: window.written)
        responseCount = 0
        if let limit = sendBuffer.current { link.stream.socket.setBufferSizes(send: limit, receive: nil) }
        stallCheck = (nil, false)
        if stallTimer == nil {
            stallTimer = shard.loop.schedule(at: shard.loop.now + shard.configuration.stallTimeout, stallAction)
        }
        shard.emit(.connected(shard: shard.index, connection: index, resumed: link.stream.isResumed,
                              kernelTLS: link.stream.isKernelTLSSending))
        pump()
    }

    /// A ready standby said something: the gateway closed it (or speaks out of turn).
    private func watchStandby(_ link: Link) {
        var scratch = (UInt64(0), UInt64(0))
        let result = withUnsafeMutableBytes(of: &scratch) { buffer in Result { () throws(TLSError) in try link.stream.read(into: buffer) } }
        if case .success(.wouldBlock) = result { return }
        perform(machine.connectionLost(link, "the standby connection ended", permanentReason: nil))
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
                connectionLost(link, "\(error)", permanent: isPermanent(error) ? "\(error)" : nil)
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
                    perform(machine.errorResponse(errorResponse, now: shard.loop.now.nanoseconds, errorWait: ledger.errorWait))
                    return
                case .success(nil):
                    continue
                case .failure(let error):
                    // A gateway that speaks something else: handled as a drop.
                    connectionLost(link, "\(error)", permanent: nil)
                    return
                }
            case .wouldBlock:
                return
            case .closed(let clean):
                let closed = clean ? "closed" : "closed (no TLS close_notify)"
                if let closedReason {
                    connectionLost(link, closedReason, permanent: nil)
                } else if responseCount > 0 {
                    connectionLost(link, "the gateway \(closed) after \(responseCount) of the \(ErrorResponse.byteCount) bytes "
                                   + "of an error response", permanent: nil)
                } else {
                    // The end of a drain (the gateway's close_notify after ours), or a drop.
                    perform(machine.endOfStream(link, clean: clean,
                                                "connection \(closed) by the gateway without an error response"))
                    if hasWork { pump() }
                }
                return
            }
        }
    }

    private func connectionLost(_ link: Link, _ reason: String, permanent: String?) {
        perform(machine.connectionLost(link, reason, permanentReason: permanent))
    }

    // MARK: Actions

    private func perform(_ actions: [ConnectionMachine<Link>.Action]) {
        for action in actions {
            switch action {
            case .connect:
                startConnect(standby: false)
            case .connectStandby:
                startConnect(standby: true)
            case .close(let link, let reason, let how):
                close(link, reason: reason, how: how)
            case .reconnect(let delay):
                shard.loop.schedule(after: delay) { [weak self] in
                    guard let self, let action = self.machine.reconnectTimerFired() else { return }
                    self.perform([action])
                }
            case .openStandby(let delay):
                shard.loop.schedule(after: delay) { [weak self] in
                    guard let self, let action = self.machine.standbyTimerFired() else { return }
                    self.perform([action])
                }
            case .activated(let link):
                activated(link)
            case .finishWriting(let link):
                link.stream.shutdown(notifyingPeer: true)
                link.stream.socket.shutdownWrite()
            case .settle(let settlement):
                apply(settlement)
            case .giveUp(let reason):
                shard.emit(.unreachable(reason: reason))
                failUnwritten(.gatewayUnreachable)
            }
        }
    }

    private func startConnect(standby: Bool) {
        let configuration = shard.configuration
        let link: Link
        do {
            let address = try shard.nextAddress()
            // Resume the session kept when the last connection closed, once (TLS 1.3 tickets
            // are single-use); lacking one, the active connection's (TLS 1.2 has it at once;
            // a TLS 1.3 server sends its ticket after the handshake).
            let resuming = session ?? machine.activeTransport?.stream.resumableSession
            session = nil
            let (socket, connected) = try Socket.startConnect(to: address)
            if let size = configuration.socketSendBuffer { socket.setBufferSizes(send: size, receive: nil) }
            link = Link(stream: try TLSStream(context: shard.tlsContext, socket: socket,
                                              serverName: configuration.serverName ?? configuration.host, resuming: resuming),
                        owner: self)
            if standby { machine.standbyStarted(link) } else { machine.connectStarted(link) }
            armConnectTimer(link)
            if connected {
                advanceHandshake(link)
                return
            }
        } catch {
            perform(standby ? machine.standbyCouldNotStart("\(error)")
                            : machine.connectFailed(nil, "\(error)", permanent: isPermanent(error)))
            return
        }
        do {
            link.registration = try shard.loop.register(link.stream.socket.fd, interest: .write, handler: link)
        } catch {
            perform(machine.connectFailed(link, "\(error)", permanent: false))
        }
    }

    private func close(_ link: Link, reason: String, how: ConnectionMachine<Link>.Closing) {
        if let registration = link.registration { shard.loop.deregister(registration) }
        link.registration = nil
        cancelConnectTimer(link)
        guard how != .unopened else {
            shard.emit(.connectionFailed(shard: shard.index, connection: index, reason: reason))
            return
        }
        // Shut down before taking the session: OpenSSL marks the session of a connection
        // freed otherwise as not resumable. A gateway that answered an error has closed its
        // side already: a close_notify would only cost a write and wake it.
        link.stream.shutdown(notifyingPeer: how == .withCloseNotify)
        session = link.stream.resumableSession ?? session
        shard.emit(.disconnected(shard: shard.index, connection: index, reason: reason))
    }

    /// Drains the open connection once it has nothing more to write, nothing more will come
    /// (every source was read to its end, or the sender is finishing) and what it wrote is
    /// past its error wait: see `ConnectionMachine.finishWriting`.
    func finishWritingIfDone() {
        shard.loop.assertInLoop()
        // The window first: false at the end of nearly every pump, and the registry locks.
        guard !hasWork, !window.isEmpty, window.isAllPresumed,
              shard.isFinishing || shard.sources.areAllExhausted else { return }
        perform(machine.finishWriting())
    }

    /// Fails the attempt on `link` if it is still connecting after `connectTimeout`.
    private func armConnectTimer(_ link: Link) {
        let timeout = shard.configuration.connectTimeout
        link.connectTimer = shard.loop.schedule(after: timeout) { [weak self, weak link] in
            guard let self, let link else { return }
            link.connectTimer = nil
            guard machine.isConnecting(link) else { return }
            perform(machine.connectFailed(link, "TCP connect and TLS handshake not complete after \(timeout)", permanent: false))
        }
    }

    private func cancelConnectTimer(_ link: Link) {
        if let timer = link.connectTimer { shard.loop.cancel(timer) }
        link.connectTimer = nil
    }

    /// Certificate, trust and protocol mismatches do not heal by retrying (`TLSError.Cause`).
    private func isPermanent(_ error: any Error) -> Bool {
        guard let tls = error as? TLSError else { return false }
        return tls.cause.isPermanent
    }

    private func setInterest(_ link: Link, _ interest: IOEvents) {
        guard let registration = link.registration else { return }
        try? shard.loop.setInterest(registration, interest)
    }

    /// Fails what waits in the staging ring and refuses more: the slot gave up, or the
    /// sender is cancelling.
    func failUnwritten(_ reason: FailureReason) {
        shard.loop.assertInLoop()
        var settlement = Settlement()
        var failed = 0
        lane.staging.refuseAndTakeUnwritten { _, origin, frame in
            ledger.noteFailed(sequence: origin.position.sequence)
            settlement.noteFinal(source: origin.source, position: origin.position, count: 1)
            failed += 1
            if let token = shard.builder.token(inFrame: frame) {
                shard.emit(.failed(token: token, reason: reason, sequence: origin.position.sequence))
            }
        }
        guard failed > 0 else { return }
        window.skipNew(to: lane.staging.written)
        ledger.recordFailed(reason, count: failed)
        apply(settlement)
    }

    /// Fails everything not final (the sender gave up waiting).
    func cancel() {
        perform(machine.cancel())
        failUnwritten(.cancelled)
    }

    // MARK: Settling

    /// Applies what the window decided: the one place where notifications become final
    /// for the ledger, the events, the sources and the retained store.
    private func apply(_ settlement: Settlement, unreadable: String? = nil) {
        if settlement.accepted > 0 { ledger.accepted.add(settlement.accepted, ordering: .relaxed) }
        if let rejection = settlement.rejection {
            ledger.recordRejected(rejection.status)
            if let (token, sequence) = try? shard.replayer.name(rejection.run, item: rejection.item, retained: lane.retained) {
                shard.reportRejection(token: token, status: rejection.status, sequence: sequence)
            }
        }
        for (run, reason) in settlement.failures {
            ledger.recordFailed(reason, count: run.count)
            if let unreadable {
                ledger.noteFailed(sequence: run.position.sequence)
                shard.emit(.failedUnnamed(count: run.count, reason: reason, firstSequence: run.position.sequence,
                                          detail: unreadable))
            } else {
                reportFailures(of: run, reason: reason)
            }
        }
        if settlement.resent > 0 { ledger.resent.add(settlement.resent, ordering: .relaxed) }
        if settlement.possibleDuplicates > 0 { ledger.possibleDuplicates.add(settlement.possibleDuplicates, ordering: .relaxed) }
        if settlement.isBeyondWindow {
            ledger.windowOverruns.add(1, ordering: .relaxed)
            if settlement.acceptedToUnknown > 0 {
                ledger.reclassifyAcceptedAsUnknown(settlement.acceptedToUnknown)
                shard.emit(.failedUnnamed(
                    count: settlement.acceptedToUnknown, reason: .deliveryUnknown, firstSequence: nil,
                    detail: "an error response named a notification written before every record kept; the "
                        + "notifications between it and the oldest record were released as accepted too early"))
            }
        }
        if settlement.errorLatency != nil || settlement.isBeyondWindow,
           let raise = ledger.recordErrorResponse(latency: settlement.errorLatency, isLate: settlement.isLateError) {
            shard.emit(.errorWaitRaised(raise))
        }
        publishOldestSequence()
        let finalsAwaited = shard.sources.noteFinals(settlement.finals)
        if let end = settlement.retainedFinalEnd { lane.retained.release(before: end) }
        // Whoever waits (for staging or retained space, or for the last finals of a source)
        // is woken when it can get on; a producer waiting for staging space while the ring
        // is still full would only go back to sleep.
        if finalsAwaited || lane.staging.hasRoomForProducers || settlement.retainedFinalEnd != nil {
            shard.notifyProgress()
        }
    }

    private func publishOldestSequence() {
        lane.oldestSequenceInWindow.store(window.oldestSequence ?? .max, ordering: .releasing)
    }

    /// One failure event per notification of `run`, named by reading it again; the first
    /// one's sequence holds back the checkpoint.
    private func reportFailures(of run: Run, reason: FailureReason) {
        var named = 0
        do {
            try shard.replayer.read(run, items: run.skip..<run.skip + run.count, retained: lane.retained) { notification in
                if named == 0 { ledger.noteFailed(sequence: notification.position.sequence) }
                shard.emit(.failed(token: notification.token, reason: reason, sequence: notification.position.sequence))
                named += 1
                return true
            }
        } catch {
            if named == 0 { ledger.noteFailed(sequence: run.position.sequence) }
            shard.emit(.failedUnnamed(count: run.count - named, reason: reason, firstSequence: run.position.sequence,
                                      detail: "\(error)"))
        }
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
    private lazy var stallAction = TimerAction { [unowned self] in self.stallTimerFired() }

    /// Every `stallTimeout` while a connection is open: when bytes waited for the gateway
    /// at the last check and still do, and its TCP acknowledged none of them since, the
    /// gateway has stopped taking them, and the connection is dropped.
    private func stallTimerFired() {
        stallTimer = nil
        guard let link = machine.activeTransport else { return }  // the next connection to open checks again
        let socket = link.stream.socket
        let waiting = socket.unacknowledgedBytes
        let acknowledged = socket.acknowledgedBytes
        let timeout = shard.configuration.stallTimeout
        if waiting > 0, stallCheck.waiting, let acknowledged, acknowledged == stallCheck.acknowledged {
            perform(machine.connectionLost(link, "the gateway took no bytes for \(timeout) (\(waiting) waiting)",
                                           permanentReason: nil, stalled: true))
            return
        }
        stallCheck = (acknowledged, waiting > 0)
        stallTimer = shard.loop.schedule(at: shard.loop.now + timeout, stallAction)
    }

    private func settleTimerFired() {
        settleTimer = nil
        settleDeadline = .max
        let now = shard.loop.now.nanoseconds
        if let link = machine.activeTransport {
            window.holdUnacknowledged(link.stream.socket.unacknowledgedBytes, now: now)
        }
        let settlement = window.settle(now: now, policy: settlePolicy())
        if !settlement.isEmpty { apply(settlement) }
        perform(machine.drainOutlived())
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
    var isFull: Bool { count >= GatewayConnection.recordSize }
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
