/// Samples read from a Prometheus text exposition (what `/metrics` serves), for tests that
/// compare metrics with a report.
public struct PrometheusText: Sendable {
    /// `name{labels}` (as written, labels included) to value.
    public let samples: [String: Double]

    /// Parses `text`: comment lines are skipped, every other line is `series value`.
    public init(_ text: String) {
        var samples: [String: Double] = [:]
        for line in text.split(separator: "\n") where !line.hasPrefix("#") {
            guard let space = line.lastIndex(of: " "), let value = Double(line[line.index(after: space)...]) else { continue }
            samples[String(line[..<space])] = value
        }
        self.samples = samples
    }

    /// The value of `name` with exactly `labels` (e.g. `["reason": "Unregistered"]`), or nil.
    public func value(_ name: String, _ labels: [String: String] = [:]) -> Double? {
        if labels.isEmpty { return samples[name] }
        let written = labels.sorted { $0.key < $1.key }.map { "\($0.key)=\"\($0.value)\"" }.joined(separator: ",")
        return samples["\(name){\(written)}"]
    }

    /// Every series of `name` with one label, `label`: its value by that label's value.
    public func values(_ name: String, by label: String) -> [String: Int] {
        var values: [String: Int] = [:]
        let prefix = "\(name){\(label)=\""
        for (series, value) in samples where series.hasPrefix(prefix) && series.hasSuffix("\"}") {
            values[String(series.dropFirst(prefix.count).dropLast(2))] = Int(value)
        }
        return values
    }
}
