import Foundation
import Prometheus
import SalvoPrometheus
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Synchronization
import Testing
@testable import SalvoEngine

/// Several apps and teams in one run: a `RoutingSender` against the real HTTP/2 mock, which
/// knows both teams' keys and the client certificate, and records who authorized each request.
@Suite(.timeLimit(.minutes(2))) struct RoutingSenderTests {
    static let teamA = "TEAMAAAAA1", keyA = "KEYAAAAAA1"
    static let teamB = "TEAMBBBBB2", keyB = "KEYBBBBBB2"
    /// Team A's apps, team B's app, and the app of the client certificate.
    static let news = "com.example.news", weather = "com.example.weather", games = "com.example.games"
    static let legacy = "com.example.legacy"

    /// A mock that takes both teams' tokens and, on a connection that presents one, the
    /// client certificate instead; and a route per team (signing by `clocks`) and one for
    /// the certificate.
    static func rig(clockA: (@Sendable () -> Int64)? = nil, clockB: (@Sendable () -> Int64)? = nil)
        throws -> (H2LoopbackRig, [RoutingSender.Route])
    {
        let pemA = try DevelopmentPKI.makeSigningKey(), pemB = try DevelopmentPKI.makeSigningKey()
        let rig = try H2LoopbackRig(clientCertificates: true) {
            $0.server.tls.requireClientCertificate = false
            $0.tokenVerifiers = [try! ProviderTokenVerifier(authKeyPEM: pemA, keyID: keyA, teamID: teamA),
                                 try! ProviderTokenVerifier(authKeyPEM: pemB, keyID: keyB, teamID: teamB)]
            $0.recordRequests = true
        }
        let certificate = rig.senderConfiguration()
        var tokens = certificate
        tokens.tls.certificateChain = nil
        tokens.tls.privateKey = nil
        func route(_ pem: String, _ keyID: String, _ teamID: String, _ topics: [String],
                   _ clock: (@Sendable () -> Int64)?) throws -> RoutingSender.Route {
            var configuration = tokens
            configuration.transport = .http2(HTTP2Options(
                topic: topics[0], authentication: .token(try ProviderCredentials(pem: pem, keyID: keyID, teamID: teamID))))
            configuration.tokenClock = clock
            return RoutingSender.Route(configuration: configuration, topics: topics, label: teamID)
        }
        return (rig, [
            try route(pemA, keyA, teamA, [news, weather], clockA),
            try route(pemB, keyB, teamB, [games], clockB),
            RoutingSender.Route(configuration: certificate, topics: [legacy], label: "client.pem"),
        ])
    }

    /// Notification n: its topic (nil: the default, news), a VoIP push of news now and then
    /// (its topic with the suffix), and a dead token every 97th.
    static func item(_ n: Int) -> NotificationList.Item {
        let token = n % 97 == 13 ? H2LoopbackRig.deadToken(n) : LoopbackRig.token(n)
        switch n % 5 {
        case 0: return .init(token: token, payload: LoopbackRig.payload(n))
        case 1: return .init(token: token, payload: LoopbackRig.payload(n), pushType: .voip, topic: news + ".voip")
        case 2: return .init(token: token, payload: LoopbackRig.payload(n), topic: weather)
        case 3: return .init(token: token, payload: LoopbackRig.payload(n), topic: games)
        default: return .init(token: token, payload: LoopbackRig.payload(n), topic: legacy)
        }
    }

    static func topic(of n: Int) -> String { [news, news, weather, games, legacy][n % 5] }

    @Test func threeAppsOfTwoTeamsAndOneByCertificateAreCountedExactlyPerTopicAndEachRequestCarriesItsTeamsToken()
        async throws
    {
        let (rig, routes) = try Self.rig()
        defer { rig.gateway.stop() }
        let count = 3000
        let sender = try RoutingSender(routes: routes, defaultTopic: Self.news)
        try await sender.send(contentsOf: NotificationList((0..<count).map(Self.item)))
        let report = await sender.finish(timeout: .seconds(60))

        var expected: [String: TopicCounts] = [:]
        for n in 0..<count {
            let dead = n % 97 == 13
            expected[Self.topic(of: n), default: TopicCounts()].submitted += 1
            if dead {
                expected[Self.topic(of: n)]!.rejectedByReason["Unregistered", default: 0] += 1
            } else {
                expected[Self.topic(of: n)]!.accepted += 1
            }
        }
        #expect(report.isComplete && report.submitted == count && report.failed == 0)
        #expect(report.byTopic == expected, "\(report.byTopic)")

        let live = (0..<count).filter { $0 % 97 != 13 }
        let mock = rig.statistics { $0.accepted >= live.count }
        #expect(mock.accepted == live.count)
        #expect(mock.acceptedDigests == H2LoopbackRig.digests(live))
        let requests = try #require(mock.acceptedRequests)
        let teamOf = [Self.news: Self.teamA, Self.weather: Self.teamA, Self.games: Self.teamB]
        var perTopic: [String: Int] = [:]
        for request in requests {
            let topic = try #require(request.topic)
            let bundleID = topic.hasSuffix(".voip") ? String(topic.dropLast(".voip".count)) : topic
            perTopic[bundleID, default: 0] += 1
            #expect(request.team == teamOf[bundleID], "\(topic) carried the token of \(request.team ?? "no team")")
        }
        #expect(perTopic == expected.mapValues(\.accepted))
        #expect(mock.providerTokensTaken == 2, "one token per team, shared by all its connections")
    }

    /// Team A's first token is 61 minutes old for the gateway: it answers
    /// ExpiredProviderToken, team A's signer renews its token and resends; team B's token
    /// is never renewed.
    @Test func oneTeamsExpiredTokenRenewsOnlyThatTeamsToken() async throws {
        let clockA = HTTP2SenderTests.MovableClock(offset: -61 * 60)
        let (rig, routes) = try Self.rig(clockA: clockA.read, clockB: HTTP2SenderTests.MovableClock(offset: 0).read)
        defer { rig.gateway.stop() }
        let sender = try RoutingSender(routes: routes, defaultTopic: Self.news)
        clockA.offset.store(-31 * 60, ordering: .relaxed)  // 30 minutes later: not due for renewal (50)
        let count = 1000
        let items = (0..<count).map { NotificationList.Item(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0),
                                                             topic: $0 % 2 == 0 ? Self.news : Self.games) }
        try await sender.send(contentsOf: NotificationList(items))
        let report = await sender.finish(timeout: .seconds(60))
        #expect(report.isComplete && report.accepted == count && report.failed == 0)
        #expect(report.byTopic[Self.news]?.accepted == count / 2 && report.byTopic[Self.games]?.accepted == count / 2)
        #expect(sender.senders[0].tokensRefreshed == 1, "team A renewed its token once")
        #expect(sender.senders[1].tokensRefreshed == 0, "team B's token was never renewed")
        let mock = rig.statistics { $0.accepted >= count }
        #expect(mock.rejected(.expiredProviderToken) >= 1 && mock.accepted == count)
        let teams = Dictionary(grouping: try #require(mock.acceptedRequests), by: { $0.topic ?? "" }).mapValues { Set($0.map(\.team)) }
        #expect(teams == [Self.news: [Self.teamA], Self.games: [Self.teamB]])
    }

    /// The completed sequence spans the senders: it stops below the oldest notification any
    /// of them has not finished, and reaches the last one once all are final.
    @Test func theCompletedSequenceIsTheLastOneEverySenderFinished() async throws {
        let (rig, routes) = try Self.rig()
        defer { rig.gateway.stop() }
        let sender = try RoutingSender(routes: routes, defaultTopic: Self.news)
        #expect(sender.completedSequence() == nil)
        let count = 500
        try await sender.send(contentsOf: NotificationList((0..<count).map(Self.item)))
        // A dead token is rejected, not failed: it does not hold the checkpoint back.
        #expect(sender.completedSequence() == UInt64(count - 1))
        _ = await sender.finish(timeout: .seconds(60))
    }

    @Test func aNotificationWhoseTopicNoCredentialsServeStopsTheSendingThere() async throws {
        let (rig, routes) = try Self.rig()
        defer { rig.gateway.stop() }
        let sender = try RoutingSender(routes: routes, defaultTopic: nil)
        var items = (0..<100).map { NotificationList.Item(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0), topic: Self.games) }
        items[60].topic = "com.example.unknown"
        var thrown: (any Error)?
        do { try await sender.send(contentsOf: NotificationList(items)) } catch { thrown = error }
        let report = await sender.finish(timeout: .seconds(60))
        guard case .unservedTopic(let reason, let sequence)? = thrown as? SendError else {
            Issue.record("expected unservedTopic, got \(String(describing: thrown))")
            return
        }
        #expect(sequence == 60 && reason.contains("com.example.unknown"), "\(reason)")
        #expect(report.isComplete && report.accepted == 60 && report.byTopic[Self.games]?.accepted == 60)
    }

    @Test func aTopicServedTwiceATeamListedTwiceOrADefaultTopicServedByNoneIsRefused() throws {
        let (rig, routes) = try Self.rig()
        defer { rig.gateway.stop() }
        var twice = routes
        twice[1].topics.append(Self.news)
        #expect(throws: SenderError.self) { try RoutingSender(routes: twice, defaultTopic: nil) }
        #expect(throws: SenderError.self) { try RoutingSender(routes: routes, defaultTopic: "com.example.other") }
        var sameTeam = routes
        sameTeam.append(routes[0])
        sameTeam[3].topics = ["com.example.other"]
        #expect { _ = try RoutingSender(routes: sameTeam, defaultTopic: nil) } throws: { "\($0)".contains("team \(Self.teamA)") }
    }

    /// The metrics: per topic and outcome, and each sender's series under its credentials.
    @Test func metricsBreakTheOutcomesDownByTopicAndEachSendersSeriesCarryItsCredentials() async throws {
        let (rig, routes) = try Self.rig()
        defer { rig.gateway.stop() }
        let registry = PrometheusCollectorRegistry()
        let sender = try RoutingSender(routes: routes, defaultTopic: Self.news, metricsFactory: MetricsEndpoint.factory(for: registry))
        let count = 1000
        try await sender.send(contentsOf: NotificationList((0..<count).map(Self.item)))
        let report = await sender.finish(timeout: .seconds(60))
        let metrics = PrometheusText(registry.emitToString())
        for (topic, counts) in report.byTopic {
            for (outcome, total) in [("accepted", counts.accepted), ("rejected", counts.rejected), ("failed", counts.failed)] {
                #expect(metrics.value("salvo_sender_topic_notifications_total", ["topic": topic, "outcome": outcome]) == Double(total),
                        "\(topic) \(outcome)")
            }
        }
        #expect(report.byTopic.count == 4 && report.byTopic.values.map(\.rejected).reduce(0, +) > 0)
        let submitted = metrics.values("salvo_sender_submitted_total", by: "credentials")
        #expect(submitted == [Self.teamA: count * 3 / 5, Self.teamB: count / 5, "client.pem": count / 5], "\(submitted)")
    }
}
