import Foundation
import SalvoEngine
import SalvoIO
import SalvoWire

/// `--credentials FILE`: the keys and certificates of a run that sends for several apps
/// and teams, each with the topics (bundle ids) it serves.
///
/// ```json
/// {"credentials": [
///   {"team_id": "ABCDE12345", "key_id": "KEY1234567", "key": "AuthKey_KEY1234567.p8",
///    "topics": ["com.example.news", "com.example.weather"], "environment": "production"},
///   {"certificate": "legacy.pem", "private_key": "legacy-key.pem",
///    "topics": ["com.example.legacy"], "environment": "production"}
/// ]}
/// ```
///
/// A bare array of entries is read too. Paths are relative to the file's directory. Key
/// files follow `--auth-key`'s and `--key`'s rules (a world-readable one is refused unless
/// `--allow-world-readable-key`); each error names the file and the entry. A team is listed
/// once (one provider token per team), a topic once.
struct CredentialsFile {
    /// One key or certificate, as the file gives it.
    struct Entry: Decodable {
        var teamID: String?
        var keyID: String?
        var key: String?
        var certificate: String?
        var privateKey: String?
        var passphraseFile: String?
        var topics: [String]
        var environment: String?

        enum CodingKeys: String, CodingKey {
            case teamID = "team_id", keyID = "key_id", key, certificate, privateKey = "private_key"
            case passphraseFile = "passphrase_file", topics, environment
        }
    }

    private struct Document: Decodable {
        var credentials: [Entry]
    }

    /// The file's path, as given.
    let path: String
    let entries: [Entry]

