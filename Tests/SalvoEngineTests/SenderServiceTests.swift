import Foundation
import Logging
import Prometheus
import SalvoIO
import SalvoMock
import SalvoPrometheus
import SalvoTestSupport
import SalvoWire
import ServiceLifecycle
import Testing
@testable import SalvoEngine

// README-SERVICE-EXAMPLE-BEGIN
/// A campaign worker inside a service: SIGTERM stops it taking notifications; what it had
/// handed over is finished (the error wait, or the open streams), and the report is returned.
func sendCampaign(_ campaign: NotificationList, with configuration: SenderConfiguration, logger: Logger)
    async throws -> SenderReport
{
    let sender = try Sender(configuration, logger: logger)  // metrics go to the bootstrapped MetricsSystem
    let group = ServiceGroup(configuration: .init(
        services: [.init(service: sender, successTerminationBehavior: .gracefullyShutdownGroup)],
        gracefulShutdownSignals: [.sigterm], logger: logger))
    async let lifecycle: Void = group.run()
    do {
        try await sender.send(contentsOf: campaign)
    } catch SendError.finished {
        logger.notice("stopped by a graceful shutdown; what was sent is accounted for")
    }
    let report = await sender.finish()  // the same report the shutdown drained to
    try await lifecycle
    return report
}
// README-SERVICE-EXAMPLE-END

