import SalvoIO
import SalvoWire

/// Capped exponential backoff with jitter, deterministic for a given seed.
public struct Backoff: Sendable, Hashable {
    /// The delay after the first failure.
    public var initial: Duration
    /// The longest delay.
    public var maximum: Duration
    /// The fraction of each delay that is randomized (0: none, 1: anywhere from 0 to the delay).
    public var jitter: Double

    public init(initial: Duration = .milliseconds(100), maximum: Duration = .seconds(10), jitter: Double = 0.5) {
        self.initial = initial
        self.maximum = maximum
        self.jitter = jitter
    }

    /// The delay before attempt `attempt` (1-based), with jitter drawn from `random`.
    func delay(attempt: Int, random: inout SplitMix64) -> Duration {
        let base = initial.nanosecondsClamped
        let cap = maximum.nanosecondsClamped
        let exponential = attempt >= 40 ? cap : min(cap, base << UInt64(max(0, attempt - 1)))
        let spread = Double(exponential) * min(max(jitter, 0), 1)
        let unit = random.nextUnit()
        return .nanoseconds(Int64(Double(exponential) - spread * unit))
    }
}

/// One gateway connection slot as a pure state machine: events in, actions out. Its
/// states own the transport (the socket, then the TLS stream); it owns the in-flight
/// window and decides, for every event, what becomes of the notifications in it.
/// `GatewayConnection` performs the actions with real sockets and timers; tests drive
/// this type alone, with any object standing in for the transport.
struct ConnectionMachine<Transport: AnyObject> {
    enum State {
        /// Not connected, not trying: nothing to send yet.
        case idle
        /// TCP connect and TLS handshake in progress.
        case connecting(Transport)
        case open(Transport)
        /// Backing off after a failed attempt or a drop; the reconnect timer is armed.
        case waitingToReconnect
        /// The gateway is out of reach: whatever is and will be sent through this slot fails.
        case gaveUp(reason: String)
    }

    enum Action {
        /// Open a new transport and report it with `connectStarted` (or `connectFailed`).
        case connect
        /// Close this transport (it has left the machine); `wasOpen` when its handshake had completed.
        case close(Transport, reason: String, wasOpen: Bool)
        /// Call `reconnectTimerFired` after this long.
        case reconnect(after: Duration)
        /// Apply this to the ledger, the events and the sources.
        case settle(Settlement)
        /// Tell the sender this slot gave up, and refuse and fail what waits to be written.
        case giveUp(reason: String)
    }

    /// How delivery works when a connection drops silently.
    struct DropPolicy {
        /// At most once: what was in flight fails as `deliveryUnknown` instead of being resent.
        var atMostOnce: Bool
        /// How many silent drops a notification may be in flight for.
        var retryBudget: Int
    }

    private(set) var state: State = .idle
    let window: InFlightWindow
    let dropPolicy: DropPolicy
    /// Failed attempts since the last connection that opened.
    private(set) var consecutiveFailures = 0
    /// Connections opened so far.
    private(set) var opened = 0
    let maximumAttempts: Int
    let backoff: Backoff
    private var random: SplitMix64

    init(window: InFlightWindow, dropPolicy: DropPolicy, maximumAttempts: Int, backoff: Backoff, seed: UInt64) {
        self.window = window
        self.dropPolicy = dropPolicy
        self.maximumAttempts = maximumAttempts
        self.backoff = backoff
        random = SplitMix64(seed: seed)
    }

    /// The open transport, if any.
    var openTransport: Transport? {
        if case .open(let transport) = state { return transport }
        return nil
    }

    var hasGivenUp: Bool {
        if case .gaveUp = state { return true }
        return false
    }

    // MARK: Events

    /// Work arrived: connect when idle.
    mutating func start() -> Action? {
        guard case .idle = state else { return nil }
        return .connect
    }

