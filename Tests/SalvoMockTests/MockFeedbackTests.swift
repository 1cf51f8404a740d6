import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

@Suite(.timeLimit(.minutes(2))) struct MockFeedbackTests {
    let harness: MockHarness

    init() throws { harness = try MockHarness() }

    let tuples = [
        FeedbackTuple(timestamp: 1_700_000_000, token: testToken(1)),
        FeedbackTuple(timestamp: 0x0102_0304, token: testToken(2)),
        FeedbackTuple(timestamp: UInt32.max, token: testToken(3)),
    ]

    @Test func tuplesArriveByteExactThenTheListIsCleared() throws {
        let feedback = try MockFeedback(.init(tls: harness.serverTLS, tuples: tuples))
        defer { feedback.stop() }
        let received = try harness.connect(feedback.port).drain()
        #expect(received == tuples.flatMap(\.bytes))
        #expect(received.count == 3 * 38)
        #expect(Array(received.prefix(6)) == [0x65, 0x53, 0xf1, 0x00, 0x00, 0x20])
        #expect(try harness.connect(feedback.port).drain().isEmpty)
        #expect(feedback.connectionsServed == 2)
    }

    @Test func withoutClearingEveryConnectionGetsTheList() throws {
        let feedback = try MockFeedback(.init(tls: harness.serverTLS, tuples: tuples, clearAfterRead: false))
        defer { feedback.stop() }
        for _ in 0..<2 {
            #expect(try harness.connect(feedback.port).drain() == tuples.flatMap(\.bytes))
        }
        feedback.stop()
        feedback.stop()
    }
}
