import CoreMetrics
import Logging
import SalvoCampaignFiles
import SalvoPostgres
import SalvoTelemetry
import SalvoWire
import ServiceLifecycle

/// `salvo serve --db`'s upkeep of the journal: sends what lapsed serve instances held (a
/// previous run killed, another instance dead), and deletes the statuses past retention.
///
/// It stops at the graceful shutdown, before the sender drains: what it took over then
/// would not be sent (it would be left in the journal for the next run, counted again).
struct JournalRecovery: Service {
    let journal: NotificationJournal
    let dispatcher: Dispatcher
    let campaignProtocol: CampaignProtocol
    /// How long a final status is kept.
    let retention: Duration
    let logger: Logger
    private let possibleDuplicates = Counter(label: "salvo_serve_possible_duplicates_total")

    /// Notifications taken over at a time, at most (and no more than the queue has room for).
    static let takeoverLimit = 1000
    /// Final statuses deleted at a time, at most: a short statement, not one over the whole table.
    static let retentionBatch = 10_000

    init(journal: NotificationJournal, dispatcher: Dispatcher, campaignProtocol: CampaignProtocol, retention: Duration,
         logger: Logger) {
        self.journal = journal
        self.dispatcher = dispatcher
        self.campaignProtocol = campaignProtocol
        self.retention = retention
        self.logger = logger
        MetricDescriptions.describe([
            "salvo_serve_possible_duplicates_total":
                "Notifications taken over from a serve whose lease lapsed (--db): each may have been sent twice.",
        ])
    }

    func run() async throws {
        try? await cancelWhenGracefulShutdown {
            while !Task.isCancelled {
                await takeOver()
                await forgetExpired()
                try await Task.sleep(for: journal.leaseDuration / 3)
            }
        }
    }

    /// Takes over and sends what lapsed leases held, as long as there is some and room in
    /// the queue.
    private func takeOver() async {
        while !Task.isCancelled {
            let room = min(Self.takeoverLimit, dispatcher.queueLimit - dispatcher.queueDepth)
            guard room > 0 else { return }
            let entries: [ServeJournal.Entry]
            do {
                entries = try await journal.upkeep.takeOver(owner: journal.instance, for: journal.leaseDuration, limit: room)
            } catch {
                return logger.warning("the journal's lapsed notifications could not be taken over", metadata: ["error": "\(error)"])
            }
            guard !entries.isEmpty else { return }
            // Their holder may have sent any of them before it stopped.
            possibleDuplicates.increment(by: entries.count)
            logger.warning("took over notifications a lapsed serve held; each may have been sent before (possible duplicates)",
                           metadata: ["count": "\(entries.count)"])
            var json: [UInt8] = []
            var items: [JSONBatchItem] = []
            for entry in entries {
                guard let id = APNsID(entry.id) else {
                    logger.error("the journal holds a notification whose apns-id is not one; skipped", metadata: ["id": "\(entry.id)"])
                    continue
                }
                items.append(JSONBatchItem(index: items.count, range: json.count..<json.count + entry.json.count, id: id))
                json += entry.json
            }
            await dispatcher.resume(items, of: JSONBody(copying: json), campaignProtocol: campaignProtocol)
            if entries.count < room { return }
        }
    }

    /// Deletes the statuses final for longer than the retention, a batch at a time.
    private func forgetExpired() async {
        while !Task.isCancelled {
            do {
                guard try await journal.upkeep.forget(finalFor: retention, limit: Self.retentionBatch) == Self.retentionBatch
                else { return }
            } catch {
                return logger.warning("old statuses could not be deleted from the journal", metadata: ["error": "\(error)"])
            }
        }
    }
}
