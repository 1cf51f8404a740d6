import PostgresNIO
import SalvoEngine

/// Provider tokens shared through PostgreSQL: the workers of a campaign, on any machines,
/// send one token per team (see `ProviderTokenStore`). A row per team and key in
/// `salvo_provider_tokens`, locked (`SELECT … FOR UPDATE`) while a worker decides whether
/// to take the stored token or sign and store a new one; the others wait for it and take
/// that one. Ages are measured by the database's clock, which every worker shares.
///
/// Each exchange opens a connection of its own and closes it: exchanges come once per
/// run and then every 50 minutes, and a lock taken on the campaign's connection would hold
/// up its queries.
public struct PostgresTokenStore: ProviderTokenStore {
    /// Where the database is.
    public let url: DatabaseURL

    /// A store in the database at `url` (nothing is read or written yet).
    public init(url: DatabaseURL) {
        self.url = url
    }

    /// `token store <url without its password>`.
    public var description: String { "token store \(url)" }

    public func exchange(_ key: ProviderTokenKey, now: Int64,
                         _ choose: (StoredProviderToken?, Int64) throws -> StoredProviderToken) async throws -> StoredProviderToken {
        let database: CampaignDatabase
        do {
            database = try await CampaignDatabase.connect(url, applicationName: "salvo-token-store")
        } catch {
            throw ProviderTokenStoreError(store: description, problem: error.description)
        }
        do {
            let chosen = try await database.transaction { database in
                try await Self.exchange(key, in: database, choose)
            }
            await database.close()
            return chosen
        } catch {
            await database.close()
            if error is ProviderTokenStoreError || error is ProviderTokenSigningError { throw error }
            throw ProviderTokenStoreError(store: description, problem: database.describe(error, while: "sharing the provider token").description)
        }
    }

    private static func exchange(_ key: ProviderTokenKey, in database: CampaignDatabase,
                                 _ choose: (StoredProviderToken?, Int64) throws -> StoredProviderToken) async throws -> StoredProviderToken {
        try await database.query("""
            INSERT INTO salvo_provider_tokens (team_id, key_id) VALUES (\(key.teamID), \(key.keyID))
            ON CONFLICT DO NOTHING
            """)
        let rows = try await database.query("""
            SELECT key_fingerprint, issued_at, token, extract(epoch FROM now())::bigint
            FROM salvo_provider_tokens WHERE team_id = \(key.teamID) AND key_id = \(key.keyID) FOR UPDATE
            """)
        var stored: StoredProviderToken?
        var now: Int64 = 0
        for try await (fingerprint, issuedAt, text, databaseNow) in rows.decode((String, Int64, String, Int64).self) {
            now = databaseNow
            if !text.isEmpty {
                stored = StoredProviderToken(key: ProviderTokenKey(teamID: key.teamID, keyID: key.keyID, keyFingerprint: fingerprint),
                                             issuedAt: issuedAt, text: text)
            }
        }
        let chosen = try choose(stored, now)
        if chosen != stored {
            try await database.query("""
                UPDATE salvo_provider_tokens
                SET key_fingerprint = \(chosen.key.keyFingerprint), issued_at = \(chosen.issuedAt), token = \(chosen.text),
                    updated_at = now()
                WHERE team_id = \(key.teamID) AND key_id = \(key.keyID)
                """)
        }
        return chosen
    }
}
