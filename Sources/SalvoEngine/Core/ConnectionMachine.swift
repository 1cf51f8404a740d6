import SalvoIO
import SalvoWire

/// One connection to the gateway (its links, one after another) as a pure state machine:
/// events in, actions out. Its
/// states own the transports (a socket with its TLS stream); it owns the in-flight window
/// and decides, for every event, what becomes of the notifications in it.
/// `Connection` performs the actions with real sockets and timers; tests drive this type
/// alone, with any object standing in for a transport.
///
/// Next to the active link the connection keeps a *standby*: connected and handshaken
/// while the active one writes. The gateway closes the connection after every error
/// response; the standby takes over at once, so an error costs no connection setup (over
/// a network two round trips), and a new standby is made in the background.
struct ConnectionMachine<Transport: AnyObject, Window: ConnectionWindow> {
    enum State {
        /// Not connected, not trying: nothing to send yet.
        case idle
        /// TCP connect and TLS handshake in progress.
        case connecting(Transport)
        case open(Transport)
        /// Wrote its last frame and then TLS close_notify (nothing more is coming): waits for
        /// the gateway to close, which proves it read everything, or to answer an error.
        case draining(Transport)
        /// Backing off after a failed attempt or a drop; the reconnect timer is armed.
        case waitingToReconnect
        /// The gateway is out of reach: whatever is and will be sent through this connection fails.
        case gaveUp(reason: String, failing: FailureReason)
    }

    enum Standby {
        case none
        case connecting(Transport)
        case ready(Transport)
        /// The standby timer is armed (after a standby failed or was closed).
        case waiting
    }

    enum Action {
        /// Open a new transport and report it with `connectStarted` (or `connectFailed`).
        case connect
        /// Open a new transport for the standby and report it with `standbyStarted` (or `connectFailed`).
        case connectStandby
        /// Close this transport (it has left the machine).
        case close(Transport, reason: String, how: Closing)
        /// Send TLS close_notify and shut down the sending side of this transport: it has
        /// written its last frame. Its reading side stays open for the gateway's answer.
        case finishWriting(Transport)
        /// Call `reconnectTimerFired` after this long.
        case reconnect(after: Duration)
        /// Call `standbyTimerFired` after this long.
        case openStandby(after: Duration)
        /// A transport became the active connection (its handshake completed, or it was
        /// the standby): write on it.
        case activated(Transport)
        /// Apply this to the ledger, the events and the sources.
        case settle(Settlement)
        /// Tell the sender this connection gave up, and refuse and fail what waits to be written
        /// (`failing` says why: the gateway is out of reach, or refuses our credentials).
        case giveUp(reason: String, failing: FailureReason)
    }

    /// What closing a transport says to the gateway.
    enum Closing: Equatable {
        /// Nothing, and its end is reported as a failed attempt: its TCP connect or TLS
        /// handshake never completed.
        case unopened
        /// Nothing: the gateway ended it (an error response, which the gateway follows
        /// with a close, or a drop), or it was told already (a drained connection).
        case silently
        /// TLS close_notify: the sender ends a working connection.
        case withCloseNotify
    }

    private(set) var state: State = .idle
    private(set) var standby: Standby = .none
    /// HTTP/2: connections retired (`retire`): they open no new streams and close once
    /// their open ones are answered, while the connection goes on with a new link. Each
    /// with its number in the window.
    private(set) var retiring: [(transport: Transport, number: UInt32)] = []
    let window: Window
    let dropPolicy: DropHandling
    let usesStandby: Bool
    /// Failed attempts since the last connection that opened.
    private(set) var consecutiveFailures = 0
    /// Failed attempts before the open connection opened: when it stalls, it counts as one
    /// more, as if it had never opened.
    private var failuresBeforeOpen = 0
    /// Failed standby attempts since the last standby that opened.
    private var standbyFailures = 0
    /// Connections opened so far (standbys when they take over).
    private(set) var opened = 0
    let maximumAttempts: Int
    let backoff: Backoff
    private var random: SplitMix64

