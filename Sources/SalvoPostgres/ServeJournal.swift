import NIOCore
import PostgresNIO

/// `salvo serve --db`'s journal: every notification taken, written before its request is
/// answered 202, with its state until final and `--status-retention` after.
///
/// Leases work as a campaign chunk's do, a row at a time: the instance that took a
/// notification holds it, renews all it holds in one statement, and writes its end back;
/// a row whose lease expired (its instance died, or was killed) is taken over by any
/// instance, which sends it again and counts it as a possible duplicate. Leases are judged
/// by the database's clock, the one every instance shares (see `CampaignStore`).
public struct ServeJournal: Sendable {
    let database: CampaignDatabase

    /// A journal on `database`; give each concurrent user a connection of its own (a
    /// connection runs one query at a time).
    public init(_ database: CampaignDatabase) {
        self.database = database
    }

    /// Where a notification is, as the journal holds it.
    public struct Status: Sendable, Equatable {
        /// `pending`, `accepted`, `rejected` or `failed`.
        public var state: String
        /// A rejection's HTTP status (or binary status byte).
        public var statusCode: Int?
        /// Apple's reason for a rejection, or why it failed.
        public var reason: String?
        /// For a 410: since when the token is invalid (ms since 1970).
        public var timestamp: Int64?
        /// For a rejection: whether the token itself is at fault.
        public var tokenProblem: Bool?

        public init(state: String, statusCode: Int? = nil, reason: String? = nil, timestamp: Int64? = nil,
                    tokenProblem: Bool? = nil) {
            self.state = state
            self.statusCode = statusCode
            self.reason = reason
            self.timestamp = timestamp
            self.tokenProblem = tokenProblem
        }
    }

    /// A notification to journal: its apns-id (canonical text) and its JSON.
    public struct Entry: Sendable {
        public var id: String
        public var json: [UInt8]

        public init(id: String, json: [UInt8]) {
            self.id = id
            self.json = json
        }
    }

    /// Appends `entries` pending, leased by `owner` for `leaseDuration`, in one statement
    /// (one commit). Returns the ids the journal held already (taken before, here or by
    /// another instance): those are not appended.
    public func append(_ entries: [Entry], owner: String, leaseDuration: Duration) async throws(CampaignStoreError) -> Set<String> {
        let seconds = leaseDuration / .seconds(1)
        do {
            let rows = try await database.query("""
                INSERT INTO serve_notifications (apns_id, body, lease_owner, lease_expires_at)
                SELECT n.id, n.body, \(owner), now() + make_interval(secs => \(seconds))
                FROM unnest(\(entries.map(\.id)), \(entries.map { ByteBuffer(bytes: $0.json) })) AS n(id, body)
                ON CONFLICT (apns_id) DO NOTHING
                RETURNING apns_id
                """)
            var held = Set(entries.map(\.id))
            for try await id in rows.decode(String.self) { held.remove(id) }
            return held
        } catch {
            throw database.describe(error, while: "journaling \(entries.count) notifications")
        }
    }

    /// The statuses of those of `ids` the journal holds.
    public func statuses(of ids: [String]) async throws(CampaignStoreError) -> [String: Status] {
        do {
            let rows = try await database.query("""
                SELECT apns_id, state, status_code, reason, apns_timestamp, token_problem FROM serve_notifications
                WHERE apns_id = ANY(\(ids))
                """)
            var statuses: [String: Status] = [:]
            for try await (id, state, code, reason, timestamp, problem)
                in rows.decode((String, String, Int32?, String?, Int64?, Bool).self)
            {
                statuses[id] = Status(state: state, statusCode: code.map(Int.init), reason: reason, timestamp: timestamp,
                                      tokenProblem: state == "rejected" ? problem : nil)
            }
            return statuses
        } catch {
            throw database.describe(error, while: "reading notification statuses")
        }
    }

    /// The device registry that refusals prune: its environment, and the topic of the
    /// notifications that name none.
    public struct Registry: Sendable {
        public var environment: RegistryScope.Environment
        public var defaultTopic: String?

        public init(environment: RegistryScope.Environment, defaultTopic: String?) {
            self.environment = environment
            self.defaultTopic = defaultTopic
        }
    }

