import SalvoEngine

/// A campaign's per-topic counts as one flat count dictionary, so that a chunk's write-back
/// adds them to its row's as it adds the reasons (`<topic> accepted`, `<topic> rejected
/// <reason>`, `<topic> failed <reason>`; a bundle id has no space).
enum TopicOutcomeKeys {
    static func flatten(_ byTopic: [String: TopicCounts]) -> [String: Int] {
        var flat: [String: Int] = [:]
        for (topic, counts) in byTopic {
            flat["\(topic) accepted"] = counts.accepted
            for (reason, count) in counts.rejectedByReason { flat["\(topic) rejected \(reason)"] = count }
            for (reason, count) in counts.failedByReason { flat["\(topic) failed \(reason)"] = count }
        }
        return flat
    }

    /// The counts by topic again; each topic's `submitted` is its final notifications.
    static func unflatten(_ flat: [String: Int]) -> [String: TopicCounts] {
        var byTopic: [String: TopicCounts] = [:]
        for (key, count) in flat {
            let parts = key.split(separator: " ", maxSplits: 2).map(String.init)
            guard parts.count >= 2 else { continue }
            var counts = byTopic[parts[0], default: TopicCounts()]
            switch (parts[1], parts.count == 3 ? parts[2] : nil) {
            case ("accepted", nil): counts.accepted += count
            case ("rejected", let reason?): counts.rejectedByReason[reason, default: 0] += count
            case ("failed", let reason?): counts.failedByReason[reason, default: 0] += count
            default: continue
            }
            counts.submitted += count
            byTopic[parts[0]] = counts
        }
        return byTopic
    }
}
