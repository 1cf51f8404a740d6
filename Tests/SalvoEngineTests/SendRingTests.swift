import SalvoIO
import SalvoWire
import Testing
@testable import SalvoEngine

/// Records what a ring settles, the way a connection would.
final class RecordingSink: SettlementSink {
    var accepted = 0
    var rejected: [(status: Status, identifier: UInt32, sequence: UInt64)] = []
    var failed: [(reason: FailureReason, sequence: UInt64)] = []

    func accepted(count: Int) { accepted += count }
    func rejected(status: Status, identifier: UInt32, sequence: UInt64, frame: UnsafeRawBufferPointer) {
        rejected.append((status, identifier, sequence))
    }
    func failed(reason: FailureReason, sequence: UInt64, frame: UnsafeRawBufferPointer) {
        failed.append((reason, sequence))
    }
    var settled: Int { accepted + rejected.count + failed.count }
}

@Suite struct SendRingTests {
    static let encoder = FrameEncoder(format: .frame)
    static let payload = Array(#"{"aps":{"alert":"hello"}}"#.utf8)
    static let frameLength = encoder.encodedLength(payloadLength: payload.count, hasExpiry: false, hasPriority: false)
    static let errorWait: UInt64 = 1_000

    static func token(_ n: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0, count: 32)
        bytes[28] = UInt8(truncatingIfNeeded: n >> 24); bytes[29] = UInt8(truncatingIfNeeded: n >> 16)
        bytes[30] = UInt8(truncatingIfNeeded: n >> 8); bytes[31] = UInt8(truncatingIfNeeded: n)
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }

    func makeRing(frames: Int = 64) -> SendRing {
        SendRing(byteCapacity: max(frames * Self.frameLength, 2 * 2109), format: .frame, maximumFrameLength: 2109)
    }

    @discardableResult
    func publish(_ ring: SendRing, count: Int, from first: Int = 0) -> [UInt32] {
        (first..<first + count).map { n in
            let result = Self.payload.withUnsafeBytes {
                try! ring.publish(encoder: Self.encoder, token: Self.token(n), payload: $0, expiry: nil, priority: nil,
                                  sequence: UInt64(n))
            }
            guard case .published(let identifier, _) = result else { Issue.record("ring full at \(n)"); return 0 }
            return identifier
        }
    }

    /// Writes everything unwritten at time `now`; returns the bytes written.
    @discardableResult
    func writeAll(_ ring: SendRing, now: UInt64, limit: Int = 16384) -> [UInt8] {
        var written: [UInt8] = []
        while let slice = ring.nextSlice(limit: limit) {
            written += slice
            ring.markWritten(slice.count, now: now)
        }
        return written
    }

    /// Decodes written bytes back to (identifier, token index) pairs.
    func decode(_ bytes: [UInt8]) -> [UInt32] {
        var decoder = FrameDecoder()
        var identifiers: [UInt32] = []
        _ = bytes.withUnsafeBytes { decoder.decode($0) { identifiers.append($0.identifier); return true } }
        return identifiers
    }

    @Test func framesAreWrittenInOrderAndSettleAfterTheErrorWait() {
        let ring = makeRing()
        let ids = publish(ring, count: 10)
        #expect(ids == Array(1...10))
        #expect(decode(writeAll(ring, now: 100)) == Array(1...10))
        let sink = RecordingSink()
        ring.settleExpired(now: 100 + Self.errorWait - 1, errorWait: Self.errorWait, sink: sink)
        #expect(sink.accepted == 0)
        ring.settleExpired(now: 100 + Self.errorWait, errorWait: Self.errorWait, sink: sink)
        #expect(sink.accepted == 10)
        #expect(!ring.hasUnsettled)
    }

    @Test func anErrorResponseAcceptsEarlierRejectsTheNamedAndResendsLater() {
        let ring = makeRing()
        publish(ring, count: 10)
        writeAll(ring, now: 0)
        let sink = RecordingSink()
        let outcome = ring.applyErrorResponse(ErrorResponse(status: .invalidToken, identifier: 4), dropBudget: 3,
                                              atMostOnce: false, sink: sink)
        #expect(outcome == .applied(resent: 6))
        #expect(sink.accepted == 3)
        #expect(sink.rejected.map(\.identifier) == [4])
        #expect(sink.rejected.map(\.sequence) == [3])
        // The same bytes again, from the frame after the rejected one.
        #expect(decode(writeAll(ring, now: 10)) == Array(5...10))
        ring.settleExpired(now: 10 + Self.errorWait, errorWait: Self.errorWait, sink: sink)
        #expect(sink.accepted == 9)
        #expect(sink.settled == 10)
    }