    /// Writes notifications' ends, in one transaction, releasing their leases: the refused
    /// ones (`refused`, each with its status) first, then `accepted` (ids), so that an id in
    /// both ends refused. A notification already final keeps its first end. With `registry`,
    /// the tokens of those refused for the token's own fault (410, BadDeviceToken) are
    /// invalidated there too, as campaigns do (`DeviceRegistry.invalidate`): the token and
    /// topic read from the notification's journaled JSON.
    public func settle(accepted: [String], refused: [(id: String, status: Status)],
                       registry: Registry? = nil) async throws(CampaignStoreError) {
        let dead = refused.filter { $0.status.tokenProblem == true }
        do {
            // Another instance's write-back can lock the same device rows in another order.
            try await database.transaction(retryingConflicts: 3) { database in
                if !refused.isEmpty {
                    try await database.query("""
                        UPDATE serve_notifications s SET state = f.state, status_code = NULLIF(f.code, -1),
                            reason = NULLIF(f.reason, ''), apns_timestamp = NULLIF(f.at, -1), token_problem = f.problem,
                            final_at = now(), lease_owner = NULL, lease_expires_at = NULL
                        FROM unnest(\(refused.map(\.id)), \(refused.map(\.status.state)),
                                    \(refused.map { Int32($0.status.statusCode ?? -1) }), \(refused.map { $0.status.reason ?? "" }),
                                    \(refused.map { $0.status.timestamp ?? -1 }), \(refused.map { $0.status.tokenProblem ?? false }))
                            AS f(id, state, code, reason, at, problem)
                        WHERE s.apns_id = f.id AND s.state = 'pending'
                        """)
                }
                if let registry, !dead.isEmpty {
                    try await database.query("""
                        UPDATE devices d
                        SET invalidated_at = CASE WHEN f.at < 0 THEN now() ELSE to_timestamp(f.at / 1000.0) END,
                            invalid_reason = f.reason
                        FROM unnest(\(dead.map(\.id)), \(dead.map { $0.status.reason ?? "" }), \(dead.map { $0.status.timestamp ?? -1 }))
                            AS f(id, reason, at)
                        JOIN serve_notifications s ON s.apns_id = f.id
                        WHERE d.token = lower(convert_from(s.body, 'UTF8')::jsonb ->> 'token')
                          AND d.topic = coalesce(convert_from(s.body, 'UTF8')::jsonb ->> 'topic', \(registry.defaultTopic))
                          AND d.environment = \(registry.environment.rawValue)
                          AND d.invalidated_at IS NULL AND (f.at < 0 OR d.last_seen_at <= to_timestamp(f.at / 1000.0))
                        """)
                }
                if !accepted.isEmpty {
                    try await database.query("""
                        UPDATE serve_notifications SET state = 'accepted', final_at = now(), lease_owner = NULL,
                            lease_expires_at = NULL
                        WHERE apns_id = ANY(\(accepted)) AND state = 'pending'
                        """)
                }
            }
        } catch {
            throw database.describe(error, while: "writing back \(accepted.count + refused.count) notification statuses")
        }
    }

    /// Extends by `duration` the lease on every pending notification `owner` holds; returns
    /// how many it holds.
    @discardableResult
    public func renew(owner: String, for duration: Duration) async throws(CampaignStoreError) -> Int {
        let seconds = duration / .seconds(1)
        do {
            // Rows a write-back holds are skipped: they are about to be final, and waiting for
            // them in whatever order the scan meets them can deadlock with that transaction.
            let rows = try await database.query("""
                WITH held AS (
                    SELECT apns_id FROM serve_notifications
                    WHERE lease_owner = \(owner) AND state = 'pending' FOR UPDATE SKIP LOCKED),
                renewed AS (
                    UPDATE serve_notifications s SET lease_expires_at = now() + make_interval(secs => \(seconds))
                    FROM held WHERE s.apns_id = held.apns_id RETURNING 1)
                SELECT count(*) FROM renewed
                """)
            for try await count in rows.decode(Int64.self) { return Int(count) }
            return 0
        } catch {
            throw database.describe(error, while: "renewing the leases of serve instance \(owner)")
        }
    }

    /// Lets every pending notification `owner` holds be taken over at once (it stops
    /// without having sent them).
    public func release(owner: String) async throws(CampaignStoreError) {
        do {
            try await database.query("""
                UPDATE serve_notifications SET lease_expires_at = now() WHERE lease_owner = \(owner) AND state = 'pending'
                """)
        } catch {
            throw database.describe(error, while: "releasing the leases of serve instance \(owner)")
        }
    }

    /// Leases to `owner`, for `duration`, up to `limit` pending notifications whose lease
    /// expired, oldest first, skipping those another instance is taking right now; returns
    /// them. Each may have been sent by its holder: the caller counts them as possible
    /// duplicates, and the row counts its takeovers.
    public func takeOver(owner: String, for duration: Duration, limit: Int) async throws(CampaignStoreError) -> [Entry] {
        let seconds = duration / .seconds(1)
        do {
            let rows = try await database.query("""
                WITH expired AS (
                    SELECT apns_id FROM serve_notifications
                    WHERE state = 'pending' AND lease_expires_at < now()
                    ORDER BY lease_expires_at LIMIT \(limit)
                    FOR UPDATE SKIP LOCKED)
                UPDATE serve_notifications s
                SET lease_owner = \(owner), lease_expires_at = now() + make_interval(secs => \(seconds)), takeovers = s.takeovers + 1
                FROM expired WHERE s.apns_id = expired.apns_id
                RETURNING s.apns_id, s.body
                """)
            var entries: [Entry] = []
            for try await (id, body) in rows.decode((String, ByteBuffer).self) {
                entries.append(Entry(id: id, json: Array(body.readableBytesView)))
            }
            return entries
        } catch {
            throw database.describe(error, while: "taking over notifications of lapsed serve instances")
        }
    }

    /// Deletes up to `limit` notifications final for longer than `age`; returns how many.
    public func forget(finalFor age: Duration, limit: Int) async throws(CampaignStoreError) -> Int {
        let seconds = age / .seconds(1)
        do {
            let rows = try await database.query("""
                WITH gone AS (
                    DELETE FROM serve_notifications WHERE apns_id IN (
                        SELECT apns_id FROM serve_notifications
                        WHERE state <> 'pending' AND final_at < now() - make_interval(secs => \(seconds)) LIMIT \(limit))
                    RETURNING 1)
                SELECT count(*) FROM gone
                """)
            for try await count in rows.decode(Int64.self) { return Int(count) }
            return 0
        } catch {
            throw database.describe(error, while: "deleting notification statuses older than \(age)")
        }
    }
}
