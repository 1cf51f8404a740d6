import Foundation
import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

/// `FailurePlan.errorDelay`: a slow gateway that answers late and discards what arrived in
/// the meantime. Times are measured on the monotonic clock from just before the client
/// writes the bad notification, and only ever bounded from below.
// Three minutes, not one: in the full suite, tests that block the cooperative pool can
// stretch a few seconds of work past a minute of wall time.
@Suite(.timeLimit(.minutes(3))) struct MockErrorDelayTests {
    let harness: MockHarness

    init() throws { harness = try MockHarness() }

    /// Reads the whole answer and when it was complete.
    func answer(of stream: TLSStream) throws -> (bytes: [UInt8], at: Instant) {
        let bytes = try stream.drain()
        return (bytes, Instant.now())
    }

    @Test func aRejectionArrivesNoEarlierThanTheDelayAndWhatFollowsIsDiscarded() throws {
        let delay = Duration.milliseconds(300)
        let gateway = try harness.gateway(FailurePlan(rejectEvery: 5, errorDelay: delay))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...4))
        let beforeTheBadOne = Instant.now()
        try stream.send(frames(5...5))
        try stream.send(frames(6...40))
        let (bytes, at) = try answer(of: stream)
        #expect(bytes == errorBytes(.invalidToken, 5))
        #expect(at.since(beforeTheBadOne) >= delay)
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 4)
        #expect(statistics.received == 5, "nothing after the rejected notification is judged")
        #expect(statistics.rejected == 1)
        #expect(statistics.delayedResponses == 1)
    }

    @Test func duringTheDelayTheClientsWritesKeepFlowingAndAreDropped() throws {
        let delay = Duration.seconds(1)
        let gateway = try harness.gateway(FailurePlan(rejectEvery: 1, errorDelay: delay))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        // A small send buffer: what follows (about 1 MiB) is far more than the client's send
        // buffer and the gateway's 256 KiB receive buffer hold, so these writes complete
        // only if the gateway keeps reading while it holds its answer.
        stream.socket.setBufferSizes(send: 16384, receive: nil)
        let beforeTheBadOne = Instant.now()
        try stream.send(frames(1...1) + frames(2...9000))
        // The writes are done and the answer is still held back.
        var scratch = [UInt8](repeating: 0, count: 64)
        let early = try scratch.withUnsafeMutableBytes { try stream.read(into: $0) }
        #expect(early == .wouldBlock(.wantRead), "all writes completed before the answer was due")
        let (bytes, at) = try answer(of: stream)
        #expect(bytes == errorBytes(.invalidToken, 1))
        #expect(at.since(beforeTheBadOne) >= delay)
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 0)
        #expect(statistics.received == 1)
        #expect(statistics.bytesReceived < 65536, "only the read that held the bad frame counts; the ~1 MiB after it does not")
        #expect(statistics.delayedResponses == 1)
    }

    @Test func aShutdownIsDelayedAndStillNamesTheLastAccepted() throws {
        let delay = Duration.milliseconds(300)
        let gateway = try harness.gateway(FailurePlan(shutdownEvery: 3, errorDelay: delay), recordAccepted: true)
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(21...22))
        let beforeTheLastOne = Instant.now()
        try stream.send(frames(23...30))
        let (bytes, at) = try answer(of: stream)
        #expect(bytes == errorBytes(.shutdown, 23))
        #expect(at.since(beforeTheLastOne) >= delay)
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 3)
        #expect(statistics.received == 3)
        #expect(statistics.shutdowns == 1)
        #expect(statistics.rejected == 0)
        #expect(statistics.acceptedDigests?.count == 3)
        #expect(statistics.delayedResponses == 1)
    }

    @Test func theAnswerToAMalformedFrameIsDelayedToo() throws {
        let delay = Duration.milliseconds(300)
        let malformed = MockGatewayTests.malformed[0]  // command 1 with a 5-byte token, identifier 12345
        let gateway = try harness.gateway(FailurePlan(errorDelay: delay))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...1))
        let beforeTheBadOne = Instant.now()
        try stream.send(malformed.bytes + frames(2...20))
        let (bytes, at) = try answer(of: stream)
        #expect(bytes == errorBytes(malformed.status, try #require(malformed.identifier)))
        #expect(at.since(beforeTheBadOne) >= delay)
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 1)
        #expect(statistics.received == 1)
        #expect(statistics.rejected(malformed.status) == 1)
        #expect(statistics.delayedResponses == 1)
    }

    @Test func aSilentDropIsNotDelayed() throws {
        // A drop answers nothing, so there is nothing to hold back: the close comes at once
        // (shown by the count, not by a clock).
        let gateway = try harness.gateway(FailurePlan(dropEvery: 2, errorDelay: .seconds(600)))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...3))
        var buffer = [UInt8](repeating: 0, count: 64)
        let result = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0, timeout: .seconds(10)) }
        #expect(result == .closed(clean: false))
        let statistics = gateway.statistics()
        #expect(statistics.droppedConnections == 1)
        #expect(statistics.delayedResponses == 0)
    }

    @Test func aClientThatFinishesWritingDuringTheDelayStillGetsItsAnswer() throws {
        let delay = Duration.seconds(1)
        // One loop: the second connection's timer is due after the first's, so once its
        // answer has arrived the first connection's timer has fired too.
        let gateway = try harness.gateway(FailurePlan(rejectEvery: 3, errorDelay: delay), loops: 1)
        defer { gateway.stop() }
        let first = try harness.connect(gateway.port)
        let beforeTheFirstBadOne = Instant.now()
        try first.send(frames(1...5))
        #expect(eventually { gateway.statistics().delayedResponses == 1 })
        first.shutdown()  // close_notify: the client has written everything, and still reads
        let (firstAnswer, firstAt) = try answer(of: first)
        #expect(firstAnswer == errorBytes(.invalidToken, 3), "the answer was held back, not dropped")
        #expect(firstAt.since(beforeTheFirstBadOne) >= delay)

        // The gateway-wide count stands at 3: the second connection's 3rd notification is the 6th.
        let second = try harness.connect(gateway.port)
        let beforeTheBadOne = Instant.now()
        try second.send(frames(11...14))
        let (bytes, at) = try answer(of: second)
        #expect(bytes == errorBytes(.invalidToken, 13))
        #expect(at.since(beforeTheBadOne) >= delay)
        let statistics = gateway.statistics()
        #expect(statistics.connections == 2)
        #expect(statistics.accepted == 4)
        #expect(statistics.received == 6)
        #expect(statistics.rejected == 2, "the first rejection counts: the gateway had decided")
        #expect(statistics.delayedResponses == 2)
    }

    @Test func stoppingDuringTheDelayClosesWithoutAnAnswer() throws {
        let gateway = try harness.gateway(FailurePlan(rejectEvery: 2, errorDelay: .seconds(600)))
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...3))
        #expect(eventually { gateway.statistics().delayedResponses == 1 })
        gateway.stop()  // must not wait for the held answer (the suite's time limit would catch it)
        gateway.stop()
        // End of stream or a reset both end the read; a timeout would mean it was left open.
        do {
            #expect(try stream.drain().isEmpty)
        } catch {
            #expect(!"\(error)".contains("timed out"), "\(error)")
        }
        #expect(gateway.statistics().accepted == 1)
    }

    @Test func withoutADelayNothingIsHeld() throws {
        let gateway = try harness.gateway(FailurePlan(rejectEvery: 2))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...3))
        #expect(try stream.drain() == errorBytes(.invalidToken, 2))
        #expect(gateway.statistics().delayedResponses == 0)
    }

    @Test func aNegativeDelayIsRefused() throws {
        #expect(throws: FailurePlanError.self) { _ = try harness.gateway(FailurePlan(errorDelay: .milliseconds(-1))) }
    }

    @Test func theCountIsInTheJSONReport() throws {
        var statistics = MockStatistics()
        statistics.delayedResponses = 2
        let data = try JSONEncoder().encode(statistics)
        #expect(String(decoding: data, as: UTF8.self).contains(#""delayedResponses":2"#))
        #expect(try JSONDecoder().decode(MockStatistics.self, from: data) == statistics)
    }
}
