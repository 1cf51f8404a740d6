import Synchronization

/// What each metric means, in a sentence: the `# HELP` line an exporter writes for it.
///
/// swift-metrics carries a label and dimensions, no description; so each module describes
/// the metrics it reports here, next to where it makes them, and an exporter (SalvoPrometheus)
/// looks them up when it registers a metric. Any thread.
public enum MetricDescriptions {
    private static let texts = Mutex<[String: String]>([:])

    /// Adds the descriptions of `texts`, label to sentence (a label described again keeps
    /// its first sentence: an exporter may have shown it already).
    public static func describe(_ texts: [String: String]) {
        Self.texts.withLock { $0.merge(texts) { first, _ in first } }
    }

    /// The sentence for `label`, if one was described.
    public static func text(for label: String) -> String? {
        texts.withLock { $0[label] }
    }
}
