import Logging
import SalvoIO
import SalvoTelemetry
import Synchronization

/// How many of the sender's connections producers publish to: the configured number at
/// first, more while those in use cannot take more, up to a ceiling. Two signals say so:
///
/// - **Every staging ring is full** (either protocol): nothing downstream takes more: the
///   gateway, the path, or a connection the gateway closed after an error response and
///   whose replacement restarts TCP's slow start (over 50 ms that is about eight round
///   trips per error). Another connection carries on meanwhile, so one is added while
///   that lasts, at most one per `interval`, so that the last one has had time to show
///   its effect.
/// - **Every connection has all the streams its gateway allows open, with work waiting**
///   (HTTP/2). A connection's rate is then its streams ÷ the answer time (1000 streams
///   answered in 200 ms carry 5000/s however idle the sender is), and the count is
///   multiplied by four: from 2 to 128 in three steps, so that a campaign of a million
///   is not spent ramping up (by doubling, six steps of an answer time each took a third
///   of such a run at 300 ms). Unless something else bounds the rate. So each step after
///   the first is judged, once every connection has been saturated long enough, by two
///   measures:
///   - **The shortest answer**: if the shortest answer time over an answer time and a
///     quarter is half as long again as the shortest of the run (the shortest, as the
///     least queued: the round trip itself does not grow with load), the gateway, not the
///     round trip, bounds the rate: no more steps, and none given back (the rate did
///     grow). Kept beside the rate: it stops a step sooner, before the next step's
///     connections are opened to be measured (on loopback, at 12 connections).
///   - **The rate it brought**: notifications accepted per second over a whole answer
///     time (held answers come back in waves an answer time apart), from an answer time
///     after every connection was saturated, against the same measure before the step
///     (`measureRate`). A step that does not raise it by `requiredGain` in two windows
///     in a row (of its first `judgedWindows`) is given back: producers go back to the
///     connections before it (the added ones drain what they hold), and none are added
///     for the rest of the run. Then the gateway, the path or the cores bound the rate,
///     and the added connections only cost: with answers held 100 ms on two cores, 192
///     connections carried 0.4–1.0× what 96 did; over a 50 ms path, 96 carried 0.5–0.6×
///     what 48 did (with the shortest answer alone and 128 per shard, 48 became 192,
///     which carried 64–75 % of bulk TCP where 128 had carried 86–92 %), while the
///     shortest answer stayed the round trip. Once there is a rate to judge by, a step
///     doubles the connections (`judgedGrowth`), and one that brought less than half its
///     share is the last (`continuingGain`).
///
///   Before the run's first answer there is nothing to judge by, and waiting for it is
///   the slowest ramp: a step is taken every `unansweredStep` until it comes. Meanwhile
///   full rings are the saturated connections' own, and add nothing.
///
///   **Answers held by the gateway.** When the first answers come while every connection
///   is saturated, and they took far longer than the network's round trip (`heldAnswers`:
///   Apple taking 100–300 ms to answer over a path of a few), nothing but the streams
///   bounds what the connections carry: their streams ÷ the answer time. That rate is
///   computed, not counted, and the step judged by it is taken at once, while the answers
///   show no queue: the run's shortest answer is one of the first, sent before any queue
///   built up (on a loaded loopback 0–2 ms), so a long one was held, not queued, and the
///   answers since every connection was loaded are within a quarter of it. (Answers that
///   do queue say the connections may already be more than the cores fill: then the
///   shortest-answer rule is waited for, as above.) Waiting for it every time, 96
///   connections came 250–305 ms into a 1.65 s run at 100 ms, and 256 came 750 ms into a
///   2 s run at 300 ms; now 120–150 ms and about 400 ms. What the streams allowed is the
///   most the connections before the step could carry, not what they did, so such a step
///   is not given back; another follows while the connections carry `heldShare` of what
///   their streams allow, two windows in a row (the answers come back in waves, and one
///   window can catch a crest): a doubling if they carry all of it, else a third more
///   (`afterHeldStep`). Over a full path (answers about a round trip long) the rate is
///   counted as before.
///
/// Connections are never closed: one nobody publishes to costs nothing, and one in use
/// until the end loses nothing. Any thread.
final class ConnectionGrowth: Sendable {
    /// The most connections there may be.
    let ceiling: Int
    private let initial: Int
    private let interval: UInt64
    /// Connections in use; read on every publish, so kept apart from `state`.
    private let active: Atomic<Int>
    private let state: Locked<State>
    private let logger: Logger

