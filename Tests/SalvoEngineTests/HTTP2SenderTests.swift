import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
import Synchronization
@testable import SalvoEngine

@Suite struct HTTP2SenderTests {
    @Test func everyNotificationIsAcceptedOverHTTP2() async throws {
        let rig = try H2LoopbackRig()
        let sender = try Sender(rig.senderConfiguration())
        try await sender.send(contentsOf: H2LoopbackRig.list(5000))
        let report = await sender.finish(timeout: .seconds(60))
        #expect(report.submitted == 5000 && report.accepted == 5000 && report.isComplete)
        let mock = rig.statistics { $0.accepted >= 5000 }
        #expect(mock.accepted == 5000 && mock.duplicates == 0 && mock.rejected == 0)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<5000))
    }
}

extension HTTP2SenderTests {
    /// Sends `count` notifications (token n carries n; tokens in `dead` end in `dead`) and
    /// returns the report and what the events said.
    static func send(_ configuration: SenderConfiguration, count: Int, dead: Set<Int> = [],
                     within limit: Duration = .seconds(60)) async throws -> (SenderReport, Events) {
        let sender = try Sender(configuration)
        let items = (0..<count).map { n in
            NotificationList.Item(token: dead.contains(n) ? H2LoopbackRig.deadToken(n) : LoopbackRig.token(n), payload: LoopbackRig.payload(n))
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
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<2000))
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
        #expect(mock.accepted == 3000 && mock.duplicates == 0 && mock.acceptedDigests == H2LoopbackRig.digests(0..<3000))
    }

    @Test func silentDropsResendWhatWasOpenAsPossibleDuplicates() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(dropEvery: 700))
        let (report, _) = try await Self.send(Self.withoutGrowth(rig.senderConfiguration()), count: 3000)
        #expect(report.isComplete && report.failed == 0 && report.accepted == 3000)
        let mock = rig.statistics { $0.accepted - $0.duplicates >= 3000 }
        #expect(mock.droppedConnections > 0)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<3000))
        #expect(mock.duplicates <= report.possibleDuplicates)
    }

    @Test func silentDropsUnderAtMostOnceAreReportedUnknown() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(dropEvery: 700))
        var configuration = rig.senderConfiguration()
        configuration.dropPolicy = .atMostOnce
        let (report, _) = try await Self.send(Self.withoutGrowth(configuration), count: 3000)
        #expect(report.isComplete && report.possibleDuplicates == 0)
        #expect(report.failed > 0 && report.failedByReason.keys.allSatisfy { $0 == "delivery_unknown" })
        let mock = rig.statistics { $0.accepted >= report.accepted }
        #expect(mock.droppedConnections > 0)
        #expect(mock.duplicates == 0 && mock.accepted == report.accepted)
    }

    /// Bodies that flow control holds back when their connection drops go back to the
    /// connection's arena: the arena frees in order, so one left behind would pin it, and a
    /// few drops would fill it until the connection could open no stream. 4 KB payloads
    /// make most bodies wait behind the gateway's default connection window.
    @Test func bodiesHeldByFlowControlComeBackWhenTheirConnectionDrops() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(dropEvery: 300))
        let padding = String(repeating: "x", count: 3_900)
        let payload = { (n: Int) in Array(#"{"aps":{"alert":"campaign"},"n":\#(n),"pad":"\#(padding)"}"#.utf8) }
        let sender = try Sender(Self.withoutGrowth(rig.senderConfiguration()))
        try await sender.send(contentsOf: NotificationList((0..<2000).map {
            NotificationList.Item(token: LoopbackRig.token($0), payload: payload($0))
        }))
        let report = await sender.finish(timeout: .seconds(30))
        #expect(report.isComplete && report.failed == 0 && report.accepted == 2000)
        guard report.isComplete else { return }
        let mock = rig.statistics { $0.accepted - $0.duplicates >= 2000 }
        #expect(mock.droppedConnections > 0)
        #expect(mock.acceptedDigests
            == (0..<2000).map { MockStatistics.digest(token: LoopbackRig.token($0), payload: payload($0)) }.sorted())
    }

    /// `configuration` on its first connections only: 3,000 notifications over four of them
    /// bring at least one to the mock's 700th request, where it drops the connection (more
    /// connections, grown while the rings were full, might each stay below it).
    static func withoutGrowth(_ configuration: SenderConfiguration) -> SenderConfiguration {
        var fixed = configuration
        fixed.maximumConnectionsPerShard = fixed.connectionsPerShard
        return fixed
    }
}

/// Token authentication against the mock's verifier, with a clock the test moves.
extension HTTP2SenderTests {
    static let keyID = "TESTKEY001", teamID = "TESTTEAM01"

