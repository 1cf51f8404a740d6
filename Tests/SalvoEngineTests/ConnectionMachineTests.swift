import SalvoIO
import SalvoWire
import Testing
@testable import SalvoEngine

/// The connection entry's state machine without sockets: any object stands in for a
/// transport, and actions are read back as short words.
@Suite struct ConnectionMachineTests {
    final class FakeLink: CustomStringConvertible {
        let name: String
        init(_ name: String) { self.name = name }
        var description: String { name }
    }

    typealias Machine = ConnectionMachine<FakeLink, InFlightWindow>

    static func machine(standby: Bool = true, attempts: Int = 3, atMostOnce: Bool = false) -> Machine {
        Machine(window: InFlightWindow(), dropPolicy: .init(atMostOnce: atMostOnce, retryBudget: 3), usesStandby: standby,
                maximumAttempts: attempts, backoff: Backoff(initial: .milliseconds(10), maximum: .seconds(1), jitter: 0), seed: 1)
    }

    /// Actions as words: `connect`, `standby`, `close a` (silently, or before it opened),
    /// `close_notify a` (closes telling the gateway), `finish a` (finishes writing),
    /// `reconnect 10ms`, `retry standby`, `activate b`, `settle`, `give up`.
    static func words<Window>(_ actions: [ConnectionMachine<FakeLink, Window>.Action]) -> [String] {
        actions.map { action in
            switch action {
            case .connect: "connect"
            case .connectStandby: "standby"
            case .close(let link, _, let how): how == .withCloseNotify ? "close_notify \(link)" : "close \(link)"
            case .finishWriting(let link): "finish \(link)"
            case .reconnect(let delay): "reconnect \(delay)"
            case .openStandby: "retry standby"
            case .activated(let link): "activate \(link)"
            case .settle: "settle"
            case .giveUp: "give up"
            }
        }
    }

    /// The settlement among `actions`, if any.
    static func settlement<Window>(in actions: [ConnectionMachine<FakeLink, Window>.Action]) -> Settlement? {
        for case .settle(let settlement) in actions { return settlement }
        return nil
    }

    /// A machine whose active connection `a` is open and whose standby `b` is ready.
    static func openWithStandby() -> (Machine, FakeLink, FakeLink) {
        var machine = machine()
        let a = FakeLink("a"), b = FakeLink("b")
        _ = machine.start()
        machine.connectStarted(a)
        #expect(words(machine.handshakeCompleted(a)) == ["activate a", "standby"])
        machine.standbyStarted(b)
        #expect(words(machine.handshakeCompleted(b)).isEmpty)
        return (machine, a, b)
    }

    /// A machine without a standby, its connection `a` open.
    static func openWithoutStandby() -> (Machine, FakeLink) {
        var machine = machine(standby: false)
        let a = FakeLink("a")
        _ = machine.start()
        machine.connectStarted(a)
        _ = machine.handshakeCompleted(a)
        return (machine, a)
    }

    static let rejection = ErrorResponse(status: .invalidToken, identifier: 1)

    /// Writes one notification on the open connection so that an error can name it.
    static func writeOne(_ machine: Machine) {
        machine.window.recordNew(index: machine.window.end,
                                 origin: Origin(position: SourcePosition(offset: 0, sequence: 1), source: 1, continuesRun: false),
                                 length: 100, now: 0)
    }

    /// Lets everything written pass its error wait.
    static func presumeAll(_ machine: Machine) {
        _ = machine.window.settle(now: 1_000, policy: SettlePolicy(errorWait: 1_000, retention: 10_000, isUrgent: { _ in false }))
    }

    /// Open with a ready standby, `frames` written and past their error wait, and draining:
    /// close_notify sent on `a`, the gateway's answer awaited.
    static func draining(writing frames: Int) -> (Machine, FakeLink, FakeLink) {
        var (machine, a, b) = openWithStandby()
        for _ in 0..<frames { writeOne(machine) }
        presumeAll(machine)
        #expect(words(machine.finishWriting()) == ["finish a"])
        return (machine, a, b)
    }