    /// Reads and checks the file's shape (not yet its keys: `routes`).
    init(path: String) throws {
        self.path = path
        let bytes = try readWholeFile(path, limit: 1 << 20, what: "credentials file")
        let decoder = JSONDecoder()
        do {
            if bytes.first(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) == UInt8(ascii: "[") {
                entries = try decoder.decode([Entry].self, from: Data(bytes))
            } else {
                entries = try decoder.decode(Document.self, from: Data(bytes)).credentials
            }
        } catch {
            throw FileInputError(description: "--credentials \(path): not a credentials file: \(Self.describe(error)) (expected "
                                 + #"{"credentials": [{"team_id", "key_id", "key", "topics", "environment"} or "#
                                 + #"{"certificate", "private_key", "topics", "environment"}, ...]})"#)
        }
        guard !entries.isEmpty else { throw FileInputError(description: "--credentials \(path): lists no credentials") }
        try check()
    }

    /// Every topic the file serves, in its order.
    var topics: [String] { entries.flatMap(\.topics) }

    /// What `--credentials FILE, entry N (team T)` says to name an entry in messages.
    func name(_ index: Int) -> String {
        let entry = entries[index]
        let what = entry.teamID.map { "team \($0)" } ?? entry.certificate.map { "certificate \($0)" } ?? "no key or certificate"
        return "--credentials \(path), entry \(index + 1) (\(what))"
    }

    private func check() throws {
        var teams: [String: Int] = [:], topics: [String: Int] = [:]
        for (index, entry) in entries.enumerated() {
            func fail(_ problem: String) -> FileInputError { FileInputError(description: "\(name(index)): \(problem)") }
            switch (entry.teamID != nil || entry.keyID != nil || entry.key != nil, entry.certificate != nil) {
            case (true, true): throw fail("give a key (team_id, key_id, key) or a certificate, not both")
            case (false, false): throw fail("give a key (team_id, key_id and key: the AuthKey .p8) or a certificate (certificate, private_key)")
            case (true, false):
                guard let teamID = entry.teamID, entry.keyID != nil, entry.key != nil else {
                    throw fail("a key needs team_id, key_id and key (the AuthKey_<KEYID>.p8 file)")
                }
                if let other = teams[teamID] {
                    throw fail("team \(teamID) is listed in entry \(other + 1) too: a team has one provider token; list all its topics in one entry")
                }
                teams[teamID] = index
            case (false, true):
                if entry.privateKey == nil, entry.passphraseFile != nil { throw fail("passphrase_file goes with private_key") }
            }
            guard !entry.topics.isEmpty else { throw fail("lists no topics (the bundle ids it serves)") }
            for topic in entry.topics {
                guard Self.isBundleID(topic) else {
                    throw fail("topic '\(topic)' is not a bundle id (dot-separated letters, digits, '-' and '_', no push-type suffix)")
                }
                if let other = topics[topic] { throw fail("topic \(topic) is served by entry \(other + 1) too; give each topic to one entry") }
                topics[topic] = index
            }
            if let environment = entry.environment, Self.environment(environment) == nil {
                throw fail("environment '\(environment)': production or sandbox")
            }
        }
    }

    /// `production`, or `sandbox` (also `development`); nil for anything else.
    static func environment(_ text: String) -> String? {
        switch text {
        case "production": "production"
        case "sandbox", "development": "sandbox"
        default: nil
        }
    }

    /// A bundle id without a push type's suffix.
    static func isBundleID(_ topic: String) -> Bool {
        let parts = topic.split(separator: ".", omittingEmptySubsequences: false)
        guard !topic.isEmpty, parts.allSatisfy({ !$0.isEmpty }) else { return false }
        guard topic.unicodeScalars.allSatisfy({ CharacterSet.alphanumerics.contains($0) || "._-".unicodeScalars.contains($0) }),
              topic.allSatisfy(\.isASCII) else { return false }
        return Array(topic.utf8).withUnsafeBytes { APNsPushType.owningSuffix(of: $0) == nil }
    }

    /// The signing keys the file names (paths resolved), with their ids: what `salvo mock`
    /// takes to play every team of the file.
    var signingKeys: [(path: String, keyID: String, teamID: String)] {
        entries.compactMap { entry in
            guard let key = entry.key, let keyID = entry.keyID, let teamID = entry.teamID else { return nil }
            return (resolve(key), keyID, teamID)
        }
    }

    /// A path of the file, relative to its directory unless absolute.
    private func resolve(_ file: String) -> String {
        guard !file.hasPrefix("/") else { return file }
        return URL(fileURLWithPath: path).deletingLastPathComponent().appendingPathComponent(file).path
    }

    /// One route per entry: `base` (the gateway, the engine and HTTP/2 settings, the trust
    /// of `--ca`) with the entry's key or certificate. Reads every key and certificate now,
    /// so that a bad one stops the run before anything is sent.
    ///
    /// - Parameters:
    ///   - gatewayEnvironment: `production` or `sandbox` for Apple's gateways (an entry of the
    ///     other environment is refused); nil for HOST:PORT (the environment is only checked
    ///     to be one of the two).
    /// - Returns: the routes, and doubts about keys and ids for the user to see.
    func routes(base: SenderConfiguration, gatewayEnvironment: String?, tokenStore: (any ProviderTokenStore)?,
                allowWorldReadableKey: Bool) throws -> ([RoutingSender.Route], warnings: [String]) {
        guard case .http2(let baseOptions) = base.transport else {
            throw FileInputError(description: "--credentials is for the HTTP/2 provider API (--protocol h2)")
        }
        var routes: [RoutingSender.Route] = []
        var warnings: [String] = []
        for (index, entry) in entries.enumerated() {
            if let gatewayEnvironment, let environment = entry.environment.flatMap(Self.environment), environment != gatewayEnvironment {
                throw FileInputError(description: "\(name(index)): its environment is \(environment) but the gateway is "
                                     + "\(gatewayEnvironment): run it against --gateway \(environment), in a run of its own")
            }
            var configuration = base
            var options = baseOptions
            options.topic = entry.topics[0]
            let label: String
            if let teamID = entry.teamID, let keyID = entry.keyID, let key = entry.key {
                let credentials: ProviderCredentials
                do {
                    credentials = try ProviderCredentials(keyFile: resolve(key), keyID: keyID, teamID: teamID,
                                                          allowWorldReadable: allowWorldReadableKey)
                } catch {
                    throw FileInputError(description: "\(name(index)): \(error)")
                }
                warnings += credentials.warnings.map { "\(name(index)): \($0)" }
                options.authentication = .token(credentials)
                options.tokenStore = tokenStore
                label = teamID
            } else if let certificate = entry.certificate {
                var tls = TLSConfiguration.client(
                    certificateChain: .file(resolve(certificate)), privateKey: .file(resolve(entry.privateKey ?? certificate)),
                    passphrase: try entry.passphraseFile.map { try TLSOptions.readPassphrase(resolve($0)) },
                    trustRoots: base.tls.trustRoots)
                tls.verifyPeer = base.tls.verifyPeer
                tls.allowWorldReadableKey = allowWorldReadableKey
                tls.kernelTLS = base.tls.kernelTLS
                // Loaded now, so that a bad certificate or key is told with its entry.
                do { _ = try TLSContext(tls, role: .client) } catch { throw FileInputError(description: "\(name(index)): \(error)") }
                configuration.tls = tls
                options.authentication = .certificate
                label = URL(fileURLWithPath: certificate).lastPathComponent
            } else {
                preconditionFailure("checked when read")
            }
            configuration.transport = .http2(options)
            routes.append(RoutingSender.Route(configuration: configuration, topics: entry.topics, label: label))
        }
        return (routes, warnings)
    }

    private static func describe(_ error: any Error) -> String {
        switch error as? DecodingError {
        case .keyNotFound(let key, let context)?:
            return "missing \"\(key.stringValue)\"" + (context.codingPath.isEmpty ? "" : " at \(path(context.codingPath))")
        case .typeMismatch(_, let context)?, .valueNotFound(_, let context)?:
            return "\(path(context.codingPath)): \(context.debugDescription)"
        case .dataCorrupted(let context)?:
            return context.codingPath.isEmpty ? "not JSON" : "\(path(context.codingPath)): \(context.debugDescription)"
        default:
            return "\(error)"
        }
    }

    private static func path(_ codingPath: [any CodingKey]) -> String {
        codingPath.map { $0.intValue.map { "entry \($0 + 1)" } ?? $0.stringValue }.joined(separator: " ")
    }
}
