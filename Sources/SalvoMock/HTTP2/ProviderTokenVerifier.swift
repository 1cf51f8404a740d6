import Crypto
import SalvoWire

/// Checks provider tokens as APNs does for one signing key: an ES256 signature by the key,
/// `kid` and `iss` as configured, and an `iat` at most an hour old.
public struct ProviderTokenVerifier: Sendable {
    /// What a token is worth.
    public enum Outcome: Sendable, Hashable {
        /// Signed by the key, for this key id and team, and fresh.
        case valid(issuedAt: Int64)
        /// Unreadable, not signed by the key, or for another key id or team: 403 InvalidProviderToken.
        case invalid
        /// Valid but issued more than `lifetime` ago: 403 ExpiredProviderToken.
        case expired
    }

    /// The key id tokens must name (`kid`).
    public let keyID: String
    /// The team tokens must be issued by (`iss`).
    public let teamID: String
    /// How old a token may be, in seconds: an hour, as Apple's (`ProviderToken.lifetime`).
    /// A test shortens it to see a sender renew a token it still thinks fresh.
    public var lifetime = ProviderToken.lifetime
    /// The public key's raw x‖y (Crypto's key type is not `Sendable`; making one is cheap,
    /// and needed only for a token not seen before).
    private let publicKey: [UInt8]

    /// A verifier for the key in `authKeyPEM`, the text of an `AuthKey_<KEYID>.p8` file (a
    /// PKCS#8 P-256 private key, as Apple's developer account hands it out).
    ///
    /// - Throws: `ProviderTokenVerifierError` when the text is not such a key, or an id is empty.
    public init(authKeyPEM: String, keyID: String, teamID: String) throws(ProviderTokenVerifierError) {
        guard !keyID.isEmpty, !teamID.isEmpty else { throw .init(description: "the key id and the team id must not be empty") }
        do {
            publicKey = Array(try P256.Signing.PrivateKey(pemRepresentation: authKeyPEM).publicKey.rawRepresentation)
        } catch {
            throw .init(description: "not a PEM P-256 private key (an AuthKey .p8 file): \(error)")
        }
        self.keyID = keyID
        self.teamID = teamID
    }

    /// Judges `token` (the text after `bearer `) at UNIX time `now`.
    public func verify(_ token: UnsafeRawBufferPointer, now: Int64) -> Outcome {
        guard let parsed = try? ProviderToken.parse(token),
              parsed.token.keyID == keyID, parsed.token.teamID == teamID,
              let key = try? P256.Signing.PublicKey(rawRepresentation: publicKey),
              let signature = try? P256.Signing.ECDSASignature(rawRepresentation: parsed.signature),
              key.isValidSignature(signature, for: UnsafeRawBufferPointer(rebasing: token[..<parsed.signingInputLength]))
        else { return .invalid }
        if now - parsed.token.issuedAt > lifetime { return .expired }
        return .valid(issuedAt: parsed.token.issuedAt)
    }
}

/// An unusable provider-token key.
public struct ProviderTokenVerifierError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String
}
