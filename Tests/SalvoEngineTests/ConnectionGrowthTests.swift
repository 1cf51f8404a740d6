import SalvoMock
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

    @Test func aCeilingBelowTheStartIsTheStart() {
        let growth = ConnectionGrowth(initial: 3, ceiling: 1, interval: .zero)
        #expect(growth.ceiling == 3 && !growth.stalled(at: 1) && growth.count == 3)
    }

    /// A staging ring of a few frames is full whenever the producer runs ahead of the
    /// socket, which on loopback is all the time: the sender grows to its ceiling, and
    /// what the added connections carry is accounted for exactly, rejections included.
    @Test(arguments: [1, 3]) func aSenderGrowsToItsCeilingWhileEveryConnectionIsFull(ceiling: Int) async throws {
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
}
