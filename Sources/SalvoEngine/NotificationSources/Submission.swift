/// A source handed to a sender with `Sender.submit(contentsOf:)`: waits for its last
/// answers and counts its outcomes, apart from every other source's.
///
/// Keep it until `outcome()` returns: until then the sender may read the source again to
/// resend. When it goes, the sender forgets the source; gone earlier, a notification that
/// has to be sent again fails as `sourceUnreadable`.
public final class Submission: Sendable {
    /// The source's entry with each sender it was published to: one, or one per topic
    /// of a `RoutingSender` (with the topic).
    private let parts: [(sender: Sender, entry: SourceRegistry.Entry, topic: String?)]
    private let stoppedBy: (any Error)?

    init(sender: Sender, entry: SourceRegistry.Entry, stoppedBy: (any Error)?) {
        parts = [(sender, entry, nil)]
        self.stoppedBy = stoppedBy
    }

    /// A source published under several entries, each with its sender and topic.
    init(parts: [(sender: Sender, entry: SourceRegistry.Entry, topic: String?)], stoppedBy: (any Error)?) {
        self.parts = parts
        self.stoppedBy = stoppedBy
    }

    /// Nothing was taken: the sender had finished.
    init(finishedSender sender: Sender) {
        parts = []
        stoppedBy = SendError.finished
    }

    deinit {
        for (sender, entry, _) in parts { sender.forget(entry) }
    }

    /// Waits until every notification taken from the source is final (over the binary
    /// protocol, the error wait after its last write), and counts them.
    public func outcome() async -> SubmissionOutcome {
        var outcome = SubmissionOutcome(published: 0, stoppedBy: stoppedBy)
        for (_, entry, topic) in parts {
            await entry.untilComplete()
            let (rejected, failed) = entry.refusals.withLock { $0 }
            let published = entry.publishedCount.load(ordering: .relaxed)
            outcome.published += published
            outcome.rejectedByReason.merge(rejected, uniquingKeysWith: +)
            outcome.failedByReason.merge(failed, uniquingKeysWith: +)
            guard let topic else { continue }
            outcome.byTopic[topic, default: TopicCounts()].add(entry)
        }
        return outcome
    }
}

/// How a submitted source's notifications ended.
///
/// `accepted` is what was neither rejected nor failed. Over the binary protocol an error
/// response that names a notification older than every record kept (a window overrun,
/// `SenderReport.windowOverruns`) turns notifications released as accepted into failures
/// no source can be named for: the sender's report counts them, a submission's does not.
public struct SubmissionOutcome: Sendable {
    /// Notifications taken from the source.
    public var published: Int
    /// Of those, the rejected, by reason name (`Rejection.reasonName`).
    public var rejectedByReason: [String: Int] = [:]
    /// Of those, the failed, by reason.
    public var failedByReason: [FailureReason: Int] = [:]
    /// By topic, from a `RoutingSender`; empty otherwise.
    public var byTopic: [String: TopicCounts] = [:]
    /// What stopped the reading before the source's end: the reader's error, or a
    /// `SendError` (`finished`, `gatewayUnreachable`, `invalidPayload`); nil when the
    /// whole source was read.
    public var stoppedBy: (any Error)?

    /// Rejected by the gateway.
    public var rejected: Int { rejectedByReason.values.reduce(0, +) }
    /// Failed.
    public var failed: Int { failedByReason.values.reduce(0, +) }
    /// Neither rejected nor failed.
    public var accepted: Int { published - rejected - failed }
}
