import Foundation
import SalvoIO
import SalvoMock
import SalvoWire
import SystemPackage
import SalvoTestSupport
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// `Sender.send(contentsOf:)` against the real mock: resends are read again from the source.
@Suite(.serialized, .timeLimit(.minutes(2))) struct SourceSendingTests {
    static func list(_ range: Range<Int>) -> NotificationList {
        NotificationList(range.map { NotificationList.Item(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0)) })
    }

    @Test func resendsAreReadAgainFromTheSourceAndTheCallReturnsWhenAllAreFinal() async throws {
        // Tokens whose last byte is 0x07 are invalid: 1 in 256, every rejection rewinds.
        let rig = try LoopbackRig(plan: FailurePlan(invalidTokenSuffix: [0x07]))
        defer { rig.gateway.stop() }
        let count = 30_000
        let rejected = Locked<Set<UInt64>>([])
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port)) { _, _, sequence in
            _ = rejected.withLock { $0.insert(sequence) }
        }
        try await sender.send(contentsOf: Self.list(0..<count))
        let progress = sender.progress
        #expect(progress.accepted + progress.rejected + progress.failed == count, "final when the call returns")
        let report = await sender.finish()
        let expectedRejected = Set((0..<count).filter { $0 & 0xff == 0x07 }.map(UInt64.init))
        #expect(rejected.withLock { $0 } == expectedRejected)
        #expect(report.isComplete && report.failed == 0 && report.resent > 0)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(mock.duplicates == 0)
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: count, excluding: expectedRejected))
    }

    @Test func twoSourcesAtOnceAreBothSentWhole() async throws {
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: 1500))
        defer { rig.gateway.stop() }
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port))
        async let first: Void = sender.send(contentsOf: Self.list(0..<10_000))
        async let second: Void = sender.send(contentsOf: Self.list(10_000..<20_000))
        _ = try await (first, second)
        let report = await sender.finish()
        #expect(report.submitted == 20_000 && report.isComplete && report.failed == 0)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(report.accepted == mock.accepted && report.rejected == mock.rejected && mock.duplicates == 0)
    }

    /// Sources submitted one after the other (the second handed over before the first's
    /// answers are all in) are counted apart: each submission's outcome is its own source's,
    /// rejections (each one rewinding its connection, so resends read both sources again)
    /// included, and together they are the sender's report.
    @Test func submissionsOneAfterTheOtherAreCountedApart() async throws {
        let rig = try LoopbackRig(plan: FailurePlan(invalidTokenSuffix: [0x07]))
        defer { rig.gateway.stop() }
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port))
        let ranges = [0..<10_000, 10_000..<12_000, 12_000..<30_000]
        var submissions: [Submission] = []
        for range in ranges { submissions.append(await sender.submit(contentsOf: Self.list(range))) }
        var outcomes: [SubmissionOutcome] = []
        for submission in submissions { outcomes.append(await submission.outcome()) }
        for (range, outcome) in zip(ranges, outcomes) {
            let rejected = range.filter { $0 & 0xff == 0x07 }.count
            #expect(outcome.stoppedBy == nil)
            #expect(outcome.published == range.count && outcome.failed == 0)
            #expect(outcome.rejected == rejected && outcome.rejectedByReason == ["invalid_token": rejected])
            #expect(outcome.accepted == range.count - rejected)
        }
        let report = await sender.finish()
        #expect(report.isComplete && report.resent > 0)
        #expect(report.accepted == outcomes.reduce(0) { $0 + $1.accepted })
        #expect(report.rejected == outcomes.reduce(0) { $0 + $1.rejected })
        let mock = rig.statistics(caughtUpWith: report)
        #expect(mock.accepted == report.accepted && mock.duplicates == 0)
    }

    /// A submission after `finish()` takes nothing and says why.
    @Test func aSubmissionAfterFinishTakesNothing() async throws {
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port))
        _ = await sender.finish()
        let outcome = await sender.submit(contentsOf: Self.list(0..<10)).outcome()
        #expect(outcome.published == 0 && outcome.stoppedBy as? SendError == .finished)
    }

    /// The first campaign ends, its connections drain (close_notify, answered by the mock's),
    /// and the call returns when everything is final; a second campaign on the same sender
    /// then goes out on the next connections, and drains in turn.
    @Test func aSourceAfterOneThatDrainedGoesOutOnTheNextConnections() async throws {
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: 1500))
        defer { rig.gateway.stop() }
        var configuration = LoopbackRig.senderConfiguration(port: rig.gateway.port)
        configuration.recordRetention = .seconds(60)  // only a drain ends the first call in time
        let sender = try Sender(configuration)
        try await sender.send(contentsOf: Self.list(0..<10_000))
        #expect(sender.progress.accepted + sender.progress.rejected == 10_000, "final when the call returns")
        try await sender.send(contentsOf: Self.list(10_000..<20_000))
        let report = await sender.finish(timeout: .seconds(30))
        var drained = 0
        for await event in sender.events {
            if case .disconnected(_, _, let reason) = event, reason.hasPrefix("drained: the gateway closed") { drained += 1 }
        }
        #expect(report.submitted == 20_000 && report.isComplete && report.failed == 0)
        #expect(drained >= 2 * LoopbackRig.senderConfiguration(port: 0).shards, "each campaign's connections drained")
        let mock = rig.statistics(caughtUpWith: report)
        #expect(report.accepted == mock.accepted && report.rejected == mock.rejected && mock.duplicates == 0)
    }

    @Test func aPayloadTheEncoderRefusesStopsTheSourceThereAndNothingBeforeItIsLost() async throws {
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port))
        var items = (0..<10).map { NotificationList.Item(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0)) }
        items[6].payload = []
        await #expect(throws: SendError.invalidPayload(.emptyPayload, sequence: 6)) {
            try await sender.send(contentsOf: NotificationList(items))
        }
        let report = await sender.finish()
        #expect(report.submitted == 6 && report.accepted == 6)
    }

    /// A source whose readers fail to seek: a resend cannot read it again.
    struct ForgetfulSource: NotificationSource {
        let list: NotificationList

        final class Reader: NotificationReader {
            let inner: NotificationList.Reader
            init(_ inner: NotificationList.Reader) { self.inner = inner }
            func next() -> SourceNotification? { inner.next() }
            func seek(to position: SourcePosition) throws {
                throw CampaignError.io(IOError("seek", errno: .ioError, target: "forgetful source"))
            }
        }

        func makeReader() -> Reader { Reader(list.makeReader()) }
    }

    @Test func whatCannotBeReadAgainFailsAsSourceUnreadableAndIsStillAccountedFor() async throws {
        let rig = try LoopbackRig(plan: FailurePlan(rejectEvery: 2000))
        defer { rig.gateway.stop() }
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port))
        let count = 20_000
        try await sender.send(contentsOf: ForgetfulSource(list: Self.list(0..<count)))
        let report = await sender.finish()
        var unnamed = 0
        var firstFailed = UInt64.max
        for await event in sender.events {
            if case .failedUnnamed(let failed, .sourceUnreadable, let first, let detail) = event {
                unnamed += failed
                firstFailed = min(firstFailed, first ?? .max)
                #expect(detail.contains("forgetful source"))
            }
        }
        #expect(report.isComplete)
        #expect((report.failedByReason["source_unreadable"] ?? 0) > 0)
        #expect(unnamed == report.failedByReason["source_unreadable"])
        // What a checkpoint records stops before the first failure, so a resume sends it again.
        #expect(firstFailed < UInt64(count))
        #expect((sender.completedSequence().map { $0 + 1 } ?? 0) == firstFailed)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(report.accepted == mock.accepted && report.rejected == mock.rejected)
    }
}
