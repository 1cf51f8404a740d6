import Foundation
import SalvoBlackBerry
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing

/// The sender on AsyncHTTPClient against the real mock NOC on loopback: every code, and
/// exact accounting under every failure plan. Each test takes a second or two alone; in the
/// whole suite on two cores they start at once and wait their turn behind the CPU-bound
/// ones for most of two minutes, so the hang guard is four.
@Suite(.timeLimit(.minutes(4))) struct PushChannelSenderTests {
    /// What the mock counted once it has answered `settled` notify requests.
    static func statistics(_ rig: NOCRig, answered settled: Int) -> GNPStatistics {
        eventually({ rig.noc.statistics() }) { $0.accepted + $0.rejected + $0.otherAnswers + $0.dropped >= settled }
    }

    @Test func code100AcceptsEveryNotificationExactlyOnce() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 60)
        let (report, ending, _) = try await rig.send(file, client: try rig.client(connections: 4))
        #expect(ending == .readToEnd)
        #expect(report.submitted == 60 && report.accepted == 60 && report.isComplete)
        let mock = Self.statistics(rig, answered: 60)
        #expect(mock.accepted == 60 && mock.duplicates == 0)
        #expect(mock.acceptedDigestSet == NOCRig.digests(1...60))
        #expect(mock.connections <= 4, "keep-alive: at most one connection per worker")
    }

    @Test func code402RejectsTheTokenAndHandsItToTheRejectedList() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 50, deadEvery: 5)
        let reader = try PushChannelCampaignReader(.jsonl(file))
        let rejected = Locked<[String]>([])
        let client = try rig.client()
        let run = PushChannelRun(client: client) { item, code in
            #expect(code == .invalidToken)
            rejected.withLock { $0.append(item.token) }
        }
        #expect(await run.send(from: reader) == .readToEnd)
        try await client.shutdown()
        let report = run.ledger.report(connections: 4)
        #expect(report.accepted == 40 && report.rejected == 10 && report.failed == 0)
        #expect(report.rejectedByReason == ["InvalidToken": 10])
        #expect(Set(rejected.withLock { $0 }) == Set((1...10).map { NOCRig.token($0 * 5, deadEvery: 5) }))
        #expect(run.ledger.completedThroughLine == 50, "rejections are done: the checkpoint passes them")
        #expect(Self.statistics(rig, answered: 50).rejected == 10)
    }

    /// One connection, so the NOC-wide "every Nth" falls on known notifications.
    @Test(arguments: ["busy (code 503)", "HTTP 503"])
    func a5xxOfEitherKindIsRetriedAndThenAccepted(name: String) async throws {
        var plan = GNPFailurePlan()
        if name == "HTTP 503" { plan.unavailableEvery = 3 } else { plan.busyEvery = 3 }
        let rig = try NOCRig(plan)
        let file = try rig.writeCampaign(lines: 30)
        let (report, _, _) = try await rig.send(file, client: try rig.client(connections: 1))
        #expect(report.accepted == 30 && report.failed == 0, "\(name)")
        // 44 answers, the last an acceptance: counts 3, 6, … 42 were 503s, each retried once.
        #expect(report.resent == 14 && report.possibleDuplicates == 0, "\(name)")
        let mock = Self.statistics(rig, answered: 44)
        #expect(mock.accepted == 30 && mock.otherAnswers == 14 && mock.duplicates == 0, "\(name)")
    }

    @Test func a5xxEveryTimeFailsAfterTheAttemptsWithServerError() async throws {
        var plan = GNPFailurePlan()
        plan.unavailableEvery = 1
        let rig = try NOCRig(plan)
        let file = try rig.writeCampaign(lines: 5)
        let (report, ending, run) = try await rig.send(file, client: try rig.client(connections: 1, attempts: 3))
        #expect(ending == .readToEnd)
        #expect(report.failed == 5 && report.failedByReason == ["server_error": 5] && report.resent == 10)
        #expect(run.ledger.completedThroughLine == 0, "failed lines hold the checkpoint back for the resume")
    }

    @Test func anUnknownCodeFailsWithTheCodeInTheReason() async throws {
        var plan = GNPFailurePlan()
        plan.unknownCodeEvery = 4
        let rig = try NOCRig(plan)
        let file = try rig.writeCampaign(lines: 20)
        let (report, _, _) = try await rig.send(file, client: try rig.client(connections: 1))
        #expect(report.accepted == 15 && report.failed == 5 && report.resent == 0)
        #expect(report.failedByReason == ["unknown_gnp_code_409": 5])
    }

    @Test func code413FailsAsPayloadTooLarge() async throws {
        var plan = GNPFailurePlan()
        plan.maximumPayloadBytes = 10
        let rig = try NOCRig(plan)
        let file = try rig.writeCampaign(lines: 4)
        let (report, _, _) = try await rig.send(file, client: try rig.client())
        #expect(report.failed == 4 && report.failedByReason == ["payload_too_large": 4])
    }

    @Test func aDroppedConnectionIsRetriedOnAnotherAndCountedAsAPossibleDuplicate() async throws {
        var plan = GNPFailurePlan()
        plan.dropEvery = 4
        let rig = try NOCRig(plan)
        let file = try rig.writeCampaign(lines: 30)
        let (report, _, _) = try await rig.send(file, client: try rig.client(connections: 1))
        #expect(report.accepted == 30 && report.isComplete)
        let mock = Self.statistics(rig, answered: 30 + report.resent)
        #expect(mock.dropped == report.resent && report.possibleDuplicates == report.resent && report.resent >= 7)
        #expect(mock.accepted == 30 && mock.duplicates == 0, "a dropped request was not taken, so nothing doubled")
        #expect(mock.acceptedDigestSet == NOCRig.digests(1...30))
    }

    @Test func aLineHostReplacesTheNOCWithItsOwnPortOrTheNOCs() async throws {
        let client = try PushChannelClient(PushChannelConfiguration(route: .noc(host: "gdmdc.good.com", port: 443)))
        #expect(client.origin(lineHost: nil) == "https://gdmdc.good.com:443")
        #expect(client.origin(lineHost: "eu.noc.example") == "https://eu.noc.example:443")
        #expect(client.origin(lineHost: "eu.noc.example:8443") == "https://eu.noc.example:8443")
        #expect(client.origin(lineHost: "[::1]:9") == "https://[::1]:9")
        #expect(client.origin(lineHost: "[::1]") == "https://[::1]:443")
        #expect(client.origin(lineHost: "::1") == "https://[::1]:443")
        try await client.shutdown()
    }

    /// A line's host is where its request goes: here the mock on another port than --noc's.
    @Test func aRegionalHostOnTheLineIsUsed() async throws {
        let rig = try NOCRig()
        let line = #"{"token":"r","payload":"p","host":"127.0.0.1:\#(rig.noc.port)"}"#
        let file = try rig.writeCampaign(lines: 3, replacing: [1: line, 2: line, 3: line])
        // --noc names a port nothing listens on: only the lines' host can be reached.
        let client = try rig.client(connections: 1, attempts: 1, route: .noc(host: "127.0.0.1", port: 1))
        let (report, ending, _) = try await rig.send(file, client: client)
        #expect(report.accepted == 3 && ending == .readToEnd)
    }

    /// An HTTPS proxy (`--proxy-tls`, port 17433 in the samples) takes the same requests as
    /// the NOC: the mock stands in for it.
    @Test func anHTTPSProxyRouteCarriesTheCampaign() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 10)
        let client = try rig.client(route: .proxy(host: "127.0.0.1", port: rig.noc.port, tls: true))
        let (report, _, _) = try await rig.send(file, client: client)
        #expect(report.accepted == 10)
    }

    @Test func checkTokenSaysAliveOrDead() async throws {
        let rig = try NOCRig()
        let client = try rig.client()
        #expect(await client.checkToken("tok-1").outcome == .accepted)
        #expect(await client.checkToken("tok-2-dead").outcome == .rejected(.invalidToken))
        try await client.shutdown()
        #expect(eventually({ rig.noc.statistics().checkedTokens }) { $0 >= 2 } == 2)
    }

    /// Each plan alone, with eight connections and two attempts (so retries interleave
    /// across connections): the sender's counts are the mock's, nothing is counted twice.
    @Test(arguments: ["invalid", "unavailable", "busy", "unknown code", "drop", "slow answers"])
    func eachFailurePlanAloneAccountsExactly(plan name: String) async throws {
        var plan = GNPFailurePlan()
        switch name {
        case "invalid": plan.invalidEvery = 3
        case "unavailable": plan.unavailableEvery = 3
        case "busy": plan.busyEvery = 3
        case "unknown code": plan.unknownCodeEvery = 3
        case "drop": plan.dropEvery = 3
        default: plan.responseDelay = .milliseconds(20)
        }
        let rig = try NOCRig(plan, loops: 2)
        let file = try rig.writeCampaign(lines: 120)
        let (report, ending, _) = try await rig.send(file, client: try rig.client(connections: 8, attempts: 2))
        #expect(ending == .readToEnd && report.submitted == 120 && report.isComplete, "\(name)")
        let mock = Self.statistics(rig, answered: 120 + report.resent)
        #expect(mock.accepted == report.accepted && mock.rejected == report.rejected && mock.duplicates == 0, "\(name)")
        #expect(mock.acceptedDigests?.count == report.accepted, "\(name)")
        #expect(mock.accepted + mock.rejected + mock.otherAnswers + mock.dropped == 120 + report.resent, "\(name): one answer or drop per attempt")
    }

    /// Every plan at once, several connections, slow answers and one attempt: whatever
    /// happens to each notification, the sender's counts are the mock's.
    @Test func everyFailurePlanAtOnceAccountsExactly() async throws {
        var plan = GNPFailurePlan()
        plan.invalidEvery = 7
        plan.unavailableEvery = 11
        plan.busyEvery = 13
        plan.unknownCodeEvery = 17
        plan.dropEvery = 19
        plan.responseDelay = .milliseconds(5)
        let rig = try NOCRig(plan, loops: 2)
        let file = try rig.writeCampaign(lines: 300, deadEvery: 23)
        let (report, ending, _) = try await rig.send(file, client: try rig.client(connections: 8, attempts: 1))
        #expect(ending == .readToEnd)
        #expect(report.submitted == 300 && report.isComplete)
        #expect(report.rejected > 0 && report.failed > 0 && report.resent == 0)
        let mock = Self.statistics(rig, answered: 300)
        #expect(mock.accepted == report.accepted && mock.rejected == report.rejected)
        #expect(mock.otherAnswers + mock.dropped == report.failed)
        #expect(mock.duplicates == 0)
    }

    @Test func anUnreachableNOCStopsTheRunWithEveryTakenLineFailedAndTheRestLeft() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 100)
        let port = rig.noc.port
        rig.noc.stop()
        var configuration = PushChannelConfiguration(route: .noc(host: "127.0.0.1", port: port))
        configuration.connections = 2
        configuration.maximumAttempts = 2
        configuration.retryBackoff = .milliseconds(1)
        configuration.requestTimeout = .seconds(3)
        configuration.trustedCertificatesFile = rig.caFile
        let (report, ending, run) = try await rig.send(file, client: try PushChannelClient(configuration))
        guard case .unreachable = ending else { Issue.record("ending: \(ending)"); return }
        #expect(report.submitted >= 1 && report.submitted <= 4, "it stops taking lines")
        #expect(report.failed == report.submitted && report.failedByReason == ["gateway_unreachable": report.submitted])
        #expect(run.ledger.completedThroughLine == 0)
    }

    @Test func aNOCWhoseCertificateIsNotTrustedIsUnreachableAndSaysWhy() async throws {
        let rig = try NOCRig()
        let file = try rig.writeCampaign(lines: 3)
        var configuration = PushChannelConfiguration(route: .noc(host: "127.0.0.1", port: rig.noc.port))
        configuration.connections = 1
        configuration.maximumAttempts = 1
        let (report, ending, _) = try await rig.send(file, client: try PushChannelClient(configuration))
        guard case .unreachable(let reason) = ending else { Issue.record("ending: \(ending)"); return }
        #expect(reason.lowercased().contains("certificate") || reason.contains("handshake"), "\(reason)")
        #expect(report.failed == 1 && rig.noc.statistics().accepted == 0)
    }
}
