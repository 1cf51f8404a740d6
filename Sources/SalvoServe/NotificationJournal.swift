import Logging
import SalvoCampaignFiles
import SalvoPostgres
import SalvoWire
import Synchronization

/// `salvo serve --db`: the notifications taken, kept in PostgreSQL from before their 202
/// until `statusRetention` after they are final, so that a serve killed with `kill -9`
/// loses none: what it held is sent by the next run, or by another serve on the same
/// database, once its leases lapse (`JournalRecovery`), and counted as possible duplicates.
///
/// SalvoServe depends on SalvoPostgres, not the reverse: the SQL stays with the other
/// tables and their schema versions (`ServeJournal`), PostgresNIO stays behind it, and this
/// type only decides when to write. Three connections, so that a request's append never
/// waits behind a write-back or a takeover: intake, write-back, upkeep (leases, takeovers,
/// retention, lookups).
public final class NotificationJournal: Sendable {
    /// The name this instance leases under: unique per run, so that a restarted serve never
    /// mistakes its previous run's notifications for its own (it takes them over).
    public let instance: String
    /// How long a lease lasts unless renewed: how soon another instance sends what a dead
    /// one held.
    public let leaseDuration: Duration
    /// The device registry 410s and bad tokens prune, nil: none.
    public let registry: ServeJournal.Registry?
    private let intake: ServeJournal
    private let writing: ServeJournal
    let upkeep: ServeJournal
    private let databases: [CampaignDatabase]
    private let appends = Mutex<AppendQueue>(AppendQueue())
    private let settlements = Mutex<SettlementQueue>(SettlementQueue())
    private let heartbeat = Mutex<Task<Void, Never>?>(nil)
    private let logger: Logger

    private typealias Appended = Result<Set<String>, CampaignStoreError>

    /// Appends waiting for the one in progress: written together next (a group commit).
    private struct AppendQueue {
        var waiting: [(entries: [ServeJournal.Entry], continuation: CheckedContinuation<Appended, Never>)] = []
        var writing = false
    }

    /// Ends not yet written back, and who waits for all of them to be.
    private struct SettlementQueue {
        var accepted: [String] = []
        var refused: [(id: String, status: ServeJournal.Status)] = []
        var writing = false
        var flushed: [CheckedContinuation<Void, Never>] = []
    }

    /// Connects (three connections) and starts renewing this instance's leases. `registry`:
    /// where the tokens of notifications refused for the token's fault are invalidated.
    ///
    /// - Throws: `CampaignStoreError`: the database is unreachable, refuses the
    ///   credentials, or holds a newer Salvo's schema.
    public static func connect(_ url: DatabaseURL, instance: String, leaseDuration: Duration, registry: ServeJournal.Registry? = nil,
                               logger: Logger) async throws(CampaignStoreError) -> NotificationJournal {
        var databases: [CampaignDatabase] = []
        do {
            for _ in 0..<3 { databases.append(try await CampaignDatabase.connect(url, applicationName: "salvo serve \(instance)")) }
        } catch {
            for database in databases { await database.close() }
            throw error
        }
        let journal = NotificationJournal(instance: instance, leaseDuration: leaseDuration, registry: registry, databases: databases,
                                          logger: logger)
        journal.heartbeat.withLock { $0 = Task { await journal.renewLeases() } }
        return journal
    }

    private init(instance: String, leaseDuration: Duration, registry: ServeJournal.Registry?, databases: [CampaignDatabase],
                 logger: Logger) {
        self.instance = instance
        self.leaseDuration = leaseDuration
        self.registry = registry
        self.databases = databases
        (intake, writing, upkeep) = (ServeJournal(databases[0]), ServeJournal(databases[1]), ServeJournal(databases[2]))
        self.logger = logger
    }

    /// Stops renewing, writes back every end recorded, lets what this instance still holds
    /// be taken over at once, and closes the connections.
    public func close() async {
        heartbeat.withLock { $0 }?.cancel()
        await flushed()
        do { try await upkeep.release(owner: instance) } catch {
            logger.warning("the journal's leases were not released; they lapse on their own", metadata: ["error": "\(error)"])
        }
        for database in databases { await database.close() }
    }

    // MARK: Intake