    init(window: Window, dropPolicy: DropHandling, usesStandby: Bool, maximumAttempts: Int, backoff: Backoff,
         seed: UInt64) {
        self.window = window
        self.dropPolicy = dropPolicy
        self.usesStandby = usesStandby
        self.maximumAttempts = maximumAttempts
        self.backoff = backoff
        random = SplitMix64(seed: seed)
    }

    /// The open transport, if any: the one to write on.
    var openTransport: Transport? {
        if case .open(let transport) = state { return transport }
        return nil
    }

    /// The open or draining transport, if any: the one to read the gateway's answers from.
    var activeTransport: Transport? {
        switch state {
        case .open(let transport), .draining(let transport): transport
        default: nil
        }
    }

    /// Whether `transport` is a retired connection waiting for its answers.
    func isRetiring(_ transport: Transport) -> Bool {
        retiring.contains { $0.transport === transport }
    }

    /// Whether `transport` is still connecting, as the active connection or the standby.
    func isConnecting(_ transport: Transport) -> Bool {
        if case .connecting(let active) = state, active === transport { return true }
        if case .connecting(let spare) = standby, spare === transport { return true }
        return false
    }

    var hasGivenUp: Bool {
        if case .gaveUp = state { return true }
        return false
    }

    /// What a connection that gave up fails its notifications as: `gatewayUnreachable`, or
    /// `authenticationFailed` when the gateway refused the credentials.
    var givenUpFailure: FailureReason? {
        if case .gaveUp(_, let failing) = state { return failing }
        return nil
    }

    // MARK: Events

    /// Work arrived: when idle, the ready standby takes over, or a connection is made.
    mutating func start() -> [Action] {
        guard case .idle = state else { return [] }
        if case .ready = standby { return promote() }
        return [.connect]
    }

    /// The reconnect timer fired.
    mutating func reconnectTimerFired() -> Action? {
        guard case .waitingToReconnect = state else { return nil }
        state = .idle
        return .connect
    }

    /// The standby timer fired: open a standby if the connection is still open.
    mutating func standbyTimerFired() -> Action? {
        guard case .waiting = standby else { return nil }
        standby = .none
        return openStandbyIfUseful()
    }

    /// A transport for a `.connect` exists and is connecting.
    mutating func connectStarted(_ transport: Transport) {
        state = .connecting(transport)
    }

    /// A transport for a `.connectStandby` exists and is connecting.
    mutating func standbyStarted(_ transport: Transport) {
        standby = .connecting(transport)
    }

    /// A transport's handshake completed: the active connection opens (and writes what
    /// is rewound first), or the standby is ready.
    mutating func handshakeCompleted(_ transport: Transport) -> [Action] {
        if case .connecting(let active) = state, active === transport {
            open(transport)
            return [.activated(transport)] + [openStandbyIfUseful()].compactMap { $0 }
        }
        if case .connecting(let spare) = standby, spare === transport {
            standby = .ready(transport)
            standbyFailures = 0
            // The active connection ended while this one was connecting: take over now.
            if case .idle = state { return promote() }
        }
        return []
    }

    /// TCP connect or the TLS handshake failed, or (`transport` nil) no transport could be
    /// made for a `.connect`. `permanent` failures (the server's certificate is not
    /// trusted, ours is refused) are not retried.
    mutating func connectFailed(_ transport: Transport?, _ reason: String, permanent: Bool) -> [Action] {
        if let transport, case .connecting(let spare) = standby, spare === transport {
            return standbyEnded(closing: spare, reason: reason, how: .unopened)
        }
        var actions: [Action] = []
        if case .connecting(let active) = state {
            actions.append(.close(active, reason: reason, how: .unopened))
            state = .idle
        }
        consecutiveFailures += 1
        if permanent || consecutiveFailures >= maximumAttempts {
            return actions + giveUp(permanent ? reason : "\(reason) (gave up after \(consecutiveFailures) attempts)")
        }
        state = .waitingToReconnect
        return actions + [.reconnect(after: backoff.delay(attempt: consecutiveFailures, random: &random))]
    }

