import Logging
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
        let counts = statistics(digests: false)
        feed.counter("salvo_mock_received_total", total: counts.received)
        feed.counter("salvo_mock_accepted_total", total: counts.accepted)
        feed.counters("salvo_mock_rejected_total", by: "reason", totals: counts.rejectedByStatus)
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
        let counts = statistics(digests: false)
        feed.counter("salvo_mock_received_total", total: counts.requests)
        feed.counter("salvo_mock_accepted_total", total: counts.accepted)
        feed.counters("salvo_mock_rejected_total", by: "reason", totals: counts.rejectedByReason)
        feed.counter("salvo_mock_streams_total", total: counts.streams)
        feed.counter("salvo_mock_reset_streams_total", total: counts.resetStreams)
        feed.counter("salvo_mock_connections_total", total: counts.connections)
        feed.counter("salvo_mock_handshake_failures_total", total: counts.handshakeFailures)
        feed.counter("salvo_mock_dropped_connections_total", total: counts.droppedConnections)
        feed.counter("salvo_mock_goaways_total", total: counts.goaways)
    }
}
