import SalvoWire
import Testing
@testable import SalvoEngine

/// The HTTP/2 window without sockets: answers in any order, the checkpoint right before
/// the lowest unanswered notification, one notification at a time retried with its limits.
@Suite struct StreamWindowTests {
    static let token = try! DeviceToken(hex: String(repeating: "ab", count: 32))

    /// A window with `count` new notifications (lane indices and sequences 0..<count) each
    /// on its own stream; returns their entries.
    static func window(opening count: Int, limits: StreamWindow.Limits = .init())
        -> (StreamWindow, [Int32])
    {
        let window = StreamWindow(limits: limits)
        window.connectionOpened()
        let entries = (0..<count).map { n in
            let position = SourcePosition(offset: UInt64(n) * 100, sequence: UInt64(n))
            let index = window.recordNew(Origin(position: position, source: 1, continuesRun: true))
            return window.open(OpenStream(index: index, token: token,
                                          attempts: Attempts(), tokenGeneration: 0))
        }
        return (window, entries)
    }

    /// One per stream a connection may have open: its size is memory per stream.
    @Test func anOpenStreamPacksIntoFiftySixBytes() {
        #expect(MemoryLayout<OpenStream?>.stride == 56)
    }

    @Test func answersInAnyOrderReleaseOnlyFromTheOldestUnanswered() {
        let (window, entries) = Self.window(opening: 4)
        var settlement = Settlement()
        window.accepted(entries[2], into: &settlement)
        window.rejected(entries[1], .http(status: 400, reason: "BadDeviceToken", timestamp: nil), into: &settlement)
        #expect(window.oldestSequence == 0, "notification 0 is unanswered: the checkpoint stays before it")
        #expect(settlement.accepted == 1 && settlement.refused.count == 1 && window.openCount == 2)
        window.accepted(entries[0], into: &settlement)
        #expect(window.oldestSequence == 3, "0, 1 and 2 are final and released together")
        window.accepted(entries[3], into: &settlement)
        #expect(window.isEmpty && window.oldestSequence == nil)
        #expect(settlement.finals.map(\.count).reduce(0, +) == 4)
    }

    @Test func aThrottledNotificationWaitsOutItsBackoffAndAskedTimesAreNeverPast() {
        let (window, entries) = Self.window(opening: 1)
        var settlement = Settlement()
        window.retry(entries[0], .throttled(after: 1_000), now: 5_000, into: &settlement)
        #expect(settlement.resent == 1 && settlement.possibleDuplicates == 0)
        #expect(window.nextRetry(now: 5_500) == nil)
        #expect(window.nextRetryTime(now: 5_500) == 6_000)
        // Due, but no stream free to take it: the window must not ask to be woken in the past
        // (a timer for a past time fires at once, again and again).
        #expect(window.nextRetryTime(now: 6_000) == nil)
        #expect(window.hasRetries)
        let retry = window.nextRetry(now: 6_001)
        #expect(retry?.index == 0 && retry?.attempts.throttled == 1)
        #expect(!window.hasRetries)
    }

    /// Waiting retries hold their places under the stream limit (the connection takes
    /// nothing new for them), and come due by their times; those due together go in the
    /// order they were throttled.
    @Test func waitingRetriesAreCountedAndComeDueEarliestFirst() {
        let (window, entries) = Self.window(opening: 3)
        var settlement = Settlement()
        window.retry(entries[0], .throttled(after: 3_000), now: 1_000, into: &settlement)
        window.retry(entries[1], .throttled(after: 1_000), now: 1_000, into: &settlement)
        window.retry(entries[2], .throttled(after: 2_000), now: 1_000, into: &settlement)
        #expect(window.openCount == 0 && window.waitingRetryCount == 3)
        #expect(window.nextRetryTime(now: 1_000) == 2_000)
        #expect(window.nextRetry(now: 2_500)?.index == 1)
        #expect(window.nextRetryTime(now: 2_500) == 3_000, "the next earliest, once the first went")
        #expect(window.waitingRetryCount == 2)
        #expect(window.nextRetry(now: 4_000)?.index == 0)
        #expect(window.nextRetry(now: 4_000)?.index == 2)
        #expect(window.waitingRetryCount == 0 && window.nextRetryTime(now: 4_000) == nil)
    }