    @Test func shutdownNamesTheLastSuccessNotAFailure() {
        let ring = makeRing()
        publish(ring, count: 5)
        writeAll(ring, now: 0)
        let sink = RecordingSink()
        #expect(ring.applyErrorResponse(ErrorResponse(status: .shutdown, identifier: 2), dropBudget: 3, atMostOnce: false,
                                        sink: sink) == .applied(resent: 3))
        #expect(sink.accepted == 2)
        #expect(sink.rejected.isEmpty)
        #expect(decode(writeAll(ring, now: 1)) == [3, 4, 5])
    }

    @Test func shutdownNamingTheFrameBeforeTheWindowResendsAllInFlight() {
        let ring = makeRing()
        publish(ring, count: 4)
        writeAll(ring, now: 0)
        let sink = RecordingSink()
        ring.settleExpired(now: Self.errorWait, errorWait: Self.errorWait, sink: sink)  // 1...4 accepted
        publish(ring, count: 3, from: 4)
        writeAll(ring, now: 2 * Self.errorWait)
        #expect(ring.applyErrorResponse(ErrorResponse(status: .shutdown, identifier: 4), dropBudget: 3, atMostOnce: false,
                                        sink: sink) == .applied(resent: 3))
        #expect(sink.accepted == 4)
        #expect(decode(writeAll(ring, now: 1)) == [5, 6, 7])
    }

    @Test func anIdentifierOutsideTheWindowIsAnOverrunNotIgnored() {
        let ring = makeRing()
        publish(ring, count: 5)
        writeAll(ring, now: 0)
        let sink = RecordingSink()
        let outcome = ring.applyErrorResponse(ErrorResponse(status: .invalidToken, identifier: 99), dropBudget: 3,
                                              atMostOnce: false, sink: sink)
        #expect(outcome == .windowOverrun(resent: 5, failed: 0))
        #expect(sink.settled == 0)
        #expect(decode(writeAll(ring, now: 1)) == [1, 2, 3, 4, 5])
    }

    @Test func aSilentDropResendsTheWindowOrReportsItUnknown() {
        let atLeastOnce = makeRing()
        publish(atLeastOnce, count: 6)
        writeAll(atLeastOnce, now: 0)
        publish(atLeastOnce, count: 2, from: 6)  // never written: not in doubt
        let sink = RecordingSink()
        #expect(atLeastOnce.handleDrop(dropBudget: 3, atMostOnce: false, sink: sink) == (6, 0))
        #expect(decode(writeAll(atLeastOnce, now: 1)) == Array(1...8))

        let atMostOnce = makeRing()
        publish(atMostOnce, count: 6)
        writeAll(atMostOnce, now: 0)
        publish(atMostOnce, count: 2, from: 6)
        let reported = RecordingSink()
        #expect(atMostOnce.handleDrop(dropBudget: 3, atMostOnce: true, sink: reported) == (0, 6))
        #expect(reported.failed.map(\.reason) == Array(repeating: .deliveryUnknown, count: 6))
        #expect(decode(writeAll(atMostOnce, now: 1)) == [7, 8])
    }

    @Test func theRetryBudgetBoundsSilentDrops() {
        let ring = makeRing()
        publish(ring, count: 3)
        let sink = RecordingSink()
        for drop in 1...3 {
            writeAll(ring, now: UInt64(drop))
            #expect(ring.handleDrop(dropBudget: 2, atMostOnce: false, sink: sink).resent == (drop <= 2 ? 3 : 0))
        }
        #expect(sink.failed.map(\.reason) == Array(repeating: .retryBudgetExhausted, count: 3))
        #expect(!ring.hasUnsettled)
        #expect(ring.nextSlice(limit: 16384) == nil)
    }

    @Test func aFullRingIsBackpressureAndSettlingFreesIt() {
        let ring = makeRing(frames: 8)
        let capacity = ring.byteCapacity / Self.frameLength
        publish(ring, count: capacity)
        let full = Self.payload.withUnsafeBytes {
            try! ring.publish(encoder: Self.encoder, token: Self.token(0), payload: $0, expiry: nil, priority: nil, sequence: 0)
        }
        #expect(full == .full)
        writeAll(ring, now: 0)
        let sink = RecordingSink()
        ring.settleExpired(now: Self.errorWait, errorWait: Self.errorWait, sink: sink)
        #expect(sink.accepted == capacity)
        // Wrapping around: frames never straddle the end, and the bytes stay intact.
        publish(ring, count: capacity, from: capacity)
        #expect(decode(writeAll(ring, now: 2 * Self.errorWait)).count == capacity)
    }

    @Test func framesThePeerHasNotAcknowledgedWaitAFullErrorWaitFromThen() {
        let ring = makeRing()
        publish(ring, count: 10)
        writeAll(ring, now: 0)
        let sink = RecordingSink()
        // At the error wait, the last three frames are still in our socket's send queue.
        ring.holdUnacknowledged(3 * Self.frameLength, now: Self.errorWait)
        ring.settleExpired(now: Self.errorWait, errorWait: Self.errorWait, sink: sink)
        #expect(sink.accepted == 7)
        ring.settleExpired(now: 2 * Self.errorWait - 1, errorWait: Self.errorWait, sink: sink)
        #expect(sink.accepted == 7)
        ring.settleExpired(now: 2 * Self.errorWait, errorWait: Self.errorWait, sink: sink)
        #expect(sink.accepted == 10)
        // An error naming a held frame still finds it in the window.
        publish(ring, count: 2, from: 10)
        writeAll(ring, now: 3 * Self.errorWait)
        ring.holdUnacknowledged(Int.max, now: 4 * Self.errorWait)
        #expect(ring.applyErrorResponse(ErrorResponse(status: .invalidToken, identifier: 12), dropBudget: 3, atMostOnce: false,
                                        sink: sink) == .applied(resent: 0))
        #expect(sink.rejected.map(\.identifier) == [12])
    }

    @Test func partialWritesResumeMidFrameAndSlicesRespectTheLimit() {
        let ring = makeRing()
        publish(ring, count: 20)
        var all: [UInt8] = []
        var retries = 0
        while let slice = ring.nextSlice(limit: 100) {
            #expect(slice.count <= max(100, Self.frameLength))
            // Take an odd number of bytes each time, as a congested socket would.
            let taken = min(slice.count, 37)
            all += slice.prefix(taken)
            ring.markWritten(taken, now: 1)
            retries += 1
        }
        #expect(decode(all) == Array(1...20))
        #expect(retries > 20)
    }

    @Test func checkpointsTrackTheOldestUnsettledSequence() {
        let ring = makeRing()
        #expect(ring.oldestUnsettledSequence() == nil)
        publish(ring, count: 5)
        #expect(ring.oldestUnsettledSequence() == 0)
        writeAll(ring, now: 0)
        let sink = RecordingSink()
        _ = ring.applyErrorResponse(ErrorResponse(status: .invalidToken, identifier: 3), dropBudget: 3, atMostOnce: false,
                                    sink: sink)
        #expect(ring.oldestUnsettledSequence() == 3)
        writeAll(ring, now: 1)
        ring.settleExpired(now: 1 + Self.errorWait, errorWait: Self.errorWait, sink: sink)
        #expect(ring.oldestUnsettledSequence() == nil)
    }

    @Test func theRejectedTokenIsReadBackFromTheFrame() {
        for format in FrameFormat.allCases {
            let encoder = FrameEncoder(format: format)
            let ring = SendRing(byteCapacity: 8192, format: format, maximumFrameLength: 2109)
            _ = Self.payload.withUnsafeBytes {
                try! ring.publish(encoder: encoder, token: Self.token(4242), payload: $0, expiry: 7, priority: 10, sequence: 0)
            }
            let frame = ring.nextSlice(limit: 16384)!
            #expect(ring.token(inFrame: frame) == Self.token(4242))
        }
    }
}

