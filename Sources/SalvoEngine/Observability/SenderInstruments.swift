import CoreMetrics
import Logging
import SalvoTelemetry

/// The metrics seam the engine owns: what the sender reports through swift-metrics, and
/// how, in Prometheus conventions (`salvo_sender_…`, counters ending in `_total`, times in
/// seconds, sizes in bytes).
///
/// Counters and gauges cost the hot path nothing: the ledger, the lanes and the event hub
/// count for the report anyway, and `Sender.reportMetrics()` (every second while the
/// sender runs as a `Service`, and once at the end of `finish()`) hands swift-metrics what
/// changed since the last flush (`MetricsFeed`). Only the histograms are recorded where
/// they happen, and none per notification: error-response latency per error response,
/// write batch size per `SSL_write` (up to 16 KiB, hundreds of notifications), and the
/// HTTP/2 response latency for one answer in `responseLatencySampling`.
struct SenderInstruments: Sendable {
    /// Binary protocol: from the write of a notification to the error response naming it.
    let errorLatency: Timer
    /// HTTP/2: from opening a stream to its answer, one answer in `responseLatencySampling`.
    let responseLatency: Timer
    /// Bytes handed to one `SSL_write`: how well records are filled.
    let writeBatch: Recorder
    /// Counters and gauges, from the totals.
    let feed: MetricsFeed

    /// One HTTP/2 answer in this many is timed (a power of two): the histogram's shape at
    /// a fraction of a lock per notification.
    static let responseLatencySampling: UInt64 = 64

    init(factory: any MetricsFactory) {
        errorLatency = Timer(label: "salvo_sender_error_response_latency_seconds", factory: factory)
        responseLatency = Timer(label: "salvo_sender_response_latency_seconds", factory: factory)
        writeBatch = Recorder(label: "salvo_sender_write_batch_bytes", aggregate: true, factory: factory)
        feed = MetricsFeed(factory: factory)
    }

    /// Instruments that report nowhere: the default of the pieces tests build alone.
    static let none = SenderInstruments(factory: NOOPMetricsHandler.instance)
}

extension Sender {
    /// Reports the accounting so far through swift-metrics: the totals' growth since the
    /// last report as counter increments, and the gauges' current values. Cheap (a
    /// snapshot of the totals, no shard is interrupted); called every second while the
    /// sender runs as a `Service` and once at the end of `finish()`. Call it yourself for
    /// fresher values.
    ///
    /// Counters: `salvo_sender_submitted_total`, `salvo_sender_accepted_total`,
    /// `salvo_sender_rejected_total{reason}` (the binary status's name, or Apple's reason),
    /// `salvo_sender_failed_total{reason}`, `salvo_sender_resent_total`,
    /// `salvo_sender_reconnects_total`, `salvo_sender_tokens_refreshed_total`. Gauges:
    /// `salvo_sender_in_flight` (submitted, not yet final), `salvo_sender_open_connections`,
    /// `salvo_sender_open_streams` (HTTP/2), `salvo_sender_connections` (connections in use).
    /// Histograms: `salvo_sender_error_response_latency_seconds` (binary),
    /// `salvo_sender_response_latency_seconds` (HTTP/2, one answer in 64),
    /// `salvo_sender_write_batch_bytes`.
    public func reportMetrics() {
        reportMetrics(of: progress)
    }

    /// Reports `report`'s totals and the gauges now.
    func reportMetrics(of report: SenderReport) {
        let feed = instruments.feed
        feed.counter("salvo_sender_submitted_total", total: report.submitted)
        feed.counter("salvo_sender_accepted_total", total: report.accepted)
        feed.counters("salvo_sender_rejected_total", by: "reason", totals: report.rejectedByReason)
        feed.counters("salvo_sender_failed_total", by: "reason", totals: report.failedByReason)
        feed.counter("salvo_sender_resent_total", total: report.resent)
        feed.counter("salvo_sender_reconnects_total", total: report.reconnects)
        feed.counter("salvo_sender_tokens_refreshed_total", total: tokensRefreshed)
        feed.gauge("salvo_sender_in_flight", value: report.submitted - report.accepted - report.rejected - report.failed)
        feed.gauge("salvo_sender_open_connections", value: openConnections)
        feed.gauge("salvo_sender_open_streams", value: openStreams)
        feed.gauge("salvo_sender_connections", value: report.connections)
    }
}
