import CoreMetrics
import Synchronization

/// Reports totals that someone else counts through swift-metrics, a flush at a time.
///
/// The engine and the mocks already count everything for their reports (atomics added
/// once per batch, locked tallies for the rarer outcomes). Counting again for swift-metrics
/// on the hot path would cost per notification; instead a flush (every second, and once
/// at the end) reads those totals and hands swift-metrics the difference since the last
/// flush. So a backend's counter equals the report's total after the final flush, and
/// the hot path pays nothing for metrics.
///
/// Instruments are made once per name and label set, with the factory given (the global
/// `MetricsSystem.factory` by default, which is a no-op until the host bootstraps one).
/// Any thread; flushes are serialised by a lock.
public final class MetricsFeed: Sendable {
    private let factory: any MetricsFactory
    private let state = Mutex<State>(State())

    private struct State {
        var counters: [Key: (counter: Counter, reported: Int64)] = [:]
        var meters: [Key: Meter] = [:]
    }

    private struct Key: Hashable {
        let label: String
        let dimensions: [String]
    }

    /// A feed that makes its instruments with `factory`.
    public init(factory: any MetricsFactory = MetricsSystem.factory) {
        self.factory = factory
    }

    /// The counter `label` (with `dimensions`, e.g. `[("reason", "BadDeviceToken")]`) has
    /// reached `total`: increments it by the growth since the last call. A total that went
    /// down (a recount) is reported again only once it has grown past what was reported.
    public func counter(_ label: String, _ dimensions: [(String, String)] = [], total: Int) {
        let key = Key(label: label, dimensions: dimensions.flatMap { [$0.0, $0.1] })
        let total = Int64(total)
        state.withLock { state in
            var entry = state.counters[key] ?? (Counter(label: label, dimensions: dimensions, factory: factory), 0)
            if total > entry.reported {
                entry.counter.increment(by: total - entry.reported)
                entry.reported = total
            }
            state.counters[key] = entry
        }
    }

    /// Each of `totals` by its label value: `counter(label, [(dimension, key)], total: value)`.
    public func counters(_ label: String, by dimension: String, totals: [String: Int]) {
        for (value, total) in totals { counter(label, [(dimension, value)], total: total) }
    }

    /// The gauge `label` is at `value` now.
    public func gauge(_ label: String, _ dimensions: [(String, String)] = [], value: Int) {
        let key = Key(label: label, dimensions: dimensions.flatMap { [$0.0, $0.1] })
        let meter = state.withLock { state in
            if let meter = state.meters[key] { return meter }
            let meter = Meter(label: label, dimensions: dimensions, factory: factory)
            state.meters[key] = meter
            return meter
        }
        meter.set(value)
    }
}
