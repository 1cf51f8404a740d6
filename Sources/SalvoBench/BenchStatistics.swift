/// The summary of one cell's runs: the median and the spread around it.
///
/// Medians, not means: on a shared machine a run that lost the CPU to something else is an
/// outlier to ignore, not a value to average in.
package struct BenchSpread: Sendable, Hashable, Codable {
    package var median: Double
    package var minimum: Double
    package var maximum: Double

    /// The median, the smallest and the largest of `values`; nil when there are none.
    package init?(_ values: [Double]) {
        guard let median = Self.median(values), let minimum = values.min(), let maximum = values.max() else { return nil }
        self.median = median
        self.minimum = minimum
        self.maximum = maximum
    }

    package init(median: Double, minimum: Double, maximum: Double) {
        self.median = median
        self.minimum = minimum
        self.maximum = maximum
    }

    /// The middle value; for an even count, the mean of the two middle values.
    package static func median(_ values: [Double]) -> Double? {
        guard !values.isEmpty else { return nil }
        let sorted = values.sorted()
        let middle = sorted.count / 2
        return sorted.count % 2 == 1 ? sorted[middle] : (sorted[middle - 1] + sorted[middle]) / 2
    }

    /// (maximum - minimum) / median: 0.05 means the runs lie within 5 % of the median's size.
    package var relativeSpread: Double { median > 0 ? (maximum - minimum) / median : 0 }

    /// How far the extremes lie from the median, as fractions of it: (-0.03, +0.02).
    package var relativeRange: (below: Double, above: Double) {
        guard median > 0 else { return (0, 0) }
        return ((minimum - median) / median, (maximum - median) / median)
    }
}