@Suite struct ConnectionLifecycleTests {
    func lifecycle(attempts: Int = 3) -> ConnectionLifecycle {
        ConnectionLifecycle(maximumAttempts: attempts, backoff: Backoff(initial: .milliseconds(100), maximum: .seconds(1), jitter: 0),
                            seed: 1)
    }

    @Test func connectsOnceWhenWorkArrives() {
        var machine = lifecycle()
        #expect(machine.start() == .connect)
        #expect(machine.start() == nil)
        machine.established()
        #expect(machine.state == .open)
    }

    @Test func backsOffExponentiallyThenGivesUp() {
        var machine = lifecycle(attempts: 4)
        _ = machine.start()
        #expect(machine.connectFailed("refused", permanent: false) == .reconnect(after: .milliseconds(100)))
        #expect(machine.reconnectTimerFired() == .connect)
        #expect(machine.connectFailed("refused", permanent: false) == .reconnect(after: .milliseconds(200)))
        _ = machine.reconnectTimerFired()
        #expect(machine.connectFailed("refused", permanent: false) == .reconnect(after: .milliseconds(400)))
        _ = machine.reconnectTimerFired()
        #expect(machine.connectFailed("refused", permanent: false) == .giveUp(reason: "refused (gave up after 4 attempts)"))
    }

    @Test func certificateProblemsAreNotRetried() {
        var machine = lifecycle()
        _ = machine.start()
        #expect(machine.connectFailed("certificate verify failed", permanent: true) == .giveUp(reason: "certificate verify failed"))
        #expect(machine.start() == nil)
    }

    @Test func errorResponsesReconnectAtOnceAndDropsBackOff() {
        var machine = lifecycle()
        _ = machine.start()
        machine.established()
        #expect(machine.closed(afterErrorResponse: true) == .connect)
        machine.established()
        #expect(machine.closed(afterErrorResponse: false) == .reconnect(after: .milliseconds(100)))
        #expect(machine.opened == 2)
    }

    @Test func jitterStaysWithinItsBandAndIsReproducible() {
        let backoff = Backoff(initial: .milliseconds(100), maximum: .seconds(1), jitter: 0.5)
        var a = SplitMix64(seed: 7), b = SplitMix64(seed: 7)
        for attempt in 1...10 {
            let delay = backoff.delay(attempt: attempt, random: &a)
            #expect(delay == backoff.delay(attempt: attempt, random: &b))
            let cap = min(Duration.seconds(1), .milliseconds(100 << (attempt - 1)))
            #expect(delay <= cap && delay >= cap / 2)
        }
    }
}
