import SalvoIO
import SalvoWire
import Synchronization

/// What an HTTP/2 gateway's loops share: the settings, the plan, the gateway-wide request
/// ordinal, the team's provider-token history, the broadcast channels, and the counters
/// for rare events (one lock per connection-level event, never per request). The push
/// port's and the channel management port's connections share one, so that a team token
/// taken on either is the team's on both.
final class H2GatewayState: Sendable {
    let plan: H2FailurePlan
    /// Token authentication's keys, nil without it.
    let verifier: ProviderTokenVerifiers?
    let allowedTopics: [[UInt8]]
    let maximumConcurrentStreams: UInt32
    let development: Bool
    let recordAccepted: Bool
    /// Whether accepted requests' headers are recorded (`recordedRequests`).
    let recordRequests: Bool
    /// Whether any gateway-wide rule needs the ordinal (so that without one, requests never
    /// touch the shared counter).
    let usesOrdinal: Bool
    /// The plan's delays in nanoseconds; all zero: every answer goes out at once.
    let responseDelay: UInt64
    let responseJitter: UInt64
    let errorDelay: UInt64?
    /// Whether any answer is ever held.
    let holdsAnswers: Bool
    /// Gateway-wide ordinal of valid requests, for the gateway-wide rules.
    let ordinal = Atomic<Int>(0)
    /// The rare events (refusals, GOAWAYs, drops, stalls), counted where the statistics
    /// report them; the loops' counters are added to a copy.
    let events = Locked(H2Statistics())
    let accepted = AcceptedRecord()
    /// With `recordRequests`: the first `H2MockGateway.recordedRequestLimit` accepted
    /// requests, in the order they were answered.
    let recordedRequests = Locked<[H2RecordedRequest]>([])
    /// The broadcast channels, for broadcasts and channel management alike.
    let channels: MockChannelRegistry
    /// The app's broadcast capability (`Configuration.broadcastsEnabled`).
    let broadcastsEnabled: Bool
    /// Accepted broadcasts by channel number (deleted channels' too; see
    /// `MockChannelRegistry.lookUp`), added by each connection when it publishes its counts.
    let broadcasts = Locked<[Int]>([])
    /// `Configuration.managementFailures` not yet answered, first first.
    private let managementFailures: Locked<ArraySlice<APNsReason>>
    /// The `iat` of each team's current token, once one was seen.
    private let teamTokenIssuedAt = Locked<[String: Int64]>([:])

    init(_ configuration: H2MockGateway.Configuration) {
        plan = configuration.failurePlan
        verifier = configuration.tokenVerifiers.isEmpty ? nil : ProviderTokenVerifiers(configuration.tokenVerifiers)
        allowedTopics = configuration.allowedTopics.map { Array($0.utf8) }
        maximumConcurrentStreams = configuration.maximumConcurrentStreams
        development = configuration.environment == .development
        recordAccepted = configuration.recordAccepted
        recordRequests = configuration.recordRequests
        channels = MockChannelRegistry(limit: configuration.channelLimit)
        broadcastsEnabled = configuration.broadcastsEnabled
        managementFailures = Locked(configuration.managementFailures[...])
        usesOrdinal = plan.rejectEvery != nil || plan.throttleEvery != nil || plan.unavailableEvery != nil
            || plan.internalErrorEvery != nil || plan.goawayEvery != nil
        responseDelay = plan.responseDelay.nanosecondsClamped
        responseJitter = plan.responseJitter.nanosecondsClamped
        errorDelay = plan.errorDelay?.nanosecondsClamped
        holdsAnswers = responseDelay > 0 || responseJitter > 0 || (errorDelay ?? 0) > 0
    }

    func count(_ update: (inout H2Statistics) -> Void) { events.withLock { update(&$0) } }

    /// The failure the next management request is answered with, if one is still planned.
    func nextManagementFailure() -> APNsReason? { managementFailures.withLock { $0.popFirst() } }

    /// Takes a valid token of `team` issued at `issuedAt` as the team's current one, or refuses it
    /// when it replaces the current one less than `ProviderToken.minimumRefreshInterval`
    /// after that one was issued (429 TooManyProviderTokenUpdates). Tokens are told apart
    /// by their `iat`: signatures differ each time the same claims are signed.
    func adoptToken(team: String, issuedAt: Int64) -> Bool {
        let (adopted, isNew) = teamTokenIssuedAt.withLock { tokens -> (Bool, Bool) in
            let current = tokens[team]
            if let current, current != issuedAt, abs(issuedAt - current) < ProviderToken.minimumRefreshInterval {
                return (false, false)
            }
            tokens[team] = issuedAt
            return (true, current != issuedAt)
        }
        if isNew { count { $0.providerTokensTaken += 1 } }
        return adopted
    }

