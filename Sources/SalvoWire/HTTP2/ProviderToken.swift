/// An APNs provider authentication token: a JSON Web Token signed with ES256.
///
/// Header `{"alg":"ES256","kid":KEY_ID}`, claims `{"iss":TEAM_ID,"iat":UNIX_SECONDS}`; on the
/// wire `base64url(header).base64url(claims).base64url(signature)`, the signature being the
/// raw 64-byte r‖s of ECDSA P-256 over SHA-256 of the text before the second dot. This type
/// holds the claims and the wire format; signing and verifying need a P-256 implementation
/// and live with their users.
public struct ProviderToken: Sendable, Hashable {
    /// The key identifier (`kid`), ten characters in Apple's developer account.
    public var keyID: String
    /// The team identifier (`iss`).
    public var teamID: String
    /// When the token was made (`iat`), UNIX seconds (a fraction on the wire is dropped).
    public var issuedAt: Int64

    /// Tokens older than this (seconds) are refused: 403 ExpiredProviderToken.
    public static let lifetime: Int64 = 3600
    /// A team may switch to a new token no sooner than this (seconds) after the last one:
    /// 429 TooManyProviderTokenUpdates.
    public static let minimumRefreshInterval: Int64 = 1200

    /// The claims of a token for key `keyID` of team `teamID`, made at `issuedAt` (UNIX seconds).
    public init(keyID: String, teamID: String, issuedAt: Int64) {
        self.keyID = keyID
        self.teamID = teamID
        self.issuedAt = issuedAt
    }

    /// The text that is signed: `base64url(header).base64url(claims)`.
    public var signingInput: String {
        let header = #"{"alg":"ES256","kid":"\#(Self.escaped(keyID))"}"#
        let claims = #"{"iss":"\#(Self.escaped(teamID))","iat":\#(issuedAt)}"#
        return Base64URL.encode(Array(header.utf8)) + "." + Base64URL.encode(Array(claims.utf8))
    }

    /// The token as sent: the signing input, a dot, and the base64url of the 64-byte signature.
    public func compact(signature: some Collection<UInt8>) -> String {
        signingInput + "." + Base64URL.encode(signature)
    }

    /// A token read off the wire, with what a verifier needs.
    public struct Parsed: Sendable, Hashable {
        /// The claims.
        public var token: ProviderToken
        /// The token's first `signingInputLength` bytes are what the signature covers.
        public var signingInputLength: Int
        /// The raw r‖s signature.
        public var signature: [UInt8]
    }

    /// Reads a token in compact form (what follows `bearer ` in `authorization`).
    ///
    /// - Throws: `ProviderTokenError` saying which part is wrong. The signature is not
    ///   checked here, only its length.
    public static func parse(_ text: UnsafeRawBufferPointer) throws(ProviderTokenError) -> Parsed {
        let dots = text.indices.filter { text[$0] == UInt8(ascii: ".") }
        guard dots.count == 2 else { throw .notThreeParts(dots.count + 1) }
        func part(_ range: Range<Int>, _ name: String) throws(ProviderTokenError) -> [UInt8] {
            guard let bytes = Base64URL.decode(UnsafeRawBufferPointer(rebasing: text[range])) else {
                throw .badBase64(name)
            }
            return bytes
        }
        let header = try part(0..<dots[0], "header")
        let claims = try part(dots[0] + 1..<dots[1], "claims")
        let signature = try part(dots[1] + 1..<text.count, "signature")

        var algorithm: String?
        var keyID: String?
        try members(of: header, "header") { key, json, member throws(ProviderTokenError) in
            if key.elementsEqual("alg".utf8) { algorithm = try string(json, member, "alg") }
            if key.elementsEqual("kid".utf8) { keyID = try string(json, member, "kid") }
        }
        guard algorithm == "ES256" else { throw .wrongAlgorithm(algorithm) }
        guard let keyID else { throw .missingClaim("kid") }

        var teamID: String?
        var issuedAt: Int64?
        try members(of: claims, "claims") { key, json, member throws(ProviderTokenError) in
            if key.elementsEqual("iss".utf8) { teamID = try string(json, member, "iss") }
            if key.elementsEqual("iat".utf8) { issuedAt = try numericDate(json, member, "iat") }
        }
        guard let teamID else { throw .missingClaim("iss") }
        guard let issuedAt else { throw .missingClaim("iat") }
        guard signature.count == 64 else { throw .badSignatureLength(signature.count) }
        return Parsed(token: ProviderToken(keyID: keyID, teamID: teamID, issuedAt: issuedAt),
                      signingInputLength: dots[1], signature: signature)
    }