    /// Journals `items` of `body` pending, leased by this instance, before anything of them
    /// is sent; appends of requests arriving meanwhile go in the same statement and commit.
    /// Returns the statuses of those the journal held already (taken before, by an earlier
    /// run or another instance): those were not appended, and are not to be sent.
    func append(_ items: [JSONBatchItem], of body: JSONBody) async throws(CampaignStoreError) -> [APNsID: NotificationStatus] {
        let entries = items.map { ServeJournal.Entry(id: $0.id.description, json: Array(body.bytes[$0.range])) }
        let appended = await withCheckedContinuation { (continuation: CheckedContinuation<Appended, Never>) in
            let leads = appends.withLock { queue in
                queue.waiting.append((entries, continuation))
                defer { queue.writing = true }
                return !queue.writing
            }
            if leads { Task { await writeAppends() } }
        }
        let held = try appended.get()
        guard !held.isEmpty else { return [:] }
        let statuses = try await upkeep.statuses(of: Array(held))
        var known: [APNsID: NotificationStatus] = [:]
        for item in items where held.contains(item.id.description) {
            known[item.id] = statuses[item.id.description].map { Self.status(item.id, $0) }
                ?? NotificationStatus(id: item.id.description, state: .pending)
        }
        return known
    }

    /// Writes the waiting appends, all in one statement, until none waits.
    private func writeAppends() async {
        while true {
            let group = appends.withLock { queue in
                defer { queue.waiting = [] }
                if queue.waiting.isEmpty { queue.writing = false }
                return queue.waiting
            }
            guard !group.isEmpty else { return }
            let appended: Appended
            do {
                appended = .success(try await intake.append(group.flatMap(\.entries), owner: instance, leaseDuration: leaseDuration))
            } catch {
                appended = .failure(error)
            }
            for member in group {
                member.continuation.resume(returning: appended.map { $0.intersection(member.entries.map(\.id)) })
            }
        }
    }

    // MARK: Ends

    /// Records that the notifications `ids` were accepted (if not refused), to be written back.
    func recordAccepted(_ ids: some Sequence<APNsID>) {
        record { $0.accepted.append(contentsOf: ids.lazy.map(\.description)) }
    }

    /// Records a notification's refusal, to be written back; on any thread, without waiting.
    func recordRefused(_ status: NotificationStatus) {
        record {
            $0.refused.append((status.id, ServeJournal.Status(state: status.state.rawValue, statusCode: status.statusCode,
                                                              reason: status.reason, timestamp: status.timestamp,
                                                              tokenProblem: status.tokenProblem)))
        }
    }

    private func record(_ change: (inout SettlementQueue) -> Void) {
        let leads = settlements.withLock { queue in
            change(&queue)
            defer { queue.writing = true }
            return !queue.writing
        }
        if leads { Task { await writeSettlements() } }
    }

    /// Writes back the recorded ends, each time all those recorded meanwhile in one
    /// transaction, until none is left.
    private func writeSettlements() async {
        var failures = 0
        while true {
            let (accepted, refused, waiters) = settlements.withLock { queue in
                defer { (queue.accepted, queue.refused) = ([], []) }
                var waiters: [CheckedContinuation<Void, Never>] = []
                if queue.accepted.isEmpty && queue.refused.isEmpty {
                    queue.writing = false
                    swap(&waiters, &queue.flushed)
                }
                return (queue.accepted, queue.refused, waiters)
            }
            guard !accepted.isEmpty || !refused.isEmpty else { return waiters.forEach { $0.resume() } }
            do {
                try await writing.settle(accepted: accepted, refused: refused, registry: registry)
                failures = 0
            } catch {
                failures += 1
                // Kept for the next attempt; after three, dropped: their rows stay pending
                // and are sent again by the instance that takes them over (counted).
                guard failures < 3 else {
                    logger.error("notification statuses not written back to the journal", metadata: [
                        "count": "\(accepted.count + refused.count)", "error": "\(error)"])
                    failures = 0
                    continue
                }
                settlements.withLock { queue in
                    queue.accepted += accepted
                    queue.refused += refused
                }
                try? await Task.sleep(for: .seconds(1))
            }
        }
    }

    /// Returns once every end recorded so far is written back (or given up on).
    func flushed() async {
        await withCheckedContinuation { continuation in
            let now = settlements.withLock { queue -> Bool in
                guard queue.writing else { return true }
                queue.flushed.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }

    // MARK: Leases and lookups

    /// Renews the leases on what this instance holds, every third of a lease, until cancelled.
    private func renewLeases() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: leaseDuration / 3)
            if Task.isCancelled { return }
            do { try await upkeep.renew(owner: instance, for: leaseDuration) } catch {
                logger.warning("the journal's leases were not renewed; another serve may take them over",
                               metadata: ["error": "\(error)"])
            }
        }
    }

    /// The status the journal holds for `id`, nil when it holds none.
    func status(of id: APNsID) async throws(CampaignStoreError) -> NotificationStatus? {
        try await upkeep.statuses(of: [id.description])[id.description].map { Self.status(id, $0) }
    }

    static func status(_ id: APNsID, _ status: ServeJournal.Status) -> NotificationStatus {
        NotificationStatus(id: id.description, state: NotificationStatus.State(rawValue: status.state) ?? .pending,
                           statusCode: status.statusCode, reason: status.reason, timestamp: status.timestamp,
                           tokenProblem: status.tokenProblem)
    }
}
