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
///   of such a run at 300 ms). Unless the answer time is the gateway's queue: then more
///   streams only lengthen it. So each step after the first is judged once every
///   connection has been saturated for an answer time: if the shortest answer time over
///   it is half as long again as the shortest of the run (the shortest, as the least
///   queued: the round trip itself does not grow with load), the gateway, not the round
///   trip, bounds the rate, and the sender stops adding connections for the rest of the
///   run. Before the run's first answer there is nothing to judge by, and waiting for it
///   is the slowest ramp: a step is taken every `unansweredStep` until it comes.
///   Meanwhile full rings are the saturated connections' own, and add nothing.
///
/// Connections are never removed: one nobody publishes to costs nothing, and one in use
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
        /// Connections at their stream limit with work waiting (`saturationChanged`).
        var saturated = 0
        /// The shortest answer time reported in the run: the round trip with the least of
        /// the gateway's queue in it.
        var shortestOfRun: UInt64 = .max
        /// Since when every connection in use, the last step's included, has been saturated
        /// (0: not since the last step), and the shortest answer time reported since.
        var loadedSince: UInt64 = 0
        var shortestWhileLoaded: UInt64 = .max
        /// More streams made answers slower, not more frequent: no more growth.
        var gatewayBound = false
        /// Added because every ring was full, and because every connection was saturated.
        var addedWhileFull = 0
        var addedWhileSaturated = 0
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
            guard current < ceiling, !state.gatewayBound, state.saturated == 0,
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

    /// A connection reached its stream limit with work waiting (`saturated`), or left it.
    func saturationChanged(_ saturated: Bool) {
        state.withLock { $0.saturated += saturated ? 1 : -1 }
    }

    /// Asked by a saturated connection now and then (`answerTime`: the shortest wait of one
    /// of its streams for an answer since it last asked, 0 when none was answered since;
    /// `now`: monotonic nanoseconds):
    /// once every connection in use is saturated, multiplies them by `saturatedGrowth`, up
    /// to the ceiling. After the first step, only once they have all been saturated for an
    /// answer time (so that the answers reported were queued behind all of them), and only
    /// if the shortest answer time over that time is under one and a half times the
    /// shortest of the run: the round trip itself does not grow with load, the gateway's
    /// queue does. Before the run's first answer, once they have all been saturated for
    /// `unansweredStep`. Returns whether it added connections.
    @discardableResult
    func considerGrowing(answerTime: UInt64, at now: UInt64) -> Bool {
        let change = state.withLock { state -> (from: Int, to: Int)? in
            if answerTime > 0 { state.shortestOfRun = min(state.shortestOfRun, answerTime) }
            let current = active.load(ordering: .relaxed)
            guard state.saturated >= current, current < ceiling, !state.gatewayBound else { return nil }
            if state.loadedSince == 0 {
                state.loadedSince = now
                state.shortestWhileLoaded = .max
            }
            if answerTime > 0 { state.shortestWhileLoaded = min(state.shortestWhileLoaded, answerTime) }
            guard state.shortestWhileLoaded != .max else {
                // Nothing answered in the run yet: the answer time is at least how long the
                // connections have been waiting, so a step is safe once that is long.
                guard state.shortestOfRun == .max, now &- state.loadedSince >= Self.unansweredStep else { return nil }
                return grow(&state, from: current)
            }
            if state.addedWhileSaturated > 0 {
                let roundTrip = state.shortestOfRun
                guard now &- state.loadedSince >= roundTrip + roundTrip / 4 + 10_000_000 else { return nil }
                if state.shortestWhileLoaded >= roundTrip + roundTrip / 2 {
                    state.gatewayBound = true
                    return (current, current)
                }
            }
            return grow(&state, from: current)
        }
        guard let change else { return false }
        guard change.to > change.from else {
            logger.notice("no more connections: the last ones added made the gateway's answers slower, not more frequent",
                          metadata: ["connections": "\(change.to)"])
            return false
        }
        logger.info("connections added: every connection had all its streams open with work waiting", metadata: [
            "from": "\(change.from)", "to": "\(change.to)", "answer_time_ms": "\(answerTime / 1_000_000)",
        ])
        return true
    }

    /// How long every connection may be saturated before the run's first answer until they
    /// are multiplied anyway. Streams unanswered for 20 ms mean at most 50 per millisecond
    /// per connection at 1000 streams, a fraction of what a shard writes (about 800), so
    /// waiting for the first answer (a whole answer time: 300 ms at Apple on a slow day)
    /// before the first step, and again before each next, would spend a campaign of a
    /// million ramping up. From the first answer on, every step is judged as above.
    static let unansweredStep: UInt64 = 20_000_000

    private func grow(_ state: inout State, from current: Int) -> (from: Int, to: Int) {
        let grown = min(ceiling, Self.saturatedGrowth * current)
        state.loadedSince = 0
        state.addedWhileSaturated += grown - current
        active.store(grown, ordering: .releasing)
        return (current, grown)
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
            if state.gatewayBound {
                reason += "; no more: the last added made the gateway's answers slower, not more frequent"
            } else if count == ceiling && count > initial {
                reason += "; the ceiling, \(ceiling) (--max-connections × shards), was reached"
            }
            return reason
        }
    }
}


