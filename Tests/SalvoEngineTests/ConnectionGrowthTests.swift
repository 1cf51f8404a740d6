import SalvoMock
import SalvoTestSupport
import Testing
@testable import SalvoEngine

/// Connections are added while every one is full, one per interval, up to the ceiling.
@Suite(.timeLimit(.minutes(2))) struct ConnectionGrowthTests {
    @Test func oneMorePerIntervalWhileStalledAndNeverBeyondTheCeiling() {
        let growth = ConnectionGrowth(initial: 2, ceiling: 4, interval: .nanoseconds(100))
        #expect(growth.count == 2)
        #expect(growth.stalled(at: 1_000) && growth.count == 3)
        #expect(!growth.stalled(at: 1_099) && growth.count == 3, "within the interval of the last growth")
        #expect(growth.stalled(at: 1_100) && growth.count == 4)
        #expect(!growth.stalled(at: 9_000) && growth.count == 4, "at the ceiling")
    }

    /// HTTP/2: once every connection in use is at its stream limit with work waiting, they
    /// are multiplied by four; connections added since are not saturated yet, so the next
    /// step waits, and it is taken only once the last one's streams were answered.
    @Test func connectionsGrowFourfoldOnceEveryOneIsSaturated() {
        let growth = ConnectionGrowth(initial: 2, ceiling: 20, interval: .zero)
        let ms: UInt64 = 1_000_000
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 200 * ms, at: 1 * ms)
        #expect(growth.count == 2, "one of two is not growth")
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 0, at: 1 * ms)
        #expect(growth.count == 2, "no answer since every one was saturated: nothing to judge a step by")
        #expect(!growth.stalled(at: 1 * ms), "while connections are saturated, full rings are theirs")
        growth.considerGrowing(answerTime: 250 * ms, at: 2 * ms)
        #expect(growth.count == 8)
        for _ in 0..<5 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 200 * ms, at: 3 * ms)
        #expect(growth.count == 8, "seven of eight")
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 900 * ms, at: 100 * ms)
        #expect(growth.count == 8, "every one saturated, but not yet for an answer time")
        growth.considerGrowing(answerTime: 210 * ms, at: 430 * ms)
        #expect(growth.count == 20, "one connection's answers came as fast: grown, up to the ceiling")
        #expect(growth.reason.contains("18 added because every connection had all the streams") && growth.reason.contains("the ceiling, 20"))
    }

    /// When more streams only made the answers slower, the gateway bounds the rate: no more
    /// connections, by either signal.
    @Test func aStepThatOnlySlowsTheAnswersIsTheLast() {
        let growth = ConnectionGrowth(initial: 1, ceiling: 64, interval: .zero)
        let ms: UInt64 = 1_000_000
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 5 * ms, at: 1 * ms)
        #expect(growth.count == 4)
        for _ in 0..<3 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 10 * ms, at: 30 * ms)
        #expect(growth.count == 4, "judged an answer time after every one was saturated")
        growth.considerGrowing(answerTime: 10 * ms, at: 50 * ms)
        #expect(growth.count == 4 && !growth.stalled(at: 60 * ms) && growth.count == 4)
        #expect(growth.reason.contains("made the gateway's answers slower"))
    }

    /// Before the run's first answer, every `unansweredStep` of saturation is a step; the
    /// first answer brings back the judged steps.
    @Test func stepsBeforeTheFirstAnswerFollowTheWaitNotTheAnswers() {
        let growth = ConnectionGrowth(initial: 2, ceiling: 128, interval: .zero)
        let ms: UInt64 = 1_000_000
        let step = ConnectionGrowth.unansweredStep.nanosecondsClamped
        growth.saturationChanged(true)
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 0, at: 1 * ms)
        growth.considerGrowing(answerTime: 0, at: 1 * ms + step - 1)
        #expect(growth.count == 2, "saturated, unanswered, but not yet for a step")
        growth.considerGrowing(answerTime: 0, at: 1 * ms + step)
        #expect(growth.count == 8)
        for _ in 0..<5 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 0, at: 100 * ms)
        #expect(growth.count == 8, "seven of eight saturated")
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 0, at: 101 * ms)
        growth.considerGrowing(answerTime: 0, at: 101 * ms + step)
        #expect(growth.count == 32, "a step after every one of eight was saturated for another step")
        for _ in 0..<24 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 300 * ms, at: 200 * ms)
        growth.considerGrowing(answerTime: 300 * ms, at: 200 * ms + step)
        #expect(growth.count == 32, "answered: the next step waits for an answer time")
        growth.considerGrowing(answerTime: 300 * ms, at: 200 * ms + 385 * ms)
        #expect(growth.count == 128)
    }

    /// When the first answers took far longer than the network's round trip, the gateway
    /// held them: the connections carry their streams ÷ the answer time, and the step
    /// judged by that is taken on the first answer, without counting. Over a path (answers
    /// about a round trip long), or from a gateway that answers at once, the shortest answer
    /// is judged first, and the rate measured, as before.
    @Test(arguments: [
        (network: 50_000 as UInt64, answer: 100_000_000 as UInt64, atFirstAnswer: 16, grown: 16),  // held 100 ms on loopback
        (network: 50_000_000, answer: 60_000_000, atFirstAnswer: 8, grown: 8),  // a 50 ms path
        (network: 50_000, answer: 3_000_000, atFirstAnswer: 8, grown: 8),  // answered at once, queued a little
    ])
    func answersHeldByTheGatewayAreJudgedByWhatTheStreamsAllow(network: UInt64, answer: UInt64, atFirstAnswer: Int, grown: Int) {
        let growth = ConnectionGrowth(initial: 2, ceiling: 64, interval: .zero)
        let ms: UInt64 = 1_000_000
        let step = ConnectionGrowth.unansweredStep.nanosecondsClamped
        growth.connected(roundTrip: network)
        growth.connected(roundTrip: network * 2)
        growth.saturationChanged(true)
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 1 * ms)
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 1 * ms + step)
        #expect(growth.count == 8)
        for _ in 0..<6 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 30 * ms)
        growth.considerGrowing(answerTime: answer, accepted: 100, streams: 1000, at: 30 * ms + answer)
        #expect(growth.count == atFirstAnswer, "held: at once; else the shortest answer is judged an answer time and a quarter on")
        growth.considerGrowing(answerTime: answer, accepted: 200, streams: 1000, at: 30 * ms + answer + answer / 4 + 10 * ms)
        #expect(growth.count == grown)
    }

    /// Held answers that queue once every connection is loaded (a quarter longer than the
    /// run's shortest) say that the connections may already be more than the cores can
    /// fill: the held-answers step waits for the shortest-answer rule, as a step on answers
    /// not held does.
    @Test func aHeldAnswersStepWaitsWhenTheAnswersQueue() {
        let growth = ConnectionGrowth(initial: 2, ceiling: 64, interval: .zero)
        let ms: UInt64 = 1_000_000
        growth.connected(roundTrip: 50_000)
        growth.saturationChanged(true)
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 1 * ms)
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 1 * ms + ConnectionGrowth.unansweredStep.nanosecondsClamped)
        #expect(growth.count == 8)
        growth.considerGrowing(answerTime: 100 * ms, accepted: 100, streams: 1000, at: 101 * ms)
        for _ in 0..<6 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 130 * ms, accepted: 200, streams: 1000, at: 140 * ms)
        #expect(growth.count == 8, "answers 130 ms long against the run's 100 ms: not at once")
        growth.considerGrowing(answerTime: 130 * ms, accepted: 300, streams: 1000, at: 275 * ms)
        #expect(growth.count == 16, "an answer time and a quarter on, under half as long again: taken")
    }

    /// A held-answers step is judged by what the streams allow: thirty-two connections of
    /// 1000 streams answered in 100 ms, 320,000/s, the most they could carry, not what they
    /// did. So the sixty-four after it are not given back, and grow again only while they
    /// carry `heldShare` of what their own streams allow (640,000/s): by a third below all
    /// of it (the cores are close), doubled at it. Below `heldShare`, the cores or the path
    /// bound the rate, and the report says so.
    @Test(arguments: [(carried: 300_000, grown: 64), (carried: 600_000, grown: 86), (carried: 660_000, grown: 128)])
    func aHeldAnswersStepGrowsWhileTheStreamsBoundTheRate(carried: Int, grown: Int) {
        let growth = ConnectionGrowth(initial: 8, ceiling: 256, interval: .zero)
        let ms: UInt64 = 1_000_000
        growth.connected(roundTrip: 50_000)
        for _ in 0..<8 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 1 * ms)
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 1 * ms + ConnectionGrowth.unansweredStep.nanosecondsClamped)
        #expect(growth.count == 32, "the first step, before any answer")
        for _ in 0..<24 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 0, streams: 1000, at: 30 * ms)
        growth.considerGrowing(answerTime: 100 * ms, accepted: 1, streams: 1000, at: 130 * ms)
        #expect(growth.count == 64, "held answers: 32 connections carry 320,000/s, uncounted, from the first answer")
        for _ in 0..<32 { growth.saturationChanged(true) }
        // Every one saturated from 140 ms: the rate is counted from 240 ms, in windows of 110 ms.
        var accepted = 10_000
        for time in stride(from: 140 * ms, through: 680 * ms, by: 10_000_000) {
            growth.considerGrowing(answerTime: 100 * ms, accepted: accepted, streams: 1000, at: time)
            accepted += carried / 100
        }
        #expect(growth.count == grown)
        if carried == 300_000 {
            #expect(growth.reason.contains("64 connections carried 47 % of what their streams allow"), "\(growth.reason)")
            #expect(!growth.reason.contains("given back"), "\(growth.reason)")
        }
    }

    /// One connection, answers after 50 ms: four on the first answer, then, every one
    /// saturated from 200 ms and carrying 100,000/s (counted from 250 ms, for 60 ms), eight:
    /// a step judged against that rate.
    private func eightAfterFourCarried100000PerSecond() -> ConnectionGrowth {
        let growth = ConnectionGrowth(initial: 1, ceiling: 64, interval: .zero)
        let ms: UInt64 = 1_000_000
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 0, at: 100 * ms)
        #expect(growth.count == 4, "the first step, on the first answer: nothing to judge it by")
        for _ in 0..<3 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 50 * ms, accepted: 1_000, at: 200 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 5_000, at: 250 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 8_500, at: 285 * ms)
        #expect(growth.count == 4, "past an answer time and a quarter, but the rate is not counted yet")
        growth.considerGrowing(answerTime: 50 * ms, accepted: 11_000, at: 310 * ms)
        #expect(growth.count == 8, "four carried 100,000/s: the next step, judged against that, doubles them")
        return growth
    }

    /// A step is judged by the rate it brought: the accepted count over a whole answer
    /// time, from an answer time after every connection was saturated (so that what is
    /// counted was queued behind all of them), against the same before the step. Once
    /// there is a rate to judge by, a step doubles the connections, and twice the
    /// connections carrying less than a twelfth more are given back, for the rest of the
    /// run, and the report says so.
    @Test func aStepThatDidNotRaiseTheRateIsGivenBack() {
        let growth = eightAfterFourCarried100000PerSecond()
        let ms: UInt64 = 1_000_000
        for _ in 0..<4 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 50 * ms, accepted: 20_000, at: 400 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 30_000, at: 450 * ms)
        // 6,300 in 60 ms: 105,000/s, 1.05× (a step to twice needs 1.08×).
        growth.considerGrowing(answerTime: 50 * ms, accepted: 36_300, at: 510 * ms)
        #expect(growth.count == 8, "one window short: it could be a stall")
        growth.considerGrowing(answerTime: 50 * ms, accepted: 42_600, at: 570 * ms)
        #expect(growth.count == 4, "two in a row: eight carried 1.05× the rate of four: given back")
        growth.considerGrowing(answerTime: 50 * ms, accepted: 60_000, at: 900 * ms)
        #expect(growth.count == 4 && !growth.stalled(at: 901 * ms) && growth.count == 4, "and no more steps, by either signal")
        #expect(growth.reason.contains("7 added because every connection had all the streams"), "\(growth.reason)")
        #expect(growth.reason.contains("4 of them given back: 8 connections carried 1.05× the rate of the 4 before them "
                                       + "(a step must bring 1.08×)"), "\(growth.reason)")
    }

    /// Over a path too full to take their requests, the added connections never all have
    /// their streams open: the step is judged all the same, on the rate counted from eight
    /// answer times after it.
    @Test func aStepIsJudgedEvenWhenItsConnectionsDoNotAllSaturate() {
        let growth = eightAfterFourCarried100000PerSecond()
        let ms: UInt64 = 1_000_000
        // Only the first four stay saturated.
        growth.considerGrowing(answerTime: 50 * ms, accepted: 20_000, at: 400 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 30_000, at: 709 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 40_000, at: 770 * ms)
        #expect(growth.count == 8, "counted from eight answer times after the step")
        growth.considerGrowing(answerTime: 50 * ms, accepted: 45_400, at: 830 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 50_800, at: 890 * ms)
        #expect(growth.count == 4, "90,000/s twice where four carried 100,000/s: given back")
        #expect(growth.reason.contains("8 connections carried 0.90× the rate of the 4 before them"), "\(growth.reason)")
    }

    /// Steps that raise the rate are kept, up to the ceiling; a count reached by a judged
    /// step is measured twice before the next (its first window has the added
    /// connections' ramp in it); the step to the ceiling is judged too, by what its
    /// smaller multiple should bring.
    @Test func stepsThatRaiseTheRateKeepGrowing() {
        let growth = ConnectionGrowth(initial: 2, ceiling: 24, interval: .zero)
        let ms: UInt64 = 1_000_000
        growth.saturationChanged(true)
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 100 * ms, accepted: 0, at: 100 * ms)
        #expect(growth.count == 8)
        /// Saturates every connection in use at `start`, and carries `rate` per second from
        /// an answer time on, for `windows` windows of 110 ms; returns the count after.
        func load(from saturated: Int, at start: UInt64, rate: Int, windows: UInt64 = 1, accepted: inout Int) -> Int {
            for _ in saturated..<growth.count { growth.saturationChanged(true) }
            growth.considerGrowing(answerTime: 100 * ms, accepted: accepted, at: start)
            growth.considerGrowing(answerTime: 100 * ms, accepted: accepted, at: start + 100 * ms)
            for window in 1...windows {
                accepted += rate * 110 / 1000
                growth.considerGrowing(answerTime: 100 * ms, accepted: accepted, at: start + (100 + 110 * window) * ms)
            }
            return growth.count
        }
        var accepted = 10_000
        #expect(load(from: 2, at: 200 * ms, rate: 80_000, accepted: &accepted) == 16, "a rate to judge by: doubled")
        #expect(load(from: 8, at: 500 * ms, rate: 150_000, accepted: &accepted) == 16, "measured once: not yet")
        accepted += 150_000 * 110 / 1000
        #expect(growth.considerGrowing(answerTime: 100 * ms, accepted: accepted, at: 820 * ms) && growth.count == 24,
                "twice, 1.9× the rate (another step needs 1.5×): up to the ceiling")
        #expect(load(from: 16, at: 900 * ms, rate: 180_000, accepted: &accepted) == 24,
                "1.5× the connections, 1.2× the rate (1.04× needed): kept")
        // A window with nothing accepted (a stall), then one as before: kept.
        #expect(growth.considerGrowing(answerTime: 100 * ms, accepted: accepted, at: 1220 * ms) == false && growth.count == 24)
        accepted += 180_000 * 110 / 1000
        #expect(growth.considerGrowing(answerTime: 100 * ms, accepted: accepted, at: 1330 * ms) == false && growth.count == 24)
        #expect(growth.reason.contains("the ceiling, 24") && !growth.reason.contains("given back"), "\(growth.reason)")
        #expect(ConnectionGrowth.requiredGain(from: 48, to: 192) == 1.25 && ConnectionGrowth.continuingGain(from: 4, to: 8) == 1.5)
    }

    /// A step kept, but that brought less than half its share, is the last: the next would
    /// bring less, and over a path it overfills.
    @Test func aStepThatBroughtLessThanHalfItsShareIsTheLast() {
        let growth = ConnectionGrowth(initial: 1, ceiling: 64, interval: .zero)
        let ms: UInt64 = 1_000_000
        growth.saturationChanged(true)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 0, at: 100 * ms)
        for _ in 0..<3 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 50 * ms, accepted: 1_000, at: 200 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 5_000, at: 250 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 11_000, at: 310 * ms)
        #expect(growth.count == 8)
        for _ in 0..<4 { growth.saturationChanged(true) }
        growth.considerGrowing(answerTime: 50 * ms, accepted: 20_000, at: 400 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 30_000, at: 450 * ms)
        // 130,000/s twice: 1.3×, kept (1.08× needed), short of the 1.5× another step needs.
        growth.considerGrowing(answerTime: 50 * ms, accepted: 37_800, at: 510 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 45_600, at: 570 * ms)
        growth.considerGrowing(answerTime: 50 * ms, accepted: 80_000, at: 900 * ms)
        #expect(growth.count == 8 && !growth.stalled(at: 901 * ms) && growth.count == 8)
        #expect(growth.reason.contains("no more: the step from 4 to 8 carried 1.30× the rate (another step needs 1.50×"),
                "\(growth.reason)")
    }

    @Test func aCeilingBelowTheStartIsTheStart() {
        let growth = ConnectionGrowth(initial: 3, ceiling: 1, interval: .zero)
        #expect(growth.ceiling == 3 && !growth.stalled(at: 1) && growth.count == 3)
    }

    /// A staging ring of a few frames is full whenever the producer runs ahead of the
    /// socket, which on loopback is all the time: the sender grows to its ceiling, and
    /// what the added connections carry is accounted for exactly, rejections included.
    /// The producer, waiting for room thousands of times, runs on a thread of its own: on
    /// the cooperative pool, behind the rest of the suite's tests, it took most of the time
    /// limit.
    @Test(.ownThread("growth-ceiling-test"), arguments: [1, 3])
    func aSenderGrowsToItsCeilingWhileEveryConnectionIsFull(ceiling: Int) async throws {
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: 2_000))
        defer { rig.gateway.stop() }
        var configuration = LoopbackRig.senderConfiguration(port: rig.gateway.port)
        configuration.shards = 1
        configuration.connectionsPerShard = 1
        configuration.maximumConnectionsPerShard = ceiling
        configuration.connectionGrowthInterval = .milliseconds(1)
        configuration.ringCapacity = 16 << 10
        let sender = try Sender(configuration)
        let count = 60_000
        try await sender.send(contentsOf: SourceSendingTests.list(0..<count))
        let report = await sender.finish()
        #expect(report.connections == ceiling)
        #expect(report.submitted == count && report.isComplete && report.failed == 0 && report.rejected == count / 2_000)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(mock.accepted == report.accepted && mock.rejected == report.rejected && mock.duplicates == 0)
    }

    /// Answers that take 20 ms over connections of 10 streams: 500/s each. The sender grows
    /// past the binary protocol's two connections because every connection holds all its
    /// streams, says so in the report, and accounts for every notification exactly.
    @Test func anHTTP2SenderAddsConnectionsWhileEveryOneHoldsAllItsStreams() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(responseDelay: .milliseconds(20))) {
            $0.maximumConcurrentStreams = 10
        }
        var configuration = rig.senderConfiguration()
        configuration.shards = 1
        configuration.connectionsPerShard = 1
        let count = 5_000
        let (report, _) = try await HTTP2SenderTests.send(configuration, count: count)
        #expect(report.submitted == count && report.accepted == count && report.isComplete)
        #expect(report.connections > 2 && report.connections <= configuration.maximumConnectionsPerShard)
        #expect(report.connectionsReason.contains("added because every connection had all the streams"), "\(report.connectionsReason)")
        let mock = rig.statistics { $0.accepted >= count }
        #expect(mock.accepted == count && mock.duplicates == 0)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<count))
    }

    /// Answers held 5 s, 400 streams per connection: before the first
    /// answer, the sender has grown (from 1 or 2 to 8 or more) on how long its streams have
    /// waited, and the new connections carry requests at once (the producer, waiting for
    /// room, is told about them): more than four connections could. Then every
    /// notification is accounted for exactly.
    /// Where the test below runs: on the cooperative pool, the suite's other tests can hold
    /// its producer, or its look at the mock, back for longer than the answers are held.
    static let ownThread = try! ThreadExecutor(name: "growth-test")

    @Test func anHTTP2SenderGrowsBeforeTheFirstAnswer() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(responseDelay: .seconds(5))) {
            $0.maximumConcurrentStreams = 400
        }
        var configuration = rig.senderConfiguration()
        configuration.shards = 1
        configuration.connectionsPerShard = 1
        configuration.maximumConnectionsPerShard = 16
        let count = 3_000
        let settings = configuration
        let (loaded, report) = try await withTaskExecutorPreference(Self.ownThread) {
            async let sent = HTTP2SenderTests.send(settings, count: count)
            let loaded = await eventuallyYielding(rig.gateway.statistics) { $0.requests > 4 * 400 }
            return (loaded, try await sent.0)
        }
        #expect(loaded.connections > 4 && loaded.accepted == 0, "more requests than four connections carry, none answered yet: \(loaded)")
        #expect(report.submitted == count && report.accepted == count && report.isComplete && report.connections > 4)
        let mock = rig.statistics { $0.accepted >= count }
        #expect(mock.accepted == count && mock.duplicates == 0)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<count))
    }
}
