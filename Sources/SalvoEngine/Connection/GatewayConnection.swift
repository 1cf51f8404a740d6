import SalvoIO
import SalvoWire

/// One connection slot to the gateway: a `SendRing` that outlives the TLS connections
/// carrying it, the lifecycle state machine, and the glue that performs its actions on
/// the shard's event loop. Lives on its shard's thread only.
final class GatewayConnection: EventHandler, SettlementSink {
    let ring: SendRing
    private unowned let shard: Shard
    let index: Int
    private var lifecycle: ConnectionLifecycle
    private var phase: Phase = .idle
    private var registration: Registration?
    /// The last connection's TLS session: reconnecting after an error response (one per
    /// rejected notification) then skips the certificate work of a full handshake.
    private var session: TLSSession?
    private var settleTimer: TimerID?
    private var settleDeadline: UInt64 = .max
    /// Error-response bytes read so far (the gateway's only message is 6 bytes).
    private var response = [UInt8](repeating: 0, count: 64)
    private var responseCount = 0
    private var ledger: DeliveryLedger { shard.ledger }
    private var configuration: SenderConfiguration { shard.configuration }
    private let errorWait: UInt64
    private let settleSlack: UInt64

    private enum Phase {
        case idle
        case connecting(Socket)
        case handshaking(TLSStream)
        case open(TLSStream)
        case closed
    }

    init(shard: Shard, index: Int, ring: SendRing) {
        self.shard = shard
        self.index = index
        self.ring = ring
        errorWait = shard.configuration.errorWait.nanosecondsClamped
        settleSlack = max(1_000_000, errorWait / 8)
        lifecycle = ConnectionLifecycle(
            maximumAttempts: shard.configuration.connectAttempts, backoff: shard.configuration.reconnectBackoff,
            seed: shard.configuration.seed &+ UInt64(shard.index * 1000 + index))
    }

    /// Whether this slot gave up on the gateway.
    var hasGivenUp: Bool {
        if case .gaveUp = lifecycle.state { return true }
        return false
    }

    // MARK: Driving

    /// The most one SSL_write takes: one full TLS record.
    private static let recordSize = 16384
    /// Records written per turn before the loop looks for an error response again: a
    /// gateway that drains and discards after an error would otherwise let one turn write
    /// the whole ring, all of it to be resent.
    private static let recordsPerTurn = 8
    /// How long a partial record may wait for more frames.
    private static let coalescingDelay: Duration = .milliseconds(1)

    /// New frames were published (or the sender started): connect if needed, then write.
    ///
    /// Writes go out in full 16 KiB records while frames keep coming; a partial record
    /// waits up to `coalescingDelay` for more (or goes at once with `flush`). Each record
    /// costs a fixed amount of work (and, in OpenSSL 3.0, a few allocations), so full
    /// records are what keeps the cost per notification low.
    func pump(flush: Bool = false) {
        if hasGivenUp {
            _ = ring.failAllUnsettled(reason: .gatewayUnreachable, sink: self)
            return
        }
        guard case .open(let stream) = phase else {
            if ring.hasUnwritten, let action = lifecycle.start() { perform(action) }
            return
        }
        do {
            var records = 0
            while true {
                if records == Self.recordsPerTurn {
                    // Yield to the loop (reads first), and come back while the socket is writable.
                    setInterest([.read, .write])
                    armSettleTimer()
                    return
                }
                // A partial record waits (at most `coalescingDelay`) for more frames.
                if !flush && ring.unwrittenBytes < Self.recordSize && ring.hasUnwritten {
                    if flushTimer == nil { flushTimer = shard.loop.schedule(at: shard.loop.now + Self.coalescingDelay, flushAction) }
                    break
                }
                guard let slice = ring.nextSlice(limit: Self.recordSize) else {
                    // Held back by the in-flight limit: settling calls pump again.
                    if ring.hasUnwritten { break }
                    if ring.loopWentIdle() { break }
                    continue
                }
                switch try stream.write(slice) {
                case .wrote(let count):
                    ring.markWritten(count, now: shard.loop.now.nanoseconds)
                    records += 1
                case .wouldBlock(let progress):
                    setInterest(progress == .wantWrite ? [.read, .write] : .read)
                    armSettleTimer()
                    return
                }
            }
            setInterest(.read)
            armSettleTimer()
        } catch {
            // The gateway may have written an error response and closed before our write
            // failed: read what is there before deciding it was a silent drop.
            readResponse(stream)
            if case .open = phase { connectionEnded(reason: "write failed: \(error)", permanent: nil) }
        }
    }

