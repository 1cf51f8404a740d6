internal import Crypto
import SalvoIO
import SystemPackage
import SalvoWire
#if canImport(Glibc)
import Glibc
#endif

/// An APNs token-authentication signing key with the ids a provider token names: what
/// `--auth-key AuthKey_<KEYID>.p8 --key-id K --team-id T` gives.
///
/// Apple's developer account hands the key out once, as `AuthKey_<KEYID>.p8`: an EC P-256
/// private key in PEM PKCS#8 (`-----BEGIN PRIVATE KEY-----`). The same key in SEC1 form
/// (`-----BEGIN EC PRIVATE KEY-----`, what `openssl ecparam -genkey` writes) is accepted
/// too; anything else is refused with a `ProviderCredentialsError` saying what it is.
///
/// The key never prints: `description`, `debugDescription` and reflection (`dump`, string
/// interpolation of a containing value) show the key id, the team and where the key came
/// from, nothing of the key.
///
/// Ids: an empty key id or team id, or one with a control character (it could not be
/// written into the token's JSON), is an error. Apple's ids are ten letters and digits,
/// but any other printable id is accepted with a line in `warnings`: the gateway is the
/// judge (a wrong id is 403 InvalidProviderToken, which stops the sender naming both
/// ids), and refusing here would lock out ids Apple might issue in another shape.
public struct ProviderCredentials: Sendable {
    /// The key identifier (`kid`), ten characters in Apple's developer account.
    public let keyID: String
    /// The team identifier (`iss`), ten characters in Apple's developer account.
    public let teamID: String
    /// Where the key came from: the file's path, or `ProviderCredentials.textSource`.
    public let source: String
    /// Doubts worth telling the user, none of them fatal: an id that does not look like
    /// Apple's, or a key file whose name says another key id.
    public let warnings: [String]
    /// The private key, in a box that never prints.
    let key: ProviderSigningKey

    /// SHA-256 of the key's public key (its uncompressed point), in hex: tells keys apart
    /// where the key id alone could name another one (a token store), and gives nothing of
    /// the private key away.
    public var keyFingerprint: String { key.fingerprint }

    /// What `source` says for a key given as text.
    public static let textSource = "the PEM text given"

    /// Reads the key from `path`, an `AuthKey_<KEYID>.p8` file.
    ///
    /// - Parameters:
    ///   - path: the `.p8` file from Apple's developer account (a P-256 key in PEM).
    ///   - keyID: the key's identifier, ten characters (the token's `kid`).
    ///   - teamID: the team's identifier, ten characters (the token's `iss`).
    ///   - allowWorldReadable: accept a key file every user may read (refused otherwise, as
    ///     TLS private keys are: `--allow-world-readable-key`).
    /// - Throws: `ProviderCredentialsError` naming the file and what is wrong with it.
    public init(keyFile path: String, keyID: String, teamID: String,
                allowWorldReadable: Bool = false) throws(ProviderCredentialsError) {
        try Self.checkIDs(keyID: keyID, teamID: teamID, source: path)
        var info = stat()
        guard stat(path, &info) == 0 else { throw ProviderCredentialsError(source: path, problem: .unreadable(errno: Errno(rawValue: errno))) }
        // Before the mode check: a directory is usually world-readable, and `chmod 600` is
        // not the fix for giving one. (A pipe, `--auth-key <(...)`, is read like a file.)
        if info.st_mode & S_IFMT == S_IFDIR {
            throw ProviderCredentialsError(source: path, problem: .unreadable(errno: .isDirectory))
        }
        if !allowWorldReadable && info.st_mode & S_IROTH != 0 {
            throw ProviderCredentialsError(source: path, problem: .worldReadable)
        }
        let bytes: [UInt8]
        do {
            // An AuthKey file is about 250 bytes; the limit only keeps a wrong path (a log,
            // a disk image) from being read whole.
            bytes = try readSmallFile(path, limit: 64 << 10)
        } catch {
            throw ProviderCredentialsError(source: path, problem: .unreadable(errno: error.errno))
        }
        try self.init(pem: bytes, source: path, keyID: keyID, teamID: teamID)
    }

