import SalvoWire
import Testing
@testable import SalvoEngine

/// The in-flight window without sockets: notifications are "written" by calling it, time is
/// a number, and every test reads as what a connection would see.
@Suite struct InFlightWindowTests {
    static let frame = 100
    static let errorWait: UInt64 = 1_000
    static let retention: UInt64 = 10_000

    /// A policy with the test's waits; `urgent` sources release at the error wait.
    static func policy(urgent: Set<SourceID> = []) -> SettlePolicy {
        SettlePolicy(errorWait: errorWait, retention: retention, isUrgent: { urgent.contains($0) })
    }

    /// Writes `count` new notifications of `source` (lane indices from the window's end) at `now`,
    /// continuing the source's run; line numbers (sequences) from `firstLine`.
    @discardableResult
    static func write(_ window: InFlightWindow, count: Int, source: SourceID = 1, firstLine: UInt64 = 1, now: UInt64,
                      continuing: Bool = true) -> Range<UInt64> {
        let first = window.end
        for n in 0..<UInt64(count) {
            let position = SourcePosition(offset: (firstLine + n) * 10, sequence: firstLine + n)
            window.recordNew(index: first + n, origin: Origin(position: position, source: source, continuesRun: continuing || n > 0),
                             length: frame, now: now)
        }
        return first..<first + UInt64(count)
    }

    static func error(_ status: Status, naming index: UInt64) -> ErrorResponse {
        ErrorResponse(status: status, identifier: StagingRing.identifier(ofIndex: index))
    }

    /// A window on an open connection.
    static func openWindow() -> InFlightWindow {
        let window = InFlightWindow(maximumRunSpan: .max)
        window.connectionOpened()
        return window
    }

    // MARK: Runs

    @Test func consecutiveNotificationsOfOneReaderShareARecord() {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        #expect(window.log.runs.count == 1)
        #expect(window.log.runs[0].count == 10 && window.log.runs[0].position.sequence == 1)
        // Another source, or a reader that published elsewhere in between, starts a run.
        Self.write(window, count: 3, source: 2, firstLine: 1, now: 0)
        Self.write(window, count: 2, firstLine: 50, now: 0, continuing: false)
        #expect(window.log.runs.map(\.count) == [10, 3, 2])
    }

    @Test func runsStopGrowingAtTheLengthLimitAndAfterTheirSpan() {
        let window = InFlightWindow(maximumRunSpan: 50)
        window.connectionOpened()
        Self.write(window, count: RunLog.maximumRunLength + 1, now: 0)
        #expect(window.log.runs.map(\.count) == [RunLog.maximumRunLength, 1])
        Self.write(window, count: 1, firstLine: 300, now: 49)
        Self.write(window, count: 1, firstLine: 301, now: 50)
        #expect(window.log.runs.map(\.count) == [RunLog.maximumRunLength, 2, 1])
    }

    // MARK: Settling

    @Test func notificationsCountOnlyWhenTheirRecordIsReleasedAfterTheRetention() {
        let window = Self.openWindow()
        Self.write(window, count: 5, now: 100)
        #expect(window.settle(now: 100 + Self.errorWait - 1, policy: Self.policy()).accepted == 0)
        #expect(window.presumed == 0)
        // Past the error wait: presumed accepted, but kept for late errors.
        #expect(window.settle(now: 100 + Self.errorWait, policy: Self.policy()).accepted == 0)
        #expect(window.presumed == 5 && window.count == 5)
        let released = window.settle(now: 100 + Self.retention, policy: Self.policy())
        #expect(released.accepted == 5 && window.isEmpty)
        #expect(released.finals.map(\.count) == [5])
    }

    @Test func anUrgentSourceIsReleasedAsSoonAsItsErrorWaitHasPassed() {
        let window = Self.openWindow()
        Self.write(window, count: 5, source: 7, now: 100)
        #expect(window.nextSettleTime(policy: Self.policy(urgent: [7])) == 100 + Self.errorWait)
        _ = window.settle(now: 100 + Self.errorWait, policy: Self.policy(urgent: [7]))
        #expect(window.isEmpty)
    }

