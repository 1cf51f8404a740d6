import Foundation
import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

/// The HTTP/2 failure plan's gateway-wide rules and what the gateway records, checked with
/// curl and h2load: each curl run is a connection of its own, so that counts that span
/// runs span connections.
@Suite(.serialized, .timeLimit(.minutes(2))) struct H2FailurePlanTests {
    // MARK: 500 InternalServerError

    @Test func everyNthValidRequestGatewayWideIsAnInternalServerError() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(internalErrorEvery: 2) }
        #expect(try await rig.curl().status == 200, "the first valid request")
        let second = try await rig.curl()
        #expect(second.status == 500 && second.reason == "InternalServerError", "the second, on another connection")
        let load = try await rig.h2load(requests: 98, clients: 2, streams: 5)
        #expect(load.statusCodes == [49, 0, 0, 49], "h2load: \(load.output)")
        let statistics = rig.gateway.statistics()
        #expect(statistics.accepted == 50 && statistics.requests == 100)
        #expect(statistics.rejectedByReason == ["InternalServerError": 50])
        #expect(statistics.rejectedByStatus == ["500": 50])
    }

    // MARK: GOAWAY at every multiple

    @Test func goawayFiresAtEveryMultipleOfNAndTheClientReconnects() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(goawayEvery: 5) }
        let answers = try await rig.curlInSequence(20)
        #expect(answers.map(\.status) == Array(repeating: 200, count: 20))
        // A new connection for the first request and after each of the first three GOAWAYs.
        #expect(answers.map(\.connects) == (0..<20).map { $0 % 5 == 0 ? 1 : 0 })
        let statistics = rig.gateway.statistics()
        #expect(statistics.goaways == 4 && statistics.connections == 4)
        #expect(statistics.accepted == 20 && statistics.requests == 20)
    }

    @Test func goawayCountsValidRequestsAcrossConnections() async throws {
        let rig = try H2Rig { $0.failurePlan = H2FailurePlan(goawayEvery: 5) }
        let first = try await rig.curlInSequence(3)
        // Requests 4 and 5 gateway-wide: the second run's connection goes away after its
        // second request, and its third goes on a new connection.
        let second = try await rig.curlInSequence(3)
        #expect((first + second).map(\.status) == Array(repeating: 200, count: 6))
        #expect(second.map(\.connects) == [1, 0, 1])
        let statistics = rig.gateway.statistics()
        #expect(statistics.goaways == 1 && statistics.connections == 3 && statistics.accepted == 6)
    }

    // MARK: Recorded requests

    @Test func acceptedRequestsAreRecordedWithTheirTokenAndHeaders() async throws {
        let rig = try H2Rig { $0.recordRequests = true }
        let id = "0f9a3c8e-1b2d-4e5f-8a9b-0c1d2e3f4a5b"
        let full = try await rig.curl(headers: ["apns-topic: com.example.app.voip", "apns-push-type: voip", "apns-id: \(id)",
                                                "apns-expiration: 1700000000", "apns-priority: 5", "apns-collapse-id: sale"])
        #expect(full.status == 200, "curl: \(full.errors)")
        let shouting = String(repeating: "AB", count: 32)
        #expect(try await rig.curl("/3/device/\(shouting)", headers: ["apns-topic: com.example.app"]).status == 200)
        #expect(try await rig.curl(headers: standardHeaders + ["apns-priority: 7"]).status == 400, "rejected: not recorded")

        let recorded = rig.gateway.statistics().acceptedRequests
        #expect(recorded == [
            H2RecordedRequest(token: h2Token, pushType: "voip", topic: "com.example.app.voip", apnsID: id,
                              expiration: "1700000000", priority: "5", collapseID: "sale"),
            H2RecordedRequest(token: shouting.lowercased(), topic: "com.example.app"),
        ])
        #expect(try H2Rig().gateway.statistics().acceptedRequests == nil, "recorded only when asked")
    }

    @Test func theRecordKeepsTheFirstHundredThousand() throws {
        let state = H2GatewayState(.init(tls: TLSConfiguration()))
        let request = H2RecordedRequest(token: h2Token)
        state.record(Array(repeating: request, count: 60_000))
        state.record([H2RecordedRequest(token: h2Token, topic: "com.example.app")] + Array(repeating: request, count: 60_000))
        let kept = state.recordedRequests.withLock { $0 }
        #expect(kept.count == H2MockGateway.recordedRequestLimit)
        #expect(kept[60_000].topic == "com.example.app", "in the order they came")
    }
}