    private struct State {
        /// When a connection was last added because every ring was full.
        var lastAddition: UInt64 = 0
        /// The shortest smoothed TCP round trip a connection reported (`connected`): the
        /// network's part of an answer time.
        var networkRoundTrip: UInt64 = .max
        /// The latest time `considerGrowing` was told.
        var latest: UInt64 = 0
        /// Connections at their stream limit with work waiting (`saturationChanged`).
        var saturated = 0
        /// The shortest answer time reported in the run: the round trip with the least of
        /// the gateway's queue in it.
        var shortestOfRun: UInt64 = .max
        /// Since when every connection in use, the last step's included, has been saturated
        /// (0: not since the last step), and the shortest answer time reported since.
        var loadedSince: UInt64 = 0
        var shortestWhileLoaded: UInt64 = .max
        /// When the last step was taken.
        var steppedAt: UInt64 = 0
        /// Where the rate of the connections in use is counted from: the accepted count
        /// and when (nil: not yet; see `considerGrowing`).
        var rateFrom: (time: UInt64, accepted: Int)?
        /// The connections before the step being judged and the rate they carried (per
        /// second), or, for a step taken on held answers, the most their streams allowed
        /// (`isBound`); nil when there is nothing to judge it against (the first step,
        /// those before the first answer, or no rate measured).
        var beforeStep: (count: Int, rate: Double, isBound: Bool)?
        /// Windows of rate since the step, and the rate of the last if it fell short.
        var judgedWindows = 0
        var shortWindow: Double?
        /// The rate of the last window measured since the step (nil: none yet).
        var lastWindow: Double?
        /// Why no more connections are added, once that is settled.
        var stop: Stop?
        /// Added because every ring was full, and because every connection was saturated.
        var addedWhileFull = 0
        var addedWhileSaturated = 0
    }

    private enum Stop {
        /// More streams made answers slower, not more frequent.
        case gatewayBound
        /// The step from `from` to `to` raised the rate by `gain`, less than the `wanted`
        /// to take another.
        case diminishing(to: Int, from: Int, gain: Double, wanted: Double)
        /// `from` connections carried `gain` times the rate of the `to` before them, less
        /// than `required`: producers went back to `to`.
        case steppedBack(from: Int, to: Int, gain: Double, required: Double)
        /// With answers held, `connections` carried `share` of what their streams allow,
        /// less than `heldShare`.
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
    /// The count after `current` for a step that follows one taken on held answers while
    /// the connections carry `heldShare` of what their streams allow but not all of it: a
    /// third more, not double, for then the cores are close. A third more lifts the
    /// streams' bound to 1.5× the rate carried or more (4/3 ÷ 0.85), beyond what cores that
    /// already bite can add; further connections only cost them. At 100 ms on two cores,
    /// a fixed 128 carried 6–9 % more than 96, and 4–6 % more than the 192 a doubling
    /// reached. Carrying all of it (two windows at the bound or above), the streams alone
    /// bind, and the step doubles as any judged step: at 50 ms, 24 connections carried
    /// 108 % of their bound, and adding a third at a time took two steps more to 64 and lost
    /// 3–7 % (medians of three interleaved pairs, twice). The step is then judged by its
    /// counted rate, as any other.
    static func afterHeldStep(_ current: Int) -> Int { current + (current + 2) / 3 }

    /// What a step judged by the rate of the connections before it multiplies them by. A
    /// step given back cannot take back what producers staged for the added connections
    /// meanwhile (a ring each), and over a full path these connect late: at 50 ms, 144
    /// added to 48 connected 1.1 s later (TCP's SYN retransmission timeout is a second),
    /// with about 288,000 notifications staged for them, and the run fell from 86–92 % of
    /// bulk TCP to 62 %. Doubling, the 48 added to 48 connected at once.
    static let judgedGrowth = 2