/// The sender and the mocks as swift-service-lifecycle services, and their metrics through
/// swift-prometheus, in process.
@Suite(.timeLimit(.minutes(2))) struct SenderServiceTests {
    @Test func theREADMEServiceExampleSendsEverythingWhenNothingShutsItDown() async throws {
        let rig = try H2LoopbackRig()
        defer { rig.gateway.stop() }
        let report = try await sendCampaign(H2LoopbackRig.list(2000), with: rig.senderConfiguration(),
                                            logger: .disabled)
        #expect(report.submitted == 2000 && report.accepted == 2000 && report.isComplete)
    }

    @Test func theREADMEShowsTheServiceExample() throws {
        let testFile = try String(contentsOfFile: #filePath, encoding: .utf8)
        // The example lives in the DocC article on logs, metrics and shutdown (README.md links it).
        let article = try String(contentsOfFile: URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("Sources/SalvoEngine/SalvoEngine.docc/LogsMetricsAndShutdown.md").path, encoding: .utf8)
        let begin = testFile.range(of: "// README-SERVICE-EXAMPLE-BEGIN\n")!.upperBound
        let end = testFile.range(of: "// README-SERVICE-EXAMPLE-END")!.lowerBound
        #expect(article.contains("```swift\n" + String(testFile[begin..<end]) + "```"),
                "LogsMetricsAndShutdown.md's service example differs from the tested one")
    }

    /// A gateway that answers each stream 100 ms late, 50 streams at a time, over one
    /// connection: 500 a second, so 100,000 take over three minutes and the shutdown comes
    /// mid-campaign even when the test's own task waited tens of seconds for a thread (in
    /// a full parallel run on two cores it can).
    static func slowRig() throws -> (H2LoopbackRig, SenderConfiguration) {
        var plan = H2FailurePlan()
        plan.responseDelay = .milliseconds(100)
        let rig = try H2LoopbackRig(plan: plan) { $0.maximumConcurrentStreams = 50 }
        var configuration = rig.senderConfiguration()
        configuration.shards = 1
        configuration.connectionsPerShard = 1
        configuration.maximumConnectionsPerShard = 1
        return (rig, configuration)
    }

    static let producerThread = try! ThreadExecutor(name: "service-test")

    @Test func aGracefulShutdownStopsTakingNotificationsFinishesTheOpenStreamsAndReportsEveryOne() async throws {
        let (rig, configuration) = try Self.slowRig()
        defer { rig.gateway.stop() }
        let registry = PrometheusCollectorRegistry()
        let sender = try Sender(configuration, logger: .disabled, metricsFactory: MetricsEndpoint.factory(for: registry))
        let group = ServiceGroup(configuration: .init(services: [rig.gateway, sender], logger: .disabled))
        let lifecycle = Task { try await group.run() }
        // The producer on a thread of its own, and the waits below suspend rather than block:
        // in the full suite other tests can hold the cooperative pool for longer than a wait.
        let sending = Task(executorPreference: Self.producerThread) {
            try await sender.send(contentsOf: H2LoopbackRig.list(100_000))
        }
        let started = await eventuallyYielding({ sender.progress.accepted }, until: { $0 >= 500 })
        #expect(started >= 500, "the campaign got going")
        // Mid-campaign, the gauges: the one connection is open with its streams in use.
        let running = await eventuallyYielding({ () -> PrometheusText in
            sender.reportMetrics()
            return PrometheusText(registry.emitToString())
        }, until: { ($0.value("salvo_sender_open_streams") ?? 0) > 0 })
        #expect(running.value("salvo_sender_open_connections") == 1)
        #expect((1...50).contains(running.value("salvo_sender_open_streams") ?? 0))
        #expect((running.value("salvo_sender_in_flight") ?? 0) > 0)
        await group.triggerGracefulShutdown()
        await #expect(throws: SendError.finished) { try await sending.value }
        let report = await sender.finish()
        try await lifecycle.value

        #expect(report.isComplete && report.failed == 0, "every notification taken is final: \(report)")
        #expect(report.submitted < 100_000, "nothing more was taken after the shutdown")
        // The only rejections are the tokens the mock knows gone (hex ending in dead or fade:
        // numbers 57,005 and 64,222 of every 65,536), if the shutdown came that late.
        let gone = (0..<report.submitted).filter { [0xDEAD, 0xFADE].contains($0 & 0xFFFF) }.count
        #expect(report.rejected == gone && report.accepted == report.submitted - gone)
        // The gateway shut down after the sender: it had answered every stream.
        #expect(rig.gateway.statistics().accepted == report.accepted)
        // The final flush: the counters are the report's.
        let metrics = PrometheusText(registry.emitToString())
        #expect(metrics.value("salvo_sender_submitted_total") == Double(report.submitted))
        #expect(metrics.value("salvo_sender_accepted_total") == Double(report.accepted))
        #expect(metrics.value("salvo_sender_in_flight") == 0 && metrics.value("salvo_sender_open_streams") == 0)
        #expect(metrics.value("salvo_sender_response_latency_seconds_count") ?? 0 >= Double(report.accepted / 64 - 1))
    }

    @Test func theMockReportsItsCountsThroughSwiftMetrics() async throws {
        let registry = PrometheusCollectorRegistry()
        var tls = TLSConfiguration.server(certificateChain: LoopbackRig.pki.server.certificate,
                                          privateKey: LoopbackRig.pki.server.privateKey,
                                          clientCertificateRoots: .certificates(LoopbackRig.pki.authority.certificate))
        tls.requireClientCertificate = true
        var plan = FailurePlan()
        plan.rejectEvery = 100
        let gateway = try MockGateway(.init(tls: tls, failurePlan: plan), logger: .disabled,
                                      metricsFactory: MetricsEndpoint.factory(for: registry))
        defer { gateway.stop() }
        var configuration = LoopbackRig.senderConfiguration(port: gateway.port)
        configuration.errorWait = .milliseconds(100)
        let sender = try Sender(configuration, logger: .disabled)
        try await sender.send(contentsOf: H2LoopbackRig.list(1000))
        let report = await sender.finish()
        gateway.reportMetrics()
        let metrics = PrometheusText(registry.emitToString())
        #expect(report.rejected > 0 && report.isComplete)
        #expect(metrics.value("salvo_mock_accepted_total") == Double(gateway.statistics().accepted))
        // Every reason's series starts at 0; those with counts carry the mock's own.
        let rejected = metrics.values("salvo_mock_rejected_total", by: "reason")
        #expect(rejected.filter { $0.value > 0 } == gateway.statistics().rejectedByStatus)
        #expect(rejected["missing_topic"] == 0)
        #expect(metrics.value("salvo_mock_connections_total") ?? 0 >= 1)
    }
}