    @Test func workConnectsOnceAndAnOpenConnectionAsksForAStandby() {
        var machine = Self.machine()
        #expect(Self.words(machine.start()) == ["connect"])
        let a = FakeLink("a")
        machine.connectStarted(a)
        #expect(machine.start().isEmpty, "already connecting")
        #expect(Self.words(machine.handshakeCompleted(a)) == ["activate a", "standby"])
        #expect(machine.openTransport === a && machine.opened == 1)
    }

    @Test func withoutStandbysAnOpenConnectionAsksForNothingMore() {
        var machine = Self.machine(standby: false)
        _ = machine.start()
        let a = FakeLink("a")
        machine.connectStarted(a)
        #expect(Self.words(machine.handshakeCompleted(a)) == ["activate a"])
    }

    @Test func afterAnErrorResponseTheReadyStandbyTakesOverAndANewOneIsMade() {
        let (initial, _, b) = Self.openWithStandby()
        var machine = initial
        Self.writeOne(machine)
        let actions = machine.errorResponse(Self.rejection, now: 1, errorWait: 1_000).actions
        #expect(Self.words(actions) == ["settle", "close a", "activate b", "standby"])
        #expect(machine.openTransport === b && machine.opened == 2)
    }

    @Test func anErrorWhileTheStandbyConnectsWaitsForItsHandshake() {
        var machine = Self.machine()
        let a = FakeLink("a"), b = FakeLink("b")
        _ = machine.start()
        machine.connectStarted(a)
        _ = machine.handshakeCompleted(a)
        machine.standbyStarted(b)
        Self.writeOne(machine)
        #expect(Self.words(machine.errorResponse(Self.rejection, now: 1, errorWait: 1_000).actions) == ["settle", "close a"])
        #expect(machine.openTransport == nil)
        #expect(Self.words(machine.handshakeCompleted(b)) == ["activate b", "standby"])
    }

    @Test func withoutAStandbyAnErrorResponseReconnectsAtOnce() {
        var machine = Self.openWithoutStandby().0
        Self.writeOne(machine)
        #expect(Self.words(machine.errorResponse(Self.rejection, now: 1, errorWait: 1_000).actions) == ["settle", "close a", "connect"])
    }

    @Test func anErrorNamingSomethingNeverSentIsHandledAsADrop() {
        let (initial, _, _) = Self.openWithStandby()
        var machine = initial
        let actions = machine.errorResponse(ErrorResponse(status: .invalidToken, identifier: 999), now: 1, errorWait: 1_000).actions
        #expect(Self.words(actions) == ["settle", "close a", "activate b", "standby"])
        // Without a standby a drop backs off (a failed attempt); an error response reconnects at once.
        var alone = Self.machine(standby: false)
        let a = FakeLink("a")
        _ = alone.start()
        alone.connectStarted(a)
        _ = alone.handshakeCompleted(a)
        let dropped = alone.errorResponse(ErrorResponse(status: .invalidToken, identifier: 999), now: 1, errorWait: 1_000).actions
        #expect(Self.words(dropped) == ["settle", "close a", "reconnect 0.01 seconds"])
        #expect(alone.consecutiveFailures == 1)
    }

    @Test func failedAttemptsBackOffThenGiveUp() {
        var machine = Self.machine(standby: false, attempts: 3)
        _ = machine.start()
        machine.connectStarted(FakeLink("a"))
        #expect(Self.words(machine.connectFailed(nil, "refused", permanent: false)) == ["close a", "reconnect 0.01 seconds"])
        #expect(machine.reconnectTimerFired().map { Self.words([$0]) } == ["connect"])
        machine.connectStarted(FakeLink("b"))
        #expect(Self.words(machine.connectFailed(nil, "refused", permanent: false)) == ["close b", "reconnect 0.02 seconds"])
        _ = machine.reconnectTimerFired()
        #expect(Self.words(machine.connectFailed(nil, "refused", permanent: false)) == ["settle", "give up"])
        #expect(machine.hasGivenUp)
        #expect(machine.start().isEmpty && machine.reconnectTimerFired() == nil)
    }

    @Test func aPermanentFailureGivesUpAtOnce() {
        var machine = Self.machine()
        _ = machine.start()
        let a = FakeLink("a")
        machine.connectStarted(a)
        #expect(Self.words(machine.connectFailed(a, "certificate verify failed", permanent: true)) == ["close a", "settle", "give up"])
    }