    /// How much a step from `previous` to `current` connections must raise the rate to be
    /// kept: a twelfth of what the added connections would bring if each carried what
    /// each before them did: 1.08× for twice the connections, 1.04× for a last step to a
    /// ceiling half as high again. Where the streams bound the rate, a step brought nearly
    /// all of its share (at 100 ms answers, 48 to 96 connections: 451,000 to 793,000/s;
    /// over the 50 ms path, 24 to 48: 114,000 to 228,000/s); where something else did,
    /// nothing or less (100 ms, 96 to 192: 0.4–0.7×; the path, 48 to 96: 1.10×, 1.23×, then
    /// 0.95× in its first three windows). A window's rate varies by about a tenth, so a
    /// low bar, but one every window must clear.
    static func requiredGain(from previous: Int, to current: Int) -> Double {
        1 + (Double(current) / Double(max(1, previous)) - 1) / 12
    }

    /// How much a step must have raised the rate for another to be taken: half of what the
    /// added connections would bring if each carried what each before them did (1.5× for
    /// a doubling). At 100 ms answers, 48 to 96 brought 1.5–1.8×; over the 50 ms path, 48
    /// to 96 brought 1.0–1.3× in its second window, and 96 to 192 then lost a quarter
    /// to half of the rate.
    static func continuingGain(from previous: Int, to current: Int) -> Double {
        1 + (Double(current) / Double(max(1, previous)) - 1) / 2
    }

    /// Connections in use: producers publish to the first this many.
    var count: Int { active.load(ordering: .acquiring) }

    /// Every connection in use was full at `now` (monotonic nanoseconds): adds one when
    /// the ceiling and the interval allow. Returns whether it did.
    func stalled(at now: UInt64) -> Bool {
        guard active.load(ordering: .relaxed) < ceiling else { return false }
        let added = state.withLock { state in
            // Read again under the lock: both kinds of growth store the count under it.
            let current = active.load(ordering: .relaxed)
            // While connections are saturated, their rings are full because of it, and
            // `considerGrowing` decides (HTTP/2).
            guard current < ceiling, state.stop == nil, state.saturated == 0,
                  state.lastAddition == 0 || now &- state.lastAddition >= interval else { return false }
            state.lastAddition = now
            state.addedWhileFull += 1
            active.store(current + 1, ordering: .releasing)
            return true
        }
        if added {
            logger.info("connection added: every staging ring was full", metadata: ["connections": "\(count)", "ceiling": "\(ceiling)"])
        }
        return added
    }

    /// A connection was established; `roundTrip` is its TCP round trip (nanoseconds), as
    /// the kernel has measured it so far.
    func connected(roundTrip: UInt64) {
        state.withLock { $0.networkRoundTrip = min($0.networkRoundTrip, roundTrip) }
    }

    /// A connection reached its stream limit with work waiting (`saturated`), or left it.
    func saturationChanged(_ saturated: Bool) {
        state.withLock { $0.saturated += saturated ? 1 : -1 }
    }

