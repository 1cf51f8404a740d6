import Logging
import SalvoIO
import SalvoTelemetry
import Synchronization

/// How many of the sender's connections producers publish to: the configured number at
/// first, more while those in use cannot take more, up to a ceiling. Two signals say so:
/// - **Every staging ring is full** (either protocol): the gateway, the path or a connection
///   restarting after an error takes no more; one is added per `interval`.
/// - **Every connection has all its streams open with work waiting** (HTTP/2): a connection's
///   rate is its streams ÷ the answer time, so the count is multiplied; each later step is
///   judged by the shortest answer and the rate it brought, and may be given back.
///
/// Connections are never closed: one nobody publishes to costs nothing, and one in use until the
/// end loses nothing. Any thread. Why each rule and constant: the Connection growth article.
final class ConnectionGrowth: Sendable {
    /// The most connections there may be.
    let ceiling: Int
    private let initial: Int
    private let interval: UInt64
    /// Connections in use; read on every publish, so kept apart from `state`.
    private let active: Atomic<Int>
    private let state: Locked<State>
    /// Whether a full ring may add a connection at all (none saturated, growth not stopped):
    /// kept apart from `state` for producers, which ask each time every ring is full, and
    /// would otherwise contend for the lock with the loops reporting saturation.
    private let addsWhenFull = Atomic<Bool>(true)
    /// When a full ring last added a connection (monotonic ns, 0: never); written under the
    /// lock, read before it, for the same reason: most stalls fall within the interval.
    private let lastAddition = Atomic<UInt64>(0)
    /// Called when connections are added (set by the sender over HTTP/2, where it wakes the
    /// shards: a new connection takes from its shard's ring, and nothing else would pump
    /// it before its shard's next wake-up).
    private let waker = Locked<(@Sendable () -> Void)?>(nil)
    private let logger: Logger

    private struct State {
        /// The shortest TCP round trip a connection reported: the network's part of an answer time.
        var networkRoundTrip: UInt64 = .max
        var latest: UInt64 = 0
        var saturated = 0
        /// The shortest answer time of the run: the one with the least of the gateway's queue in it.
        var shortestOfRun: UInt64 = .max
        /// Since when all in use are saturated (0: not since the last step), and the shortest answer since.
        var loadedSince: UInt64 = 0
        var shortestWhileLoaded: UInt64 = .max
        var steppedAt: UInt64 = 0
        /// Where the rate is counted from: the accepted count and when (nil: not yet; see `measureRate`).
        var rateFrom: (time: UInt64, accepted: Int)?
        /// The count before the step being judged and its rate, or for a step on held answers the most
        /// their streams allowed (`isBound`); nil when there is nothing to judge the step against.
        var beforeStep: (count: Int, rate: Double, isBound: Bool)?
        /// Windows of rate since the step, the rate of the last if it fell short, and of the last measured.
        var judgedWindows = 0
        var shortWindow: Double?
        var lastWindow: Double?
        /// Why no more connections are added, once that is settled.
        var stop: Stop?
        var addedWhileFull = 0
        var addedWhileSaturated = 0
    }

    private enum Stop {
        case gatewayBound
        case diminishing(to: Int, from: Int, gain: Double, wanted: Double)
        case steppedBack(from: Int, to: Int, gain: Double, required: Double)
        case streamsNoLongerBound(connections: Int, share: Double)
    }

    private enum Change {
        case grew(from: Int, to: Int, rate: Double?)
        case steppedBack(from: Int, to: Int, rate: Double, before: Double)
        case gatewayBound(Int)
        case diminishing(Int)
        case streamsNoLongerBound(Int)
        case measured(connections: Int, saturated: Int, rate: Double)
    }

    init(initial: Int, ceiling: Int, interval: Duration, logger: Logger = .disabled) {
        self.logger = logger
        self.initial = initial
        self.ceiling = max(initial, ceiling)
        self.interval = interval.nanosecondsClamped
        active = Atomic(initial)
        state = Locked(State())
    }

    /// What a step multiplies the connections by while every one is saturated.
    static let saturatedGrowth = 4
    /// The count after `current` for a step following one on held answers while the connections carry
    /// `heldShare` of what their streams allow but not all of it: a third more, for the cores are close.
    static func afterHeldStep(_ current: Int) -> Int { current + (current + 2) / 3 }