    /// A transport ended without an error response. For the active connection that is a
    /// silent drop: what was within its error wait has an unknown fate (the drop policy
    /// decides), and the connection backs off like after a failed attempt, so that a gateway
    /// that drops every connection is not hammered; a ready standby still takes over.
    ///
    /// A connection that proved nothing counts as one more failed attempt after those
    /// before it opened, as if it had never opened: one the gateway `stalled` (stopped
    /// taking bytes, or left every stream unanswered too long), and one that ended
    /// `unanswered` (HTTP/2: not one stream answered, e.g. a protocol error right after
    /// SETTINGS). A gateway that does either on every connection is given up on. A standby
    /// that ends is made again after a backoff.
    mutating func connectionLost(_ transport: Transport, _ reason: String, permanentReason: String?,
                                 stalled: Bool = false, unanswered: Bool = false) -> [Action] {
        switch standby {
        case .connecting(let spare) where spare === transport:
            return standbyEnded(closing: spare, reason: reason, how: .unopened)
        case .ready(let spare) where spare === transport:
            return standbyEnded(closing: spare, reason: reason, how: .silently)
        default:
            break
        }
        guard let active = activeTransport, active === transport else { return [] }
        let settlement = window.connectionLost(dropPolicy)
        state = .idle
        var actions: [Action] = [.settle(settlement), .close(transport, reason: reason, how: .silently)]
        if let permanentReason { return actions + giveUp(permanentReason) }
        consecutiveFailures = (stalled || unanswered ? failuresBeforeOpen : consecutiveFailures) + 1
        if consecutiveFailures >= maximumAttempts {
            return actions + giveUp("\(reason) (gave up after \(consecutiveFailures) attempts)")
        }
        if case .ready = standby { return actions + promote() }
        state = .waitingToReconnect
        actions.append(.reconnect(after: backoff.delay(attempt: consecutiveFailures, random: &random)))
        return actions
    }

    /// No transport could be made for a `.connectStandby`: try again after a backoff.
    mutating func standbyCouldNotStart(_ reason: String) -> [Action] {
        standbyEnded(closing: nil, reason: reason, how: .unopened)
    }

    /// The sender gives up on everything not final (finish timed out): fail it all, as
    /// the drop policy has it (under at-most-once what was sent may have arrived: unknown).
    mutating func cancel() -> [Action] {
        let reason: FailureReason = dropPolicy.atMostOnce ? .deliveryUnknown : .cancelled
        let actions: [Action] = [.settle(window.failAll(reason: reason))] + closeAll(reason: "cancelled")
        state = .gaveUp(reason: "cancelled", failing: .gatewayUnreachable)
        return actions
    }

    // MARK: Internals

    /// The active connection ended: the standby takes over when ready; otherwise wait for
    /// a connecting one, or connect anew.
    private mutating func takeOver() -> [Action] {
        switch standby {
        case .ready: return promote()
        case .connecting: return []  // `handshakeCompleted` promotes it
        case .none, .waiting:
            standby = .none
            return [.connect]
        }
    }

    private mutating func promote() -> [Action] {
        guard case .ready(let spare) = standby else { return [] }
        standby = .none
        open(spare)
        return [.activated(spare)] + [openStandbyIfUseful()].compactMap { $0 }
    }

    /// `transport` becomes the active connection: a fresh one, or the standby. Either way
    /// a connection opened, so the failed attempts before it no longer count.
    private mutating func open(_ transport: Transport) {
        state = .open(transport)
        opened += 1
        failuresBeforeOpen = consecutiveFailures
        consecutiveFailures = 0
        window.connectionOpened()
    }