    @Test func aSilentDropBacksOffUnlessAStandbyIsReady() {
        let (opened, a) = Self.openWithoutStandby()
        var machine = opened
        #expect(Self.words(machine.connectionLost(a, "reset", permanentReason: nil)) == ["settle", "close a", "reconnect 0.01 seconds"])

        let (initial, c, d) = Self.openWithStandby()
        var withStandby = initial
        #expect(Self.words(withStandby.connectionLost(c, "reset", permanentReason: nil)) == ["settle", "close a", "activate b", "standby"])
        #expect(withStandby.openTransport === d)
    }

    /// Makes a new standby ready after the last one took over.
    static func readyStandby(_ machine: inout Machine, _ name: String) {
        let spare = FakeLink(name)
        machine.standbyStarted(spare)
        _ = machine.handshakeCompleted(spare)
    }

    @Test func dropsOnStandbysThatTookOverAreNotFailedAttemptsInARow() {
        let (initial, a, _) = Self.openWithStandby()
        var machine = initial
        var active = a
        for name in ["c", "d", "e", "f"] {
            _ = machine.connectionLost(active, "reset", permanentReason: nil)
            #expect(machine.consecutiveFailures == 0, "the standby that took over opened")
            active = machine.openTransport!
            Self.readyStandby(&machine, name)
        }
        #expect(!machine.hasGivenUp)
    }