    /// What a step judged by the rate multiplies the connections by: two, not four, for a step given
    /// back cannot take back what was staged for the added ones, which over a long path connect late.
    static let judgedGrowth = 2

    /// How much a step from `previous` to `current` connections must raise the rate to be kept: a
    /// twelfth of the added ones' share (1.08× for a doubling), a low bar as a window's rate varies.
    static func requiredGain(from previous: Int, to current: Int) -> Double {
        1 + (Double(current) / Double(max(1, previous)) - 1) / 12
    }

    /// How much a step must have raised the rate for another to be taken: half of the added
    /// connections' share (1.5× for a doubling).
    static func continuingGain(from previous: Int, to current: Int) -> Double {
        1 + (Double(current) / Double(max(1, previous)) - 1) / 2
    }

    /// Connections in use: producers publish to the first this many.
    var count: Int { active.load(ordering: .acquiring) }

    /// Every connection in use was full at `now` (monotonic ns): adds one if the ceiling and interval allow.
    func stalled(at now: UInt64) -> Bool {
        guard active.load(ordering: .relaxed) < ceiling, addsWhenFull.load(ordering: .relaxed),
              isPastInterval(now) else { return false }
        let added = state.withLock { state in
            // Read again under the lock: both kinds of growth store the count under it.
            let current = active.load(ordering: .relaxed)
            // While connections are saturated their rings are full because of it: `considerGrowing` decides.
            guard current < ceiling, state.stop == nil, state.saturated == 0, isPastInterval(now) else { return false }
            lastAddition.store(now, ordering: .relaxed)
            state.addedWhileFull += 1
            active.store(current + 1, ordering: .releasing)
            return true
        }
        if added {
            logger.info("connection added: every staging ring was full", metadata: ["connections": "\(count)", "ceiling": "\(ceiling)"])
            waker.withLock { $0 }?()
        }
        return added
    }

    /// Sets (or, with nil, clears) what is called when connections are added.
    func setWaker(_ wake: (@Sendable () -> Void)?) {
        waker.withLock { $0 = wake }
    }

    /// Whether a full ring may add a connection at `now`: none added yet, or the last an
    /// `interval` ago.
    private func isPastInterval(_ now: UInt64) -> Bool {
        let last = lastAddition.load(ordering: .relaxed)
        return last == 0 || now &- last >= interval
    }

    /// A connection was established; `roundTrip`: its TCP round trip so far, in nanoseconds.
    func connected(roundTrip: UInt64) {
        state.withLock { $0.networkRoundTrip = min($0.networkRoundTrip, roundTrip) }
    }

    /// A connection reached its stream limit with work waiting (`saturated`), or left it.
    func saturationChanged(_ saturated: Bool) {
        state.withLock { state in
            state.saturated += saturated ? 1 : -1
            updateAddsWhenFull(state)
        }
    }

    /// Under the lock, after `saturated` or `stop` changed.
    private func updateAddsWhenFull(_ state: State) {
        addsWhenFull.store(state.saturated == 0 && state.stop == nil, ordering: .relaxed)
    }

    /// Asked by a saturated connection now and then: `answerTime`, its shortest wait for an answer since
    /// it last asked (0: none); `accepted`, notifications accepted in the run (0: not counted); `streams`,
    /// how many it may have open (0: not said); `time`, monotonic ns. Returns whether it added connections.
    @discardableResult
    func considerGrowing(answerTime: UInt64, accepted: Int = 0, streams: Int = 0, at time: UInt64) -> Bool {
        let change = state.withLock { state in
            defer { updateAddsWhenFull(state) }
            return decide(&state, answerTime: answerTime, accepted: accepted, streams: streams, at: time)
        }
        guard let change, log(change, answerTime: answerTime) else { return false }
        waker.withLock { $0 }?()
        return true
    }

