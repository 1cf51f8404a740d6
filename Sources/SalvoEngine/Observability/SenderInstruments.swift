import CoreMetrics
import Logging
import SalvoTelemetry
import SalvoWire

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
    /// The rejection reasons the transport knows, reported from the first flush on (at 0),
    /// so that a dashboard sees the series before the first rejection.
    let knownRejections: [String: Int]

    /// One HTTP/2 answer in this many is timed (a power of two): the histogram's shape at
    /// a fraction of a lock per notification.
    static let responseLatencySampling: UInt64 = 64

    /// Instruments for a sender speaking HTTP/2 (`http2`) or the binary protocol: the other
    /// transport's histogram reports nowhere, rather than as a series that stays empty.
    init(factory: any MetricsFactory, http2: Bool = false) {
        MetricDescriptions.describe(Self.descriptions)
        let none = NOOPMetricsHandler.instance
        errorLatency = Timer(label: "salvo_sender_error_response_latency_seconds", factory: http2 ? none : factory)
        responseLatency = Timer(label: "salvo_sender_response_latency_seconds", factory: http2 ? factory : none)
        writeBatch = Recorder(label: "salvo_sender_write_batch_bytes", aggregate: true, factory: factory)
        feed = MetricsFeed(factory: factory)
        let reasons = http2 ? APNsReason.allCases.filter(\.isRejection).map(\.name) : Status.rejections.map(\.name)
        knownRejections = Dictionary(uniqueKeysWithValues: reasons.map { ($0, 0) })
    }

    /// Instruments that report nowhere: the default of the pieces tests build alone.
    static let none = SenderInstruments(factory: NOOPMetricsHandler.instance)

    /// The `# HELP` text of every metric the sender reports.
    static let descriptions = [
        "salvo_sender_submitted_total": "Notifications handed to the sender.",
        "salvo_sender_accepted_total": "Notifications the gateway accepted (binary: no error response named them in the error wait).",
        "salvo_sender_rejected_total": "Notifications the gateway rejected, by reason (the binary status's name, or Apple's reason).",
        "salvo_sender_failed_total": "Notifications the sender gave up on, by reason (unreachable gateway, retry budget, unknown fate...).",
        "salvo_sender_resent_total": "Notifications written again after a drop or an error response on their connection.",
        "salvo_sender_reconnects_total": "Connections made again after one ended.",
        "salvo_sender_tokens_refreshed_total": "HTTP/2 provider tokens signed anew after the gateway called one expired.",
        "salvo_sender_in_flight": "Notifications submitted and not yet final.",
        "salvo_sender_open_connections": "Gateway connections open now.",
        "salvo_sender_open_streams": "HTTP/2 streams open now, waiting for their answers.",
        "salvo_sender_connections": "Gateway connections in use: those configured at the start, and those added while every one was full.",
        "salvo_sender_error_response_latency_seconds": "Binary protocol: from writing a notification to the error response naming it.",
        "salvo_sender_response_latency_seconds": "HTTP/2: from opening a stream to its answer (one answer in 64).",
        "salvo_sender_write_batch_bytes": "Bytes handed to one SSL_write: how well TLS records are filled.",
    ]
}

extension Sender {
    /// Every failure reason, at 0: the series `salvo_sender_failed_total` starts with.
    static let knownFailures = Dictionary(uniqueKeysWithValues: FailureReason.allCases.map { ($0.rawValue, 0) })

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
        // Every known reason from the start, at 0 until it happens.
        feed.counters("salvo_sender_rejected_total", by: "reason",
                      totals: instruments.knownRejections.merging(report.rejectedByReason) { $1 })
        feed.counters("salvo_sender_failed_total", by: "reason",
                      totals: Self.knownFailures.merging(report.failedByReason) { $1 })
        feed.counter("salvo_sender_resent_total", total: report.resent)
        feed.counter("salvo_sender_reconnects_total", total: report.reconnects)
        feed.counter("salvo_sender_tokens_refreshed_total", total: tokensRefreshed)
        feed.gauge("salvo_sender_in_flight", value: report.submitted - report.accepted - report.rejected - report.failed)
        feed.gauge("salvo_sender_open_connections", value: openConnections)
        feed.gauge("salvo_sender_open_streams", value: openStreams)
        feed.gauge("salvo_sender_connections", value: report.connections)
    }
}
