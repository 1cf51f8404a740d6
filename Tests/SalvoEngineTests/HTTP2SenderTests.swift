import Foundation
import SalvoIO
import SalvoMock
import SalvoWire
import Testing
@testable import SalvoEngine

/// An HTTP/2 mock gateway with throwaway certificates and a sender configured for it.
struct H2LoopbackRig {
    static let pki = LoopbackRig.pki

    let gateway: H2MockGateway

    init(plan: H2FailurePlan = H2FailurePlan(), clientCertificates: Bool = true,
         _ configure: (inout H2MockGateway.Configuration) -> Void = { _ in }) throws {
        var tls = TLSConfiguration.server(certificateChain: Self.pki.server.certificate, privateKey: Self.pki.server.privateKey,
                                          clientCertificateRoots: clientCertificates ? .certificates(Self.pki.authority.certificate) : nil)
        tls.requireClientCertificate = clientCertificates
        var configuration = H2MockGateway.Configuration(tls: tls, loops: 2, failurePlan: plan, recordAccepted: true)
        configure(&configuration)
        gateway = try H2MockGateway(configuration)
    }

    /// A sender for the rig, authenticating with the client certificate.
    func senderConfiguration(topic: String = "com.example.app") -> SenderConfiguration {
        var configuration = LoopbackRig.senderConfiguration(port: gateway.port)
        configuration.transport = .http2(HTTP2Options(topic: topic))
        return configuration
    }

    /// The mock's statistics once `condition` holds (bounded).
    func statistics(when condition: (H2Statistics) -> Bool) -> H2Statistics {
        let deadline = Instant.now() + .seconds(20)
        var statistics = gateway.statistics()
        while !condition(statistics) && Instant.now() < deadline {
            usleep(2_000)
            statistics = gateway.statistics()
        }
        return statistics
    }
}

@Suite struct HTTP2SenderTests {
    static func list(_ count: Int) -> NotificationList {
        NotificationList((0..<count).map { NotificationList.Item(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0)) })
    }

    /// The digests the mock records for what a sender had accepted.
    static func digests(_ sequences: some Sequence<Int>) -> [UInt64] {
        sequences.map { MockStatistics.digest(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0)) }.sorted()
    }

    @Test func everyNotificationIsAcceptedOverHTTP2() async throws {
        let rig = try H2LoopbackRig()
        let sender = try Sender(rig.senderConfiguration())
        try await sender.send(contentsOf: Self.list(5000))
        let report = await sender.finish(timeout: .seconds(60))
        #expect(report.submitted == 5000 && report.accepted == 5000 && report.isComplete)
        let mock = rig.statistics { $0.accepted >= 5000 }
        #expect(mock.accepted == 5000 && mock.duplicates == 0 && mock.rejected == 0)
        #expect(mock.acceptedDigests == Self.digests(0..<5000))
    }
}

extension HTTP2SenderTests {
    /// Sends `count` notifications (token n carries n; tokens in `dead` end in `dead`) and
    /// returns the report and what the events said.
    static func send(_ configuration: SenderConfiguration, count: Int, dead: Set<Int> = [],
                     within limit: Duration = .seconds(60)) async throws -> (SenderReport, Events) {
        let sender = try Sender(configuration)
        let items = (0..<count).map { n in
            NotificationList.Item(token: dead.contains(n) ? Self.deadToken(n) : LoopbackRig.token(n), payload: LoopbackRig.payload(n))
        }
        try await sender.send(contentsOf: NotificationList(items))
        let report = await sender.finish(timeout: limit)
        var events = Events()
        for await event in sender.events {
            switch event {
            case .rejected(_, let rejection, let sequence): events.rejected[sequence] = rejection
            case .failed(_, let reason, let sequence): events.failed[sequence] = reason
            case .streamLimit(_, _, let limit): events.streamLimits.append(limit)
            case .disconnected(_, _, let reason), .unreachable(let reason): events.reasons.append(reason)
            default: break
            }
        }
        return (report, events)
    }

    struct Events {
        var rejected: [UInt64: Rejection] = [:]
        var failed: [UInt64: FailureReason] = [:]
        var streamLimits: [Int] = []
        var reasons: [String] = []
    }

