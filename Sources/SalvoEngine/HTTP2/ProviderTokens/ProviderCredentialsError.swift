import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Why a signing key cannot be used. `description` names the key's file and says what to
/// do; it never quotes the file.
public struct ProviderCredentialsError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong.
    public enum Problem: Sendable, Hashable {
        /// The file is readable by every user.
        case worldReadable
        /// The file cannot be read: `errno` of stat, open or read.
        case unreadable(errno: Errno)
        /// Not a PEM private key, or a damaged one; the text says what was found.
        case notAPrivateKey(String)
        /// A private key, but not EC P-256; the text says which kind ("an RSA key").
        case notP256(String)
        /// No key id was given.
        case emptyKeyID
        /// No team id was given.
        case emptyTeamID
        /// The named id ("key id", "team id") holds a control character.
        case controlCharacter(String)
    }

    /// The key file's path, or `ProviderCredentials.textSource`.
    public var source: String
    /// What is wrong.
    public var problem: Problem

    /// The error for the key from `source` (a path, or `ProviderCredentials.textSource`).
    public init(source: String, problem: Problem) {
        self.source = source
        self.problem = problem
    }

    /// The source, what is wrong and what to do, for the user: e.g. `APNs signing key
    /// (AuthKey_ABCDE12345.p8): the key file is readable by every user; run …`.
    public var description: String { "APNs signing key (\(source)): \(reason)" }

    private var reason: String {
        let wanted = "APNs token auth needs the AuthKey_<KEYID>.p8 file from Apple's developer account"
        switch problem {
        case .worldReadable:
            return "the key file is readable by every user; run `chmod 600 \(source)` (or pass --allow-world-readable-key to accept it)"
        case .unreadable(let code):
            return "cannot read the key file: \(code.symbolicName) (\(String(cString: strerror(code.rawValue))))"
        case .notAPrivateKey(let why):
            return "not a PEM private key: \(why); \(wanted) (-----BEGIN PRIVATE KEY-----)"
        case .notP256(let kind):
            return "\(kind), not a P-256 (ES256) key; APNs signs provider tokens with ES256 only: \(wanted), an EC P-256 key"
        case .emptyKeyID:
            return "no key id given: give the key's 10-character Key ID (the KEYID in AuthKey_KEYID.p8; --key-id)"
        case .emptyTeamID:
            return "no team id given: give the 10-character Team ID of the developer account the key belongs to (--team-id)"
        case .controlCharacter(let which):
            return "the \(which) holds a control character (a stray newline?); give it as Apple shows it, 10 letters and digits"
        }
    }
}