    @Test func aStreamRefusedTooOftenFailsAsRetryBudgetExhausted() {
        let (window, entries) = Self.window(opening: 1, limits: .init(refusals: 1))
        var settlement = Settlement()
        window.retry(entries[0], .refused, now: 0, into: &settlement)
        let retry = try! #require(window.nextRetry(now: 0))
        let entry = window.open(OpenStream(index: retry.index, token: Self.token, attempts: retry.attempts, tokenGeneration: 0))
        window.retry(entry, .refused, now: 0, into: &settlement)
        #expect(settlement.failures.map(\.reason) == [.retryBudgetExhausted])
        #expect(window.isEmpty && !window.hasRetries)
    }

    @Test func aServiceUnavailableIsRetriedOnAnotherConnectionOnly() {
        let (window, entries) = Self.window(opening: 2)
        var settlement = Settlement()
        window.retry(entries[0], .unavailable, now: 0, into: &settlement)
        window.retry(entries[1], .refused, now: 0, into: &settlement)
        // The refused one may go again here; the 503's waits for the next connection.
        #expect(window.nextRetry(now: 0)?.index == 1)
        #expect(window.nextRetry(now: 0) == nil)
        window.connectionOpened()
        #expect(window.nextRetry(now: 0)?.index == 0)
        #expect(settlement.resent == 2 && settlement.possibleDuplicates == 0)
    }

    @Test func anInternalServerErrorIsRetriedAtOnceOnTheSameConnection() {
        let (window, entries) = Self.window(opening: 1)
        var settlement = Settlement()
        window.retry(entries[0], .serverError, now: 0, into: &settlement)
        #expect(window.nextRetry(now: 0)?.attempts.serverErrors == 1)
        #expect(settlement.resent == 1 && settlement.possibleDuplicates == 0)
    }

    /// A retired connection's streams count apart from the next connection's (whose stream
    /// limit they must not take), are answered on it, and, if it drops, only they follow
    /// the drop policy.
    @Test func aRetiredConnectionsStreamsCountApartAndOnlyTheyAreLostWithIt() {
        let (window, entries) = Self.window(opening: 3)
        var settlement = Settlement()
        let retired = window.retireConnection()
        #expect(window.openCount == 0 && window.openCount(onRetired: retired) == 3 && window.openOnAllConnections == 3)
        window.connectionOpened()
        let position = SourcePosition(offset: 300, sequence: 3)
        let index = window.recordNew(Origin(position: position, source: 1, continuesRun: true))
        let fresh = window.open(OpenStream(index: index, token: Self.token,
                                           attempts: Attempts(), tokenGeneration: 0))
        #expect(window.openCount == 1 && window.openOnAllConnections == 4)
        window.accepted(entries[0], into: &settlement)
        #expect(window.openCount(onRetired: retired) == 2 && window.openCount == 1)
        let lost = window.connectionLost(DropHandling(atMostOnce: false, retryBudget: 3), number: retired)
        #expect(lost.resent == 2 && lost.possibleDuplicates == 2)
        #expect(window.openCount(onRetired: retired) == 0 && window.openCount == 1)
        window.retiredConnectionClosed(retired)
        window.accepted(fresh, into: &settlement)
        #expect(window.openOnAllConnections == 0 && window.waitingRetryCount == 2)
    }

    @Test func aDropResendsOpenStreamsAsPossibleDuplicatesOrReportsThemUnknown() {
        let (resending, _) = Self.window(opening: 3)
        let resent = resending.connectionLost(DropHandling(atMostOnce: false, retryBudget: 3))
        #expect(resent.resent == 3 && resent.possibleDuplicates == 3 && resent.failures.isEmpty)
        #expect(resending.openCount == 0 && resending.oldestSequence == 0)

        let (reporting, entries) = Self.window(opening: 3)
        var settlement = Settlement()
        reporting.accepted(entries[1], into: &settlement)
        let reported = reporting.connectionLost(DropHandling(atMostOnce: true, retryBudget: 3))
        #expect(reported.failures.map(\.reason) == [.deliveryUnknown, .deliveryUnknown])
        #expect(reporting.isEmpty)
    }

    @Test func failingEverythingIncludesWaitingRetries() {
        let (window, entries) = Self.window(opening: 3)
        var settlement = Settlement()
        window.retry(entries[0], .throttled(after: 1_000_000), now: 0, into: &settlement)
        let failed = window.failAll(reason: .authenticationFailed)
        #expect(failed.failures.count == 3 && failed.failures.allSatisfy { $0.reason == .authenticationFailed })
        #expect(window.isEmpty && !window.hasRetries)
    }
}