    /// The reconnect timer fired.
    mutating func reconnectTimerFired() -> Action? {
        guard case .waitingToReconnect = state else { return nil }
        state = .idle
        return .connect
    }

    /// A transport for a `.connect` exists and is connecting.
    mutating func connectStarted(_ transport: Transport) {
        state = .connecting(transport)
    }

    /// The handshake completed: the connection is open and writes what is rewound first.
    mutating func established() {
        guard case .connecting(let transport) = state else { return }
        state = .open(transport)
        consecutiveFailures = 0
        opened += 1
        window.connectionOpened()
    }

    /// TCP connect or the TLS handshake failed (or no transport could be made).
    /// `permanent` failures (the server's certificate is not trusted, ours is refused) are
    /// not retried.
    mutating func connectFailed(_ reason: String, permanent: Bool) -> [Action] {
        var actions: [Action] = []
        if case .connecting(let transport) = state { actions.append(.close(transport, reason: reason, wasOpen: false)) }
        consecutiveFailures += 1
        if permanent || consecutiveFailures >= maximumAttempts {
            return actions + giveUp(permanent ? reason : "\(reason) (gave up after \(consecutiveFailures) attempts)")
        }
        state = .waitingToReconnect
        return actions + [.reconnect(after: backoff.delay(attempt: consecutiveFailures, random: &random))]
    }

    /// The gateway answered `08 status identifier`: it processed everything before the
    /// named notification and discarded everything after it, and closes. Reconnect at once
    /// (the gateway is healthy) and write the discarded notifications again.
    mutating func errorResponse(_ response: ErrorResponse, now: UInt64, errorWait: UInt64) -> [Action] {
        guard case .open(let transport) = state else { return [] }
        guard let settlement = window.applyErrorResponse(response, now: now, errorWait: errorWait) else {
            return connectionLost("the gateway named #\(response.identifier), which this connection never sent "
                                  + "(\(response.status.name))", permanentReason: nil)
        }
        state = .idle
        return [.settle(settlement),
                .close(transport, reason: "error response: \(response.status.name) for #\(response.identifier)", wasOpen: true),
                .connect]
    }

    /// An open connection ended without an error response: a silent drop. What was
    /// within its error wait has an unknown fate (the drop policy decides); back off
    /// like a failed attempt, so a gateway that drops every connection is not hammered.
    mutating func connectionLost(_ reason: String, permanentReason: String?) -> [Action] {
        guard case .open(let transport) = state else { return [] }
        let settlement = window.connectionLost(atMostOnce: dropPolicy.atMostOnce, retryBudget: dropPolicy.retryBudget)
        state = .idle
        let next: [Action]
        if let permanentReason {
            next = giveUp(permanentReason)
        } else {
            consecutiveFailures += 1
            if consecutiveFailures >= maximumAttempts {
                next = giveUp("\(reason) (gave up after \(consecutiveFailures) attempts)")
            } else {
                state = .waitingToReconnect
                next = [.reconnect(after: backoff.delay(attempt: consecutiveFailures, random: &random))]
            }
        }
        return [.settle(settlement), .close(transport, reason: reason, wasOpen: true)] + next
    }

    /// The sender gives up on everything not final (finish timed out): fail it all.
    mutating func cancel() -> [Action] {
        var actions: [Action] = [.settle(window.failAll(reason: .cancelled))]
        switch state {
        case .open(let transport):
            actions.append(.close(transport, reason: "cancelled", wasOpen: true))
        case .connecting(let transport):
            actions.append(.close(transport, reason: "cancelled", wasOpen: false))
        case .idle, .waitingToReconnect, .gaveUp:
            break
        }
        state = .gaveUp(reason: "cancelled")
        return actions
    }

    private mutating func giveUp(_ reason: String) -> [Action] {
        state = .gaveUp(reason: reason)
        // The window first: its notifications are older than those waiting to be written.
        return [.settle(window.failAll(reason: .gatewayUnreachable)), .giveUp(reason: reason)]
    }
}
