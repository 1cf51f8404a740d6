

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