    /// Takes the key from `pem`, the text of an `AuthKey_<KEYID>.p8` file.
    ///
    /// - Throws: `ProviderCredentialsError` saying what is wrong with the text (never
    ///   quoting it).
    public init(pem: String, keyID: String, teamID: String) throws(ProviderCredentialsError) {
        try Self.checkIDs(keyID: keyID, teamID: teamID, source: Self.textSource)
        try self.init(pem: Array(pem.utf8), source: Self.textSource, keyID: keyID, teamID: teamID)
    }

    private init(pem: [UInt8], source: String, keyID: String, teamID: String) throws(ProviderCredentialsError) {
        let scalar: [UInt8]
        do throws(AuthKeyProblem) {
            scalar = try AuthKeyReader.p256Scalar(pem: pem)
        } catch {
            switch error {
            case .notAPrivateKey(let why): throw ProviderCredentialsError(source: source, problem: .notAPrivateKey(why))
            case .notP256(let kind): throw ProviderCredentialsError(source: source, problem: .notP256(kind))
            }
        }
        self.keyID = keyID
        self.teamID = teamID
        self.source = source
        self.key = ProviderSigningKey(scalar: scalar)
        self.warnings = Self.doubts(keyID: keyID, teamID: teamID, source: source)
    }

    private static func checkIDs(keyID: String, teamID: String, source: String) throws(ProviderCredentialsError) {
        guard !keyID.isEmpty else { throw ProviderCredentialsError(source: source, problem: .emptyKeyID) }
        guard !teamID.isEmpty else { throw ProviderCredentialsError(source: source, problem: .emptyTeamID) }
        // ProviderToken escapes only `"` and `\`: a control character would make its JSON invalid.
        let isControl = { (scalar: Unicode.Scalar) in scalar.value < 0x20 || scalar.value == 0x7F }
        if keyID.unicodeScalars.contains(where: isControl) {
            throw ProviderCredentialsError(source: source, problem: .controlCharacter("key id"))
        }
        if teamID.unicodeScalars.contains(where: isControl) {
            throw ProviderCredentialsError(source: source, problem: .controlCharacter("team id"))
        }
    }

    private static func doubts(keyID: String, teamID: String, source: String) -> [String] {
        func looksLikeApples(_ id: String) -> Bool {
            id.utf8.count == 10 && id.utf8.allSatisfy { (0x30...0x39).contains($0) || (0x41...0x5A).contains($0) || (0x61...0x7A).contains($0) }
        }
        func shape(_ id: String) -> String {
            let count = id.count
            return count == 10 ? "has characters other than letters and digits" : "has \(count) character\(count == 1 ? "" : "s")"
        }
        var doubts: [String] = []
        if !looksLikeApples(keyID) {
            doubts.append("key id '\(keyID)' \(shape(keyID)); Apple's key ids are 10 letters and digits (the key's page in "
                          + "your developer account): check it, or the gateway will answer 403 InvalidProviderToken")
        }
        if !looksLikeApples(teamID) {
            doubts.append("team id '\(teamID)' \(shape(teamID)); Apple's team ids are 10 letters and digits (Membership in "
                          + "your developer account): check it, or the gateway will answer 403 InvalidProviderToken")
        }
        // Apple names the file for its key: AuthKey_<KEYID>.p8.
        let name = source.split(separator: "/").last.map(String.init) ?? source
        if name.hasPrefix("AuthKey_"), name.hasSuffix(".p8") {
            let named = name.dropFirst("AuthKey_".count).dropLast(".p8".count)
            if !named.isEmpty, named != keyID {
                doubts.append("the key file's name says key id '\(named)', but '\(keyID)' was given")
            }
        }
        return doubts
    }
}

extension ProviderCredentials: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// The key id, the team and the key's source; never the key.
    public var description: String { "APNs signing key \(keyID) of team \(teamID) (\(source))" }
    /// `description`, named as the type.
    public var debugDescription: String { "ProviderCredentials(\(description))" }
    /// Only the ids and the source: `dump` and the like must not reach the key.
    public var customMirror: Mirror {
        Mirror(self, children: ["keyID": keyID, "teamID": teamID, "source": source], displayStyle: .struct)
    }
}