    /// Under the lock: measures the rate, judges the last step, takes the next when every connection is saturated.
    private func decide(_ state: inout State, answerTime: UInt64, accepted: Int, streams: Int, at time: UInt64) -> Change? {
        // Shards' loops cache their clocks, so one's time can lag another's: never go back (it would wrap).
        let now = max(time, state.latest)
        state.latest = now
        if answerTime > 0 { state.shortestOfRun = min(state.shortestOfRun, answerTime) }
        let current = active.load(ordering: .relaxed)
        // At the ceiling, the step that reached it is still judged.
        let judging = state.beforeStep != nil && state.judgedWindows < Self.judgedWindows
        guard state.stop == nil, current < ceiling || judging else { return nil }
        let allSaturated = state.saturated >= current
        if allSaturated && state.loadedSince == 0 {
            state.loadedSince = now
            state.shortestWhileLoaded = .max
        }
        let roundTrip = state.shortestOfRun
        let rate = measureRate(&state, accepted: accepted, roundTrip: roundTrip, at: now)
        let windowBefore = rate == nil ? nil : state.lastWindow
        if let rate {
            state.lastWindow = rate
            if judging, let steppedBack = judgeWindow(&state, rate: rate, current: current) { return steppedBack }
        }
        let measured = rate.map { Change.measured(connections: current, saturated: state.saturated, rate: $0) }
        guard allSaturated, current < ceiling else { return measured }
        if answerTime > 0 { state.shortestWhileLoaded = min(state.shortestWhileLoaded, answerTime) }
        guard state.shortestWhileLoaded != .max else {
            // Nothing answered yet: the answer time is at least the wait, so a long wait makes a step safe.
            guard roundTrip == .max, now &- state.loadedSince >= Self.unansweredStep.nanosecondsClamped else { return nil }
            return grow(&state, from: current, rate: nil, at: now)
        }
        guard state.addedWhileSaturated > 0 else { return grow(&state, from: current, rate: nil, at: now) }
        // Answers the gateway held: the rate is known without counting. Stepped at once unless the answers
        // since every connection was loaded took a quarter longer than the run's shortest: a queue, so the
        // connections may already be more than the cores fill, and the shortest-answer rule is waited for.
        let heldRate = state.beforeStep == nil
            ? Self.heldAnswersRate(connections: current, streams: streams, answerTime: roundTrip, network: state.networkRoundTrip)
            : nil
        let heldUnqueued = heldRate != nil && state.shortestWhileLoaded < roundTrip + roundTrip / 4
        guard heldUnqueued || now &- state.loadedSince >= roundTrip + roundTrip / 4 + Self.measurementSlack else { return measured }
        // Counted, the rate is waited for: the step it judges is taken on it, not while the last is in doubt.
        if heldRate == nil && accepted > 0 && (rate == nil || state.shortWindow != nil) { return measured }
        var coresClose = false
        if let before = state.beforeStep, let rate {
            switch judgeLastStep(&state, before: before, rate: rate, windowBefore: windowBefore, current: current,
                                 streams: streams, roundTrip: roundTrip) {
            case .wait: return measured
            case .stop(let change): return change
            case .another(let afterHeldStep): coresClose = afterHeldStep
            }
        }
        // Answers half as long again as the run's shortest: the gateway's queue, not the round trip, bounds the rate.
        if state.shortestWhileLoaded >= roundTrip + roundTrip / 2 {
            state.stop = .gatewayBound
            return .gatewayBound(current)
        }
        return grow(&state, from: current, rate: heldRate ?? rate, isBound: heldRate != nil,
                    afterHeldStep: coresClose, at: now)
    }

    /// One window of rate after a step: a step short of what it must bring twice in a row is given back.
    private func judgeWindow(_ state: inout State, rate: Double, current: Int) -> Change? {
        guard let before = state.beforeStep else { return nil }
        let required = Self.requiredGain(from: before.count, to: current)
        state.judgedWindows += 1
        // What the streams allowed is a bound, not a count the step can fall short of.
        if before.isBound || rate >= before.rate * required {
            state.shortWindow = nil
            return nil
        }
        guard let previous = state.shortWindow else {
            state.shortWindow = rate
            return nil
        }
        // Two windows in a row: one alone can be a stall the step did not cause.
        let gain = (previous + rate) / 2 / before.rate
        state.stop = .steppedBack(from: current, to: before.count, gain: gain, required: required)
        active.store(before.count, ordering: .releasing)
        return .steppedBack(from: current, to: before.count, rate: rate, before: before.rate)
    }

    /// Wait for another window, no more steps, or another (smaller after held answers when the cores are close).
    private enum StepVerdict {
        case wait
        case stop(Change)
        case another(afterHeldStep: Bool)
    }

