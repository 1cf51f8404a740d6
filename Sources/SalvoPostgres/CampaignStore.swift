import Foundation
import PostgresNIO
import SalvoEngine
import SalvoWire

/// Campaigns in PostgreSQL: created once, then sent by any number of workers that lease
/// their chunks.
///
/// Leases are judged by the database's clock (`now()`), the one clock every worker on
/// every machine shares, so that no two machines' clocks need to agree. `clockOffset` is
/// added to it in every lease decision this store makes: zero in production; a test moves
/// one worker's idea of the time forward to see another's lease expire, without waiting.
public struct CampaignStore: Sendable {
    let database: CampaignDatabase
    /// Added to the database's `now()` when this store takes, renews or judges a lease.
    public var clockOffset: Duration

    /// A store on `database`, judging leases at the database's time plus `clockOffset`.
    public init(_ database: CampaignDatabase, clockOffset: Duration = .zero) {
        self.database = database
        self.clockOffset = clockOffset
    }

    private var offsetSeconds: Double { clockOffset / .seconds(1) }

    // MARK: Campaigns

    /// A campaign as workers see it.
    public struct Campaign: Sendable, Equatable {
        /// Its row id.
        public var id: Int64
        /// Its name.
        public var name: String
        /// The one payload of every notification, or nil: one per item.
        public var payload: String?
        /// The registry scope its rejections prune, or nil.
        public var registry: RegistryScope?
        /// Notifications in it.
        public var total: Int
        /// When it was cancelled, if it was.
        public var isCancelled: Bool
    }

    /// The campaign named `name`.
    ///
    /// - Throws: `CampaignStoreError` when there is none by that name.
    public func campaign(named name: String) async throws(CampaignStoreError) -> Campaign {
        do {
            let rows = try await database.query("""
                SELECT id, payload, topic, environment, total, cancelled_at IS NOT NULL FROM campaigns WHERE name = \(name)
                """)
            for try await (id, payload, topic, environment, total, cancelled)
                in rows.decode((Int64, String?, String?, String?, Int64, Bool).self)
            {
                var registry: RegistryScope?
                if let topic, let environment = environment.flatMap(RegistryScope.Environment.init(rawValue:)) {
                    registry = RegistryScope(topic: topic, environment: environment)
                }
                return Campaign(id: id, name: name, payload: payload, registry: registry, total: Int(total),
                                isCancelled: cancelled)
            }
        } catch {
            throw database.describe(error, while: "reading campaign \(name)")
        }
        throw CampaignStoreError("no campaign named \(name) in \(database.url) (salvo campaign create makes one)")
    }

    /// Marks the campaign cancelled: workers stop at their next lease renewal, after what
    /// they sent is final and counted. Returns whether it was running (not cancelled before).
    public func cancel(_ name: String) async throws(CampaignStoreError) -> Bool {
        _ = try await campaign(named: name)
        do {
            let rows = try await database.query("""
                UPDATE campaigns SET cancelled_at = now() WHERE name = \(name) AND cancelled_at IS NULL RETURNING id
                """)
            for try await _ in rows.decode(Int64.self) { return true }
            return false
        } catch {
            throw database.describe(error, while: "cancelling campaign \(name)")
        }
    }

    // MARK: Leases

    /// A chunk a worker holds: the items after `completedThrough` up to `lastSequence`.
    public struct Lease: Sendable, Equatable {
        /// The campaign.
        public var campaign: Int64
        /// The chunk's first sequence (its key).
        public var firstSequence: Int64
        /// Its last sequence.
        public var lastSequence: Int64
        /// The checkpoint the chunk resumes after.
        public var completedThrough: Int64
        /// Bumped at every lease, so a worker that lost a chunk cannot write over the holder
        /// that took it, even under the same worker name.
        public var generation: Int64
        /// Whether another worker's lease on it had expired: what that worker sent after the
        /// checkpoint may now be sent twice (counted as possible duplicates).
        public var isTakeover: Bool
    }