    /// A mock that verifies provider tokens of a fresh key, and a sender that signs them
    /// by `clock` (UNIX seconds).
    static func tokenRig(plan: H2FailurePlan = H2FailurePlan(), clock: (@Sendable () -> Int64)? = nil)
        throws -> (H2LoopbackRig, SenderConfiguration)
    {
        let pem = try DevelopmentPKI.makeSigningKey()
        let rig = try H2LoopbackRig(plan: plan, clientCertificates: false) {
            $0.tokenVerifier = try! ProviderTokenVerifier(authKeyPEM: pem, keyID: keyID, teamID: teamID)
        }
        var configuration = rig.senderConfiguration()
        let credentials = try ProviderCredentials(pem: pem, keyID: keyID, teamID: teamID)
        configuration.transport = .http2(HTTP2Options(topic: "com.example.app", authentication: .token(credentials)))
        configuration.shards = 1
        configuration.tokenClock = clock
        return (rig, configuration)
    }

    /// A clock `offset` seconds from the real one; the test moves it.
    final class MovableClock: Sendable {
        let offset: Atomic<Int64>
        init(offset: Int64) { self.offset = Atomic(offset) }
        var read: @Sendable () -> Int64 { { [self] in Int64(time(nil)) + offset.load(ordering: .relaxed) } }
    }

    @Test func oneStreamUntilTheFirstTokenIsSeenThenTheGatewaysLimit() async throws {
        let (rig, configuration) = try Self.tokenRig()
        let (report, events) = try await Self.send(configuration, count: 3000)
        #expect(report.accepted == 3000 && report.isComplete)
        #expect(events.streamLimits.first == 1, "APNs allows one stream until it has seen a valid token")
        #expect(events.streamLimits.contains(1000))
        #expect(rig.statistics { $0.accepted >= 3000 }.accepted == 3000)
    }

    /// The gateway calls the token expired while this machine says it is 31 minutes old:
    /// renewed (allowed: older than 20 minutes), the request is sent again and accepted.
    @Test func anExpiredProviderTokenIsRenewedAndTheRequestsSentAgain() async throws {
        let clock = MovableClock(offset: -61 * 60)  // the first token: 61 minutes old for the gateway
        let (rig, configuration) = try Self.tokenRig(clock: clock.read)
        let sender = try Sender(configuration)
        clock.offset.store(-31 * 60, ordering: .relaxed)  // 30 minutes later: not due for renewal (50)
        try await sender.send(contentsOf: H2LoopbackRig.list(200))
        let report = await sender.finish(timeout: .seconds(60))
        #expect(report.accepted == 200 && report.failed == 0 && report.isComplete)
        #expect(report.resent >= 1 && report.possibleDuplicates == 0)
        let mock = rig.statistics { $0.accepted >= 200 }
        #expect(mock.rejected(.expiredProviderToken) >= 1 && mock.accepted == 200)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<200))
    }

    /// Sends 100,000 notifications with credentials the gateway refuses: the run must stop
    /// with `SendError.credentialsRefused`, having sent little, accepted nothing and failed
    /// what it held as `authentication_failed`. Returns the reason, or nil (recorded as an
    /// issue) when the run did not stop that way.
    static func sendUntilCredentialsRefused(_ configuration: SenderConfiguration) async throws -> String? {
        let sender = try Sender(configuration)
        var thrown: SendError?
        do {
            try await sender.send(contentsOf: H2LoopbackRig.list(100_000))
        } catch {
            thrown = error as? SendError
        }
        let report = await sender.finish(timeout: .seconds(30))
        guard case .credentialsRefused(let reason)? = thrown else {
            Issue.record("expected credentialsRefused, got \(String(describing: thrown))")
            return nil
        }
        #expect(report.isComplete && report.accepted == 0 && report.submitted < 100_000)
        #expect(report.failedByReason.keys.allSatisfy { $0 == "authentication_failed" }, "\(report.failedByReason)")
        return reason
    }

    /// The gateway calls a token expired that this machine signed a moment ago: the clock
    /// is wrong; renewing would only earn 429s. The run stops, saying so.
    @Test func aTokenCalledExpiredAsSoonAsSignedStopsTheRunAskingAboutTheClock() async throws {
        let (rig, configuration) = try Self.tokenRig(clock: MovableClock(offset: -2 * 3600).read)
        guard let reason = try await Self.sendUntilCredentialsRefused(configuration) else { return }
        #expect(reason.contains("clock") && reason.contains(Self.keyID) && reason.contains(Self.teamID), "\(reason)")
        #expect(rig.gateway.statistics().rejected(.expiredProviderToken) >= 1)
    }