    /// Whether the last step earned another: half its share of rate, or on held answers nearly all the streams allow.
    private func judgeLastStep(_ state: inout State, before: (count: Int, rate: Double, isBound: Bool), rate: Double,
                               windowBefore: Double?, current: Int, streams: Int, roundTrip: UInt64) -> StepVerdict {
        // The first window after a step still has the added connections' ramp in it: measured twice.
        guard state.judgedWindows >= 2 else { return .wait }
        guard before.isBound else {
            let wanted = Self.continuingGain(from: before.count, to: current)
            if rate < before.rate * wanted {
                state.stop = .diminishing(to: current, from: before.count, gain: rate / before.rate, wanted: wanted)
                return .stop(.diminishing(current))
            }
            return .another(afterHeldStep: false)
        }
        // Two windows in a row, for held answers come back in waves and one window can catch the crest.
        let bound = Self.heldAnswersRate(connections: current, streams: streams, answerTime: roundTrip,
                                         network: state.networkRoundTrip)
        let sustained = min(rate, windowBefore ?? 0)
        if let bound, sustained < bound * Self.heldShare {
            state.stop = .streamsNoLongerBound(connections: current, share: sustained / bound)
            return .stop(.streamsNoLongerBound(current))
        }
        return .another(afterHeldStep: bound.map { sustained < $0 } ?? false)
    }

    /// Logs `change`; whether it added connections.
    private func log(_ change: Change, answerTime: UInt64) -> Bool {
        switch change {
        case let .measured(connections, saturated, rate):
            logger.debug("accepted rate measured", metadata: [
                "connections": "\(connections)", "saturated": "\(saturated)", "accepted_per_s": "\(Int(rate))",
            ])
            return false
        case let .grew(from, to, rate):
            logger.info("connections added: every connection had all its streams open with work waiting", metadata: [
                "from": "\(from)", "to": "\(to)", "answer_time_ms": "\(answerTime / 1_000_000)",
                "accepted_per_s": "\(rate.map { "\(Int($0))" } ?? "not measured")",
            ])
            return true
        case let .steppedBack(from, to, rate, before):
            logger.notice("connections given back: the last step did not raise the rate", metadata: [
                "from": "\(from)", "to": "\(to)", "accepted_per_s": "\(Int(rate))", "before": "\(Int(before))",
            ])
            return false
        case let .diminishing(connections):
            logger.notice("no more connections: the last step brought less than half its share of rate",
                          metadata: ["connections": "\(connections)"])
            return false
        case let .streamsNoLongerBound(connections):
            logger.notice("no more connections: the streams no longer bound the rate, the cores or the path do",
                          metadata: ["connections": "\(connections)"])
            return false
        case let .gatewayBound(connections):
            logger.notice("no more connections: the last ones added made the gateway's answers slower, not more frequent",
                          metadata: ["connections": "\(connections)"])
            return false
        }
    }

    /// Saturated this long before the run's first answer, connections are multiplied: an answer time per step is too slow.
    static let unansweredStep: Duration = .milliseconds(20)
    /// Added to a round trip before what it measures is judged: timers fire late.
    private static let measurementSlack = Duration.milliseconds(10).nanosecondsClamped

    /// The shortest answer time from which answers are held by the gateway, whatever the network: a
    /// gateway that answers at once does so in a few milliseconds, queue included.
    static let heldAnswerTime: UInt64 = unansweredStep.nanosecondsClamped

    /// How many network round trips an answer time must be for the answers to have been held by the
    /// gateway: over a full path an answer time is the round trip and the queue in front of it.
    static let heldAnswers: UInt64 = 8

    /// The share of what their streams allow (`heldAnswersRate`) connections must carry, answers held, for
    /// another step: nearly all of it while the streams bound the rate, much less once the cores do.
    static let heldShare = 0.85

    /// What `connections` of `streams` streams carry per second when the gateway holds every answer
    /// `answerTime` ns and nothing else bounds them; nil unless held (see `heldAnswers`) and streams known.
    static func heldAnswersRate(connections: Int, streams: Int, answerTime: UInt64, network: UInt64) -> Double? {
        guard streams > 0, network != .max, answerTime != .max, answerTime >= heldAnswerTime,
              answerTime / heldAnswers >= network else { return nil }
        return Double(connections * streams) * 1e9 / Double(answerTime)
    }