    /// What the plan does with a valid request. `onConnection` is the request's 1-based
    /// place among its connection's valid requests; `token` is nil for a broadcast, which
    /// the token rules pass over.
    func decision(onConnection: Int, token: DeviceToken?) -> PlanDecision {
        if onConnection == plan.dropEvery { return PlanDecision(drop: true) }
        var decision = PlanDecision()
        if usesOrdinal {
            let position = ordinal.wrappingAdd(1, ordering: .relaxed).newValue
            decision.reason = Self.reason(at: position, plan, broadcast: token == nil)
            if let every = plan.goawayEvery, position % every == 0 { decision.goAway = true }
        }
        guard let token else { return decision }
        if decision.reason == nil, plan.unavailableTokens.contains(token) { decision.reason = .serviceUnavailable }
        if decision.reason == nil { decision.reason = Self.reason(for: token) }
        return decision
    }

    /// The gateway-wide answer rules, in the documented order. A rejected broadcast is
    /// ChannelNotRegistered, a broadcast's counterpart of BadDeviceToken.
    private static func reason(at position: Int, _ plan: H2FailurePlan, broadcast: Bool) -> APNsReason? {
        if let every = plan.rejectEvery, position % every == 0 { return broadcast ? .channelNotRegistered : .badDeviceToken }
        if let every = plan.throttleEvery, position % every == 0 { return .tooManyRequests }
        if let every = plan.unavailableEvery, position % every == 0 { return .serviceUnavailable }
        if let every = plan.internalErrorEvery, position % every == 0 { return .internalServerError }
        return nil
    }

    /// The token rules: hex ending in `dead`, 410 Unregistered; in `fade`, 410 ExpiredToken.
    static func reason(for token: DeviceToken) -> APNsReason? {
        token.withUnsafeBytes { bytes in
            switch (bytes[30], bytes[31]) {
            case (0xde, 0xad): .unregistered
            case (0xfa, 0xde): .expiredToken
            default: nil
            }
        }
    }

    /// How long the answer to stream `stream` of connection `connection` is held, in
    /// nanoseconds: the error delay for an error when the plan has one, else the response
    /// delay plus its jitter.
    func holdTime(isError: Bool, connection: Int, stream: Int32) -> UInt64 {
        if isError, let errorDelay { return errorDelay }
        guard responseJitter > 0 else { return responseDelay }
        let key = UInt64(truncatingIfNeeded: connection) << 32 | UInt64(UInt32(bitPattern: stream))
        // A seed of its own, so that the jitter does not track the identifiers made up
        // from the same key.
        return responseDelay + SplitMix64.draw(seed: plan.seed ^ 0x3177_E2D1, key: key) % (responseJitter + 1)
    }

    /// Adds a connection's accepted broadcasts by channel, and empties its counts.
    func countBroadcasts(_ counts: inout BroadcastCounts) {
        broadcasts.withLock { total in counts.drain(into: &total) }
    }

    /// Accepted broadcasts by channel id.
    func broadcastsByChannel() -> [ChannelID: Int] {
        // Counts first: the ids only grow, so every channel counted is among them after.
        let counts = broadcasts.withLock { $0 }
        let ids = channels.idsByNumber()
        var byChannel: [ChannelID: Int] = [:]
        for (number, count) in counts.enumerated() where count > 0 { byChannel[ids[number]] = count }
        return byChannel
    }

    /// Keeps `requests` while fewer than `H2MockGateway.recordedRequestLimit` are kept.
    func record(_ requests: [H2RecordedRequest]) {
        recordedRequests.withLock { kept in
            kept.append(contentsOf: requests.prefix(max(0, H2MockGateway.recordedRequestLimit - kept.count)))
        }
    }
}

/// What the failure plan decided for a valid request.
struct PlanDecision: Equatable {
    /// Close the connection without answering (the drop rule); nothing else applies.
    var drop = false
    /// The error to answer with; nil: accept (200).
    var reason: APNsReason?
    /// Go away once the request is judged (the goaway rule).
    var goAway = false
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

/// A connection's accepted broadcasts by channel number since it last published them:
/// an array and the numbers it touched, so that counting is an index, and publishing
/// visits only the channels counted.
struct BroadcastCounts {
    private var counts: [Int] = []
    private var touched: [Int32] = []

    var isEmpty: Bool { touched.isEmpty }

    mutating func add(_ channel: Int32) {
        let number = Int(channel)
        if number >= counts.count { counts.append(contentsOf: repeatElement(0, count: number + 1 - counts.count)) }
        if counts[number] == 0 { touched.append(channel) }
        counts[number] += 1
    }

    /// Adds the counts to `total` (by number, grown as needed) and zeroes them.
    mutating func drain(into total: inout [Int]) {
        for channel in touched {
            let number = Int(channel)
            if number >= total.count { total.append(contentsOf: repeatElement(0, count: number + 1 - total.count)) }
            total[number] += counts[number]
            counts[number] = 0
        }
        touched.removeAll(keepingCapacity: true)
    }
}