    func handleEvents(_ events: IOEvents) {
        switch phase {
        case .connecting(let socket):
            do {
                try socket.finishConnect()
                let stream = try TLSStream(context: shard.tlsContext, socket: socket,
                                           serverName: configuration.serverName ?? configuration.host, resuming: session)
                phase = .handshaking(stream)
                advanceHandshake(stream)
            } catch {
                connectFailed("\(error)", permanent: isPermanent(error))
            }
        case .handshaking(let stream):
            advanceHandshake(stream)
        case .open(let stream):
            if events.contains(.read) || events.contains(.hangup) { readResponse(stream) }
            if case .open = phase, events.contains(.write) { pump() }
        case .idle, .closed:
            break
        }
    }

    private func perform(_ action: ConnectionLifecycle.Action) {
        switch action {
        case .connect:
            startConnect()
        case .reconnect(let delay):
            shard.loop.schedule(after: delay) { [weak self] in
                guard let self, let action = self.lifecycle.reconnectTimerFired() else { return }
                self.perform(action)
            }
        case .giveUp(let reason):
            shard.emit(.unreachable(reason: reason))
            _ = ring.failAllUnsettled(reason: .gatewayUnreachable, sink: self)
            shard.notifyProgress()
        }
    }

    private func startConnect() {
        do {
            let address = try shard.nextAddress()
            let (socket, connected) = try Socket.startConnect(to: address)
            if let size = configuration.socketSendBuffer { socket.setBufferSizes(send: size, receive: nil) }
            phase = .connecting(socket)
            registration = try shard.loop.register(socket.fd, interest: .write, handler: self)
            if connected { handleEvents(.write) }
        } catch {
            phase = .idle
            connectFailed("\(error)", permanent: false)
        }
    }

    private func advanceHandshake(_ stream: TLSStream) {
        do {
            switch try stream.handshake() {
            case .complete:
                lifecycle.established()
                if lifecycle.opened > 1 { ledger.reconnects.add(1, ordering: .relaxed) }
                phase = .open(stream)
                responseCount = 0
                shard.emit(.connected(shard: shard.index, connection: index, resumed: stream.isResumed, kernelTLS: stream.isKernelTLSSending))
                pump()
            case .wantRead: setInterest(.read)
            case .wantWrite: setInterest(.write)
            }
        } catch {
            connectFailed("\(error)", permanent: isPermanent(error))
        }
    }

