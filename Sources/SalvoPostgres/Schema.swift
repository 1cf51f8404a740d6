import PostgresNIO

/// The tables campaigns and the device registry live in, and their version.
///
/// `salvo_schema_version` holds one row: the version this database was last brought to. A
/// Salvo meets an older version by creating what is missing, and refuses a newer one (a
/// newer Salvo may have changed what the tables mean).
enum Schema {
    /// The version this Salvo writes. Not raised by a new table (`salvo serve --db`'s
    /// journal): `statements` create it, and a Salvo that does not know it still reads the
    /// others as they were, so it need not refuse the database.
    static let version: Int32 = 4

    /// Creates what is missing, under a transaction-scoped advisory lock so that workers
    /// starting together do not race; refuses a newer schema with its version.
    static func prepare(_ database: CampaignDatabase) async throws {
        try await database.transaction { database in
            // Any constant key: it only has to be the same for every Salvo.
            try await database.query("SELECT pg_advisory_xact_lock(\(Int64(0x5341_4C56_4F00_0001)))")
            try await database.query("CREATE TABLE IF NOT EXISTS salvo_schema_version (version integer NOT NULL)")
            let rows = try await database.query("SELECT max(version) FROM salvo_schema_version")
            var found: Int32?
            for try await version in rows.decode(Int32?.self) { found = version }
            if let found, found > version {
                throw CampaignStoreError("the database \(database.url) has Salvo schema version \(found); this salvo knows "
                                         + "versions up to \(version): use a newer salvo")
            }
            for statement in statements { try await database.query(PostgresQuery(unsafeSQL: statement)) }
            for (target, statements) in upgrades where target > found ?? 0 {
                for statement in statements { try await database.query(PostgresQuery(unsafeSQL: statement)) }
            }
            if found == nil {
                try await database.query("INSERT INTO salvo_schema_version (version) VALUES (\(version))")
            } else if found! < version {
                try await database.query("UPDATE salvo_schema_version SET version = \(version)")
            }
        }
    }

    /// What brings a database from the version before each to it, run after
    /// `statements` (also on a new database, so written to be idempotent), in order.
    /// Constant text, no input in it.
    private static let upgrades: [(version: Int32, statements: [String])] = [
        // Packed chunks. Their tokens are random bytes: compressing them is work for
        // nothing, and stored out of line uncompressed (EXTERNAL), a resumed chunk's
        // `substring` reads only the TOAST pages after its checkpoint. The chunk's row is
        // updated at every lease and write-back; its tokens, out of line, are not copied.
        (2, ["ALTER TABLE campaign_chunks ADD COLUMN IF NOT EXISTS tokens bytea",
             "ALTER TABLE campaign_chunks ALTER COLUMN tokens SET STORAGE EXTERNAL"]),
        // A JSONL line's own HTTP/2 headers; the possible duplicates of takeovers apart from
        // the sender's; a chunk's last write-back (the campaign's rate is over its active
        // time); the protocol each worker speaks (for `campaign status`'s wording).
        (3, ["ALTER TABLE campaign_items ADD COLUMN IF NOT EXISTS push_type text",
             "ALTER TABLE campaign_items ADD COLUMN IF NOT EXISTS topic text",
             "ALTER TABLE campaign_items ADD COLUMN IF NOT EXISTS collapse_id text",
             "ALTER TABLE campaign_items ADD COLUMN IF NOT EXISTS apns_id text",
             "ALTER TABLE campaign_chunks ADD COLUMN IF NOT EXISTS takeover_duplicates bigint NOT NULL DEFAULT 0",
             "ALTER TABLE campaign_chunks ADD COLUMN IF NOT EXISTS written_at timestamptz",
             "ALTER TABLE campaign_workers ADD COLUMN IF NOT EXISTS protocol text"]),
        // The counts by topic of campaigns sent with credentials per topic.
        (4, ["ALTER TABLE campaign_chunks ADD COLUMN IF NOT EXISTS outcomes_by_topic jsonb NOT NULL DEFAULT '{}'"]),
    ]

