import SalvoIO
import SalvoWire

/// One client of the mock gateway: reads the stream in large chunks, decodes it in place,
/// judges each notification by the failure plan, and publishes counts once per read. With
/// `FailurePlan.errorDelay`, an error response is held back: the connection stops judging
/// and drains the client until a timer writes the response and closes.
final class BinaryMockConnection: ServerConnection {
    /// Per-connection tallies, copied to a local for each read so that the per-notification
    /// path touches stack memory only (no class-property exclusivity checks).
    struct Ledger {
        var received = 0
        var accepted = 0
        var simple = 0
        var enhanced = 0
        var frame = 0
        var verdict: Verdict?
    }

    /// Reads per readiness event before yielding to the loop's other connections.
    private static let readBudget = 16

    private let state: GatewayState
    private let counters: LoopCounters
    private let ordinal: Int
    private var decoder: FrameDecoder
    private var ledger = Ledger()
    private var nextStall: Int
    private var stallCount = 0
    private var isStalled = false
    /// The timer that writes a held-back error response; while set, nothing more is judged
    /// and what the client sends is read and dropped.
    private var heldResponse: TimerID?

    init(stream: TLSStream, ordinal: Int, loop: ServerRuntime.Loop, counters: LoopCounters,
         state: GatewayState, maximumPayloadLength: Int) {
        self.state = state
        self.counters = counters
        self.ordinal = ordinal
        decoder = FrameDecoder(maximumPayloadLength: maximumPayloadLength)
        nextStall = state.rules.stallEvery
        super.init(stream: stream, loop: loop)
    }

    override func didEstablish() { readAvailable() }

    override func connectionEvents(_ events: IOEvents) { readAvailable() }

    private func readAvailable() {
        guard !isStalled else { return }
        // Undo a write interest left by an earlier WANT_WRITE (a no-op when unchanged), so
        // an always-writable socket cannot keep waking us.
        watch(.read)
        var reads = 0
        while phase == .established && !isStalled {
            guard let result = readClient() else { return clientWentAway() }
            switch result {
            case .bytes(let count):
                // While a response is held back, what the client sends is read (its writes
                // keep flowing; through TLS, since the response still goes out on this
                // session) and dropped: nothing more is judged or counted.
                if heldResponse == nil { ingest(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) }
                reads += 1
                // Level-triggered epoll brings us back for bytes still in the socket, but
                // not for bytes OpenSSL already holds: drain those first.
                if reads >= Self.readBudget && !stream.hasBufferedBytes { return }
            case .wouldBlock(let progress):
                watch(progress == .wantWrite ? [.read, .write] : .read)
                return
            case .closed where heldResponse != nil:
                // The client finished writing (close_notify, or a half-close) and waits for
                // answers: the held-back response still goes out when its time comes.
                watch([])
                return
            case .closed(clean: true):
                // The client finished writing with close_notify, and everything before it was
                // judged without an error: say so with ours (what a sender waits for to know
                // its last notifications were read), then close.
                respondAndClose([])
                return
            case .closed:
                clientWentAway()
                return
            }
        }
    }

    private func ingest(_ bytes: UnsafeRawBufferPointer) {
        var ledger = self.ledger
        let before = ledger
        let rules = state.rules
        let state = self.state
        let stop: DecodeStop?
        if state.recordAccepted {
            var digests: [UInt64] = []
            stop = decoder.decode(bytes) { notification in
                let accepted = Self.judge(notification, &ledger, rules, state)
                if accepted || ledger.verdict.isShutdown {
                    digests.append(MockStatistics.digest(token: notification.token, payload: notification.payload))
                }
                return accepted
            }
            state.accepted.insert(digests)
        } else {
            stop = decoder.decode(bytes) { Self.judge($0, &ledger, rules, state) }
        }
        self.ledger = ledger
        publish(from: before, to: ledger, byteCount: bytes.count)

        switch stop {
        case nil:
            if ledger.received >= nextStall { stall() }
        case .stoppedByCaller?:
            if let verdict = ledger.verdict { carryOut(verdict) }
        case .violation(let violation)?:
            let count = { (counts: inout MockStatistics) in counts.countRejection(violation.status) }
            if let response = violation.errorResponse {
                answer(response, counting: count)
            } else {
                state.count(count)
                closeSilently()
            }
        }
    }