    /// Reads whatever the gateway sent: an error response, or the end of the stream.
    private func readResponse(_ stream: TLSStream) {
        while true {
            let result: TLSReadResult
            do {
                result = try response.withUnsafeMutableBytes { buffer in
                    try stream.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[responseCount...]))
                }
            } catch {
                connectionEnded(reason: "\(error)", permanent: isPermanent(error) ? "\(error)" : nil)
                return
            }
            switch result {
            case .bytes(let count):
                responseCount += count
                if responseCount >= ErrorResponse.byteCount || responseCount == response.count {
                    handleErrorResponse()
                    return
                }
            case .wouldBlock:
                return
            case .closed:
                connectionEnded(reason: "connection closed by the gateway without an error response", permanent: nil)
                return
            }
        }
    }

    private func handleErrorResponse() {
        let decoded = response.withUnsafeBytes { try? ErrorResponse.decode(UnsafeRawBufferPointer(rebasing: $0[0..<responseCount])) }
        guard let errorResponse = decoded else {
            // Not an error response: a gateway that speaks something else. Treat as a drop.
            connectionEnded(reason: "unexpected bytes from the gateway", permanent: nil)
            return
        }
        let outcome = ring.applyErrorResponse(
            errorResponse, dropBudget: configuration.retryBudget, atMostOnce: configuration.dropPolicy == .atMostOnce, sink: self)
        switch outcome {
        case .applied(let resent):
            ledger.resent.add(resent, ordering: .relaxed)
        case .windowOverrun(let resent, _):
            ledger.windowOverruns.add(1, ordering: .relaxed)
            ledger.resent.add(resent, ordering: .relaxed)
            ledger.possibleDuplicates.add(resent, ordering: .relaxed)
        }
        close(reason: "error response: \(errorResponse.status.name) for #\(errorResponse.identifier)")
        perform(lifecycle.closed(afterErrorResponse: true))
        shard.notifyProgress()
    }

    /// The connection ended without an error response.
    private func connectionEnded(reason: String, permanent: String?) {
        let (resent, _) = ring.handleDrop(
            dropBudget: configuration.retryBudget, atMostOnce: configuration.dropPolicy == .atMostOnce, sink: self)
        ledger.resent.add(resent, ordering: .relaxed)
        ledger.possibleDuplicates.add(resent, ordering: .relaxed)
        close(reason: reason)
        perform(lifecycle.closed(afterErrorResponse: false, permanentReason: permanent))
        shard.notifyProgress()
    }

    private func connectFailed(_ reason: String, permanent: Bool) {
        close(reason: reason)
        shard.emit(.connectionFailed(shard: shard.index, connection: index, reason: reason))
        perform(lifecycle.connectFailed(reason, permanent: permanent))
    }

    private func close(reason: String) {
        if let registration { shard.loop.deregister(registration) }
        registration = nil
        switch phase {
        case .open(let stream):
            // close_notify first: OpenSSL marks the session of a connection freed without
            // it as not resumable.
            stream.shutdown()
            session = stream.resumableSession ?? session
            shard.emit(.disconnected(shard: shard.index, connection: index, reason: reason))
        case .handshaking, .connecting, .idle, .closed:
            break
        }
        phase = .closed
    }

    /// Certificate problems do not heal by retrying.
    private func isPermanent(_ error: any Error) -> Bool {
        guard let tls = error as? TLSError else { return false }
        let reason = tls.reason
        return tls.stage == .configuration || reason.contains("certificate")
    }

    private func setInterest(_ interest: IOEvents) {
        guard let registration else { return }
        try? shard.loop.setInterest(registration, interest)
    }

    // MARK: Settling

    private func armSettleTimer() {
        // Settling a little late lets one timer settle a large batch: fewer wake-ups for
        // the loop and for producers waiting on backpressure.
        guard let due = ring.nextSettleTime(errorWait: errorWait) else { return }
        let deadline = due + settleSlack
        guard deadline < settleDeadline else { return }
        if let settleTimer { shard.loop.cancel(settleTimer) }
        settleDeadline = deadline
        settleTimer = shard.loop.schedule(at: Instant(nanoseconds: deadline), settleCallback)
    }

    private var flushTimer: TimerID?
    private lazy var flushAction = TimerAction { [unowned self] in
        self.flushTimer = nil
        self.pump(flush: true)
    }

    /// Made once: scheduling it allocates nothing on the hot path.
    private lazy var settleCallback = TimerAction { [unowned self] in self.settleTimerFired() }

    private func settleTimerFired() {
        settleTimer = nil
        settleDeadline = .max
        if case .open(let stream) = phase {
            ring.holdUnacknowledged(stream.socket.unacknowledgedBytes, now: shard.loop.now.nanoseconds)
        }
        ring.settleExpired(now: shard.loop.now.nanoseconds, errorWait: errorWait, sink: self)
        armSettleTimer()
        shard.notifyProgress()
        if ring.hasUnwritten { pump() }
    }

    // MARK: SettlementSink

    func accepted(count: Int) {
        ledger.accepted.add(count, ordering: .relaxed)
    }

    func rejected(status: Status, identifier: UInt32, sequence: UInt64, frame: UnsafeRawBufferPointer) {
        ledger.recordRejected(status)
        if let token = ring.token(inFrame: frame) {
            shard.reportRejection(token: token, status: status, sequence: sequence)
        }
    }

    func failed(reason: FailureReason, sequence: UInt64, frame: UnsafeRawBufferPointer) {
        ledger.recordFailed(reason)
        if let token = ring.token(inFrame: frame) {
            shard.emit(.failed(token: token, reason: reason, sequence: sequence))
        }
    }
}