    private mutating func openStandbyIfUseful() -> Action? {
        guard usesStandby, case .none = standby, case .open = state else { return nil }
        return .connectStandby
    }

    private mutating func standbyEnded(closing spare: Transport?, reason: String, how: Closing) -> [Action] {
        standbyFailures += 1
        standby = .waiting
        var actions: [Action] = spare.map { [.close($0, reason: reason, how: how)] } ?? []
        actions.append(.openStandby(after: backoff.delay(attempt: standbyFailures, random: &random)))
        // The active connection was waiting for this standby.
        if case .idle = state { actions.append(.connect) }
        return actions
    }

    private mutating func closeAll(reason: String) -> [Action] {
        var actions: [Action] = []
        switch state {
        case .open(let transport): actions.append(.close(transport, reason: reason, how: .withCloseNotify))
        case .draining(let transport): actions.append(.close(transport, reason: reason, how: .silently))
        case .connecting(let transport): actions.append(.close(transport, reason: reason, how: .unopened))
        case .idle, .waitingToReconnect, .gaveUp: break
        }
        switch standby {
        case .ready(let spare): actions.append(.close(spare, reason: reason, how: .withCloseNotify))
        case .connecting(let spare): actions.append(.close(spare, reason: reason, how: .unopened))
        case .none, .waiting: break
        }
        standby = .none
        // Their streams are settled with the window's (`failAll`).
        actions += retiring.map { .close($0.transport, reason: reason, how: .withCloseNotify) }
        retiring.removeAll()
        return actions
    }

    private mutating func giveUp(_ reason: String, failing: FailureReason = .gatewayUnreachable) -> [Action] {
        let closing = closeAll(reason: reason)
        state = .gaveUp(reason: reason, failing: failing)
        // The window first: its notifications are older than those waiting to be written.
        return [.settle(window.failAll(reason: failing)), .giveUp(reason: reason, failing: failing)] + closing
    }
}

// MARK: - Binary settling

extension ConnectionMachine where Window == InFlightWindow {
    /// The open connection has nothing more to write, nothing more is coming (its sources
    /// were read to their end, or the sender is finishing), and all it wrote, if anything,
    /// is past its error wait: it finishes writing and drains.
    ///
    /// What was written last is only presumed accepted so far: the error wait has passed
    /// since the gateway's TCP acknowledged it, and nothing written after it shows that the
    /// gateway judged it. A gateway's socket buffers hold MiBs it has not read, and one
    /// that answers late reads on and discards after a rejection: the answer about the last
    /// notifications can come later still. Its close_notify in reply to ours proves it read
    /// everything; a close without one proves nothing, and is a drop, as ever.
    mutating func finishWriting() -> [Action] {
        guard case .open(let transport) = state, !window.isEmpty, window.isAllPresumed else { return [] }
        state = .draining(transport)
        return [.finishWriting(transport)]
    }

    /// The gateway ended the stream of the active transport, `clean`ly (its close_notify)
    /// or not. While draining, its close_notify answers ours: it read everything written
    /// before ours and answered no error, so all of it is accepted. Anything else is a drop
    /// (a gateway that closes without close_notify may not have read what it was sent),
    /// which releases what was presumed accepted, as ever: all of it, when draining.
    mutating func endOfStream(_ transport: Transport, clean: Bool, _ reason: String) -> [Action] {
        guard clean, case .draining(let draining) = state, draining === transport else {
            return connectionLost(transport, reason, permanentReason: nil)
        }
        state = .idle
        return [.settle(window.drained()), .close(transport, reason: "drained: the gateway closed after reading everything",
                                                   how: .silently)]
    }

