import Crypto
import SalvoIO

/// The callers `salvo serve` lets in: a file of named keys, stored hashed.
///
/// One key per line, `NAME SHA256-HEX` (the SHA-256 of the key, as `printf %s "$KEY" |
/// sha256sum` prints it); blank lines and lines starting with `#` are skipped. A caller
/// gives its key as `Authorization: Bearer KEY`; the server keeps only the hashes, so the
/// file leaks no key, and compares hashes, so timing tells nothing about a key.
public struct APIKeys: Sendable {
    /// Key names by the hex SHA-256 of their key.
    private let names: [String: String]

    /// The keys of the file at `path`.
    ///
    /// - Throws: `APIKeysError` naming the file and line of what is wrong.
    public init(path: String) throws {
        let text: String
        do {
            text = String(decoding: try readSmallFile(path, limit: 1 << 20), as: UTF8.self)
        } catch {
            throw APIKeysError(description: "--api-keys \(path): \(error)")
        }
        try self.init(text: text, path: path)
    }

    init(text: String, path: String) throws {
        var names: [String: String] = [:]
        for (number, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" || $0 == "\r" })
            guard let first = fields.first, !first.hasPrefix("#") else { continue }
            let at = "--api-keys \(path) line \(number + 1)"
            guard fields.count == 2 else { throw APIKeysError(description: "\(at): expected NAME SHA256-HEX") }
            let hash = fields[1].lowercased()
            guard hash.count == 64, hash.allSatisfy(\.isHexDigit) else {
                throw APIKeysError(description: "\(at): the key's SHA-256 is 64 hex digits (printf %s \"$KEY\" | sha256sum)")
            }
            guard names.updateValue(String(first), forKey: hash) == nil else {
                throw APIKeysError(description: "\(at): this key hash is listed twice")
            }
        }
        guard !names.isEmpty else { throw APIKeysError(description: "--api-keys \(path): lists no key") }
        self.names = names
    }

    /// The name of the key in `authorization` (an `Authorization` header's value), nil when
    /// it is no `Bearer` key of the file.
    public func caller(authorization: String?) -> String? {
        guard let authorization, authorization.count > 7, authorization.prefix(7).lowercased() == "bearer " else { return nil }
        let key = authorization.dropFirst(7).trimmingPrefix(" ")
        let digest = SHA256.hash(data: Array(key.utf8))
        return names[digest.map { Self.hexDigits[Int($0 >> 4)] + Self.hexDigits[Int($0 & 15)] }.joined()]
    }

    private static let hexDigits = (0..<16).map { String($0, radix: 16) }
}

/// An unusable `--api-keys` file.
public struct APIKeysError: Error, CustomStringConvertible {
    public var description: String
}