    @Test func connectionsThatStallInARowAreGivenUpOn() {
        let (initial, a, _) = Self.openWithStandby()
        var machine = initial
        #expect(Self.words(machine.connectionLost(a, "stalled", permanentReason: nil, stalled: true))
                == ["settle", "close a", "activate b", "standby"])
        Self.readyStandby(&machine, "c")
        _ = machine.connectionLost(machine.openTransport!, "stalled", permanentReason: nil, stalled: true)
        Self.readyStandby(&machine, "d")
        #expect(machine.consecutiveFailures == 0)
        #expect(Self.words(machine.connectionLost(machine.openTransport!, "stalled", permanentReason: nil, stalled: true))
                == ["settle", "close c", "settle", "give up", "close_notify d"])
        #expect(machine.hasGivenUp)
    }

    @Test func aConnectionThatEndsWellBetweenStallsStartsTheCountAgain() {
        let (initial, a, _) = Self.openWithStandby()
        var machine = initial
        _ = machine.connectionLost(a, "stalled", permanentReason: nil, stalled: true)
        Self.readyStandby(&machine, "c")
        Self.writeOne(machine)
        _ = machine.errorResponse(Self.rejection, now: 1, errorWait: 1_000)
        Self.readyStandby(&machine, "d")
        _ = machine.connectionLost(machine.openTransport!, "stalled", permanentReason: nil, stalled: true)
        _ = machine.connectionLost(machine.openTransport!, "stalled", permanentReason: nil, stalled: true)
        #expect(!machine.hasGivenUp, "two stalls in a row since the error response, of three allowed")
    }

    @Test func aStandbyThatEndsIsMadeAgainAfterABackoff() {
        let (initial, a, b) = Self.openWithStandby()
        var machine = initial
        #expect(Self.words(machine.connectionLost(b, "closed", permanentReason: nil)) == ["close b", "retry standby"])
        #expect(machine.openTransport === a, "the active connection is not affected")
        #expect(machine.standbyTimerFired().map { Self.words([$0]) } == ["standby"])
    }

    @Test func aStandbyThatCannotConnectIsRetriedWithoutGivingUp() {
        var machine = Self.machine(attempts: 1)
        let a = FakeLink("a"), b = FakeLink("b")
        _ = machine.start()
        machine.connectStarted(a)
        _ = machine.handshakeCompleted(a)
        machine.standbyStarted(b)
        for _ in 0..<5 {
            #expect(Self.words(machine.connectFailed(b, "refused", permanent: false)) == ["close b", "retry standby"])
            _ = machine.standbyTimerFired()
            machine.standbyStarted(b)
        }
        #expect(!machine.hasGivenUp)
    }

    @Test func cancellingFailsEverythingAndClosesBothConnections() {
        let (initial, _, _) = Self.openWithStandby()
        var machine = initial
        Self.writeOne(machine)
        #expect(Self.words(machine.cancel()) == ["settle", "close_notify a", "close_notify b"])
        #expect(machine.hasGivenUp && machine.window.isEmpty)
    }

    // MARK: Draining

    @Test func aDrainedConnectionProvesEverythingItWroteAndTheStandbyWaitsForWork() throws {
        let (initial, a, _) = Self.openWithStandby()
        var machine = initial
        #expect(machine.finishWriting().isEmpty, "nothing written, nothing to prove")
        Self.writeOne(machine)
        Self.writeOne(machine)
        #expect(machine.finishWriting().isEmpty, "not while something is within its error wait")
        Self.presumeAll(machine)
        #expect(Self.words(machine.finishWriting()) == ["finish a"])
        #expect(machine.openTransport == nil && machine.activeTransport === a, "reads go on, writes do not")
        #expect(machine.finishWriting().isEmpty && machine.start().isEmpty, "once, and new work waits for the drain")

        // The gateway answers our close_notify with its own: it read both, and no error.
        let actions = machine.endOfStream(a, clean: true, "closed")
        #expect(Self.words(actions) == ["settle", "close a"])
        let settlement = try #require(Self.settlement(in: actions))
        #expect(settlement.accepted == 2 && settlement.resent == 0 && settlement.possibleDuplicates == 0)
        #expect(machine.window.isEmpty && machine.activeTransport == nil && machine.consecutiveFailures == 0)
        // Work comes again: the ready standby takes over, no connection is made.
        #expect(Self.words(machine.start()) == ["activate b", "standby"])
    }

    @Test func aGatewayThatNeverAnswersCloseNotifyHoldsTheSlotOnlyUntilTheRetention() {
        let (initial, _, _) = Self.draining(writing: 1)
        var machine = initial
        #expect(machine.drainOutlived().isEmpty, "records kept: the answer may still come")
        // The retention releases the record as accepted; then the drain is given up.
        _ = machine.window.settle(now: 20_000, policy: SettlePolicy(errorWait: 1_000, retention: 10_000, isUrgent: { _ in false }))
        #expect(Self.words(machine.drainOutlived()) == ["close a"])
        #expect(Self.words(machine.start()) == ["activate b", "standby"], "what comes next is written")
    }

    @Test func anErrorResponseWhileDrainingIsHandledAsEver() {
        let (initial, _, b) = Self.draining(writing: 2)
        var machine = initial
        let actions = machine.errorResponse(Self.rejection, now: 1, errorWait: 1_000).actions
        #expect(Self.words(actions) == ["settle", "close a", "activate b", "standby"])
        #expect(machine.openTransport === b && machine.window.needsRebuild, "the second one is written again")
    }

    @Test func anEndOfStreamBeforeTheSenderFinishedWritingIsADrop() {
        let (initial, a, b) = Self.openWithStandby()
        var machine = initial
        Self.writeOne(machine)
        #expect(Self.words(machine.endOfStream(a, clean: true, "closed")) == ["settle", "close a", "activate b", "standby"])
        #expect(machine.openTransport === b && machine.window.needsRebuild, "at least once: written again")
    }

    @Test func aDrainThatEndsWithoutTheGatewaysCloseNotifyIsADropOfWhatWasPresumedAccepted() throws {
        let (initial, a, _) = Self.draining(writing: 1)
        var machine = initial
        // A gateway that closes without answering our close_notify may not have read it: a
        // drop, which releases what was presumed accepted, as a drop always does.
        let actions = machine.endOfStream(a, clean: false, "closed")
        #expect(Self.words(actions) == ["settle", "close a", "activate b", "standby"])
        let settlement = try #require(Self.settlement(in: actions))
        #expect(settlement.accepted == 1 && settlement.resent == 0)
    }

    @Test func aDrainingConnectionThatIsResetIsADrop() {
        let (initial, a, _) = Self.draining(writing: 1)
        var machine = initial
        #expect(Self.words(machine.connectionLost(a, "reset", permanentReason: nil)) == ["settle", "close a", "activate b", "standby"])
        #expect(machine.window.isEmpty, "what was presumed accepted is released as such, as after any drop")
    }

    @Test func cancellingADrainingConnectionClosesItSilently() {
        let (initial, _, _) = Self.draining(writing: 1)
        var machine = initial
        #expect(Self.words(machine.cancel()) == ["settle", "close a", "close_notify b"])
    }

    @Test func backoffIsCappedAndReproducible() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), jitter: 0.5)
        var first = SplitMix64(seed: 7), second = SplitMix64(seed: 7)
        let delays = (1...8).map { backoff.delay(attempt: $0, random: &first) }
        #expect(delays == (1...8).map { backoff.delay(attempt: $0, random: &second) })
        #expect(delays.allSatisfy { $0 <= .seconds(1) && $0 >= .milliseconds(50) })
    }
}

