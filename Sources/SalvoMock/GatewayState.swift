import SalvoIO
import SalvoWire
import Synchronization

/// What the gateway's loops share: the plan, the gateway-wide notification ordinal, and the
/// counters for rare events (one lock per connection-level event, never per notification).
final class GatewayState: Sendable {
    let rules: PlanRules
    let recordAccepted: Bool
    /// Gateway-wide ordinal of judged notifications, for `rejectEvery`/`rejectProbability`.
    let ordinal = Atomic<Int>(0)
    /// The rare events (rejections, drops, shutdowns, stalls, delays), counted where the
    /// statistics report them; the loops' counters are added to a copy.
    let events = Locked(MockStatistics())
    let accepted = AcceptedRecord()

    init(plan: FailurePlan, recordAccepted: Bool) {
        rules = PlanRules(plan)
        self.recordAccepted = recordAccepted
    }

    func count(_ update: (inout MockStatistics) -> Void) {
        events.withLock { update(&$0) }
    }
}

extension MockStatistics {
    /// One more rejection (or refused malformed frame) with `status`.
    mutating func countRejection(_ status: Status) {
        rejectedByStatus[status.name, default: 0] += 1
        rejected += 1
    }
}

/// The digests of accepted notifications (`MockStatistics.digest`), and how many were
/// accepted before: what `recordAccepted` keeps. One lock per batch.
final class AcceptedRecord: Sendable {
    private struct Record {
        var digests: Set<UInt64> = []
        var duplicates = 0
    }

    private let record = Locked(Record())

    func insert(_ batch: [UInt64]) {
        record.withLock { record in
            for digest in batch where !record.digests.insert(digest).inserted {
                record.duplicates += 1
            }
        }
    }

    /// The distinct digests, sorted, and the duplicate count.
    func snapshot() -> (digests: [UInt64], duplicates: Int) {
        record.withLock { ($0.digests.sorted(), $0.duplicates) }
    }
}

/// Counters a loop publishes after each read; only that loop writes them.
final class LoopCounters: Sendable {
    let accepted = Atomic<Int>(0)
    let simple = Atomic<Int>(0)
    let enhanced = Atomic<Int>(0)
    let frame = Atomic<Int>(0)
    let bytesReceived = Atomic<Int>(0)
}

/// How one connection's stream ends, once the plan has decided.
enum Verdict {
    case reject(Status, identifier: UInt32)
    case shutdown(lastAccepted: UInt32)
    case drop
}

/// A `FailurePlan` flattened for the per-notification path: sentinels instead of optionals
/// and one flag that skips everything when no per-notification rule is set.
struct PlanRules: Sendable {
    let plan: FailurePlan
    /// Any of drop, gateway-wide reject or token rules.
    let judgesEach: Bool
    let dropAfter: Int
    let shutdownAfter: Int
    let stallEvery: Int
    let rejectEvery: Int
    let rejectProbability: Double
    let usesOrdinal: Bool
    let suffix: [UInt8]
    let checksTokens: Bool

    init(_ plan: FailurePlan) {
        self.plan = plan
        dropAfter = plan.dropEvery ?? Int.max
        shutdownAfter = plan.shutdownEvery ?? Int.max
        stallEvery = plan.stallEvery ?? Int.max
        rejectEvery = plan.rejectEvery ?? 0
        rejectProbability = plan.rejectProbability ?? 0
        usesOrdinal = rejectEvery > 0 || rejectProbability > 0
        suffix = plan.invalidTokenSuffix ?? []
        checksTokens = !suffix.isEmpty || !plan.invalidTokens.isEmpty
        judgesEach = plan.dropEvery != nil || usesOrdinal || checksTokens
    }

    /// The rules before acceptance, in the documented order: drop, gateway-wide reject, tokens.
    func verdict(for notification: DecodedNotification, receivedOnConnection: Int, ordinal: borrowing Atomic<Int>) -> Verdict? {
        if receivedOnConnection == dropAfter { return .drop }
        if usesOrdinal {
            let position = ordinal.wrappingAdd(1, ordering: .relaxed).newValue
            if rejectEvery > 0 && position % rejectEvery == 0 {
                return .reject(plan.rejectStatus, identifier: notification.identifier)
            }
            if rejectProbability > 0 && SplitMix64.unit(seed: plan.seed, key: UInt64(position)) < rejectProbability {
                return .reject(plan.rejectStatus, identifier: notification.identifier)
            }
        }
        if checksTokens && isInvalid(notification.token) {
            return .reject(.invalidToken, identifier: notification.identifier)
        }
        return nil
    }

    private func isInvalid(_ token: UnsafeRawBufferPointer) -> Bool {
        if !suffix.isEmpty && token.suffix(suffix.count).elementsEqual(suffix) { return true }
        if !plan.invalidTokens.isEmpty, let value = try? DeviceToken(bytes: token) {
            return plan.invalidTokens.contains(value)
        }
        return false
    }

    /// How long stall number `stall` (1-based) of connection `connection` lasts.
    func stallDelay(connection: Int, stall: Int) -> Duration {
        let jitter = plan.stallJitter.nanosecondsClamped
        guard jitter > 0 else { return plan.stallDuration }
        let key = UInt64(truncatingIfNeeded: connection) << 32 | UInt64(truncatingIfNeeded: stall)
        return plan.stallDuration + .nanoseconds(Int64(SplitMix64.draw(seed: plan.seed, key: key) % jitter))
    }
}