    /// Another sender's token for the team was adopted a minute before ours: APNs answers
    /// every request 429 TooManyProviderTokenUpdates. That is the token's fault, not the
    /// notifications': with nothing accepted yet, the first refusal stops the run saying
    /// so, having sent little (one stream at a time until a token is taken), and nothing is
    /// lost.
    @Test func aTokenRefusedAsAnUpdateTooSoonStopsTheRunInsteadOfThrottlingEveryNotification() async throws {
        let (rig, first) = try Self.tokenRig(clock: MovableClock(offset: 0).read)
        let (firstReport, _) = try await Self.send(first, count: 10)
        #expect(firstReport.accepted == 10)

        var second = first
        second.tokenClock = MovableClock(offset: 60).read
        guard case .http2(var options) = second.transport else { return }
        options.throttleBackoff = Backoff(initial: .milliseconds(1), maximum: .milliseconds(4))
        options.throttleRetries = 2
        second.transport = .http2(options)
        guard let reason = try await Self.sendUntilCredentialsRefused(second) else { return }
        #expect(reason.contains("TooManyProviderTokenUpdates") && reason.contains(Self.teamID), "\(reason)")
        let refused = rig.gateway.statistics().rejected(.tooManyProviderTokenUpdates)
        #expect(refused >= 1 && refused <= second.maximumConnectionsPerShard * second.shards,
                "one stream per connection (no token taken yet), none tried again: \(refused)")
    }

    /// A 500 is one request's: it is sent again, and its connection stays.
    @Test func internalServerErrorsAreRetriedWithoutRetiringTheConnection() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(internalErrorEvery: 50))
        var configuration = rig.senderConfiguration()
        configuration.shards = 1
        configuration.connectionsPerShard = 1
        configuration.maximumConnectionsPerShard = 1
        let (report, _) = try await Self.send(configuration, count: 1000)
        #expect(report.accepted == 1000 && report.failed == 0 && report.isComplete && report.resent >= 20)
        let mock = rig.statistics { $0.accepted >= 1000 }
        #expect(mock.rejected(.internalServerError) >= 20 && mock.connections == 1)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<1000))
    }

    /// A 503 retires its connection; the gateway here answers nothing once the client says
    /// GOAWAY (as servers built on python's h2 do). Said after the connection's streams
    /// are answered, nothing is lost and nothing goes twice.
    @Test func aConnectionRetiredAfterA503IsAnsweredBeforeItSaysGoAway() async throws {
        let plan = H2FailurePlan(unavailableEvery: 2000, responseDelay: .milliseconds(5), responseJitter: .milliseconds(20),
                                 silentAfterClientGoAway: true)
        let rig = try H2LoopbackRig(plan: plan)
        let (report, events) = try await Self.send(rig.senderConfiguration(), count: 20_000)
        #expect(report.accepted == 20_000 && report.failed == 0 && report.isComplete)
        #expect(report.possibleDuplicates == 0 && report.resent == 10)
        // One retirement per 503, but for a 503 on a connection already retiring.
        #expect(events.reasons.contains { $0.contains("retired after 503 ServiceUnavailable: every stream answered") })
        #expect(!events.reasons.contains { $0.contains("unanswered") }, "\(events.reasons)")
        let mock = rig.statistics { $0.accepted >= 20_000 }
        #expect(mock.rejected(.serviceUnavailable) == 10 && mock.unsentAnswers == 0)
        #expect(mock.accepted == 20_000 && mock.duplicates == 0 && mock.acceptedDigests == H2LoopbackRig.digests(0..<20_000))
    }

    /// Tokens ending in `fade`: the mock answers 410 ExpiredToken, with a timestamp.
    @Test func expiredDeviceTokensAreRejectedWithTheirTimestamp() async throws {
        let rig = try H2LoopbackRig()
        var items = (0..<100).map { NotificationList.Item(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0)) }
        var bytes = [UInt8](repeating: 0x11, count: 32)
        bytes[30] = 0xFA
        bytes[31] = 0xDE
        items[7] = NotificationList.Item(token: bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }, payload: LoopbackRig.payload(7))
        let sender = try Sender(rig.senderConfiguration())
        try await sender.send(contentsOf: NotificationList(items))
        let report = await sender.finish(timeout: .seconds(30))
        #expect(report.accepted == 99 && report.rejectedByReason == ["ExpiredToken": 1])
        var rejection: Rejection?
        for await event in sender.events { if case .rejected(_, let r, 7) = event { rejection = r } }
        guard case .http(410, "ExpiredToken", let timestamp?)? = rejection else {
            Issue.record("not a 410 ExpiredToken with a timestamp: \(String(describing: rejection))")
            return
        }
        #expect(timestamp > 1_700_000_000_000)
    }
}

extension HTTP2SenderTests {
    /// Over HTTP/2 a shard's connections draw from its staging ring as their streams free
    /// up: 400 notifications, four connections in use on one shard and 25 streams each
    /// (answers held 200 ms), and all four connect: each has work. Given to one connection
    /// 256 at a time, as the binary protocol's lanes are, only two would have had any.
    @Test func everyConnectionInUseDrawsFromItsShardsRing() async throws {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(responseDelay: .milliseconds(200))) {
            $0.maximumConcurrentStreams = 25
        }
        var configuration = rig.senderConfiguration()
        configuration.shards = 1
        configuration.connectionsPerShard = 4
        configuration.maximumConnectionsPerShard = 4
        let count = 400
        let (report, _) = try await Self.send(configuration, count: count)
        #expect(report.accepted == count && report.isComplete && report.connections == 4)
        let mock = rig.statistics { $0.accepted >= count }
        #expect(mock.connections == 4, "\(mock)")
        #expect(mock.accepted == count && mock.duplicates == 0)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(0..<count))
    }
}