    /// Leases the first chunk that is neither done nor validly leased, skipping those that
    /// other workers are leasing right now (`FOR UPDATE SKIP LOCKED`). A chunk whose lease
    /// expired is taken over: everything after its checkpoint is counted as possible
    /// duplicates, since its holder may have sent it. Nil when nothing is free.
    public func lease(_ campaign: Int64, worker: String, for duration: Duration) async throws(CampaignStoreError) -> Lease? {
        let offset = offsetSeconds, seconds = duration / .seconds(1)
        do {
            let rows = try await database.query("""
                WITH free AS (
                    SELECT k.campaign_id, k.first_seq, k.lease_owner IS NOT NULL AS expired FROM campaign_chunks k JOIN campaigns c ON c.id = k.campaign_id
                    WHERE k.campaign_id = \(campaign) AND NOT k.done AND c.cancelled_at IS NULL
                      AND (k.lease_owner IS NULL OR k.lease_expires_at < now() + make_interval(secs => \(offset)))
                    ORDER BY k.first_seq LIMIT 1
                    FOR UPDATE OF k SKIP LOCKED)
                UPDATE campaign_chunks k
                SET possible_duplicates = k.possible_duplicates
                        + CASE WHEN k.lease_owner IS NULL THEN 0 ELSE k.last_seq - k.completed_through END,
                    takeover_duplicates = k.takeover_duplicates
                        + CASE WHEN k.lease_owner IS NULL THEN 0 ELSE k.last_seq - k.completed_through END,
                    takeovers = k.takeovers + CASE WHEN k.lease_owner IS NULL THEN 0 ELSE 1 END,
                    lease_owner = \(worker), lease_generation = k.lease_generation + 1,
                    lease_expires_at = now() + make_interval(secs => \(offset + seconds)),
                    started_at = coalesce(k.started_at, now())
                FROM free
                WHERE k.campaign_id = free.campaign_id AND k.first_seq = free.first_seq
                RETURNING k.first_seq, k.last_seq, k.completed_through, k.lease_generation, free.expired
                """)
            for try await (first, last, completed, generation, takeover) in rows.decode((Int64, Int64, Int64, Int64, Bool).self) {
                return Lease(campaign: campaign, firstSequence: first, lastSequence: last, completedThrough: completed,
                             generation: generation, isTakeover: takeover)
            }
            return nil
        } catch {
            throw database.describe(error, while: "leasing a chunk")
        }
    }

    /// What a renewal found.
    public enum Renewal: Sendable, Equatable {
        /// The lease is extended.
        case held
        /// Another worker has the chunk now (this lease expired and was taken over).
        case lost
        /// The campaign was cancelled: stop, and write back what was sent.
        case cancelled
    }

    /// Extends `lease` by `duration`, if it is still this worker's.
    public func renew(_ lease: Lease, worker: String, for duration: Duration) async throws(CampaignStoreError) -> Renewal {
        let offset = offsetSeconds, seconds = duration / .seconds(1)
        do {
            let rows = try await database.query("""
                UPDATE campaign_chunks k SET lease_expires_at = now() + make_interval(secs => \(offset + seconds))
                FROM campaigns c
                WHERE k.campaign_id = \(lease.campaign) AND k.first_seq = \(lease.firstSequence) AND c.id = k.campaign_id
                  AND k.lease_owner = \(worker) AND k.lease_generation = \(lease.generation)
                RETURNING c.cancelled_at IS NOT NULL
                """)
            for try await cancelled in rows.decode(Bool.self) { return cancelled ? .cancelled : .held }
            return .lost
        } catch {
            throw database.describe(error, while: "renewing the lease on chunk \(lease.firstSequence)")
        }
    }

    /// Whether chunks of the campaign are left: not done, and the campaign not cancelled.
    public func hasUnfinishedChunks(_ campaign: Int64) async throws(CampaignStoreError) -> Bool {
        do {
            let rows = try await database.query("""
                SELECT EXISTS (SELECT 1 FROM campaign_chunks k JOIN campaigns c ON c.id = k.campaign_id
                               WHERE k.campaign_id = \(campaign) AND NOT k.done AND c.cancelled_at IS NULL)
                """)
            for try await left in rows.decode(Bool.self) { return left }
            return false
        } catch {
            throw database.describe(error, while: "reading the campaign's chunks")
        }
    }

    // MARK: Items