    /// Token n, ending in `dead`: the mock answers 410 Unregistered.
    static func deadToken(_ n: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0xA5, count: 32)
        withUnsafeBytes(of: UInt32(n).bigEndian) { bytes.replaceSubrange(24..<28, with: $0) }
        bytes[30] = 0xDE
        bytes[31] = 0xAD
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }

    @Test func deadTokensAreRejectedWithTheirTimestampAndTheRestAccepted() async throws {
        let rig = try H2LoopbackRig()
        let dead: Set<Int> = [3, 50, 999]
        let (report, events) = try await Self.send(rig.senderConfiguration(), count: 1000, dead: dead)
        #expect(report.accepted == 997 && report.rejected == 3 && report.failed == 0 && report.isComplete)
        #expect(report.rejectedByReason == ["Unregistered": 3])
        #expect(Set(events.rejected.keys) == Set(dead.map(UInt64.init)))
        for rejection in events.rejected.values {
            guard case .http(410, "Unregistered", let timestamp?) = rejection else {
                Issue.record("not a 410 with a timestamp: \(rejection)")
                continue
            }
            #expect(timestamp > 1_700_000_000_000 && rejection.isTokenProblem)
        }
    }

    @Test func badDeviceTokensAreRejectedWithTheirReason() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(rejectEvery: 100))
        let (report, events) = try await Self.send(rig.senderConfiguration(), count: 1000)
        #expect(report.accepted == 990 && report.rejected == 10 && report.isComplete)
        #expect(report.rejectedByReason == ["BadDeviceToken": 10])
        #expect(events.rejected.values.allSatisfy { $0 == .http(status: 400, reason: "BadDeviceToken", timestamp: nil) })
        let mock = rig.statistics { $0.accepted >= 990 }
        #expect(mock.accepted == 990 && mock.rejected == 10)
    }

    @Test func throttledAndUnavailableNotificationsAreRetriedUntilAccepted() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(throttleEvery: 97, unavailableEvery: 89))
        var configuration = rig.senderConfiguration()
        configuration.transport = .http2({
            var options = HTTP2Options(topic: "com.example.app")
            options.throttleBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(20))
            return options
        }())
        let (report, _) = try await Self.send(configuration, count: 2000)
        #expect(report.accepted == 2000 && report.rejected == 0 && report.failed == 0 && report.isComplete)
        #expect(report.resent > 0 && report.possibleDuplicates == 0)
        let mock = rig.statistics { $0.accepted >= 2000 }
        #expect(mock.accepted == 2000 && mock.duplicates == 0)
        #expect(mock.acceptedDigests == Self.digests(0..<2000))
        #expect(mock.rejected(.tooManyRequests) > 0 && mock.rejected(.serviceUnavailable) > 0)
    }

    @Test func aNotificationThrottledEveryTimeFailsAsThrottled() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(throttleEvery: 1))
        var configuration = rig.senderConfiguration()
        var options = HTTP2Options(topic: "com.example.app")
        options.throttleBackoff = Backoff(initial: .milliseconds(1), maximum: .milliseconds(4))
        options.throttleRetries = 2
        configuration.transport = .http2(options)
        let (report, events) = try await Self.send(configuration, count: 5)
        #expect(report.failed == 5 && report.failedByReason == ["throttled": 5] && report.isComplete)
        #expect(events.failed.count == 5 && events.failed.values.allSatisfy { $0 == .throttled })
        #expect(rig.statistics { $0.requests >= 15 }.requests == 15, "each tried three times")
    }

    @Test func aGoAwayInTheMiddleResendsWhatItDidNotProcessExactlyOnce() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(goawayEvery: 300))
        let (report, _) = try await Self.send(rig.senderConfiguration(), count: 3000)
        #expect(report.accepted == 3000 && report.isComplete && report.possibleDuplicates == 0)
        let mock = rig.statistics { $0.accepted >= 3000 }
        #expect(mock.goaways > 0)
        #expect(mock.accepted == 3000 && mock.duplicates == 0 && mock.acceptedDigests == Self.digests(0..<3000))
    }

    @Test func silentDropsResendWhatWasOpenAsPossibleDuplicates() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(dropEvery: 700))
        let (report, _) = try await Self.send(rig.senderConfiguration(), count: 3000)
        #expect(report.isComplete && report.failed == 0 && report.accepted == 3000)
        let mock = rig.statistics { $0.accepted - $0.duplicates >= 3000 }
        #expect(mock.droppedConnections > 0)
        #expect(mock.acceptedDigests == Self.digests(0..<3000))
        #expect(mock.duplicates <= report.possibleDuplicates)
    }

    @Test func silentDropsUnderAtMostOnceAreReportedUnknown() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(dropEvery: 700))
        var configuration = rig.senderConfiguration()
        configuration.dropPolicy = .atMostOnce
        let (report, _) = try await Self.send(configuration, count: 3000)
        #expect(report.isComplete && report.possibleDuplicates == 0)
        #expect(report.failed > 0 && report.failedByReason.keys.allSatisfy { $0 == "delivery_unknown" })
        let mock = rig.statistics { $0.accepted >= report.accepted }
        #expect(mock.duplicates == 0 && mock.accepted == report.accepted)
    }
}