    /// The accepted rate per second over the window that ended now, if one did; windows start again while
    /// fewer are saturated than the judged step started from: at a campaign's end the rate falls with the work.
    private func measureRate(_ state: inout State, accepted: Int, roundTrip: UInt64, at now: UInt64) -> Double? {
        guard accepted > 0, roundTrip != .max,
              state.saturated >= state.beforeStep?.count ?? active.load(ordering: .relaxed) else {
            state.rateFrom = nil
            state.lastWindow = nil
            return nil
        }
        guard let from = state.rateFrom else {
            let loaded = state.loadedSince != 0 && now &- state.loadedSince >= roundTrip
            if loaded || now &- state.steppedAt >= Self.unsaturatedJudgement * roundTrip { state.rateFrom = (now, accepted) }
            return nil
        }
        guard now &- from.time >= roundTrip + Self.measurementSlack else { return nil }
        state.rateFrom = (now, accepted)
        return Double(accepted - from.accepted) * 1e9 / Double(now &- from.time)
    }

    /// How many windows of rate a step is judged over, given back once two in a row fall short: over a
    /// long path, added connections first carry what they were given, and only then share the path.
    static let judgedWindows = 4

    /// After how many answer times a step whose connections do not all saturate is judged all the same:
    /// over a long path, added connections take that long to connect and leave slow start.
    static let unsaturatedJudgement: UInt64 = 8

    /// Steps from `current`, remembering the rate it carried (if measured) to judge the step by.
    private func grow(_ state: inout State, from current: Int, rate: Double?, isBound: Bool = false,
                      afterHeldStep: Bool = false, at now: UInt64) -> Change {
        let grown = min(ceiling, afterHeldStep ? Self.afterHeldStep(current)
                                               : (rate == nil ? Self.saturatedGrowth : Self.judgedGrowth) * current)
        state.loadedSince = 0
        state.steppedAt = now
        state.rateFrom = nil
        state.judgedWindows = 0
        state.shortWindow = nil
        state.lastWindow = nil
        state.beforeStep = rate.map { (current, $0, isBound) }
        state.addedWhileSaturated += grown - current
        active.store(grown, ordering: .releasing)
        return .grew(from: current, to: grown, rate: rate)
    }

    /// Why there are `count` connections, for the report.
    var reason: String {
        let count = self.count
        return state.withLock { state in
            var reason = "\(initial) at the start"
            if state.addedWhileSaturated > 0 {
                reason += "; \(state.addedWhileSaturated) added because every connection had all the streams its gateway "
                    + "allows open with more notifications waiting (a connection's rate is its streams ÷ the answer time)"
            }
            if state.addedWhileFull > 0 {
                reason += "; \(state.addedWhileFull) added because every connection's staging ring was full (the gateway "
                    + "or the path took no more)"
            }
            switch state.stop {
            case .gatewayBound:
                reason += "; no more: the last added made the gateway's answers slower, not more frequent"
            case let .diminishing(to, from, gain, wanted):
                reason += "; no more: the step from \(from) to \(to) carried \(Self.times(gain)) the rate (another step "
                    + "needs \(Self.times(wanted)), half the added connections' share), so the next would bring less"
            case let .steppedBack(from, to, gain, required):
                reason += "; \(from - to) of them given back: \(from) connections carried \(Self.times(gain)) the rate "
                    + "of the \(to) before them (a step must bring \(Self.times(required))), so producers went back to \(to) "
                    + "and the others only drained what they held"
            case let .streamsNoLongerBound(connections, share):
                reason += "; no more: with the answers held, \(connections) connections carried \(Self.percent(share)) of "
                    + "what their streams allow (another step needs \(Self.percent(Self.heldShare))), so the cores or the "
                    + "path, not the streams, bound the rate"
            case nil:
                if count == ceiling && count > initial {
                    reason += "; the ceiling, \(ceiling) (--max-connections × shards), was reached"
                }
            }
            return reason
        }
    }

    private static func percent(_ ratio: Double) -> String { "\(Int((ratio * 100).rounded())) %" }

    private static func times(_ ratio: Double) -> String {
        let hundredths = Int((ratio * 100).rounded())
        return "\(hundredths / 100).\(hundredths % 100 < 10 ? "0" : "")\(hundredths % 100)×"
    }
}