    /// The topics the campaign's items name (nil: none, the worker's), with how many name
    /// each and the first sequence that does: what a worker with credentials per topic
    /// checks before it sends anything.
    public func itemTopics(of campaign: Campaign) async throws(CampaignStoreError)
        -> [(topic: String?, count: Int, firstSequence: Int64)]
    {
        do {
            let rows = try await database.query("""
                SELECT topic, count(*), min(seq) FROM campaign_items WHERE campaign_id = \(campaign.id) GROUP BY topic
                """)
            var topics: [(topic: String?, count: Int, firstSequence: Int64)] = []
            for try await (topic, count, first) in rows.decode((String?, Int64, Int64).self) {
                topics.append((topic, Int(count), first))
            }
            return topics
        } catch {
            throw database.describe(error, while: "reading the campaign's topics")
        }
    }

    /// The items of a leased chunk after its checkpoint, as a source for the sender, and the
    /// sequence of each (index i of the list is `sequences[i]`; the sequences of a
    /// campaign with a payload per item have gaps where invalidated tokens were left out).
    public func items(of lease: Lease, in campaign: Campaign) async throws(CampaignStoreError)
        -> (list: NotificationList, sequences: [Int64])
    {
        do {
            if let payload = campaign.payload, let tokens = try await packedTokens(of: lease, in: campaign) {
                return (NotificationList(tokens: tokens, payload: Array(payload.utf8)),
                        Array((lease.completedThrough + 1)..<(lease.lastSequence + 1)))
            }
            // Row by row: a payload per item, or a campaign created at schema version 1.
            var sequences: [Int64] = []
            var items: [NotificationList.Item] = []
            let rows = try await database.query("""
                SELECT seq, token, payload, expiry, priority, push_type, topic, collapse_id, apns_id FROM campaign_items
                WHERE campaign_id = \(lease.campaign) AND seq > \(lease.completedThrough) AND seq <= \(lease.lastSequence)
                ORDER BY seq
                """)
            for try await (seq, hex, payload, expiry, priority, pushType, topic, collapseID, apnsID)
                in rows.decode((Int64, String, String?, Int64?, Int16?, String?, String?, String?, String?).self)
            {
                sequences.append(seq)
                items.append(.init(token: try Self.token(hex, sequence: seq, in: campaign),
                                   payload: Array((payload ?? campaign.payload ?? "").utf8),
                                   expiry: expiry.map { UInt32(clamping: $0) }, priority: priority.map { UInt8(clamping: $0) },
                                   pushType: try pushType.map { try Self.pushType($0, sequence: seq, in: campaign) },
                                   topic: topic, collapseID: collapseID,
                                   apnsID: try apnsID.map { try Self.apnsID($0, sequence: seq, in: campaign) }))
            }
            return (NotificationList(items), sequences)
        } catch {
            throw database.describe(error, while: "reading chunk \(lease.firstSequence)")
        }
    }

    /// The tokens of a packed chunk after its checkpoint, or nil when the chunk is not
    /// packed. One value, not a row per token: decoding a row costs far more than a token,
    /// and the server reads only the chunk's TOAST pages from the checkpoint on.
    private func packedTokens(of lease: Lease, in campaign: Campaign) async throws -> [DeviceToken]? {
        let width = DeviceToken.byteCount
        // substring's position is an integer: chunks are at most 1,000,000 tokens.
        let start = Int32((lease.completedThrough - lease.firstSequence + 1) * Int64(width) + 1)
        let rows = try await database.query("""
            SELECT substring(tokens FROM \(start)) FROM campaign_chunks
            WHERE campaign_id = \(lease.campaign) AND first_seq = \(lease.firstSequence)
            """)
        for try await packed in rows.decode(ByteBuffer?.self) {
            guard let packed else { return nil }
            let count = Int(lease.lastSequence - lease.completedThrough)
            guard packed.readableBytes == width * count else {
                throw CampaignStoreError("campaign \(campaign.name) chunk \(lease.firstSequence): \(packed.readableBytes) bytes "
                                         + "of tokens after item \(lease.completedThrough), not \(width) for each of "
                                         + "\(count) items", isUsageError: false)
            }
            return packed.withUnsafeReadableBytes { raw in
                (0..<count).map { index in
                    // Exactly `width` bytes each (checked above): cannot throw.
                    try! DeviceToken(bytes: UnsafeRawBufferPointer(rebasing: raw[(index * width)..<((index + 1) * width)]))
                }
            }
        }
        return nil
    }

