import Foundation
import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

@Suite(.timeLimit(.minutes(2))) struct MockGatewayTests {
    let harness: MockHarness

    init() throws { harness = try MockHarness() }

    @Test func wellFormedFramesAreAcceptedAndCountedByCommand() throws {
        let gateway = try harness.gateway()
        defer { gateway.stop() }
        let bytes = frames(1...3, .simple) + frames(4...7, .enhanced) + frames(8...12, .frame)
        let stream = try harness.connect(gateway.port)
        try stream.send(bytes)
        #expect(eventually { gateway.statistics().accepted == 12 })
        stream.shutdown()
        let statistics = gateway.statistics()
        #expect(statistics.framesByCommand == .init(simple: 3, enhanced: 4, frame: 5))
        #expect(statistics.bytesReceived == bytes.count)
        #expect(statistics.rejected == 0)
        #expect(statistics.connections == 1)
        #expect(statistics.acceptedDigests == nil)
    }

    /// A malformed notification between two good ones: the first is accepted, the bad one
    /// answered with its 6 bytes (a command 0 with none: that format has no error
    /// responses), the last discarded, and the connection closed.
    struct Malformed: CustomTestStringConvertible, Sendable {
        let name: String
        let bytes: [UInt8]
        let status: Status
        /// The identifier the error response names; nil: no error response.
        let identifier: UInt32?
        var testDescription: String { name }
    }

    static let malformed: [Malformed] = {
        let token = testToken(7)
        var tokenBytes: [UInt8] = []
        token.withUnsafeBytes { tokenBytes = Array($0) }
        let payload = testPayload
        func frame(_ items: [(UInt8, [UInt8])]) -> [UInt8] {
            let body = items.flatMap { [$0.0, UInt8($0.1.count >> 8), UInt8($0.1.count & 0xff)] + $0.1 }
            return [2] + withUnsafeBytes(of: UInt32(body.count).bigEndian, Array.init) + body
        }
        let identifier: [UInt8] = [0, 0, 0x30, 0x39]  // 12345
        let priority: [UInt8] = [10]
        let enhancedBadToken: [UInt8] = [1, 0, 0, 0x30, 0x39, 0, 0, 0, 0, 0, 5, 1, 2, 3, 4, 5, 0, 1, 0x7b]
        return [
            Malformed(name: "command 1 with a 5-byte token", bytes: enhancedBadToken, status: .invalidTokenSize, identifier: 12345),
            Malformed(name: "command 0 with a 5-byte token", bytes: [0, 0, 5, 1, 2, 3, 4, 5, 0, 1, 0x7b],
                      status: .invalidTokenSize, identifier: nil),
            Malformed(name: "command 2 without a token", bytes: frame([(2, payload), (3, identifier), (5, priority)]),
                      status: .missingDeviceToken, identifier: 12345),
            Malformed(name: "command 2 without a payload", bytes: frame([(1, tokenBytes), (3, identifier), (5, priority), (2, [])].dropLast()),
                      status: .missingPayload, identifier: 12345),
            Malformed(name: "command 2 with an empty payload", bytes: frame([(1, tokenBytes), (2, []), (3, identifier)]),
                      status: .invalidPayloadSize, identifier: 12345),
            Malformed(name: "command 2 with a 2049-byte payload",
                      bytes: frame([(3, identifier), (1, tokenBytes), (2, [UInt8](repeating: 0x20, count: 2049))]),
                      status: .invalidPayloadSize, identifier: 12345),
            Malformed(name: "command 2 with all five items and a 4096-byte payload, beyond the largest legal frame",
                      bytes: frame([(1, tokenBytes), (2, [UInt8](repeating: 0x20, count: 4096)), (3, identifier),
                                    (4, [0, 0, 0, 0]), (5, priority)]),
                      status: .invalidPayloadSize, identifier: 12345),
            Malformed(name: "unknown command 9", bytes: [9] + [UInt8](repeating: 0, count: 60),
                      status: .protocolError, identifier: 0),
            Malformed(name: "command 2 with an unknown item", bytes: frame([(3, identifier), (9, [1]), (1, tokenBytes), (2, payload)]),
                      status: .protocolError, identifier: 12345),
        ]
    }()

    @Test(arguments: malformed)
    func malformedNotificationGetsItsErrorResponseThenTheConnectionCloses(_ malformed: Malformed) throws {
        let gateway = try harness.gateway()
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...1) + malformed.bytes + frames(2...2))
        #expect(try stream.drain() == malformed.identifier.map { errorBytes(malformed.status, $0) } ?? [])
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 1)
        #expect(statistics.received == 1)
        #expect(statistics.rejected(malformed.status) == 1)
        #expect(statistics.rejected == 1)
    }

    @Test func invalidTokenFromTheSetIsRejectedWithItsIdentifier() throws {
        let gateway = try harness.gateway(FailurePlan(invalidTokens: [testToken(3)]))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...5))
        #expect(try stream.drain() == errorBytes(.invalidToken, 3))
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 2)
        #expect(statistics.received == 3, "the notifications after the rejected one are discarded unread")
        #expect(statistics.rejectedByStatus == ["invalid_token": 1])
    }

    @Test func invalidTokenSuffixRejectsMatchingTokens() throws {
        // testToken(n) ends with n's big-endian bytes: 0x0104 is notification 260.
        let gateway = try harness.gateway(FailurePlan(invalidTokenSuffix: [0x01, 0x04]))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(255...265, .enhanced))
        #expect(try stream.drain() == errorBytes(.invalidToken, 260))
        #expect(gateway.statistics().accepted == 5)
    }

    @Test func rejectEveryCountsAcrossConnections() throws {
        let gateway = try harness.gateway(FailurePlan(rejectEvery: 4, rejectStatus: .processingError))
        defer { gateway.stop() }
        let first = try harness.connect(gateway.port)
        try first.send(frames(1...6))
        #expect(try first.drain() == errorBytes(.processingError, 4))
        // The gateway-wide count stands at 4: the 4th notification of the next connection is the 8th.
        let second = try harness.connect(gateway.port)
        try second.send(frames(101...110))
        #expect(try second.drain() == errorBytes(.processingError, 104))
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 6)
        #expect(statistics.rejectedByStatus == ["processing_error": 2])
    }

    /// Which of notifications 1...count a gateway with `plan` rejects, observed on the
    /// wire: each connection carries the rest of them and ends with an unknown command, so
    /// its answer is either a rejection (resume after it on a new connection) or the 128
    /// for the terminator (everything before it was accepted).
    func rejectedIdentifiers(_ plan: FailurePlan, count: Int) throws -> [Int] {
        let gateway = try harness.gateway(plan)
        defer { gateway.stop() }
        var rejected: [Int] = []
        var next = 1
        while next <= count {
            let stream = try harness.connect(gateway.port)
            try stream.send(frames(next...count) + [9])
            let answer = try #require(try ErrorResponse.decode(stream.drain()))
            if answer.status == .protocolError { break }
            #expect(answer.status == plan.rejectStatus)
            rejected.append(Int(answer.identifier))
            next = Int(answer.identifier) + 1
        }
        #expect(gateway.statistics().accepted + rejected.count == count)
        return rejected
    }

    @Test func rejectProbabilityIsReproducibleFromTheSeed() throws {
        let count = 400
        let rejected = try rejectedIdentifiers(FailurePlan(seed: 42, rejectProbability: 0.25), count: count)
        #expect(rejected == (try rejectedIdentifiers(FailurePlan(seed: 42, rejectProbability: 0.25), count: count)))
        #expect(rejected != (try rejectedIdentifiers(FailurePlan(seed: 43, rejectProbability: 0.25), count: count)))
        // 400 draws at 1/4: 100 expected, with a standard deviation of about 9.
        #expect((60...140).contains(rejected.count), "\(rejected.count) of \(count) rejected")
    }

    @Test func shutdownEveryNamesTheLastAcceptedNotification() throws {
        let gateway = try harness.gateway(FailurePlan(shutdownEvery: 3), recordAccepted: true)
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(21...25))
        #expect(try stream.drain() == errorBytes(.shutdown, 23))
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 3)
        #expect(statistics.shutdowns == 1)
        #expect(statistics.rejected == 0)
        #expect(statistics.acceptedDigests?.count == 3)
    }

    @Test func dropEveryClosesWithoutAnyBytes() throws {
        let gateway = try harness.gateway(FailurePlan(dropEvery: 3))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...5))
        var buffer = [UInt8](repeating: 0, count: 64)
        let result = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0, timeout: .seconds(5)) }
        #expect(result == .closed(clean: false), "a silent drop sends neither an error response nor close_notify")
        let statistics = gateway.statistics()
        #expect(statistics.accepted == 2)
        #expect(statistics.received == 3)
        #expect(statistics.droppedConnections == 1)
        #expect(statistics.rejected == 0)
    }

    /// A client that finished writing says so with close_notify; the gateway answers with its
    /// own once it has judged everything before it, which is how a sender learns its last
    /// notifications were read, not only buffered.
    @Test func aClientsCloseNotifyIsAnsweredOnceEverythingBeforeItWasJudged() throws {
        let gateway = try harness.gateway(FailurePlan(stallEvery: 50, stallDuration: .milliseconds(100)))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        // About four TLS records: the gateway stalls after each of the first three reads.
        try stream.send(frames(1...600))
        stream.shutdown()
        var buffer = [UInt8](repeating: 0, count: 64)
        let result = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0, timeout: .seconds(5)) }
        #expect(result == .closed(clean: true))
        // Read after its stalls, yet all of it judged before the answer.
        let statistics = gateway.statistics()
        #expect(statistics.stalls >= 2)
        #expect(statistics.accepted == 600)
    }

    /// A client that keeps writing after its rejection, for longer than the gateway lingers
    /// once a client is quiet (PyAPNs resends for seconds before it reads the error), is not
    /// reset: its writes go on being drained and its error response arrives intact.
    @Test func aClientStillWritingAfterItsRejectionIsNotReset() throws {
        let gateway = try harness.gateway(FailurePlan(rejectEvery: 1))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        try stream.send(frames(1...1))
        let pause = Duration.milliseconds(250)
        let writes = Int((ServerConnection.lingerQuietTime * 3 / 2) / pause)
        for identifier in 2...(1 + writes) {
            // Pacing, not synchronisation: the client is slow on purpose.
            usleep(UInt32(pause.nanosecondsClamped / 1000))
            try stream.send(frames(identifier...identifier))
        }
        stream.socket.shutdownWrite()
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        var end: TLSReadResult
        while true {
            end = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0, timeout: .seconds(5)) }
            guard case .bytes(let n) = end else { break }
            bytes += buffer.prefix(n)
        }
        #expect(bytes == errorBytes(.invalidToken, 1))
        #expect(end == .closed(clean: true), "close_notify, not a reset")
        #expect(gateway.statistics().received == 1)
    }

    @Test func stallPushesBackOnTheWriterAndThenEverythingArrives() throws {
        let stall = Duration.milliseconds(200)
        let gateway = try harness.gateway(FailurePlan(stallEvery: 500, stallDuration: stall))
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        stream.socket.setBufferSizes(send: 16384, receive: nil)
        let frame = encoded(token: testToken(1), identifier: 1)
        // Write until a write has been refused for a good part of a stall, then a few more.
        var written = 0
        var longestWait = Duration.zero
        var extra = 0
        let deadline = Instant.now() + .seconds(20)
        try frame.withUnsafeBytes { bytes in
            while extra < 10 && Instant.now() < deadline {
                var offset = 0
                while offset < bytes.count {
                    switch try stream.write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
                    case .wrote(let n): offset += n
                    case .wouldBlock(let progress):
                        let started = Instant.now()
                        var poller = pollfd(fd: stream.socket.fd.rawValue, events: Int16(progress == .wantWrite ? POLLOUT : POLLIN), revents: 0)
                        _ = poll(&poller, 1, 1000)
                        longestWait = max(longestWait, Instant.now().since(started))
                    }
                }
                written += 1
                if longestWait >= stall / 2 { extra += 1 }
            }
        }
        #expect(longestWait >= stall / 2, "the writer should have been held back by the stall")
        #expect(eventually(timeout: .seconds(10)) { gateway.statistics().accepted == written })
        #expect(gateway.statistics().stalls >= 1)
        #expect(gateway.statistics().stalls <= written / 500)
    }

    @Test func clientWithoutCertificateIsRefusedWhenOneIsRequired() throws {
        let gateway = try harness.gateway(strict: true)
        defer { gateway.stop() }
        #expect(throws: (any Error).self) {
            let stream = try harness.connect(gateway.port)
            // TLS 1.3: the client's handshake ends first; the refusal arrives on the first read.
            _ = try stream.drain()
        }
        #expect(eventually { gateway.statistics().handshakeFailures == 1 })

        let stream = try harness.connect(gateway.port, withCertificate: true)
        try stream.send(frames(1...2))
        #expect(eventually { gateway.statistics().accepted == 2 })
        #expect(gateway.statistics().connections == 2)
    }

    @Test func twoConcurrentConnectionsAreBothCounted() throws {
        let gateway = try harness.gateway()
        defer { gateway.stop() }
        let first = try harness.connect(gateway.port)
        let second = try harness.connect(gateway.port)
        try first.send(frames(1...10))
        try second.send(frames(11...30))
        try first.send(frames(31...35))
        #expect(eventually { gateway.statistics().accepted == 35 })
        #expect(gateway.statistics().connections == 2)
    }

    @Test func recordedDigestsMatchWhatWasSentAndDuplicatesAreCounted() throws {
        let gateway = try harness.gateway(recordAccepted: true)
        defer { gateway.stop() }
        let stream = try harness.connect(gateway.port)
        // Notification 2 again under a new identifier is the same notification.
        try stream.send(frames(1...4) + encoded(.enhanced, token: testToken(2), identifier: 99))
        #expect(eventually { gateway.statistics().accepted == 5 })
        let expected = Set((1...4).map { MockStatistics.digest(token: testToken($0), payload: testPayload) })
        let statistics = gateway.statistics()
        #expect(statistics.acceptedDigestSet == expected)
        #expect(statistics.acceptedDigests == expected.sorted())
        #expect(statistics.duplicates == 1)
    }

    @Test func statisticsEncodeAsJSON() throws {
        var statistics = MockStatistics()
        statistics.accepted = 3
        statistics.rejectedByStatus = ["invalid_token": 1]
        let data = try JSONEncoder().encode(statistics)
        let decoded = try JSONDecoder().decode(MockStatistics.self, from: data)
        #expect(decoded == statistics)
        #expect(String(decoding: data, as: UTF8.self).contains(#""framesByCommand""#))
    }

    @Test func stopIsPromptAndIdempotent() throws {
        let gateway = try harness.gateway()
        let port = gateway.port
        let stream = try harness.connect(port)
        try stream.send(frames(1...3))
        #expect(eventually { gateway.statistics().accepted == 3 })
        let started = Instant.now()
        gateway.stop()
        #expect(Instant.now().since(started) < .seconds(1))
        gateway.stop()
        // The connection is gone (end of stream or reset, both end the read)…
        _ = try? stream.drain()
        // …and so is the listener.
        #expect(throws: (any Error).self) { _ = try harness.connect(port) }
    }

    @Test func invalidPlansAreRefused() throws {
        #expect(throws: FailurePlanError.self) { _ = try harness.gateway(FailurePlan(rejectEvery: 0)) }
        #expect(throws: FailurePlanError.self) { _ = try harness.gateway(FailurePlan(rejectProbability: 1.5)) }
        #expect(throws: FailurePlanError.self) {
            _ = try harness.gateway(FailurePlan(invalidTokenSuffix: [UInt8](repeating: 0, count: 33)))
        }
    }

    @Test func stallJitterIsReproducible() {
        let rules = PlanRules(FailurePlan(seed: 7, stallEvery: 1, stallDuration: .milliseconds(10), stallJitter: .milliseconds(5)))
        let delays = (1...20).map { rules.stallDelay(connection: 3, stall: $0) }
        #expect(delays == (1...20).map { rules.stallDelay(connection: 3, stall: $0) })
        #expect(delays.allSatisfy { $0 >= .milliseconds(10) && $0 < .milliseconds(15) })
        #expect(Set(delays).count > 1)
    }
}