/// The private key: its 32-byte P-256 scalar, kept out of every description.
///
/// A class so that copies of `ProviderCredentials` share one allocation and reflection
/// stops at an opaque reference; the scalar rather than Crypto's key type because that is
/// not `Sendable` (a key is made where it signs, once per token).
final class ProviderSigningKey: Sendable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    private let scalar: [UInt8]
    /// SHA-256 of the public key, in hex.
    let fingerprint: String

    init(scalar: [UInt8]) {
        self.scalar = scalar
        // The scalar was read as a P-256 key already (`AuthKeyReader`).
        guard let key = try? P256.Signing.PrivateKey(rawRepresentation: scalar) else { preconditionFailure("not a P-256 scalar") }
        fingerprint = SHA256.hash(data: key.publicKey.x963Representation).map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
    }

    /// The raw ES256 signature (r‖s, 64 bytes) of `message`.
    func signature(for message: [UInt8]) throws -> [UInt8] {
        let key = try P256.Signing.PrivateKey(rawRepresentation: scalar)
        return Array(try key.signature(for: message).rawRepresentation)
    }

    var description: String { "<private key>" }
    var debugDescription: String { "<private key>" }
    var customMirror: Mirror { Mirror(self, children: [:]) }
}

/// What reading a key file found wrong (`ProviderCredentialsError` adds the file).
private enum AuthKeyProblem: Error {
    case notAPrivateKey(String)
    case notP256(String)
}

/// Takes the P-256 scalar out of a PEM private key, and says precisely what anything else
/// is: swift-crypto alone would parse a good key, but its errors do not tell a P-384 or
/// RSA key from a damaged file, and those need different fixes.
private enum AuthKeyReader {
    static func p256Scalar(pem: [UInt8]) throws(AuthKeyProblem) -> [UInt8] {
        let block = try PEMBlock.privateKey(in: pem)
        let der = try block.der()
        switch block.label {
        case "PRIVATE KEY": try checkPKCS8(der)
        case "EC PRIVATE KEY": try checkSEC1(der)
        case "RSA PRIVATE KEY": throw .notP256("an RSA key")
        case "DSA PRIVATE KEY": throw .notP256("a DSA key")
        case "OPENSSH PRIVATE KEY": throw .notP256("an OpenSSH key")
        default: throw .notAPrivateKey("it holds a \(block.label), a kind of key Salvo does not read")
        }
        do {
            return Array(try P256.Signing.PrivateKey(derRepresentation: der).rawRepresentation)
        } catch {
            // swift-crypto's errors name the ASN.1 fault, never the bytes.
            throw .notAPrivateKey("its P-256 key does not parse (\(error))")
        }
    }

    /// PKCS#8: SEQUENCE { version, AlgorithmIdentifier { OID, parameters }, OCTET STRING key }.
    private static func checkPKCS8(_ der: [UInt8]) throws(AuthKeyProblem) {
        var outer = DERReader(der[...])
        guard var info = outer.contents(of: 0x30).map(DERReader.init),
              info.contents(of: 0x02) != nil,
              var algorithm = info.contents(of: 0x30).map(DERReader.init),
              let oid = algorithm.contents(of: 0x06),
              info.contents(of: 0x04) != nil
        else { throw .notAPrivateKey(DERReader.damaged) }
        switch Array(oid) {
        case ObjectID.ecPublicKey:
            // The curve is the parameters' OID; without one, swift-crypto judges.
            if let curve = algorithm.contents(of: 0x06) { try checkCurve(Array(curve)) }
        case ObjectID.rsaEncryption: throw .notP256("an RSA key")
        case ObjectID.rsaPSS: throw .notP256("an RSA-PSS key")
        case ObjectID.dsa: throw .notP256("a DSA key")
        case ObjectID.ed25519: throw .notP256("an Ed25519 key")
        case ObjectID.ed448: throw .notP256("an Ed448 key")
        case ObjectID.x25519: throw .notP256("an X25519 key")
        case ObjectID.x448: throw .notP256("an X448 key")
        default: throw .notP256("a key of another kind (algorithm \(ObjectID.dotted(oid)))")
        }
    }

