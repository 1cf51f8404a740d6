import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

/// Answers held as bytes: counted as each falls due, their frames released no earlier than
/// the latest due time held when they were made, in the order they came.
@Suite struct HeldOutputTests {
    private func frame(_ byte: UInt8, _ count: Int = 3) -> [UInt8] { [UInt8](repeating: byte, count: count) }
    private func bytes(_ output: borrowing OutputBuffer) -> [UInt8] { Array(output.readable) }
    /// Answers held, and when the earliest thing held is due.
    private func heldState(_ held: borrowing HeldOutput) -> (Int, Instant?) { (held.count, held.earliest) }

    @Test func answersAndTheirFramesLeaveWhenDueInOrder() {
        var held = HeldOutput()
        var output = OutputBuffer(capacity: 16)
        let (empty, earliest, keepsOrder) = (held.isEmpty, held.earliest, held.keepsOrder(Instant(nanoseconds: 1)))
        #expect(empty && earliest == nil && keepsOrder)
        held.hold(.init(due: Instant(nanoseconds: 10), digest: 1, streamID: 1, reason: nil))
        held.hold(.init(due: Instant(nanoseconds: 10), digest: 2, streamID: 3, reason: .badDeviceToken))
        frame(1).withUnsafeBytes { held.holdFrame($0) }
        frame(2).withUnsafeBytes { held.holdFrame($0) }
        held.hold(.init(due: Instant(nanoseconds: 20), digest: 3, streamID: 5, reason: nil))
        let (tooEarly, onTime) = (held.keepsOrder(Instant(nanoseconds: 19)), held.keepsOrder(Instant(nanoseconds: 20)))
        #expect(!tooEarly && onTime)
        frame(3).withUnsafeBytes { held.holdFrame($0) }
        let seen1 = heldState(held)
        #expect(seen1 == (3, Instant(nanoseconds: 10)))

        let early = held.popDueAnswer(by: Instant(nanoseconds: 9))
        #expect(early == nil, "nothing is due yet")
        held.releaseBytes(by: Instant(nanoseconds: 9), into: &output)
        let seen2 = bytes(output)
        #expect(seen2.isEmpty)

        let now = Instant(nanoseconds: 10)
        let first = held.popDueAnswer(by: now)
        #expect(first?.digest == 1)
        let second = held.popDueAnswer(by: now)
        #expect(second?.reason == .badDeviceToken)
        let third = held.popDueAnswer(by: now)
        #expect(third == nil)
        held.releaseBytes(by: now, into: &output)
        let seen3 = bytes(output)
        #expect(seen3 == frame(1) + frame(2), "the frames of the answers due, not the next one's")
        let seen4 = heldState(held)
        #expect(seen4 == (1, Instant(nanoseconds: 20)))

        held.releaseBytes(by: Instant(nanoseconds: 25), into: &output)
        let last = held.popDueAnswer(by: Instant(nanoseconds: 25))
        #expect(last?.digest == 3)
        let seen5 = bytes(output)
        #expect(seen5 == frame(1) + frame(2) + frame(3))
        let seen6 = heldState(held)
        #expect(seen6 == (0, nil))
    }

    /// A frame made after a later answer was held waits for that answer's time: none
    /// leaves before the answer it belongs to.
    @Test func aFrameMadeLateWaitsForTheLatestHeld() {
        var held = HeldOutput()
        var output = OutputBuffer(capacity: 16)
        held.hold(.init(due: Instant(nanoseconds: 10), digest: 1, streamID: 1, reason: nil))
        held.hold(.init(due: Instant(nanoseconds: 30), digest: 2, streamID: 3, reason: nil))
        frame(1).withUnsafeBytes { held.holdFrame($0) }
        held.releaseBytes(by: Instant(nanoseconds: 10), into: &output)
        let seen7 = bytes(output)
        #expect(seen7.isEmpty)
        let first = held.popDueAnswer(by: Instant(nanoseconds: 10))
        #expect(first?.digest == 1, "counted at its own time")
        held.releaseBytes(by: Instant(nanoseconds: 30), into: &output)
        let seen8 = bytes(output)
        #expect(seen8 == frame(1))
    }

    /// A client's reset finds the stream's held answer: it stops counting as held (against
    /// the stream limit, or as unsent when the connection goes), and comes out marked when
    /// due; its bytes still go.
    @Test func aResetStreamsAnswerIsMarkedAndNoLongerCounts() {
        var held = HeldOutput()
        var output = OutputBuffer(capacity: 16)
        held.hold(.init(due: Instant(nanoseconds: 10), digest: 1, streamID: 1, reason: nil))
        held.hold(.init(due: Instant(nanoseconds: 10), digest: 2, streamID: 3, reason: nil))
        held.hold(.init(due: Instant(nanoseconds: 20), digest: 3, streamID: 5, reason: nil))
        frame(1).withUnsafeBytes { held.holdFrame($0) }
        let (first, again, unknown) = (held.reset(streamID: 3), held.reset(streamID: 3), held.reset(streamID: 7))
        #expect(first && !again && !unknown, "counted once, and only for an answer held")
        let heldCount = held.count
        #expect(heldCount == 2)
        let answers = [held.popDueAnswer(by: Instant(nanoseconds: 10)), held.popDueAnswer(by: Instant(nanoseconds: 10))]
        #expect(answers.map { $0?.streamID } == [1, 3] && answers.map { $0?.isReset } == [false, true])
        held.releaseBytes(by: Instant(nanoseconds: 20), into: &output)
        let seen = bytes(output)
        #expect(seen == frame(1), "the bytes go all the same")
        let last = held.reset(streamID: 5)
        #expect(last)
        let unsent = held.discard()
        #expect(unsent == 0, "already counted when reset")
    }

    @Test func aConnectionGoneDiscardsWhatIsHeldAndCountsTheAnswers() {
        var held = HeldOutput()
        var output = OutputBuffer(capacity: 16)
        held.hold(.init(due: Instant(nanoseconds: 10), digest: 1, streamID: 1, reason: nil))
        held.hold(.init(due: Instant(nanoseconds: 10), digest: 2, streamID: 3, reason: nil))
        frame(1, 40).withUnsafeBytes { held.holdFrame($0) }
        let unsent = held.discard()
        #expect(unsent == 2)
        let seen9 = heldState(held)
        #expect(seen9 == (0, nil))
        // Holding goes on from a clean slate.
        held.hold(.init(due: Instant(nanoseconds: 50), digest: 3, streamID: 5, reason: nil))
        frame(2).withUnsafeBytes { held.holdFrame($0) }
        held.releaseBytes(by: Instant(nanoseconds: 50), into: &output)
        let seen10 = bytes(output)
        #expect(seen10 == frame(2))
    }
}
