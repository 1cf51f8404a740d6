import CoreMetrics
import Logging
import SalvoIO
import SalvoTelemetry
import SalvoWire
import Synchronization

/// Sends the notifications of several apps and teams in one run: one `Sender` per set of
/// credentials (a team's signing key, or a client certificate), each with its own
/// connections, growth and provider token, and every notification through the sender of
/// the credentials that serve its topic.
///
/// ```swift
/// let sender = try RoutingSender(routes: [
///     .init(configuration: teamA, topics: ["com.example.news", "com.example.weather"]),
///     .init(configuration: certificate, topics: ["com.example.legacy"]),
/// ], defaultTopic: "com.example.news")
/// try await sender.send(contentsOf: campaign)
/// let report = await sender.finish()   // report.byTopic: each app's counts
/// ```
///
/// A connection carries one team's requests (token authentication) or one certificate's,
/// as APNs wants; the team's one provider token is shared by all of its connections (and
/// through `HTTP2Options.tokenStore` with its other processes). A source is read once, on
/// the caller's task; each sender reads it again from a position to resend, as a lone
/// sender does, and is told only of its own notifications. The report adds the senders'
/// and breaks the outcomes down by topic; `completedSequence` is exact over all of them,
/// so a checkpoint holds for the whole source.
///
/// Built from one configuration (`init(_:)`), it is that one sender and nothing more:
/// `send(contentsOf:)` is the sender's own, with no routing and no per-topic counts.
///
/// Thread-safety: every method may be called from any thread or task.
public final class RoutingSender: Sendable {
    /// One set of credentials and the topics it serves.
    public struct Route: Sendable {
        /// The sender's configuration: the gateway and engine settings (the same for every
        /// route), and this route's credentials (HTTP/2 token authentication, or the
        /// client certificate of `tls`).
        public var configuration: SenderConfiguration
        /// The bundle ids it serves (each served by one route only).
        public var topics: [String]
        /// What its metrics are labelled with (`credentials="…"`): a team id, a certificate's name.
        public var label: String

        /// A route for `topics`, sending with `configuration`, labelled `label`.
        public init(configuration: SenderConfiguration, topics: [String], label: String) {
            self.configuration = configuration
            self.topics = topics
            self.label = label
        }
    }

    /// The senders, one per route, in the routes' order.
    public let senders: [Sender]
    /// Which topic a notification goes to; nil for a single sender (no routing).
    public let routing: TopicRouting?
    /// Of each topic (by `routing`'s index), the index of its sender.
    private let senderOfTopic: [Int]
    /// What happens as the senders run, all of them in one stream.
    public let events: AsyncStream<SenderEvent>
    private let forwarders: [Task<Void, Never>]
    /// The sequence of the last notification routed, plus one (0: none yet).
    private let submittedSequenceEnd = Atomic<UInt64>(0)
    /// Each topic's counts (by `routing`'s index).
    private let tally: TopicTally
    /// Per-topic counters: `salvo_sender_topic_notifications_total{topic,outcome}`.
    private let topicFeed: MetricsFeed

    /// The settings the senders share (the first route's configuration).
    public var configuration: SenderConfiguration { senders[0].configuration }

    /// One sender and no routing: `Sender.init`'s parameters.
    public init(_ configuration: SenderConfiguration, logger: Logger = .disabled, metricsFactory: (any MetricsFactory)? = nil,
                onRejected: (@Sendable (PushTarget, Rejection, UInt64) -> Void)? = nil) throws(SenderError) {
        let sender = try Sender(configuration, logger: logger, metricsFactory: metricsFactory, onRejected: onRejected)
        senders = [sender]
        routing = nil
        senderOfTopic = []
        events = sender.events
        forwarders = []
        tally = TopicTally(topics: 0)
        topicFeed = MetricsFeed(factory: NOOPMetricsHandler.instance)
    }