    private static func pushType(_ name: String, sequence: Int64, in campaign: Campaign) throws -> APNsPushType {
        guard let type = APNsPushType.allCases.first(where: { $0.name == name }) else {
            throw CampaignStoreError("campaign \(campaign.name) item \(sequence): push type \(name) is none APNs knows",
                                     isUsageError: false)
        }
        return type
    }

    private static func apnsID(_ text: String, sequence: Int64, in campaign: Campaign) throws -> APNsID {
        guard let id = APNsID(text) else {
            throw CampaignStoreError("campaign \(campaign.name) item \(sequence): apns-id \(text) is not a UUID", isUsageError: false)
        }
        return id
    }

    private static func token(_ hex: String, sequence: Int64, in campaign: Campaign) throws -> DeviceToken {
        do { return try DeviceToken(hex: hex) } catch {
            throw CampaignStoreError("campaign \(campaign.name) item \(sequence): token \(hex): \(error)", isUsageError: false)
        }
    }

    // MARK: Write-back

    /// What a worker writes back at the end of its turn on a chunk.
    public struct ChunkOutcome: Sendable, Equatable {
        /// Every item up to this sequence is final and counted here.
        public var completedThrough: Int64
        /// Whether that is the whole chunk.
        public var isDone: Bool
        /// The counts of the items sent in this turn.
        public var accepted = 0, rejected = 0, failed = 0, resent = 0, possibleDuplicates = 0
        /// Rejections by reason name, and failures by reason.
        public var rejectedByReason: [String: Int] = [:], failedByReason: [String: Int] = [:]
        /// With credentials per topic: the counts by topic.
        public var byTopic: [String: TopicCounts] = [:]
        /// The rejected items.
        public var rejections: [RejectedItem] = []

        /// An outcome up to `completedThrough`.
        public init(completedThrough: Int64, isDone: Bool) {
            self.completedThrough = completedThrough
            self.isDone = isDone
        }
    }

    /// A rejected notification, as the rejected list and the registry record it.
    public struct RejectedItem: Sendable, Equatable {
        /// Its campaign sequence.
        public var sequence: Int64
        /// The token, hex.
        public var token: String
        /// The binary status byte or the HTTP status.
        public var status: Int
        /// Apple's reason or the status's name.
        public var reason: String
        /// For 410: since when the token is invalid (ms since 1970).
        public var timestamp: Int64?
        /// Whether the token itself is dead (`Rejection.isTokenProblem`).
        public var isTokenProblem: Bool

        /// A rejected item of sequence `sequence` and `token`, for `rejection`.
        public init(sequence: Int64, token: DeviceToken, rejection: Rejection) {
            self.sequence = sequence
            self.token = token.hex
            status = rejection.statusCode
            reason = rejection.reasonName
            timestamp = rejection.timestamp
            isTokenProblem = rejection.isTokenProblem
        }
    }