    /// The per-notification path: count, apply the plan, accept.
    @inline(__always)
    private static func judge(
        _ notification: DecodedNotification, _ ledger: inout Ledger, _ rules: PlanRules, _ state: GatewayState
    ) -> Bool {
        switch notification.format {
        case .frame: ledger.frame &+= 1
        case .enhanced: ledger.enhanced &+= 1
        case .simple: ledger.simple &+= 1
        }
        ledger.received &+= 1
        if rules.judgesEach,
           let verdict = rules.verdict(for: notification, receivedOnConnection: ledger.received, ordinal: state.ordinal) {
            ledger.verdict = verdict
            return false
        }
        ledger.accepted &+= 1
        if ledger.accepted == rules.shutdownAfter {
            ledger.verdict = .shutdown(lastAccepted: notification.identifier)
            return false
        }
        return true
    }

    private func publish(from before: Ledger, to after: Ledger, byteCount: Int) {
        counters.bytesReceived.wrappingAdd(byteCount, ordering: .relaxed)
        if after.accepted != before.accepted {
            counters.accepted.wrappingAdd(after.accepted &- before.accepted, ordering: .relaxed)
        }
        if after.frame != before.frame { counters.frame.wrappingAdd(after.frame &- before.frame, ordering: .relaxed) }
        if after.enhanced != before.enhanced {
            counters.enhanced.wrappingAdd(after.enhanced &- before.enhanced, ordering: .relaxed)
        }
        if after.simple != before.simple { counters.simple.wrappingAdd(after.simple &- before.simple, ordering: .relaxed) }
    }

    private func carryOut(_ verdict: Verdict) {
        switch verdict {
        case .reject(let status, let identifier):
            answer(ErrorResponse(status: status, identifier: identifier)) { $0.countRejection(status) }
        case .shutdown(let lastAccepted):
            answer(ErrorResponse(status: .shutdown, identifier: lastAccepted)) { $0.shutdowns += 1 }
        case .drop:
            state.count { $0.droppedConnections += 1 }
            closeSilently()
        }
    }

    /// Counts the event, then writes `response`, close_notify, and closes: at once, or after
    /// the plan's `errorDelay`, draining the client meanwhile as a slow gateway would.
    private func answer(_ response: ErrorResponse, counting event: (inout MockStatistics) -> Void) {
        let delay = state.rules.plan.errorDelay
        guard delay > .zero else {
            state.count(event)
            respondAndClose(response.bytes)
            return
        }
        state.count { counts in
            event(&counts)
            counts.delayedResponses += 1
        }
        let bytes = response.bytes
        // Weak: a client that closes first releases the connection; the timer then finds nothing.
        heldResponse = loop.schedule(after: delay) { [weak self] in
            guard let self else { return }
            heldResponse = nil
            respondAndClose(bytes)
        }
    }

    /// The client's stream failed, or it ended with no response held back for it: close
    /// (a held-back response has nobody to go to any more).
    private func clientWentAway() {
        if let heldResponse { loop.cancel(heldResponse) }
        heldResponse = nil
        close()
    }

    private func stall() {
        let every = state.rules.stallEvery
        nextStall = (ledger.received / every + 1) * every
        stallCount += 1
        isStalled = true
        watch([])
        state.count { $0.stalls += 1 }
        loop.schedule(after: state.rules.stallDelay(connection: ordinal, stall: stallCount)) { [weak self] in
            self?.resume()
        }
    }

    private func resume() {
        isStalled = false
        guard phase == .established else { return }
        // OpenSSL may hold decrypted bytes that epoll cannot announce.
        readAvailable()
    }
}

extension Optional where Wrapped == Verdict {
    /// A shutdown verdict: its notification was accepted, so it counts as such.
    var isShutdown: Bool {
        if case .shutdown? = self { return true }
        return false
    }
}