    @Test func anUrgentSourceIsReleasedAtTheErrorWaitWhileMoreFollows() {
        let window = Self.openWindow()
        Self.write(window, count: 5, source: 7, now: 100)
        Self.write(window, count: 5, source: 7, firstLine: 6, now: 600, continuing: false)
        // Producers wait for room: the first five go, though five more are on the wire.
        #expect(window.settle(now: 100 + Self.errorWait, policy: Self.policy(urgent: [7])).accepted == 5)
    }

    @Test func aDrainedConnectionReleasesEverythingItWroteWhateverItsErrorWait() {
        let window = Self.openWindow()
        Self.write(window, count: 5, source: 7, now: 100)
        Self.write(window, count: 5, source: 7, firstLine: 6, now: 600, continuing: false)
        // A source read to its end waits for the retention like any other...
        #expect(window.settle(now: 600 + Self.errorWait, policy: Self.policy()).accepted == 0)
        #expect(window.presumed == 10)
        // ...unless the gateway closes after reading everything: then all ten are final at once.
        let settlement = window.drained()
        #expect(settlement.accepted == 10 && settlement.resent == 0 && settlement.finals.map(\.count) == [10])
        #expect(window.isEmpty && window.written == 10 && !window.needsRebuild)
        // Nothing written yet (just rewound or just opened) is nothing to release.
        #expect(window.drained().isEmpty)
    }

    @Test func unacknowledgedBytesRestartTheErrorWait() {
        let window = Self.openWindow()
        Self.write(window, count: 2, now: 0)
        Self.write(window, count: 2, firstLine: 10, now: 0, continuing: false)
        // The gateway's TCP has not acknowledged the last two frames.
        window.holdUnacknowledged(2 * Self.frame, now: 500)
        _ = window.settle(now: Self.errorWait, policy: Self.policy())
        #expect(window.presumed == 2)
        _ = window.settle(now: 500 + Self.errorWait, policy: Self.policy())
        #expect(window.presumed == 4)
    }

    @Test func aHalfRewrittenRunIsPresumedUpToWhereItWasWritten() {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        _ = window.connectionLost(DropHandling(atMostOnce: false, retryBudget: 3))
        window.connectionOpened()
        for index: UInt64 in 0..<4 { window.recordRebuilt(index: index, length: Self.frame, now: 10) }
        _ = window.settle(now: 10 + Self.errorWait, policy: Self.policy())
        #expect(window.presumed == 4, "the written head of the run is presumed; the rest is not written yet")
    }

    // MARK: Error responses

    @Test func anErrorAcceptsWhatCameBeforeRejectsTheNamedAndRewindsWhatFollows() throws {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        let (settlement, evidence) = try #require(window.applyErrorResponse(Self.error(.invalidToken, naming: 6), now: 300, errorWait: Self.errorWait))
        #expect(settlement.accepted == 6)
        let rejection = try #require(settlement.refused.first)
        #expect(rejection.rejection == .binary(.invalidToken) && rejection.item == 6 && rejection.run.position.sequence == 1)
        #expect(settlement.resent == 3 && settlement.possibleDuplicates == 0)
        #expect(settlement.finals.map(\.count) == [7])
        #expect(evidence.latency == 300 && !evidence.isLate)
        // The rest is rewound: written again from the start of what remains of the run.
        #expect(window.written == 7 && window.needsRebuild)
        let (run, done) = try #require(window.rebuildRun(atOrAfter: window.written))
        #expect(run.first == 7 && run.skip == 7 && run.count == 3 && done == 0)
    }

    @Test func aShutdownNamesTheLastSuccessItIsAcceptedNotRejected() throws {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        let (settlement, _) = try #require(window.applyErrorResponse(Self.error(.shutdown, naming: 4), now: 1, errorWait: Self.errorWait))
        #expect(settlement.accepted == 5 && settlement.refused.isEmpty && settlement.resent == 5)
    }

    @Test func aShutdownNamingTheNotificationBeforeTheWindowRewindsItAll() throws {
        let window = Self.openWindow()
        Self.write(window, count: 4, now: 0)
        _ = window.applyErrorResponse(Self.error(.invalidToken, naming: 1), now: 1, errorWait: Self.errorWait)
        window.connectionOpened()
        for index: UInt64 in 2..<4 { window.recordRebuilt(index: index, length: Self.frame, now: 2) }
        // Status 10 naming #1 (before the window): nothing after it was processed.
        let (settlement, evidence) = try #require(window.applyErrorResponse(Self.error(.shutdown, naming: 1), now: 3, errorWait: Self.errorWait))
        #expect(settlement.accepted == 0 && settlement.resent == 2 && !evidence.isBeyondWindow)
        #expect(window.written == 2)
    }

