/// Where a team's provider token is kept, so that every process of the team sends the
/// same token instead of signing one each.
///
/// APNs lets a team switch to a new provider token at most once every 20 minutes; a newer
/// one sooner is refused (429 TooManyProviderTokenUpdates). A second run, a resume, or a
/// second worker that signed its own token would be locked out for 20 minutes. A store
/// hands the token one process signed to the others: ``ProviderTokenCache`` (a file, for
/// the processes of one machine) or a table in PostgreSQL (`SalvoPostgres`, for several
/// machines).
public protocol ProviderTokenStore: Sendable {
    /// Names the store in messages, e.g. `token cache /root/.local/state/salvo/provider-tokens`;
    /// never a token or a password.
    var description: String { get }

    /// Calls `choose` under the store's lock (other processes wait) with the token stored
    /// for `key`'s team and key id, if any, and the time; stores what `choose` returns if it
    /// differs, then lets go of the lock.
    ///
    /// - Parameters:
    ///   - key: the team, key id and key fingerprint whose token is asked for.
    ///   - now: the time as the caller's clock has it (UNIX seconds). A store whose
    ///     processes share a clock of their own (a database's) passes that one to `choose`
    ///     instead, so that machines whose clocks disagree agree on a token's age.
    ///   - choose: the stored token (nil: none) and the time in; the token to keep out.
    /// - Throws: ``ProviderTokenStoreError`` when the store cannot be read or written, or
    ///   what `choose` throws.
    func exchange(_ key: ProviderTokenKey, now: Int64,
                  _ choose: (StoredProviderToken?, Int64) throws -> StoredProviderToken) async throws -> StoredProviderToken
}
