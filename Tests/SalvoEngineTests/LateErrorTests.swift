import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Synchronization
import Testing
@testable import SalvoEngine

/// Error responses that arrive after the error wait, from a slow gateway (the mock's
/// `errorDelay`): while the named notification's record is kept they are handled exactly;
/// once it was released they fail what they may cover as `delivery_unknown`.
///
/// Timing: the mock answers later than the sender's error wait on purpose. Records are kept
/// for the retention, or until the connection drained (the gateway answered its close_notify,
/// which it reads after everything before it), so a late error finds its record as long as it
/// comes within the retention. A fast sender reads a campaign of tens of thousands in a
/// fraction of a second (the connection the gateway stopped judging takes everything at full
/// speed), faster than one delay: some tests order these events (`GatedSource`) so that a
/// late error is handled before the campaign's end.
@Suite(.serialized, .timeLimit(.minutes(2)), .ownThread("late-error-tests")) struct LateErrorTests {
    /// How long the mock holds back each error response here.
    static let errorDelay = Duration.milliseconds(150)

    struct Scenario: Sendable, CustomTestStringConvertible {
        var name: String
        var plan: FailurePlan
        var shards = 2
        var connectionsPerShard = 2
        var seed: UInt64 = 0x5A1F0
        var testDescription: String { name }
    }

    static let scenarios: [Scenario] = [
        Scenario(name: "reject every 2000, 2×2 connections", plan: FailurePlan(rejectEvery: 2000, errorDelay: errorDelay)),
        Scenario(name: "reject every 2000, 2×4 connections", plan: FailurePlan(rejectEvery: 2000, errorDelay: errorDelay),
                 connectionsPerShard: 4),
    ] + [UInt64(11), 12, 13].map { seed in
        // The seed decides which notifications the probability rule rejects (and the
        // sender's backoff jitter); reject-every and shutdown-every are counters.
        // Shutdowns come after 1500 accepted on one connection: fewer than a connection
        // takes between two rejections.
        Scenario(name: "reject every 4000 + shutdown every 1500 + 1/5000 at random, seed \(seed)",
                 plan: FailurePlan(seed: seed, rejectEvery: 4000, rejectProbability: 0.0002, shutdownEvery: 1500,
                                   errorDelay: errorDelay),
                 seed: seed)
    }

    /// Opened once, from any thread; waited for by one reader, with a bound.
    final class Gate: Sendable {
        private let semaphore = DispatchSemaphore(value: 0)
        private let isOpen = Atomic<Bool>(false)

        func open() {
            if !isOpen.exchange(true, ordering: .acquiringAndReleasing) { semaphore.signal() }
        }

        /// Whether it opened within `seconds`.
        func wait(seconds: Int) -> Bool {
            if isOpen.load(ordering: .acquiring) { return true }
            return semaphore.wait(timeout: .now() + .seconds(seconds)) == .success
        }
    }

    /// A campaign whose first reader stops after `gateAfter` notifications until `gate`
    /// opens. The sender's own readers (for resends) are never held.
    struct GatedSource: NotificationSource {
        let list: NotificationList
        let gateAfter: Int
        let gate: Gate

        final class Reader: NotificationReader {
            private let inner: NotificationList.Reader
            private var gate: Gate?
            private var remainingBeforeGate: Int

            init(_ inner: NotificationList.Reader, gate: Gate?, after count: Int) {
                self.inner = inner
                self.gate = gate
                remainingBeforeGate = count
            }

            func next() -> SourceNotification? {
                if let gate {
                    if remainingBeforeGate == 0 {
                        #expect(gate.wait(seconds: 30), "the gate never opened: no error response reached the sender")
                        self.gate = nil
                    } else {
                        remainingBeforeGate -= 1
                    }
                }
                return inner.next()
            }

            func seek(to position: SourcePosition) { inner.seek(to: position) }
        }

        func makeReader() -> Reader { Reader(list.makeReader(), gate: nil, after: 0) }
        func makeGatedReader() -> Reader { Reader(list.makeReader(), gate: gate, after: gateAfter) }
    }

    /// The gateway shuts a connection down (status 10) but answers late, draining what
    /// follows meanwhile; the campaign was read to its end before, and the connection goes
    /// on writing it. Reading a campaign to its end must not release its records: the
    /// answer would name a notification already counted as accepted, and what followed it
    /// would fail as `delivery_unknown` (`salvo demo` with shutdowns and 1.5 s late errors
    /// once lost 800,000 of 2,000,000 so). Records go at the retention, or when a drain
    /// proves them.
    @Test func aLateShutdownFindsItsRecordAfterItsCampaignWasReadToTheEnd() async throws {
        // On each connection the mock stops reading for 300 ms after 12,500 notifications,
        // and shuts down after 25,000 accepted, answering 150 ms late.
        let rig = try LoopbackRig(plan: FailurePlan(shutdownEvery: 25_000, stallEvery: 12_500, stallDuration: .milliseconds(300),
                                                    errorDelay: Self.errorDelay))
        defer { rig.gateway.stop() }
        var configuration = LoopbackRig.oneConnection(port: rig.gateway.port)
        // Half the gateway's delay: the named notification is presumed accepted well before
        // the answer comes, and writing the 75,000 after it outlasts the other half even at
        // a million notifications a second.
        configuration.errorWait = .milliseconds(75)
        configuration.recordRetention = .seconds(10)
        // The whole campaign fits the staging ring: it is read to its end during the first
        // stall, before the first shutdown is decided.
        configuration.ringCapacity = 16 << 20
        let count = 100_000
        let sender = try Sender(configuration)
        try await sender.send(contentsOf: SourceSendingTests.list(0..<count))
        let report = await sender.finish(timeout: .seconds(60))
        let mock = rig.statistics(caughtUpWith: report)

        #expect(mock.shutdowns > 0 && mock.delayedResponses == mock.shutdowns)
        #expect(report.windowOverruns == 0, "failed: \(report.failedByReason)")
        #expect(report.isComplete && report.failed == 0 && report.rejected == 0)
        #expect(report.lateErrors > 0 && report.errorWaitRaises.allSatisfy { $0.latency != nil })
        #expect(report.errorLatency?.count == mock.shutdowns)
        #expect(report.accepted == mock.accepted && mock.duplicates == 0)
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: count, excluding: []))
    }

    /// The whole campaign is written long before the gateway reads its end (it stops reading
    /// now and then, and its socket buffers take the rest), and the gateway rejects one of
    /// the last notifications, answering late. By then everything was presumed accepted and
    /// the connection was draining: the answer arrives while the sender waits for the
    /// gateway's close_notify, and is handled exactly; the next connection drains too.
    @Test func aLateErrorAboutTheLastNotificationsIsHandledWhileTheConnectionDrains() async throws {
        let count = 30_000
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: count - 10, stallEvery: 5_000,
                                                    stallDuration: .milliseconds(100), errorDelay: Self.errorDelay))
        defer { rig.gateway.stop() }
        var configuration = LoopbackRig.oneConnection(port: rig.gateway.port)
        configuration.errorWait = .milliseconds(30)
        configuration.recordRetention = .seconds(30)
        let sender = try Sender(configuration)
        try await sender.send(contentsOf: SourceSendingTests.list(0..<count))
        let report = await sender.finish(timeout: .seconds(60))
        var reasons: [String] = []
        for await event in sender.events {
            if case .disconnected(_, _, let reason) = event { reasons.append(reason) }
        }
        let mock = rig.statistics(caughtUpWith: report)

        #expect(mock.rejected == 1 && report.rejected == 1 && report.lateErrors == 1)
        #expect(report.isComplete && report.failed == 0 && report.windowOverruns == 0, "\(report.failedByReason)")
        #expect(report.accepted == mock.accepted && mock.duplicates == 0)
        expectSameAcceptedSet(mock.acceptedDigestSet,
                              LoopbackRig.digests(count: count, excluding: [UInt64(count - 10 - 1)]))
        // The rejection ended the first connection; a drain ended the second, not the retention.
        #expect(reasons.first?.contains("error response") == true, "\(reasons)")
        #expect(reasons.last?.contains("drained") == true, "\(reasons)")
    }

    @Test(arguments: scenarios)
    func lateErrorsRejectExactlyWhatTheyNameAndLoseNothing(_ scenario: Scenario) async throws {
        let rig = try LoopbackRig(plan: scenario.plan)
        defer { rig.gateway.stop() }
        var configuration = LoopbackRig.senderConfiguration(port: rig.gateway.port)
        configuration.shards = scenario.shards
        configuration.connectionsPerShard = scenario.connectionsPerShard
        configuration.seed = scenario.seed
        // Every error response (150 ms) comes later than the error wait (30 ms), and well
        // within the retention: each is late, and each finds its record. The retention is
        // long because "within" counts from the write: on a starved machine the mock may
        // read a frame seconds after the kernel acknowledged it.
        configuration.errorWait = .milliseconds(30)
        configuration.recordRetention = .seconds(10)
        let count = 40_000

        // The campaign is read to its end only after the first late error was handled (a
        // rejection is reported, and the wait raised, in the same step), so that the raise
        // is seen while sending. The first 10,000 hold rejections (every 2000th or 4000th).
        let gate = Gate()
        let source = GatedSource(list: SourceSendingTests.list(0..<count), gateAfter: 10_000, gate: gate)
        let rejected = Locked<Set<UInt64>>([])
        let sender = try Sender(configuration) { _, _, sequence in
            _ = rejected.withLock { $0.insert(sequence) }
            gate.open()
        }
        try await sender.send(contentsOf: source, startingWith: source.makeGatedReader())
        let report = await sender.finish(timeout: .seconds(60))
        var raisedEvents: [ErrorWaitRaise] = []
        for await event in sender.events {
            if case .errorWaitRaised(let raise) = event { raisedEvents.append(raise) }
        }
        let rejectedSequences = rejected.withLock { $0 }
        let mock = rig.statistics(caughtUpWith: report)

        // Complete and exact: nothing failed, nothing lost, nothing twice.
        #expect(report.submitted == count)
        #expect(report.isComplete)
        #expect(report.failed == 0, "failed: \(report.failedByReason)")
        #expect(report.windowOverruns == 0)
        #expect(mock.rejected > 0)
        #expect(report.rejected == mock.rejected)
        #expect(rejectedSequences.count == report.rejected)
        #expect(report.accepted == mock.accepted)
        #expect(mock.duplicates == 0)
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: count, excluding: rejectedSequences))
        if scenario.plan.shutdownEvery != nil { #expect(mock.shutdowns > 0) }

        // Every response was held back, and each reached the sender while its record was kept.
        #expect(mock.delayedResponses == mock.rejected + mock.shutdowns)
        #expect(report.errorLatency?.count == mock.rejected + mock.shutdowns)
        #expect((report.errorLatency?.p50Milliseconds ?? 0) >= 140, "latency \(String(describing: report.errorLatency))")

        // They came late, and the wait was raised above the gateway's delay.
        #expect(report.lateErrors > 0)
        #expect(report.errorWait > Self.errorDelay, "error wait \(report.errorWait)")
        #expect(!report.errorWaitRaises.isEmpty)
        #expect(report.errorWaitRaises.allSatisfy { $0.latency != nil }, "a raise without latency: a record was released")
        #expect(report.lateErrors >= report.errorWaitRaises.count)
        #expect(report.errorWaitRaises.last?.to == report.errorWait)
        #expect(raisedEvents == report.errorWaitRaises, "each raise is announced as an event")
    }
}
