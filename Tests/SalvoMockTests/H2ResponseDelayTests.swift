import Foundation
import SalvoIO
import Testing
@testable import SalvoMock

/// Answers held by the plan's response and error delays, timed by the clients (h2load's
/// per-request times, nghttp's frame log) and by the test's clock. Only lower bounds on
/// time are asserted: a loaded machine makes everything slower, never faster.
@Suite(.serialized, .timeLimit(.minutes(2))) struct H2ResponseDelayTests {
    @Test func heldAnswersHoldUpNeitherOtherStreamsNorReading() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(responseDelay: .milliseconds(200)) }
        // 100 streams at a time: ten rounds of answers held 200 ms each, where answering one
        // stream at a time would take 1000 × 200 ms.
        let load = try await rig.h2load(requests: 1000, clients: 1, streams: 100)
        #expect(load.statusCodes == [1000, 0, 0, 0], "h2load: \(load.output)")
        #expect(try #require(load.requestTime).min >= 0.2, "every answer held 200 ms: \(load.output)")
        #expect(load.elapsed >= .seconds(2))
        #expect(rig.gateway.statistics().accepted == 1000)
    }

    @Test func aThousandStreamsPerConnectionAreHeldAtOnce() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(responseDelay: .milliseconds(200)) }
        let load = try await rig.h2load(requests: 4000, clients: 2, streams: 1000)
        #expect(load.statusCodes == [4000, 0, 0, 0], "h2load: \(load.output)")
        #expect(try #require(load.requestTime).min >= 0.2, "h2load: \(load.output)")
        #expect(load.elapsed >= .milliseconds(400), "two rounds of 1000 on each connection")
        let statistics = rig.gateway.statistics()
        #expect(statistics.accepted == 4000 && statistics.connections == 2)
    }

    @Test func theJitterAddsASeededUniformShareOfItsRange() async throws {
        let rig = try H2Rig {
            $0.failurePlan = H2FailurePlan(responseDelay: .milliseconds(100), responseJitter: .milliseconds(200))
        }
        let load = try await rig.h2load(requests: 1000, clients: 1, streams: 100)
        #expect(load.statusCodes == [1000, 0, 0, 0], "h2load: \(load.output)")
        let time = try #require(load.requestTime)
        #expect(time.min >= 0.1)
        // Uniform over 0...200 ms: a mean of 100 ms, give or take 2 ms over 1000 answers.
        #expect(time.mean >= 0.1 + 0.08, "h2load: \(load.output)")
    }

    @Test func theJitterIsAPureFunctionOfTheSeedTheConnectionAndTheStream() {
        func holdTimes(seed: UInt64) -> [UInt64] {
            let plan = H2FailurePlan(seed: seed, responseDelay: .milliseconds(100), responseJitter: .milliseconds(200))
            let state = H2GatewayState(.init(tls: TLSConfiguration(), failurePlan: plan))
            return stride(from: Int32(1), to: 2000, by: 2).map { state.holdTime(isError: false, connection: 3, stream: $0) }
        }
        let times = holdTimes(seed: 7)
        #expect(times.allSatisfy { (100_000_000...300_000_000).contains($0) })
        #expect(times.max()! - times.min()! > 150_000_000, "spread over the range")
        #expect(holdTimes(seed: 7) == times)
        #expect(holdTimes(seed: 8) != times)
    }

    /// Request 1 is accepted, request 2 rejected (`rejectEvery: 2`); whichever answer is
    /// held the longer arrives last, at least its delay after its request went out.
    @Test(arguments: [(1000, 0), (0, 1000)])
    func errorAnswersAreHeldByTheErrorDelayInsteadOfTheResponseDelay(responseDelay: Int, errorDelay: Int) async throws {
        let rig = try H2Rig {
            $0.failurePlan = H2FailurePlan(rejectEvery: 2, responseDelay: .milliseconds(responseDelay),
                                           errorDelay: .milliseconds(errorDelay))
        }
        let log = try await rig.nghttp(requests: 2)
        #expect(log.answers.count == 2, "nghttp: \(log.text)")
        let (first, last) = try (#require(log.answers.first), #require(log.answers.last))
        let heldLonger = errorDelay > responseDelay ? 400 : 200
        #expect(last.status == heldLonger && first.status != heldLonger, "nghttp: \(log.text)")
        #expect(log.latency(of: last) >= 1.0 - NghttpLog.resolution, "nghttp: \(log.text)")
        let statistics = rig.gateway.statistics()
        #expect(statistics.accepted == 1 && statistics.rejectedByReason == ["BadDeviceToken": 1])
    }

    /// Answers held a fixed time are held as the bytes nghttp2 made of them, their streams
    /// closed in nghttp2: a client's reset of one still finds its answer, which counts as
    /// unsent, not accepted, while the connection carries on.
    @Test func aStreamResetWhileItsAnswerIsHeldIsCountedAsUnsent() throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(responseDelay: .milliseconds(300)) }
        let client = try RawH2Client(port: rig.gateway.port)
        try client.send(RawH2Client.preface + RawH2Client.frame(type: 4, flags: 0, stream: 0, []) + client.request(stream: 1))
        _ = try #require(rig.statistics { $0.requests == 1 }, "the first request judged, its answer held")
        try client.send(RawH2Client.cancel(stream: 1) + client.request(stream: 3))
        let frames = try client.readFrames { $0.contains { $0.type == 1 && $0.stream == 3 } }
        #expect(frames.contains { $0.type == 1 && $0.stream == 3 }, "the second answer, after the first was due")
        let statistics = try #require(rig.statistics { $0.accepted + $0.unsentAnswers == 2 })
        #expect(statistics.accepted == 1 && statistics.unsentAnswers == 1)
    }

    @Test func anAnswerHeldPastItsClientsPatienceIsCountedAsUnsent() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(responseDelay: .seconds(30)) }
        let response = try await rig.curl(extra: ["--max-time", "1"])
        #expect(response.status == nil && response.exitCode == 28, "curl gave up: \(response.errors)")
        let statistics = try #require(rig.statistics { $0.unsentAnswers == 1 })
        #expect(statistics.requests == 1 && statistics.accepted == 0 && statistics.rejected == 0)
    }
}