/// HTTP/2: a connection that must go retires while the entry goes on with a new one.
extension ConnectionMachineTests {
    typealias StreamMachine = ConnectionMachine<FakeLink, StreamWindow>

    /// A machine whose connection `a` is open with `streams` open streams.
    static func openWithStreams(_ streams: Int) -> (StreamMachine, StreamWindow, FakeLink) {
        let window = StreamWindow()
        var machine = StreamMachine(window: window, dropPolicy: .init(atMostOnce: false, retryBudget: 3), usesStandby: false,
                                    maximumAttempts: 3, backoff: Backoff(initial: .milliseconds(10), jitter: 0), seed: 1)
        let a = FakeLink("a")
        _ = machine.start()
        machine.connectStarted(a)
        #expect(words(machine.handshakeCompleted(a)) == ["activate a"])
        for n in 0..<streams {
            let position = SourcePosition(offset: UInt64(n), sequence: UInt64(n))
            let index = window.recordNew(Origin(position: position, source: 1, continuesRun: true))
            _ = window.open(OpenStream(index: index, token: StreamWindowTests.token,
                                       attempts: Attempts(), tokenGeneration: 0))
        }
        return (machine, window, a)
    }

    @Test func aRetiredConnectionClosesOnlyOnceItsStreamsAreAnsweredWhileANewOneConnects() {
        var (machine, window, a) = Self.openWithStreams(2)
        #expect(Self.words(machine.retire(a, "503")).isEmpty, "no GOAWAY, no close: two streams wait for answers")
        #expect(machine.isRetiring(a) && machine.openTransport == nil)
        #expect(Self.words(machine.start()) == ["connect"], "the entry goes on with a new connection")
        var settlement = Settlement()
        window.accepted(0, into: &settlement)
        #expect(Self.words(machine.retiredStreamsAnswered(a, "503")).isEmpty)
        window.accepted(1, into: &settlement)
        #expect(Self.words(machine.retiredStreamsAnswered(a, "503")) == ["close_notify a"])
        #expect(!machine.isRetiring(a) && settlement.accepted == 2)
    }

    @Test func aRetiredConnectionWithNothingOpenClosesAtOnce() {
        var (machine, _, a) = Self.openWithStreams(0)
        #expect(Self.words(machine.retire(a, "GOAWAY")) == ["close_notify a"])
    }

    @Test func aRetiredConnectionLostWithStreamsOpenLeavesThemToTheDropPolicyAndNotTheSlot() {
        var (machine, _, a) = Self.openWithStreams(3)
        _ = machine.retire(a, "503")
        let actions = machine.retiredConnectionLost(a, "no answer within 15 s")
        #expect(Self.words(actions) == ["settle", "close a"])
        let settlement = Self.settlement(in: actions)
        #expect(settlement?.resent == 3 && settlement?.possibleDuplicates == 3)
        #expect(machine.consecutiveFailures == 0, "the entry's own connection is not at fault")
    }

    @Test func cancellingClosesRetiredConnectionsToo() {
        var (machine, _, a) = Self.openWithStreams(1)
        _ = machine.retire(a, "503")
        let actions = machine.cancel()
        #expect(Self.words(actions) == ["settle", "close_notify a"])
        #expect(Self.settlement(in: actions)?.failures.count == 1 && !machine.isRetiring(a))
    }
}