    /// While draining, the window emptied without the gateway's answer: the retention
    /// released what was presumed accepted, so there is nothing left to prove. A gateway
    /// that never answers close_notify must not keep the connection from writing what comes next.
    mutating func drainOutlived() -> [Action] {
        guard case .draining(let transport) = state, window.isEmpty else { return [] }
        state = .idle
        return [.close(transport, reason: "drained: no answer to close_notify within the record retention", how: .silently)]
    }

    /// The gateway answered `08 status identifier` on the active connection: it processed
    /// everything before the named notification and discarded everything after it, and
    /// closes. The standby takes over (or a new connection is made at once: the gateway
    /// is healthy), and the discarded notifications are written again. The evidence is
    /// what the answer shows about the error wait, for the transport to apply.
    mutating func errorResponse(_ response: ErrorResponse, now: UInt64,
                                errorWait: UInt64) -> (actions: [Action], evidence: ErrorResponseEvidence?) {
        guard let transport = activeTransport else { return ([], nil) }
        guard let (settlement, evidence) = window.applyErrorResponse(response, now: now, errorWait: errorWait) else {
            return (connectionLost(transport, "the gateway named #\(response.identifier), which this connection never sent "
                                   + "(\(response.status.name))", permanentReason: nil), nil)
        }
        state = .idle
        let close = Action.close(transport, reason: "error response: \(response.status.name) for #\(response.identifier)",
                                 how: .silently)
        return ([.settle(settlement), close] + takeOver(), evidence)
    }
}

// MARK: - HTTP/2 settling

extension ConnectionMachine where Window == StreamWindow {
    /// The open connection retires: the gateway said GOAWAY, or the sender makes way for a
    /// new connection after a 503. It opens no new streams; its open ones are answered (or
    /// refused by its GOAWAY) and then it closes (`retiredStreamsAnswered`), or, if they
    /// are not answered in time, it is dropped (`retiredConnectionLost`). Meanwhile the
    /// connection goes on: it connects anew when it has work (`start`).
    ///
    /// Closing at once, with GOAWAY, would leave the open streams to the gateway's goodwill:
    /// some servers stop answering a connection once the client says GOAWAY, and every
    /// stream still open would end unanswered, a possible duplicate.
    mutating func retire(_ transport: Transport, _ reason: String) -> [Action] {
        guard case .open(let open) = state, open === transport else { return [] }
        state = .idle
        retiring.append((transport, window.retireConnection()))
        return retiredStreamsAnswered(transport, reason)
    }

    /// Streams of a retired connection were answered: once none is open, it closes.
    mutating func retiredStreamsAnswered(_ transport: Transport, _ reason: String) -> [Action] {
        guard let place = retiring.firstIndex(where: { $0.transport === transport }),
              window.openCount(onRetired: retiring[place].number) == 0 else { return [] }
        window.retiredConnectionClosed(retiring.remove(at: place).number)
        return [.close(transport, reason: "\(reason): every stream answered", how: .withCloseNotify)]
    }

    /// A retired connection ended (or was given up on) with streams still open: as for any
    /// drop, the drop policy decides their fate. The connection's open link goes on.
    mutating func retiredConnectionLost(_ transport: Transport, _ reason: String) -> [Action] {
        guard let place = retiring.firstIndex(where: { $0.transport === transport }) else { return [] }
        let number = retiring.remove(at: place).number
        let unanswered = window.openCount(onRetired: number)
        let settlement = window.connectionLost(dropPolicy, number: number)
        window.retiredConnectionClosed(number)
        return [.settle(settlement), .close(transport, reason: "\(reason) (\(unanswered) stream(s) unanswered)", how: .silently)]
    }

    /// The gateway refuses the provider's credentials (a 403 other than an expired token):
    /// nothing sent with them can succeed, so the connection stops, and everything not final
    /// fails as `authenticationFailed` (not as a million rejections).
    mutating func credentialsRefused(_ reason: String) -> [Action] {
        guard !hasGivenUp else { return [] }
        return giveUp(reason, failing: .authenticationFailed)
    }
}