    @Test func aLateErrorStillRejectsExactlyAndResendsWhatFollows() throws {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        _ = window.settle(now: Self.errorWait, policy: Self.policy())
        #expect(window.presumed == 10, "presumed accepted: the error wait has passed")
        let (settlement, evidence) = try #require(window.applyErrorResponse(Self.error(.invalidToken, naming: 3), now: 4_000, errorWait: Self.errorWait))
        #expect(evidence.isLate && evidence.latency == 4_000)
        #expect(settlement.accepted == 3 && !settlement.refused.isEmpty && settlement.resent == 6)
        #expect(window.presumed == 4 && window.written == 4)
    }

    /// The gateway accepts #0…#2 and decides to shut down naming #2, but holds its answer
    /// back while it reads and discards what follows; the sender has read its campaign to
    /// the end and writes on (at 600). At the error wait #0…#4 are presumed accepted, yet
    /// the answer comes later still: it must find #2's record, not count #3 and #4 as
    /// accepted and then fail them as `delivery_unknown`.
    @Test func aLateShutdownAfterTheSourceWasReadToItsEndFindsItsRecordWhileTheConnectionWrote() throws {
        let window = Self.openWindow()
        Self.write(window, count: 5, source: 7, now: 0)
        Self.write(window, count: 5, source: 7, firstLine: 6, now: 600, continuing: false)
        _ = window.settle(now: Self.errorWait, policy: Self.policy())
        let (settlement, evidence) = try #require(window.applyErrorResponse(Self.error(.shutdown, naming: 2), now: 1_500,
                                                                errorWait: Self.errorWait))
        #expect(!evidence.isBeyondWindow && evidence.acceptedToUnknown == 0)
        #expect(evidence.isLate && evidence.latency == 1_500)
        #expect(settlement.accepted == 3 && settlement.refused.isEmpty && settlement.resent == 7)
        #expect(window.written == 3 && window.needsRebuild)
    }

    @Test func anErrorOlderThanEveryRecordFailsWhatItMayCoverAsUnknown() throws {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        _ = window.settle(now: Self.retention, policy: Self.policy())  // all 10 released as accepted
        Self.write(window, count: 5, firstLine: 11, now: Self.retention)
        // The gateway names #3, long released: 3…9 were discarded after all, and so were the 5 kept.
        let (settlement, evidence) = try #require(window.applyErrorResponse(Self.error(.invalidToken, naming: 3), now: Self.retention + 1,
                                                                errorWait: Self.errorWait))
        #expect(evidence.isBeyondWindow && evidence.acceptedToUnknown == 7)
        #expect(settlement.resent == 5 && settlement.possibleDuplicates == 0)
        #expect(evidence.latency == nil)
        #expect(window.written == 10)
    }

    @Test func anIdentifierNeverWrittenOnThisConnectionIsNotTrusted() {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        #expect(window.applyErrorResponse(Self.error(.invalidToken, naming: 500), now: 1, errorWait: Self.errorWait) == nil)
        #expect(window.applyErrorResponse(ErrorResponse(status: .invalidToken, identifier: 0), now: 1, errorWait: Self.errorWait) == nil)
    }

    @Test func identifiersWrapAt32Bits() throws {
        let window = Self.openWindow()
        let start = UInt64(UInt32.max) - 2
        window.skipNew(to: start)
        window.connectionOpened()
        Self.write(window, count: 6, now: 0)
        // Index 2^32 + 1 has identifier 2.
        let named = UInt64(UInt32.max) + 2
        #expect(StagingRing.identifier(ofIndex: named) == 2)
        let (settlement, _) = try #require(window.applyErrorResponse(Self.error(.invalidToken, naming: named), now: 1,
                                                                errorWait: Self.errorWait))
        #expect(settlement.accepted == Int(named - start) && settlement.resent == 1)
    }

    // MARK: Silent drops

    @Test func aDropReleasesWhatWasPresumedAndResendsWhatWasInFlight() {
        let window = Self.openWindow()
        Self.write(window, count: 4, now: 0)
        _ = window.settle(now: Self.errorWait, policy: Self.policy())
        Self.write(window, count: 6, firstLine: 5, now: Self.errorWait, continuing: false)
        let settlement = window.connectionLost(DropHandling(atMostOnce: false, retryBudget: 3))
        #expect(settlement.accepted == 4)
        #expect(settlement.resent == 6 && settlement.possibleDuplicates == 6 && settlement.failures.isEmpty)
        #expect(window.written == 4 && window.log.runs.map(\.drops) == [1])
    }

    @Test func atMostOnceADropFailsWhatWasInFlightAsUnknown() {
        let window = Self.openWindow()
        Self.write(window, count: 6, now: 0)
        let settlement = window.connectionLost(DropHandling(atMostOnce: true, retryBudget: 3))
        #expect(settlement.resent == 0 && settlement.failures.map(\.reason) == [.deliveryUnknown])
        #expect(settlement.finals.map(\.count) == [6] && window.isEmpty)
    }

    @Test func notificationsInFlightOnTooManyDropsFail() {
        let window = Self.openWindow()
        Self.write(window, count: 3, now: 0)
        for _ in 0..<2 {
            _ = window.connectionLost(DropHandling(atMostOnce: false, retryBudget: 2))
            window.connectionOpened()
            for index: UInt64 in 0..<3 { window.recordRebuilt(index: index, length: Self.frame, now: 1) }
        }
        let last = window.connectionLost(DropHandling(atMostOnce: false, retryBudget: 2))
        #expect(last.failures.map(\.reason) == [.retryBudgetExhausted] && last.failures[0].run.count == 3)
    }

    @Test func eachDropHalvesTheInFlightLimitAndPresumingGrowsItBack() {
        let window = Self.openWindow()
        #expect(window.writeBudget == .max)
        Self.write(window, count: 100, now: 0)
        _ = window.connectionLost(DropHandling(atMostOnce: false, retryBudget: 10))
        #expect(window.inFlightLimit == 50)
        window.connectionOpened()
        for index: UInt64 in 0..<50 { window.recordRebuilt(index: index, length: Self.frame, now: 1) }
        #expect(window.writeBudget == 0, "the rest waits until something is presumed accepted")
        _ = window.settle(now: 1 + Self.errorWait, policy: Self.policy())
        #expect(window.inFlightLimit == 100 && window.writeBudget == 100)
    }

    // MARK: Failing

    @Test func aRunWhoseSourceCannotBeReadFailsFromThatPointOn() throws {
        let window = Self.openWindow()
        Self.write(window, count: 10, now: 0)
        _ = window.connectionLost(DropHandling(atMostOnce: false, retryBudget: 3))
        window.connectionOpened()
        for index: UInt64 in 0..<4 { window.recordRebuilt(index: index, length: Self.frame, now: 1) }
        let settlement = window.failRun(from: 4, reason: .sourceUnreadable)
        #expect(settlement.failures.map(\.run.count) == [6] && settlement.failures[0].run.skip == 4)
        // Nothing is left to rebuild: the hole is skipped.
        #expect(window.rebuildRun(atOrAfter: window.written) == nil)
        window.finishRebuild()
        #expect(!window.needsRebuild && window.count == 4)
    }

    @Test func failingAllReleasesEveryRun() {
        let window = Self.openWindow()
        Self.write(window, count: 3, now: 0)
        Self.write(window, count: 2, source: 2, now: 0)
        let settlement = window.failAll(reason: .cancelled)
        #expect(settlement.failures.count == 2 && settlement.finals.map(\.count) == [3, 2] && window.isEmpty)
    }

    @Test func theRetainedStoreLearnsHowFarItsEntriesAreFinal() throws {
        let window = Self.openWindow()
        Self.write(window, count: 4, source: RetainedStore.sourceID, firstLine: 0, now: 0)
        let (settlement, _) = try #require(window.applyErrorResponse(Self.error(.invalidToken, naming: 1), now: 1, errorWait: Self.errorWait))
        // The run starts at entry 0: entries 0 (accepted) and 1 (rejected) are final.
        #expect(settlement.retainedFinalEnd == 2)
    }
}