    /// Writes a worker's turn on a chunk back in one transaction: the counts, the rejected
    /// items, the checkpoint, the worker's progress, and the registry's invalidations; then
    /// releases the lease. Only while the lease is still this worker's (same generation):
    /// returns false, writing nothing, when another worker has taken the chunk over.
    /// `speaking`: the worker's protocol, `h2` or `binary`, for `status`'s wording.
    public func writeBack(_ outcome: ChunkOutcome, for lease: Lease, of campaign: Campaign, worker: String,
                          speaking wireProtocol: String? = nil) async throws(CampaignStoreError) -> Bool
    {
        let o = outcome
        let rejections = o.rejections
        do {
            // Other workers' write-backs invalidate the same device rows in another order.
            return try await database.transaction(retryingConflicts: 3) { database in
                let updated = try await database.query("""
                    UPDATE campaign_chunks SET
                        completed_through = \(o.completedThrough), done = \(o.isDone),
                        accepted = accepted + \(o.accepted), rejected = rejected + \(o.rejected), failed = failed + \(o.failed),
                        resent = resent + \(o.resent), possible_duplicates = possible_duplicates + \(o.possibleDuplicates),
                        rejected_by_reason = (SELECT coalesce(jsonb_object_agg(key, total), '{}'::jsonb) FROM (
                            SELECT key, sum(value::bigint) AS total FROM (
                                SELECT * FROM jsonb_each_text(rejected_by_reason)
                                UNION ALL SELECT * FROM jsonb_each_text(\(Self.json(o.rejectedByReason))::jsonb)
                            ) AS counts GROUP BY key) AS sums),
                        failed_by_reason = (SELECT coalesce(jsonb_object_agg(key, total), '{}'::jsonb) FROM (
                            SELECT key, sum(value::bigint) AS total FROM (
                                SELECT * FROM jsonb_each_text(failed_by_reason)
                                UNION ALL SELECT * FROM jsonb_each_text(\(Self.json(o.failedByReason))::jsonb)
                            ) AS counts GROUP BY key) AS sums),
                        outcomes_by_topic = (SELECT coalesce(jsonb_object_agg(key, total), '{}'::jsonb) FROM (
                            SELECT key, sum(value::bigint) AS total FROM (
                                SELECT * FROM jsonb_each_text(outcomes_by_topic)
                                UNION ALL SELECT * FROM jsonb_each_text(\(Self.json(TopicOutcomeKeys.flatten(o.byTopic)))::jsonb)
                            ) AS counts GROUP BY key) AS sums),
                        lease_owner = NULL, lease_expires_at = NULL, last_worker = \(worker), written_at = now(),
                        finished_at = CASE WHEN \(o.isDone) THEN now() ELSE finished_at END
                    WHERE campaign_id = \(lease.campaign) AND first_seq = \(lease.firstSequence)
                      AND lease_owner = \(worker) AND lease_generation = \(lease.generation)
                    RETURNING first_seq
                    """)
                var held = false
                for try await _ in updated.decode(Int64.self) { held = true }
                guard held else { return false }
                if !rejections.isEmpty {
                    try await database.query("""
                        INSERT INTO campaign_rejections (campaign_id, seq, token, status, reason, apns_timestamp)
                        SELECT \(lease.campaign), r.seq, r.token, r.status, r.reason, NULLIF(r.at, -1)
                        FROM unnest(\(rejections.map(\.sequence)), \(rejections.map(\.token)), \(rejections.map { Int32($0.status) }),
                                    \(rejections.map(\.reason)), \(rejections.map { $0.timestamp ?? -1 })) AS r(seq, token, status, reason, at)
                        ON CONFLICT (campaign_id, seq) DO UPDATE SET status = excluded.status, reason = excluded.reason,
                            apns_timestamp = excluded.apns_timestamp, rejected_at = excluded.rejected_at
                        """)
                }
                if let registry = campaign.registry {
                    let dead = rejections.filter(\.isTokenProblem)
                    if !dead.isEmpty {
                        try await DeviceRegistry.invalidate(tokens: dead.map(\.token), reasons: dead.map(\.reason),
                                                            since: dead.map(\.timestamp), in: registry, database: database)
                    }
                }
                let final = o.accepted + o.rejected + o.failed
                try await database.query("""
                    INSERT INTO campaign_workers (campaign_id, worker, chunks, final, accepted, protocol)
                    VALUES (\(lease.campaign), \(worker), \(o.isDone ? 1 : 0), \(final), \(o.accepted), \(wireProtocol))
                    ON CONFLICT (campaign_id, worker) DO UPDATE SET chunks = campaign_workers.chunks + excluded.chunks,
                        final = campaign_workers.final + excluded.final, accepted = campaign_workers.accepted + excluded.accepted,
                        protocol = coalesce(excluded.protocol, campaign_workers.protocol), last_seen_at = now()
                    """)
                return true
            }
        } catch {
            throw database.describe(error, while: "writing back chunk \(lease.firstSequence)")
        }
    }

    /// A count dictionary as a JSON object.
    static func json(_ counts: [String: Int]) -> String {
        let data = (try? JSONSerialization.data(withJSONObject: counts, options: [.sortedKeys])) ?? Data("{}".utf8)
        return String(decoding: data, as: UTF8.self)
    }
}
