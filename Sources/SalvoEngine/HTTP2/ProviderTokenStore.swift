/// Where a team's provider token is kept, so that every process of the team sends the
/// same token instead of signing one each.
///
/// APNs lets a team switch to a new provider token at most once every 20 minutes; a newer
/// one sooner is refused (429 TooManyProviderTokenUpdates). A second run, a resume, or a
/// second worker that signed its own token would be locked out for 20 minutes. A store
/// hands the token one process signed to the others: ``ProviderTokenCache`` (a file, for
/// the processes of one machine) or a table in PostgreSQL (`SalvoCampaigns`, for several
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
    ///   - now: the time as the caller's clock has it (UNIX seconds). A store whose
    ///     processes share a clock of their own (a database's) passes that one to `choose`
    ///     instead, so that machines whose clocks disagree agree on a token's age.
    ///   - choose: the stored token (nil: none) and the time in; the token to keep out.
    /// - Throws: ``ProviderTokenStoreError`` when the store cannot be read or written, or
    ///   what `choose` throws.
    func exchange(_ key: ProviderTokenKey, now: Int64,
                  _ choose: (StoredProviderToken?, Int64) throws -> StoredProviderToken) async throws -> StoredProviderToken
}

/// Whose token: a team's, signed with one key. A token is reused only by the key that signed
/// it, recognised by its fingerprint (the key id alone could name another key).
public struct ProviderTokenKey: Sendable, Hashable {
    /// The team identifier (the token's `iss`).
    public var teamID: String
    /// The key identifier (the token's `kid`).
    public var keyID: String
    /// SHA-256 of the signing key's public key, in hex (``ProviderCredentials/keyFingerprint``).
    public var keyFingerprint: String

    /// The key of `credentials`' tokens.
    public init(_ credentials: ProviderCredentials) {
        self.init(teamID: credentials.teamID, keyID: credentials.keyID, keyFingerprint: credentials.keyFingerprint)
    }

    /// A key from its parts, as a store reads them back.
    public init(teamID: String, keyID: String, keyFingerprint: String) {
        self.teamID = teamID
        self.keyID = keyID
        self.keyFingerprint = keyFingerprint
    }
}

/// A provider token as a store keeps it. Its description never shows the token.
public struct StoredProviderToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Whose token it is.
    public var key: ProviderTokenKey
    /// When it was signed (its `iat`), UNIX seconds.
    public var issuedAt: Int64
    /// The compact JWT: a credential for an hour.
    public var text: String

    /// A token of `key` signed at `issuedAt`.
    public init(key: ProviderTokenKey, issuedAt: Int64, text: String) {
        self.key = key
        self.issuedAt = issuedAt
        self.text = text
    }

    /// Whether a process holding `key` may send this token at `now`: signed by that key,
    /// and younger than `maximumAge`. A token from the future (the clock went back, or the
    /// store came from elsewhere) is not: its age cannot be told.
    public func isReusable(by key: ProviderTokenKey, at now: Int64, maximumAge: Int64) -> Bool {
        self.key == key && issuedAt <= now && now - issuedAt < maximumAge
    }

    /// The team, the key id and the time; never the token.
    public var description: String { "provider token of team \(key.teamID), key id \(key.keyID), issued at \(issuedAt)" }
    /// `description`: the JWT stays out of debug output too.
    public var debugDescription: String { description }
    /// Only the key and the time: `dump` and the like must not reach the JWT.
    public var customMirror: Mirror { Mirror(self, children: ["key": key, "issuedAt": issuedAt], displayStyle: .struct) }
}

/// A token store could not be used. `description` names the store and says what to do.
public struct ProviderTokenStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The store (``ProviderTokenStore/description``).
    public var store: String
    /// What is wrong, and what to do about it.
    public var problem: String

    /// The error for `store`.
    public init(store: String, problem: String) {
        self.store = store
        self.problem = problem
    }

    /// `<store>: <problem>`.
    public var description: String { "\(store): \(problem)" }
}
