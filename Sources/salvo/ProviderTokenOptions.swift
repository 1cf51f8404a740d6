import ArgumentParser
import Foundation
import SalvoEngine
import SalvoPostgres

/// Token authentication's flags: the signing key and its ids, and where the team's provider
/// token is shared. One group for every command that talks to APNs with a token (`send`,
/// `campaign run`, `channel`), so that all of them take the same token from the same place.
struct ProviderTokenOptions: ParsableArguments {
    @Option(name: .customLong("auth-key"),
            help: ArgumentHelp("Token authentication: the AuthKey_<KEYID>.p8 signing key (instead of --cert).", valueName: "file"))
    var authKey: String?

    @Option(name: .customLong("key-id"), help: ArgumentHelp("Token authentication: the key's id (10 characters).", valueName: "id"))
    var keyID: String?

    @Option(name: .customLong("team-id"), help: ArgumentHelp("Token authentication: your team id (10 characters).", valueName: "id"))
    var teamID: String?

    @Option(name: .customLong("credentials"),
            help: ArgumentHelp("Several apps and teams in one run (send, campaign run): a JSON file of keys and certificates, each with the topics it serves (instead of --auth-key or --cert; see `salvo send --help`).",
                               valueName: "file"))
    var credentialsFile: String?

    @Option(name: .customLong("token-cache"),
            help: ArgumentHelp("Token authentication: the file this machine's runs share the team's provider token in "
                               + "(default: $XDG_STATE_HOME/salvo/provider-tokens, or ~/.local/state/salvo/provider-tokens).",
                               valueName: "file"))
    var tokenCache: String?

    @Flag(name: .customLong("no-token-cache"),
          help: "Token authentication: sign this run's own provider token, shared with no other run.")
    var noTokenCache = false

    @Option(name: .customLong("token-store"),
            help: ArgumentHelp("Token authentication: share the team's provider token through PostgreSQL with senders on "
                               + "other machines (campaign run: its --db unless told otherwise).", valueName: "postgres://…"))
    var tokenStore: String?

    /// The first of these flags given, for messages about flags that do not apply.
    var givenFlag: String? {
        firstGivenFlag([("--auth-key", authKey != nil), ("--key-id", keyID != nil), ("--team-id", teamID != nil),
                        ("--credentials", credentialsFile != nil),
                        ("--token-cache", tokenCache != nil), ("--no-token-cache", noTokenCache),
                        ("--token-store", tokenStore != nil)])
    }

    /// The first of the token store's flags given, if any.
    private var tokenStoreFlag: String? {
        firstGivenFlag([("--token-cache", tokenCache != nil), ("--no-token-cache", noTokenCache),
                        ("--token-store", tokenStore != nil)])
    }

    func validate() throws {
        switch (authKey, keyID, teamID) {
        case (nil, nil, nil), (_?, _?, _?): break
        case (_?, _, _): throw ValidationError("--auth-key needs --key-id and --team-id (both on the key's page in your developer account)")
        case (nil, _, _): throw ValidationError("--key-id and --team-id go with --auth-key AuthKey_<KEYID>.p8")
        }
        let storeFlags = [tokenCache != nil, noTokenCache, tokenStore != nil].filter { $0 }.count
        if storeFlags > 1 { throw ValidationError("give one of --token-cache, --no-token-cache and --token-store") }
        if credentialsFile != nil, authKey != nil {
            throw ValidationError("give --credentials FILE (several apps and teams) or --auth-key, not both: list the key in the file")
        }
        if let flag = tokenStoreFlag, authKey == nil, credentialsFile == nil {
            throw ValidationError("\(flag) goes with --auth-key or --credentials (token authentication)")
        }
    }

    /// Where the team's provider token is shared: `--token-store`, `--token-cache`, the
    /// `fallback` when neither is given (campaign run: its database), else the default
    /// cache; nil with `--no-token-cache` or without token authentication. A cache that
    /// cannot be used is refused here, before anything is sent.
    func providerTokenStore(fallback: (any ProviderTokenStore)? = nil) throws -> (any ProviderTokenStore)? {
        guard authKey != nil || credentialsFile != nil, !noTokenCache else { return nil }
        if let tokenStore {
            do { return PostgresTokenStore(url: try DatabaseURL(tokenStore)) } catch {
                throw ValidationError(error.description.replacingOccurrences(of: "--db", with: "--token-store"))
            }
        }
        if tokenCache == nil, let fallback { return fallback }
        guard let path = tokenCache ?? ProviderTokenCache.defaultPath(environment: ProcessInfo.processInfo.environment) else {
            throw ValidationError("no place for the token cache: neither XDG_STATE_HOME nor HOME is set; give --token-cache FILE "
                                  + "or --no-token-cache")
        }
        let cache = ProviderTokenCache(path: path)
        do { try cache.check() } catch { throw ValidationError(error.description) }
        return cache
    }

    /// The signing key these flags name, nil without `--auth-key`. Reads the `.p8` file,
    /// refusing one every user may read unless `allowWorldReadableKey`.
    func credentials(allowWorldReadableKey: Bool) throws -> ProviderCredentials? {
        guard let authKey, let keyID, let teamID else { return nil }
        return try ProviderCredentials(keyFile: authKey, keyID: keyID, teamID: teamID, allowWorldReadable: allowWorldReadableKey)
    }
}
