import SalvoIO
import Testing
@testable import SalvoMock

/// Held answers leave earliest due first, those due at the same instant in arrival order,
/// whether they arrived in due order (the queue) or not (the heap).
@Suite struct HeldAnswersTests {
    @Test func answersLeaveByDueTimeThenArrivalWhateverOrderTheyCameIn() {
        var held = HeldAnswers()
        // Stream n is due at dues[n]: runs in order, with earlier ones (jitter, an error's
        // shorter delay) and ties among them.
        let dues: [UInt64] = [10, 20, 20, 5, 30, 25, 25, 40, 5, 30]
        for (stream, due) in dues.enumerated() {
            held.insert(due: Instant(nanoseconds: due), streamID: Int32(stream), slot: Int32(stream))
        }
        #expect(held.earliest == Instant(nanoseconds: 5))
        #expect(held.popDue(by: Instant(nanoseconds: 4)) == nil, "nothing is due yet")
        var released: [Int32] = []
        while let entry = held.popDue(by: Instant(nanoseconds: 100)) { released.append(entry.streamID) }
        let expected = dues.indices.sorted { (dues[$0], $0) < (dues[$1], $1) }.map(Int32.init)
        #expect(released == expected)
        #expect(held.earliest == nil)
    }
}