    /// The tables as this version has them. Constant text, no input in it.
    private static let statements = [
        """
        CREATE TABLE IF NOT EXISTS campaigns (
            id bigserial PRIMARY KEY,
            name text NOT NULL UNIQUE,
            -- The payload of every notification of a --tokens or --from-registry campaign; NULL: one per item.
            payload text,
            -- The registry's app and environment the campaign's tokens belong to; NULL: --no-registry.
            topic text,
            environment text,
            total bigint NOT NULL,
            chunk_size integer NOT NULL,
            created_at timestamptz NOT NULL DEFAULT now(),
            cancelled_at timestamptz
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS campaign_items (
            campaign_id bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
            seq bigint NOT NULL,
            token text NOT NULL,
            payload text,
            expiry bigint,
            priority smallint,
            -- The line's own HTTP/2 headers (push_type, topic, collapse_id, apns_id); NULL: the worker's.
            push_type text,
            topic text,
            collapse_id text,
            apns_id text,
            PRIMARY KEY (campaign_id, seq)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS campaign_chunks (
            campaign_id bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
            first_seq bigint NOT NULL,
            last_seq bigint NOT NULL,
            -- The checkpoint: every item up to it is final and counted below.
            completed_through bigint NOT NULL,
            -- A campaign with one payload: the chunk's tokens, 32 bytes each in sequence
            -- order, first_seq to last_seq without gaps; its items are not in campaign_items.
            -- NULL: the items are rows of campaign_items (one payload per item, or a
            -- campaign created at schema version 1).
            tokens bytea,
            done boolean NOT NULL DEFAULT false,
            lease_owner text,
            lease_generation bigint NOT NULL DEFAULT 0,
            lease_expires_at timestamptz,
            takeovers integer NOT NULL DEFAULT 0,
            accepted bigint NOT NULL DEFAULT 0,
            rejected bigint NOT NULL DEFAULT 0,
            failed bigint NOT NULL DEFAULT 0,
            resent bigint NOT NULL DEFAULT 0,
            possible_duplicates bigint NOT NULL DEFAULT 0,
            -- Of possible_duplicates, those counted when the chunk was taken over from a
            -- worker whose lease expired (the rest: the senders' resends after silent drops).
            takeover_duplicates bigint NOT NULL DEFAULT 0,
            rejected_by_reason jsonb NOT NULL DEFAULT '{}',
            failed_by_reason jsonb NOT NULL DEFAULT '{}',
            -- With credentials per topic: the counts by topic (TopicOutcomeKeys).
            outcomes_by_topic jsonb NOT NULL DEFAULT '{}',
            last_worker text,
            started_at timestamptz,
            finished_at timestamptz,
            -- The last write-back: with started_at, when the campaign was active.
            written_at timestamptz,
            PRIMARY KEY (campaign_id, first_seq)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS campaign_rejections (
            campaign_id bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
            seq bigint NOT NULL,
            token text NOT NULL,
            status integer NOT NULL,
            reason text NOT NULL,
            apns_timestamp bigint,
            rejected_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (campaign_id, seq)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS campaign_workers (
            campaign_id bigint NOT NULL REFERENCES campaigns ON DELETE CASCADE,
            worker text NOT NULL,
            chunks bigint NOT NULL DEFAULT 0,
            final bigint NOT NULL DEFAULT 0,
            accepted bigint NOT NULL DEFAULT 0,
            -- h2 or binary: what the worker spoke to the gateway.
            protocol text,
            first_seen_at timestamptz NOT NULL DEFAULT now(),
            last_seen_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (campaign_id, worker)
        )
        """,
        """
        CREATE TABLE IF NOT EXISTS devices (
            token text NOT NULL,
            topic text NOT NULL,
            environment text NOT NULL,
            registered_at timestamptz NOT NULL DEFAULT now(),
            last_seen_at timestamptz NOT NULL DEFAULT now(),
            invalidated_at timestamptz,
            invalid_reason text,
            PRIMARY KEY (token, topic, environment)
        )
        """,
        // One provider token per team and key, shared by every worker (PostgresTokenStore).
        // A row is locked while a worker decides whether to sign a new one.
        """
        CREATE TABLE IF NOT EXISTS salvo_provider_tokens (
            team_id text NOT NULL,
            key_id text NOT NULL,
            key_fingerprint text NOT NULL DEFAULT '',
            issued_at bigint NOT NULL DEFAULT 0,
            token text NOT NULL DEFAULT '',
            updated_at timestamptz NOT NULL DEFAULT now(),
            PRIMARY KEY (team_id, key_id)
        )
        """,
        // `salvo serve --db`: every notification taken, from before its 202 until
        // `--status-retention` after it is final (ServeJournal).
        """
        CREATE TABLE IF NOT EXISTS serve_notifications (
            apns_id text PRIMARY KEY,
            -- The notification as posted: one JSON object of the request's body.
            body bytea NOT NULL,
            -- pending, accepted, rejected or failed.
            state text NOT NULL DEFAULT 'pending',
            status_code integer,
            reason text,
            apns_timestamp bigint,
            token_problem boolean NOT NULL DEFAULT false,
            -- The serve instance sending it, and until when unless renewed; NULL once final.
            lease_owner text,
            lease_expires_at timestamptz,
            -- Times it was taken over from an instance whose lease expired: each may have sent it.
            takeovers integer NOT NULL DEFAULT 0,
            taken_at timestamptz NOT NULL DEFAULT now(),
            final_at timestamptz
        )
        """,
        // What takeovers look for (lapsed leases), what renewals touch (an instance's own).
        "CREATE INDEX IF NOT EXISTS serve_notifications_pending ON serve_notifications (lease_expires_at) WHERE state = 'pending'",
        "CREATE INDEX IF NOT EXISTS serve_notifications_held ON serve_notifications (lease_owner) WHERE state = 'pending'",
        // What retention deletes.
        "CREATE INDEX IF NOT EXISTS serve_notifications_final ON serve_notifications (final_at) WHERE state <> 'pending'",
    ]
}