    /// Asked by a saturated connection now and then (`answerTime`: the shortest wait of one
    /// of its streams for an answer since it last asked, 0 when none was answered since;
    /// `accepted`: notifications accepted in the run so far, by every connection, 0 when
    /// not counted; `streams`: how many streams it may have open, 0 when not said; `time`:
    /// monotonic nanoseconds):
    /// once every connection in use is saturated, multiplies them by `saturatedGrowth`
    /// (`judgedGrowth` once there is a rate to judge the step by), up to the ceiling.
    /// After the first step, only once they have all been saturated for long enough to
    /// judge the last step:
    /// - the shortest answer time since must be under one and a half times the shortest
    ///   of the run (the round trip itself does not grow with load, the gateway's queue
    ///   does); judged after an answer time and a quarter, so that the answers reported
    ///   were queued behind all of them;
    /// - the accepted rate must have grown by `requiredGain` since the step, or, after two
    ///   windows in a row that fell short, the step is given back. It is counted over a
    ///   whole answer time (held answers come back in waves an answer time apart), from an
    ///   answer time after every connection was saturated (earlier answers are for streams
    ///   opened before), or, when they do not all get there (a path too full to take their
    ///   requests), from `unsaturatedJudgement` answer times after the step;
    /// - a count reached by a judged step is measured for two windows, and grows again
    ///   only if that step brought `continuingGain`.
    ///
    /// Before the run's first answer, once they have all been saturated for `unansweredStep`.
    /// When the gateway holds its answers (`heldAnswers`), the first step after the first
    /// answer is taken at once, judged by the rate the streams allow, not waiting for it to
    /// be counted; it is not given back, and grows again only while the connections carry
    /// `heldShare` of what their streams allow, by a third unless they carry all of it
    /// (`afterHeldStep`). Returns whether it added connections.
    @discardableResult
    func considerGrowing(answerTime: UInt64, accepted: Int = 0, streams: Int = 0, at time: UInt64) -> Bool {
        let change = state.withLock { state -> Change? in
            // Each shard's loop reads the clock once per turn: one shard's time can be a little
            // behind what another's already told. Time here never goes back (an interval
            // that did would wrap to a very long one).
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
            if let rate { state.lastWindow = rate }
            if let before = state.beforeStep, judging, let rate {
                let required = Self.requiredGain(from: before.count, to: current)
                state.judgedWindows += 1
                // What the streams allowed is a bound, not a count the step can fall short of.
                if before.isBound || rate >= before.rate * required {
                    state.shortWindow = nil
                } else if let previous = state.shortWindow {
                    // Two windows in a row: one alone can be a stall the step did not cause.
                    let gain = (previous + rate) / 2 / before.rate
                    state.stop = .steppedBack(from: current, to: before.count, gain: gain, required: required)
                    active.store(before.count, ordering: .releasing)
                    return .steppedBack(from: current, to: before.count, rate: rate, before: before.rate)
                } else {
                    state.shortWindow = rate
                }
            }
            let measured = rate.map { Change.measured(connections: current, saturated: state.saturated, rate: $0) }
            guard allSaturated, current < ceiling else { return measured }
            if answerTime > 0 { state.shortestWhileLoaded = min(state.shortestWhileLoaded, answerTime) }
            guard state.shortestWhileLoaded != .max else {
                // Nothing answered in the run yet: the answer time is at least how long the
                // connections have been waiting, so a step is safe once that is long.
                guard roundTrip == .max, now &- state.loadedSince >= Self.unansweredStep.nanosecondsClamped else { return nil }
                return grow(&state, from: current, rate: nil, at: now)
            }
            guard state.addedWhileSaturated > 0 else { return grow(&state, from: current, rate: nil, at: now) }
            // Answers the gateway held: what the connections carry is known without counting.
            // The step is taken at once while the answers since every connection was loaded
            // took no longer than the run's shortest, give or take a quarter: no queue grew
            // (the shortest of the run, one of the first, was long, so held, not queued).
            // Otherwise the connections may already be more than the cores can fill, and the
            // shortest-answer rule is waited for.
            let heldRate = state.beforeStep == nil
                ? Self.heldAnswersRate(connections: current, streams: streams, answerTime: roundTrip, network: state.networkRoundTrip)
                : nil
            let heldUnqueued = heldRate != nil && state.shortestWhileLoaded < roundTrip + roundTrip / 4
            guard heldUnqueued || now &- state.loadedSince >= roundTrip + roundTrip / 4 + Self.measurementSlack else { return measured }
            // Counted, the rate is waited for: the step it judges next is taken on it, and
            // not while the last one is in doubt.
            if heldRate == nil && accepted > 0 && (rate == nil || state.shortWindow != nil) { return measured }
            // After a step on held answers: whether the cores are close (see `afterHeldStep`).
            var coresClose = false
            if let before = state.beforeStep, let rate {
                // The first window after a step still has the added connections' ramp in it
                // (over a path, their slow start), so a count reached by a judged step is
                // measured twice; and a step that brought less than half its share is the
                // last: the next would bring less.
                guard state.judgedWindows >= 2 else { return measured }
                if before.isBound {
                    // After a step on held answers, another while the streams still bound
                    // the rate, two windows in a row: held answers come back in waves, and
                    // one window can catch the crest.
                    let bound = Self.heldAnswersRate(connections: current, streams: streams, answerTime: roundTrip,
                                                     network: state.networkRoundTrip)
                    let sustained = min(rate, windowBefore ?? 0)
                    if let bound, sustained < bound * Self.heldShare {
                        state.stop = .streamsNoLongerBound(connections: current, share: sustained / bound)
                        return .streamsNoLongerBound(current)
                    }
                    coresClose = bound.map { sustained < $0 } ?? false
                } else {
                    let wanted = Self.continuingGain(from: before.count, to: current)
                    if rate < before.rate * wanted {
                        state.stop = .diminishing(to: current, from: before.count, gain: rate / before.rate, wanted: wanted)
                        return .diminishing(current)
                    }
                }
            }
            if state.shortestWhileLoaded >= roundTrip + roundTrip / 2 {
                state.stop = .gatewayBound
                return .gatewayBound(current)
            }
            return grow(&state, from: current, rate: heldRate ?? rate, isBound: heldRate != nil,
                        afterHeldStep: coresClose, at: now)
        }
        switch change {
        case nil:
            return false
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

    /// How long every connection may be saturated before the run's first answer until they
    /// are multiplied anyway. Streams unanswered for 20 ms mean at most 50 per millisecond
    /// per connection at 1000 streams, a fraction of what a shard writes (about 800), so
    /// waiting for the first answer (a whole answer time: 300 ms at Apple on a slow day)
    /// before the first step, and again before each next, would spend a campaign of a
    /// million ramping up. From the first answer on, every step is judged as above.
    static let unansweredStep: Duration = .milliseconds(20)
    /// Added to a round trip before what it measures is judged: timers fire late.
    private static let measurementSlack = Duration.milliseconds(10).nanosecondsClamped

    /// The shortest answer time from which answers are held by the gateway, whatever the
    /// network: a step before the first answer. A gateway that answers at once does so in
    /// a few milliseconds, queue included (loopback: 1–5 ms under load).
    static let heldAnswerTime: UInt64 = unansweredStep.nanosecondsClamped

    /// How many network round trips an answer time must be for the answers to have been
    /// held by the gateway. Over a full path the answer time is the round trip and the
    /// queue in front of it (at 50 ms, 60–120 ms).
    static let heldAnswers: UInt64 = 8

    /// The share of what their streams allow (`heldAnswersRate`) that connections must
    /// carry, with answers held, for another step: while the streams bound the rate they
    /// carry nearly all of it, and once the cores do, much less. Whole runs of a million
    /// on two cores, a fixed count of 1000-stream connections each: at 100 ms, 48 carried
    /// 96 % of it, 64 91 %, 80 84 %, 96 73 %; at 300 ms, 128 96 %, 192 88 %, 256 74 %.
    static let heldShare = 0.85

    /// What `connections` of `streams` streams each carry when the gateway holds every
    /// answer `answerTime` (nanoseconds) and nothing else bounds them, per second; nil
    /// unless the answers are held (far longer than the network round trip `network`, and
    /// at least `heldAnswerTime`) and the streams are known. The most they can carry, so a
    /// step judged by it must bring more than a measured rate would ask for.
    static func heldAnswersRate(connections: Int, streams: Int, answerTime: UInt64, network: UInt64) -> Double? {
        guard streams > 0, network != .max, answerTime != .max, answerTime >= heldAnswerTime,
              answerTime / heldAnswers >= network else { return nil }
        return Double(connections * streams) * 1e9 / Double(answerTime)
    }

    /// The accepted rate (per second) of the connections in use over the window that ended
    /// now, if one did (see `considerGrowing`); nil otherwise. Windows follow each other,
    /// and start again while fewer connections are saturated than the step being judged
    /// started from (or, with none, than are in use): at the end of a campaign the rate
    /// falls because the work does, whatever the connections.
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

    /// How many windows of rate a step is judged over: given back once two in a row fall
    /// short. On a long path, added connections at first carry what they were given on
    /// top of what the others carry, and only then share the path with them.
    static let judgedWindows = 4

    /// After how many answer times a step whose connections do not all saturate is judged
    /// all the same. Over a 50 ms path a connection added takes two round trips to
    /// connect and about five more of slow start to carry a thousand streams' requests
    /// (230 KB); judged at four, a doubling looked like it brought nothing.
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