    /// SEC1: SEQUENCE { version 1, OCTET STRING key, [0] curve OID (optional), [1] public key }.
    private static func checkSEC1(_ der: [UInt8]) throws(AuthKeyProblem) {
        var outer = DERReader(der[...])
        guard var key = outer.contents(of: 0x30).map(DERReader.init),
              key.contents(of: 0x02) != nil,
              key.contents(of: 0x04) != nil
        else { throw .notAPrivateKey(DERReader.damaged) }
        if var parameters = key.contents(of: 0xA0).map(DERReader.init), let curve = parameters.contents(of: 0x06) {
            try checkCurve(Array(curve))
        }
    }

    private static func checkCurve(_ oid: [UInt8]) throws(AuthKeyProblem) {
        switch oid {
        case ObjectID.p256: return
        case ObjectID.p384: throw .notP256("an EC P-384 key")
        case ObjectID.p521: throw .notP256("an EC P-521 key")
        case ObjectID.secp256k1: throw .notP256("an EC secp256k1 key")
        default: throw .notP256("an EC key on another curve (\(ObjectID.dotted(oid[...])))")
        }
    }
}

/// The first PEM private key in a file: its label and base64 lines.
private struct PEMBlock {
    var label: String
    var body: [Substring]

    /// The first block whose label ends in PRIVATE KEY.
    static func privateKey(in bytes: [UInt8]) throws(AuthKeyProblem) -> PEMBlock {
        let text = String(decoding: bytes, as: UTF8.self)
        var labels: [String] = []
        var lines = text.split(whereSeparator: \.isNewline).map { $0.trimmingWhitespace }.makeIterator()
        while let line = lines.next() {
            guard let label = line.between("-----BEGIN ", "-----") else { continue }
            labels.append(label)
            guard label.hasSuffix("PRIVATE KEY") else { continue }
            var body: [Substring] = []
            while let line = lines.next() {
                if line == "-----END \(label)-----" {
                    if label == "ENCRYPTED PRIVATE KEY" || body.contains(where: { $0.contains(":") }) {
                        // PKCS#8 encrypted, or a traditional key with Proc-Type/DEK-Info headers.
                        throw .notAPrivateKey("it is encrypted (Apple's AuthKey files are not); decrypt it with `openssl pkey -in FILE -out AuthKey_KEYID.p8`")
                    }
                    return PEMBlock(label: label, body: body)
                }
                body.append(line)
            }
            throw .notAPrivateKey("its -----END \(label)----- line is missing (is the file cut short?)")
        }
        if labels.isEmpty { throw .notAPrivateKey("it has no -----BEGIN line (is it PEM text?)") }
        let found = labels.map { $0 == "CERTIFICATE" ? "a certificate" : "a \($0)" }.joined(separator: ", ")
        throw .notAPrivateKey("it holds \(found) but no private key")
    }

    /// The DER bytes the base64 lines encode.
    func der() throws(AuthKeyProblem) -> [UInt8] {
        var base64 = Array(body.joined().utf8)
        // PEM pads to whole groups of four: anything else was cut short or damaged.
        guard !base64.isEmpty, base64.count % 4 == 0 else { throw .notAPrivateKey("its base64 is cut short or damaged") }
        if base64.last == UInt8(ascii: "=") { base64.removeLast() }
        if base64.last == UInt8(ascii: "=") { base64.removeLast() }
        for index in base64.indices {
            if base64[index] == UInt8(ascii: "+") { base64[index] = UInt8(ascii: "-") }
            else if base64[index] == UInt8(ascii: "/") { base64[index] = UInt8(ascii: "_") }
        }
        guard let der = base64.withUnsafeBytes({ Base64URL.decode($0) }) else {
            throw .notAPrivateKey("its base64 is damaged")
        }
        return der
    }
}