    private static func members(
        of json: [UInt8], _ part: String,
        _ visit: (UnsafeRawBufferPointer, UnsafeRawBufferPointer, JSONMember) throws(ProviderTokenError) -> Void
    ) throws(ProviderTokenError) {
        // withUnsafeBytes rethrows untyped errors: carry ours out by hand.
        var failure: ProviderTokenError?
        json.withUnsafeBytes { bytes in
            var iterator = JSONObjectMembers(bytes)
            do throws(ProviderTokenError) {
                while true {
                    let member: JSONMember?
                    do throws(JSONScanError) { member = try iterator.next() } catch { throw .badJSON(part, error.description) }
                    guard let member else { return }
                    try visit(member.key(in: bytes), bytes, member)
                }
            } catch {
                failure = error
            }
        }
        if let failure { throw failure }
    }

    /// A NumericDate (RFC 7519): any JSON number of seconds, truncated to whole seconds.
    /// Signers that pass the clock as it is send a fraction (`time.time()`), and APNs takes it.
    private static func numericDate(_ json: UnsafeRawBufferPointer, _ member: JSONMember, _ name: String) throws(ProviderTokenError) -> Int64 {
        guard member.kind == .number else { throw .badClaim(name, "not a number") }
        let range = member.valueRange
        if !json[range].contains(where: { $0 | 0x20 == UInt8(ascii: "e") }) {
            let end = json[range].firstIndex(of: UInt8(ascii: ".")) ?? range.upperBound
            do { return try JSONScanner.int64(json, range: range.lowerBound..<end) } catch { throw .badClaim(name, "out of range") }
        }
        // An exponent (`1.7e9`) is rare enough for a Double, whose 53 bits hold any date's seconds.
        guard let value = Double(String(decoding: json[range], as: UTF8.self)),
              let seconds = Int64(exactly: value.rounded(.towardZero)) else { throw .badClaim(name, "out of range") }
        return seconds
    }

    private static func string(_ json: UnsafeRawBufferPointer, _ member: JSONMember, _ name: String) throws(ProviderTokenError) -> String {
        guard member.kind == .string, let text = try? JSONScanner.string(json, range: member.valueRange) else {
            throw .badClaim(name, "not a string")
        }
        return text
    }

    /// `text` as the inside of a JSON string (key and team ids are plain ASCII in practice).
    private static func escaped(_ text: String) -> String {
        var result = ""
        for character in text {
            if character == "\\" || character == "\"" { result.append("\\") }
            result.append(character)
        }
        return result
    }
}

/// Why a provider token could not be read.
public enum ProviderTokenError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The token has this many dot-separated parts, not three.
    case notThreeParts(Int)
    /// This part (header, claims or signature) is not base64url.
    case badBase64(String)
    /// This part is not a JSON object, for this reason.
    case badJSON(String, String)
    /// The header's `alg` is this (or missing), not ES256.
    case wrongAlgorithm(String?)
    /// The header or the claims lack this field (`kid`, `iss`, `iat`).
    case missingClaim(String)
    /// This field has a value of the wrong kind, for this reason.
    case badClaim(String, String)
    /// The signature has this many bytes, not 64.
    case badSignatureLength(Int)

    /// The problem in a sentence, for error messages.
    public var description: String {
        switch self {
        case .notThreeParts(let count): "a provider token has three dot-separated parts, this one has \(count)"
        case .badBase64(let part): "the token's \(part) is not base64url"
        case .badJSON(let part, let reason): "the token's \(part) is not a JSON object: \(reason)"
        case .wrongAlgorithm(let algorithm): "the token's alg is \(algorithm.map { "'\($0)'" } ?? "missing"); APNs wants ES256"
        case .missingClaim(let name): "the token has no '\(name)'"
        case .badClaim(let name, let reason): "the token's '\(name)' is \(reason)"
        case .badSignatureLength(let count): "the token's signature has \(count) bytes; ES256 signatures have 64"
        }
    }
}
