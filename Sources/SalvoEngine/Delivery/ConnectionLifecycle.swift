import SalvoIO

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

/// The life of one gateway connection slot, as a pure state machine: events in, actions
/// out. The `GatewayConnection` performs the actions with real sockets; tests drive this
/// type alone.
struct ConnectionLifecycle: Sendable {
    enum State: Equatable, Sendable {
        case idle
        case connecting
        case open
        case waitingToReconnect
        /// The gateway is out of reach; unsettled and future frames fail.
        case gaveUp(reason: String)
    }

    enum Action: Equatable, Sendable {
        case connect
        case reconnect(after: Duration)
        case giveUp(reason: String)
    }

    private(set) var state: State = .idle
    /// Failed connection attempts since the last connection that opened.
    private(set) var consecutiveFailures = 0
    /// Connections opened so far.
    private(set) var opened = 0
    let maximumAttempts: Int
    let backoff: Backoff
    private var random: SplitMix64

    init(maximumAttempts: Int, backoff: Backoff, seed: UInt64) {
        self.maximumAttempts = maximumAttempts
        self.backoff = backoff
        random = SplitMix64(seed: seed)
    }

    /// Work arrived (or the sender started): connect when idle.
    mutating func start() -> Action? {
        guard state == .idle else { return nil }
        state = .connecting
        return .connect
    }

    /// The reconnect timer fired.
    mutating func reconnectTimerFired() -> Action? {
        guard state == .waitingToReconnect else { return nil }
        state = .connecting
        return .connect
    }

    /// TCP connect or the TLS handshake failed. `permanent` failures (the server's
    /// certificate is not trusted, ours is refused) are not retried.
    mutating func connectFailed(_ reason: String, permanent: Bool) -> Action {
        consecutiveFailures += 1
        if permanent || consecutiveFailures >= maximumAttempts {
            let why = permanent ? reason : "\(reason) (gave up after \(consecutiveFailures) attempts)"
            state = .gaveUp(reason: why)
            return .giveUp(reason: why)
        }
        state = .waitingToReconnect
        return .reconnect(after: backoff.delay(attempt: consecutiveFailures, random: &random))
    }

    /// The handshake completed.
    mutating func established() {
        state = .open
        consecutiveFailures = 0
        opened += 1
    }

    /// An open connection ended: after an error response the gateway processed
    /// something, so reconnect at once; after a silent drop back off like a failed connect
    /// (a gateway that drops every connection must not be hammered).
    mutating func closed(afterErrorResponse: Bool, permanentReason: String? = nil) -> Action {
        if let permanentReason {
            state = .gaveUp(reason: permanentReason)
            return .giveUp(reason: permanentReason)
        }
        if afterErrorResponse {
            state = .connecting
            return .connect
        }
        return connectFailed("connection dropped", permanent: false)
    }
}