/// Reads DER elements one after another; enough of it to find a key's algorithm and curve.
private struct DERReader {
    static let damaged = "its DER structure is damaged or cut short"

    private var bytes: ArraySlice<UInt8>

    init(_ bytes: ArraySlice<UInt8>) { self.bytes = bytes }

    /// The contents of the next element if its tag is `tag` (the element is then consumed),
    /// or nil: another tag, or bytes that end before the element does.
    mutating func contents(of tag: UInt8) -> ArraySlice<UInt8>? {
        var rest = bytes
        guard let found = rest.popFirst(), found == tag, let first = rest.popFirst() else { return nil }
        var length = 0
        if first < 0x80 {
            length = Int(first)
        } else {
            // Long form; 0x80 (indefinite) is not DER, and no key is 4 GiB.
            let count = Int(first & 0x7F)
            guard (1...4).contains(count), rest.count >= count else { return nil }
            for _ in 0..<count { length = length << 8 | Int(rest.removeFirst()) }
        }
        guard rest.count >= length else { return nil }
        bytes = rest.dropFirst(length)
        return rest.prefix(length)
    }
}

/// The object identifiers (DER contents) that tell keys apart.
private enum ObjectID {
    static let ecPublicKey: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x02, 0x01]        // 1.2.840.10045.2.1
    static let p256: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x3D, 0x03, 0x01, 0x07]         // 1.2.840.10045.3.1.7
    static let p384: [UInt8] = [0x2B, 0x81, 0x04, 0x00, 0x22]                           // 1.3.132.0.34
    static let p521: [UInt8] = [0x2B, 0x81, 0x04, 0x00, 0x23]                           // 1.3.132.0.35
    static let secp256k1: [UInt8] = [0x2B, 0x81, 0x04, 0x00, 0x0A]                      // 1.3.132.0.10
    static let rsaEncryption: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x01]  // 1.2.840.113549.1.1.1
    static let rsaPSS: [UInt8] = [0x2A, 0x86, 0x48, 0x86, 0xF7, 0x0D, 0x01, 0x01, 0x0A]         // 1.2.840.113549.1.1.10
    static let dsa: [UInt8] = [0x2A, 0x86, 0x48, 0xCE, 0x38, 0x04, 0x01]                // 1.2.840.10040.4.1
    static let x25519: [UInt8] = [0x2B, 0x65, 0x6E]                                     // 1.3.101.110
    static let x448: [UInt8] = [0x2B, 0x65, 0x6F]                                       // 1.3.101.111
    static let ed25519: [UInt8] = [0x2B, 0x65, 0x70]                                    // 1.3.101.112
    static let ed448: [UInt8] = [0x2B, 0x65, 0x71]                                      // 1.3.101.113

    /// `1.2.840.10045.2.1` for the DER contents of an OID, to name one we do not know.
    static func dotted(_ contents: ArraySlice<UInt8>) -> String {
        var arcs: [UInt64] = []
        var value: UInt64 = 0
        for byte in contents {
            value = value << 7 | UInt64(byte & 0x7F)
            if byte & 0x80 == 0 {
                if arcs.isEmpty {
                    let first = min(value / 40, 2)
                    arcs = [first, value - first * 40]
                } else {
                    arcs.append(value)
                }
                value = 0
            }
        }
        return arcs.map(String.init).joined(separator: ".")
    }
}

extension Substring {
    fileprivate var trimmingWhitespace: Substring {
        var result = self
        while let first = result.first, first.isWhitespace { result.removeFirst() }
        while let last = result.last, last.isWhitespace { result.removeLast() }
        return result
    }

    /// What lies between `prefix` and `suffix` when the line is exactly that, e.g. the label of `-----BEGIN X-----`.
    fileprivate func between(_ prefix: String, _ suffix: String) -> String? {
        guard hasPrefix(prefix), hasSuffix(suffix), count >= prefix.count + suffix.count else { return nil }
        return String(dropFirst(prefix.count).dropLast(suffix.count))
    }
}