    /// Starts one sender per route.
    ///
    /// - Parameters:
    ///   - routes: the credentials and their topics; HTTP/2 only (a binary gateway knows
    ///     one certificate per connection and no topics). A topic served twice is refused.
    ///   - defaultTopic: the topic of notifications that name none (one of the routes'),
    ///     also their sender's `HTTP2Options.topic`; nil: every notification names its own.
    ///   - logger, onRejected: as for `Sender.init`, shared by the senders.
    ///   - metricsFactory: as for `Sender.init`; each sender's metrics carry the dimension
    ///     `credentials` (its route's label).
    /// - Throws: `SenderError` for routes that cannot work, or a sender that cannot start.
    public init(routes: [Route], defaultTopic: String?, logger: Logger = .disabled,
                metricsFactory: (any MetricsFactory)? = nil,
                onRejected: (@Sendable (PushTarget, Rejection, UInt64) -> Void)? = nil) throws(SenderError) {
        let topics = routes.flatMap(\.topics)
        guard !routes.isEmpty, routes.allSatisfy({ !$0.topics.isEmpty }) else {
            throw SenderError(description: "every set of credentials needs at least one topic (bundle id)")
        }
        if let twice = Dictionary(grouping: topics, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw SenderError(description: "the topic \(twice) is served by two sets of credentials; give each topic to one")
        }
        let teams = routes.compactMap { route -> String? in
            guard case .token(let credentials)? = route.configuration.http2?.authentication else { return nil }
            return credentials.teamID
        }
        if let twice = Dictionary(grouping: teams, by: { $0 }).first(where: { $0.value.count > 1 })?.key {
            throw SenderError(description: "team \(twice) has two sets of credentials; a team has one provider token: give all its topics to one")
        }
        if let defaultTopic, !topics.contains(defaultTopic) {
            throw SenderError(description: "the default topic \(defaultTopic) is served by none of the credentials")
        }
        let factory = metricsFactory ?? MetricsSystem.factory
        var senders: [Sender] = []
        for route in routes {
            guard case .http2(var options) = route.configuration.transport else {
                throw SenderError(description: "credentials per topic are for the HTTP/2 provider API")
            }
            // Notifications without a topic of their own take their sender's.
            options.topic = defaultTopic.flatMap { route.topics.contains($0) ? $0 : nil } ?? route.topics[0]
            var configuration = route.configuration
            configuration.transport = .http2(options)
            senders.append(try Sender(configuration, logger: logger.labelled(route.label),
                                      metricsFactory: LabelledMetricsFactory(base: factory, dimension: ("credentials", route.label)),
                                      onRejected: onRejected))
        }
        self.senders = senders
        routing = TopicRouting(topics: topics, defaultTopic: defaultTopic)
        senderOfTopic = routes.indices.flatMap { index in Array(repeating: index, count: routes[index].topics.count) }
        tally = TopicTally(topics: topics.count)
        topicFeed = MetricsFeed(factory: factory)
        MetricDescriptions.describe(["salvo_sender_topic_notifications_total":
            "Notifications of each topic (bundle id) that ended accepted, rejected or failed, when a run sends for several apps."])
        let (stream, continuation) = AsyncStream.makeStream(of: SenderEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        events = stream
        // The stream ends when the last sender's does.
        let remaining = Countdown(senders.count)
        forwarders = senders.map { sender in
            Task {
                for await event in sender.events { continuation.yield(event) }
                if remaining.countDown() { continuation.finish() }
            }
        }
    }

    deinit {
        forwarders.forEach { $0.cancel() }
    }

    // MARK: Sending

    /// Sends every notification `source` yields, each through the sender of its topic, and
    /// returns when every one is final. As `Sender.send(contentsOf:startingWith:)`; also
    /// throws `SendError.unservedTopic` at a notification whose topic no route serves
    /// (after everything read before it is final).
    public func send<Source: NotificationSource>(contentsOf source: Source, startingWith reader: Source.Reader? = nil)
        async throws
    {
        guard routing != nil else { return try await senders[0].send(contentsOf: source, startingWith: reader) }
        let outcome = await submit(contentsOf: source, startingWith: reader).outcome()
        if let stopped = outcome.stoppedBy { throw stopped }
    }

    /// Hands every notification `source` yields to the sender of its topic, and returns
    /// once the last one is taken: as `Sender.submit(contentsOf:startingWith:observingRefusals:)`, the
    /// submission counting the source's outcomes over every sender.
    public func submit<Source: NotificationSource>(contentsOf source: Source, startingWith reader: Source.Reader? = nil,
                                                   observingRefusals: RefusalObserver? = nil) async -> Submission
    {
        guard let routing else {
            return await senders[0].submit(contentsOf: source, startingWith: reader, observingRefusals: observingRefusals)
        }
        // One entry per topic, with the topic's sender: each entry counts its own outcomes.
        let entries = routing.topics.indices.map {
            senders[senderOfTopic[$0]].sources.register(source, refusalObserver: observingRefusals)
        }
        tally.add(entries)
        var published = [Int](repeating: 0, count: entries.count)
        var turns = senders.map { $0.firstTurn() }
        var stopped: (any Error)?
        do {
            if senders.contains(where: \.hasFinished) { throw SendError.finished }
            let reader = try reader ?? source.makeReader()
            while let next = try publishUntilFull(reader, routing, entries, &turns, &published) {
                let (waiting, topic) = next
                let index = senderOfTopic[topic], sender = senders[index], id = entries[topic].id
                try await sender.untilTaken { () throws(SendError) -> Bool in
                    turns[index].previous = -1
                    return try sender.tryPublish(waiting, source: id, turn: &turns[index])
                }
                countPublished(waiting, topic: topic, &published)
            }
        } catch {
            stopped = error
        }
        for topic in entries.indices { senders[senderOfTopic[topic]].sourceExhausted(entries[topic], after: published[topic]) }
        return Submission(parts: entries.indices.map { (senders[senderOfTopic[$0]], entries[$0], routing.topics[$0]) },
                          stoppedBy: stopped)
    }

    /// Publishes what `reader` yields while its sender takes it at once; returns the first
    /// one its sender could not take, and its topic; nil at the reader's end.
    private func publishUntilFull<Reader: NotificationReader>(
        _ reader: Reader, _ routing: TopicRouting, _ entries: [SourceRegistry.Entry], _ turns: inout [Sender.LaneTurn],
        _ published: inout [Int]
    ) throws -> (SourceNotification, Int)? {
        while let notification = try reader.next() {
            guard let topic = routing.topic(of: notification) else {
                throw SendError.unservedTopic(routing.problem(with: notification), sequence: notification.position.sequence)
            }
            let index = senderOfTopic[topic]
            // Consecutive notifications of one sender are not consecutive in the source:
            // none continues the previous one's run.
            turns[index].previous = -1
            guard try senders[index].tryPublish(notification, source: entries[topic].id, turn: &turns[index]) else {
                return (notification, topic)
            }
            countPublished(notification, topic: topic, &published)
        }
        return nil
    }

    @inline(__always)
    private func countPublished(_ notification: SourceNotification, topic: Int, _ published: inout [Int]) {
        published[topic] += 1
        submittedSequenceEnd.store(notification.position.sequence &+ 1, ordering: .releasing)
    }

    // MARK: Progress

    /// The accounting so far, over every sender, by topic when routing.
    public var progress: SenderReport { report(SenderReport.combining(senders.map(\.progress))) }

    /// As `Sender.completedSequence(holdingBackFailures:)`, over every sender: every
    /// notification routed with a sequence up to the result is final.
    public func completedSequence(holdingBackFailures: Bool = true) -> UInt64? {
        guard routing != nil else { return senders[0].completedSequence(holdingBackFailures: holdingBackFailures) }
        // The high-water mark first, then the senders' lanes: see `Sender.completedSequence`.
        let end = submittedSequenceEnd.load(ordering: .acquiring)
        let oldest = senders.reduce(UInt64.max) { min($0, $1.oldestUnfinishedSequence(holdingBackFailures: holdingBackFailures)) }
        return Sender.completedSequence(end: end, oldestUnfinished: oldest)
    }

    /// Finishes every sender (`Sender.finish(timeout:)`) and returns their report, combined
    /// and by topic. Later calls return the same report.
    public func finish(timeout: Duration = .seconds(300)) async -> SenderReport {
        let reports = await withTaskGroup(of: (Int, SenderReport).self) { group in
            for (index, sender) in senders.enumerated() { group.addTask { (index, await sender.finish(timeout: timeout)) } }
            var reports = [SenderReport?](repeating: nil, count: senders.count)
            for await (index, report) in group { reports[index] = report }
            return reports.compactMap { $0 }
        }
        let combined = report(SenderReport.combining(reports))
        reportTopicMetrics(combined)
        return combined
    }

    /// What is not final fails now, in every sender (`Sender.abandonUnsettled`).
    package func abandonUnsettled() { senders.forEach { $0.abandonUnsettled() } }

    /// `report` with its per-topic counts, when routing.
    private func report(_ report: SenderReport) -> SenderReport {
        guard let routing else { return report }
        var report = report
        report.byTopic = Dictionary(uniqueKeysWithValues: zip(routing.topics, tally.counts()))
        return report
    }

    /// Reports the senders' metrics (each under its `credentials` label) and the per-topic
    /// counters `salvo_sender_topic_notifications_total{topic,outcome}`.
    public func reportMetrics() {
        senders.forEach { $0.reportMetrics() }
        if routing != nil { reportTopicMetrics(progress) }
    }

    /// Reports `report`'s per-topic counters.
    func reportTopicMetrics(_ report: SenderReport) {
        for (topic, counts) in report.byTopic {
            for (outcome, total) in [("accepted", counts.accepted), ("rejected", counts.rejected), ("failed", counts.failed)] {
                topicFeed.counter("salvo_sender_topic_notifications_total", [("outcome", outcome), ("topic", topic)], total: total)
            }
        }
    }
}

extension Logger {
    /// This logger with `credentials` metadata: which route's sender logs.
    fileprivate func labelled(_ label: String) -> Logger {
        var logger = self
        logger[metadataKey: "credentials"] = "\(label)"
        return logger
    }
}

/// Counts down from a number, shared by tasks.
private final class Countdown: Sendable {
    private let remaining: Atomic<Int>

    init(_ count: Int) { remaining = Atomic(count) }

    /// One less; true for the call that reaches zero.
    func countDown() -> Bool { remaining.subtract(1, ordering: .acquiringAndReleasing).newValue == 0 }
}
