import CoreMetrics
import Prometheus
import SalvoTelemetry
import Synchronization

/// swift-metrics onto a swift-prometheus registry, as `PrometheusMetricsFactory` does, with
/// a `# HELP` line for every metric: the sentence its module described in
/// `MetricDescriptions`, or a plain one for a metric nobody described (a library's).
///
/// A metric's help is fixed the first time its name is registered, and used for every
/// label set after (the registry refuses a family whose help text changes).
public struct DescribedMetricsFactory: MetricsFactory, Sendable {
    /// The registry the metrics go to.
    public let registry: PrometheusCollectorRegistry
    /// Buckets of the histograms `Timer`s make.
    public var durationBuckets: [Duration]
    /// Buckets of the histograms aggregating `Recorder`s make.
    public var valueBuckets: [Double]
    private let helps = HelpTexts()

    /// Metrics into `registry`, histograms with these buckets.
    public init(registry: PrometheusCollectorRegistry, durationBuckets: [Duration], valueBuckets: [Double]) {
        self.registry = registry
        self.durationBuckets = durationBuckets
        self.valueBuckets = valueBuckets
    }

    private func descriptor(_ label: String) -> MetricNameDescriptor {
        MetricNameDescriptor(metricName: label, unitName: "", helpText: helps.text(for: label))
    }

    public func makeCounter(label: String, dimensions: [(String, String)]) -> any CounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeFloatingPointCounter(label: String, dimensions: [(String, String)]) -> any FloatingPointCounterHandler {
        registry.makeCounter(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeRecorder(label: String, dimensions: [(String, String)], aggregate: Bool) -> any RecorderHandler {
        guard aggregate else { return registry.makeGauge(descriptor: descriptor(label), labels: dimensions) }
        return registry.makeValueHistogram(descriptor: descriptor(label), labels: dimensions, buckets: valueBuckets)
    }

    public func makeMeter(label: String, dimensions: [(String, String)]) -> any MeterHandler {
        registry.makeGauge(descriptor: descriptor(label), labels: dimensions)
    }

    public func makeTimer(label: String, dimensions: [(String, String)]) -> any TimerHandler {
        registry.makeDurationHistogram(descriptor: descriptor(label), labels: dimensions, buckets: durationBuckets)
    }

    public func destroyCounter(_ handler: any CounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyFloatingPointCounter(_ handler: any FloatingPointCounterHandler) {
        if let counter = handler as? Prometheus.Counter { registry.unregisterCounter(counter) }
    }

    public func destroyRecorder(_ handler: any RecorderHandler) {
        switch handler {
        case let gauge as Prometheus.Gauge: registry.unregisterGauge(gauge)
        case let histogram as ValueHistogram: registry.unregisterValueHistogram(histogram)
        default: break
        }
    }

    public func destroyMeter(_ handler: any MeterHandler) {
        if let gauge = handler as? Prometheus.Gauge { registry.unregisterGauge(gauge) }
    }

    public func destroyTimer(_ handler: any TimerHandler) {
        if let histogram = handler as? DurationHistogram { registry.unregisterDurationHistogram(histogram) }
    }
}

/// The help text each metric name was first registered with.
private final class HelpTexts: Sendable {
    private let chosen = Mutex<[String: String]>([:])

    func text(for label: String) -> String {
        chosen.withLock { chosen in
            if let text = chosen[label] { return text }
            let text = MetricDescriptions.text(for: label) ?? "\(label), reported through swift-metrics (not described)."
            chosen[label] = text
            return text
        }
    }
}
