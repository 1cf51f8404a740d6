import SalvoIO
import SalvoWire
import Synchronization

/// What an HTTP/2 gateway's loops share: the settings, the plan, the gateway-wide request
/// ordinal, the team's provider-token history, and the counters for rare events (one lock
/// per connection-level event, never per request).
final class H2GatewayState: Sendable {
    let plan: H2FailurePlan
    let verifier: ProviderTokenVerifier?
    let allowedTopics: [[UInt8]]
    let maximumConcurrentStreams: UInt32
    let development: Bool
    let recordAccepted: Bool
    /// Whether any gateway-wide rule needs the ordinal (so that without one, requests never
    /// touch the shared counter).
    let usesOrdinal: Bool
    /// Gateway-wide ordinal of valid requests, for the gateway-wide rules.
    let ordinal = Atomic<Int>(0)
    /// The rare events (refusals, GOAWAYs, drops, stalls), counted where the statistics
    /// report them; the loops' counters are added to a copy.
    let events = Locked(H2Statistics())
    let accepted = AcceptedRecord()
    /// The `iat` of the team's current token, once one was seen.
    private let teamTokenIssuedAt = Locked<Int64?>(nil)

    init(_ configuration: H2MockGateway.Configuration) {
        plan = configuration.failurePlan
        verifier = configuration.tokenVerifier
        allowedTopics = configuration.allowedTopics.map { Array($0.utf8) }
        maximumConcurrentStreams = configuration.maximumConcurrentStreams
        development = configuration.environment == .development
        recordAccepted = configuration.recordAccepted
        usesOrdinal = plan.rejectEvery != nil || plan.throttleEvery != nil || plan.unavailableEvery != nil
    }

    func count(_ update: (inout H2Statistics) -> Void) { events.withLock { update(&$0) } }

    /// Takes a valid token issued at `issuedAt` as the team's current one, or refuses it
    /// when it replaces the current one less than `ProviderToken.minimumRefreshInterval`
    /// after that one was issued (429 TooManyProviderTokenUpdates). Tokens are told apart
    /// by their `iat`: signatures differ each time the same claims are signed.
    func adoptToken(issuedAt: Int64) -> Bool {
        teamTokenIssuedAt.withLock { current in
            if let current, current != issuedAt, abs(issuedAt - current) < ProviderToken.minimumRefreshInterval {
                return false
            }
            current = issuedAt
            return true
        }
    }

    /// What the plan does with a valid request: nil to accept it. `onConnection` is the
    /// request's 1-based place among its connection's valid requests.
    func planVerdict(onConnection: Int, token: DeviceToken) -> PlanVerdict? {
        if onConnection == plan.dropEvery { return .drop }
        if usesOrdinal {
            let position = ordinal.wrappingAdd(1, ordering: .relaxed).newValue
            if let every = plan.rejectEvery, position % every == 0 { return .answer(.badDeviceToken) }
            if let every = plan.throttleEvery, position % every == 0 { return .answer(.tooManyRequests) }
            if let every = plan.unavailableEvery, position % every == 0 { return .answer(.serviceUnavailable) }
        }
        if Self.isDead(token) { return .answer(.unregistered) }
        return nil
    }

    /// Tokens whose hex ends in `dead`.
    static func isDead(_ token: DeviceToken) -> Bool {
        token.withUnsafeBytes { $0[30] == 0xde && $0[31] == 0xad }
    }
}

/// What the failure plan decided for a valid request.
enum PlanVerdict: Equatable {
    /// Close the connection without answering.
    case drop
    /// Answer with this reason (and its status).
    case answer(APNsReason)
}

/// Counters a loop publishes after each read; only that loop writes them.
final class H2LoopCounters: Sendable {
    let accepted = Atomic<Int>(0)
    let requests = Atomic<Int>(0)
    let streams = Atomic<Int>(0)
    let resetStreams = Atomic<Int>(0)
    /// By `APNsReason.rawValue`; rejections are rare in throughput runs, so a lock will do.
    let rejections = Locked([Int](repeating: 0, count: APNsReason.allCases.count))
}
