import Logging
import SalvoTelemetry
import SalvoWire
import ServiceLifecycle

/// What either mock gateway runs as a swift-service-lifecycle `Service` and reports
/// through swift-metrics.
protocol ObservableGateway: AnyObject, Sendable {
    /// Reports the totals so far (see `MockGateway.reportMetrics()`).
    func reportMetrics()
    /// Stops serving.
    func stop()
    var logger: Logger { get }
}

/// The `# HELP` text of the mocks' metrics, described once, before the first report.
private let mockMetricsDescribed: Void = MetricDescriptions.describe([
    "salvo_mock_received_total": "Notifications the mock decoded (binary frames; HTTP/2 complete requests).",
    "salvo_mock_accepted_total": "Notifications the mock accepted.",
    "salvo_mock_rejected_total": "Notifications the mock rejected, by reason (the binary status's name, or Apple's reason).",
    "salvo_mock_connections_total": "Connections the mock accepted.",
    "salvo_mock_handshake_failures_total": "TLS handshakes that failed.",
    "salvo_mock_dropped_connections_total": "Connections the mock closed silently (its failure plan's drops).",
    "salvo_mock_streams_total": "HTTP/2 streams opened by clients.",
    "salvo_mock_reset_streams_total": "HTTP/2 streams reset by the mock or its clients.",
    "salvo_mock_goaways_total": "HTTP/2 GOAWAY frames the mock sent.",
])

/// Every rejection reason of each protocol at 0: the series the rejected counter starts
/// with, so that a dashboard sees them before the first rejection.
private let binaryRejections = Dictionary(uniqueKeysWithValues: Status.rejections.map { ($0.name, 0) })
private let http2Rejections = Dictionary(uniqueKeysWithValues: APNsReason.allCases.map { ($0.name, 0) })

extension ObservableGateway {
    /// Until a graceful shutdown or a cancellation: report the metrics every second. Then
    /// report once more and stop (the listener closes, every connection with it).
    func serve() async {
        try? await cancelWhenGracefulShutdown {
            while true {
                self.reportMetrics()
                try await Task.sleep(for: .seconds(1))
            }
        }
        reportMetrics()
        stop()
        logger.info("stopped")
    }
}

extension MockGateway: Service, ObservableGateway {
    /// Runs the gateway as a `Service`: it already listens (since `init`); this reports
    /// its metrics every second and, on graceful shutdown or cancellation, stops it.
    public func run() async throws { await serve() }

    /// Reports the counts so far through swift-metrics, from the counters the gateway
    /// keeps anyway (nothing is counted twice): `salvo_mock_received_total` (frames
    /// decoded), `salvo_mock_accepted_total`, `salvo_mock_rejected_total{reason}` (the
    /// status's name), `salvo_mock_connections_total`, `salvo_mock_handshake_failures_total`,
    /// `salvo_mock_dropped_connections_total`.
    public func reportMetrics() {
        _ = mockMetricsDescribed
        let counts = statistics(digests: false)
        feed.counter("salvo_mock_received_total", total: counts.received)
        feed.counter("salvo_mock_accepted_total", total: counts.accepted)
        feed.counters("salvo_mock_rejected_total", by: "reason", totals: binaryRejections.merging(counts.rejectedByStatus) { $1 })
        feed.counter("salvo_mock_connections_total", total: counts.connections)
        feed.counter("salvo_mock_handshake_failures_total", total: counts.handshakeFailures)
        feed.counter("salvo_mock_dropped_connections_total", total: counts.droppedConnections)
    }
}

extension H2MockGateway: Service, ObservableGateway {
    /// Runs the gateway as a `Service`: it already listens (since `init`); this reports
    /// its metrics every second and, on graceful shutdown or cancellation, stops it.
    public func run() async throws { await serve() }

    /// Reports the counts so far through swift-metrics, from the counters the gateway
    /// keeps anyway: `salvo_mock_received_total` (complete requests),
    /// `salvo_mock_accepted_total`, `salvo_mock_rejected_total{reason}` (Apple's reason),
    /// `salvo_mock_streams_total`, `salvo_mock_reset_streams_total`,
    /// `salvo_mock_connections_total`, `salvo_mock_handshake_failures_total`,
    /// `salvo_mock_dropped_connections_total`, `salvo_mock_goaways_total`.
    public func reportMetrics() {
        _ = mockMetricsDescribed
        let counts = statistics(digests: false)
        feed.counter("salvo_mock_received_total", total: counts.requests)
        feed.counter("salvo_mock_accepted_total", total: counts.accepted)
        feed.counters("salvo_mock_rejected_total", by: "reason", totals: http2Rejections.merging(counts.rejectedByReason) { $1 })
        feed.counter("salvo_mock_streams_total", total: counts.streams)
        feed.counter("salvo_mock_reset_streams_total", total: counts.resetStreams)
        feed.counter("salvo_mock_connections_total", total: counts.connections)
        feed.counter("salvo_mock_handshake_failures_total", total: counts.handshakeFailures)
        feed.counter("salvo_mock_dropped_connections_total", total: counts.droppedConnections)
        feed.counter("salvo_mock_goaways_total", total: counts.goaways)
    }
}
