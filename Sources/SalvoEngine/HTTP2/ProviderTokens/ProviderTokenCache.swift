import SalvoIO
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Provider tokens kept in a file, so that the runs, resumes and workers of one machine
/// send one token per team (see ``ProviderTokenStore``).
///
/// The file is text, one line per team and key, never the key itself:
///
///     salvo-provider-tokens v1
///     <team id> TAB <key id> TAB <key fingerprint> TAB <issued at> TAB <JWT>
///
/// It is replaced atomically with mode 0600 (a token is a credential for an hour), under
/// an exclusive `flock` of `<path>.lock` that every process using the cache takes. A cache
/// that every user may read is refused, as key files are.
public struct ProviderTokenCache: ProviderTokenStore {
    /// The cache file.
    public let path: String

    static let header = "salvo-provider-tokens v1"

    /// A cache kept at `path` (nothing is read or written yet; the directory is made when
    /// the first token is stored).
    public init(path: String) {
        self.path = path
    }

    /// Where the cache lives unless told otherwise: `$XDG_STATE_HOME/salvo/provider-tokens`,
    /// or `$HOME/.local/state/salvo/provider-tokens`; nil without either variable.
    public static func defaultPath(environment: [String: String]) -> String? {
        if let state = environment["XDG_STATE_HOME"], state.hasPrefix("/") { return state + "/salvo/provider-tokens" }
        if let home = environment["HOME"], !home.isEmpty { return home + "/.local/state/salvo/provider-tokens" }
        return nil
    }

    /// `token cache <path>`.
    public var description: String { "token cache \(path)" }

    /// Checks, before a run starts, that the cache can be used: not readable by every user,
    /// and readable. A cache that does not exist yet is fine.
    ///
    /// - Throws: ``ProviderTokenStoreError`` saying what to do.
    public func check() throws(ProviderTokenStoreError) {
        _ = try read()
    }

    public func exchange(_ key: ProviderTokenKey, now: Int64,
                         _ choose: (StoredProviderToken?, Int64) throws -> StoredProviderToken) throws -> StoredProviderToken {
        try makeDirectory()
        let lock = try withProblem("cannot open its lock file") { () throws(IOError) in
            try FileDescriptor.open(path: path + ".lock", .readWrite, options: .create, permissions: [.ownerReadWrite])
        }
        defer { try? lock.close() }
        try withProblem("cannot lock it") { () throws(IOError) in
            _ = try syscallOrThrow("flock", target: path + ".lock") { flock(lock.rawValue, LOCK_EX) }
        }
        var tokens = try read()
        let stored = tokens.first { $0.key.teamID == key.teamID && $0.key.keyID == key.keyID }
        let chosen = try choose(stored, now)
        guard chosen != stored else { return chosen }
        tokens.removeAll { $0.key.teamID == key.teamID && $0.key.keyID == key.keyID }
        tokens.append(chosen)
        let text = ([Self.header] + tokens.map(Self.line)).joined(separator: "\n") + "\n"
        try withProblem("cannot write it") { () throws(IOError) in
            try replaceFileAtomically(path, with: text, permissions: [.ownerReadWrite])
        }
        return chosen
    }

    // MARK: The file

    private static func line(_ token: StoredProviderToken) -> String {
        [token.key.teamID, token.key.keyID, token.key.keyFingerprint, String(token.issuedAt), token.text].joined(separator: "\t")
    }

    /// The tokens in the file; none when there is no file yet.
    private func read() throws(ProviderTokenStoreError) -> [StoredProviderToken] {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return [] }
            throw problem("cannot read it: \(Errno(rawValue: errno).symbolicName)")
        }
        guard info.st_mode & S_IFMT == S_IFREG else { throw problem("it is not a regular file") }
        if info.st_mode & S_IROTH != 0 {
            throw problem("the token cache is readable by every user, and its tokens are credentials for an hour; "
                + "run `chmod 600 \(path)`")
        }
        let bytes = try withProblem("cannot read it") { () throws(IOError) in try readSmallFile(path, limit: 1 << 20) }
        let lines = String(decoding: bytes, as: UTF8.self).split(separator: "\n", omittingEmptySubsequences: true)
        guard lines.first == Substring(Self.header) else {
            throw problem("it is not a Salvo token cache (its first line is not '\(Self.header)'); remove it, it is only a cache")
        }
        var tokens: [StoredProviderToken] = []
        for (number, line) in lines.enumerated().dropFirst() {
            let fields = line.split(separator: "\t", omittingEmptySubsequences: false)
            guard fields.count == 5, let issuedAt = Int64(fields[3]), !fields[4].isEmpty else {
                throw problem("line \(number + 1) is not a token entry; remove the file, it is only a cache")
            }
            tokens.append(StoredProviderToken(
                key: ProviderTokenKey(teamID: String(fields[0]), keyID: String(fields[1]), keyFingerprint: String(fields[2])),
                issuedAt: issuedAt, text: String(fields[4])))
        }
        return tokens
    }

    /// Makes the cache's directory (and its parents) for this user only, if missing.
    private func makeDirectory() throws(ProviderTokenStoreError) {
        var partial = path.hasPrefix("/") ? "" : "."
        for component in SalvoIO.directory(of: path).split(separator: "/") {
            partial += "/" + component
            if mkdir(partial, 0o700) != 0 && errno != EEXIST {
                throw problem("cannot make the directory \(partial): \(Errno(rawValue: errno).symbolicName)")
            }
        }
    }

    private func problem(_ text: String) -> ProviderTokenStoreError {
        ProviderTokenStoreError(store: description, problem: text)
    }

    private func withProblem<T>(_ what: String, _ body: () throws(IOError) -> T) throws(ProviderTokenStoreError) -> T {
        do { return try body() } catch { throw problem("\(what): \(error)") }
    }
}
