import Foundation
import PostgresNIO
import SalvoCampaignFiles
import SalvoEngine

/// Why the campaign store could not do what it was asked, said for the user.
public struct CampaignStoreError: Error, Sendable, CustomStringConvertible {
    /// What went wrong, and where.
    public var description: String
    /// Whether the user must fix the command or the input (unreachable database, refused
    /// credentials, a newer schema, a name taken, a bad file): `salvo` exits with 2.
    public var isUsageError: Bool

    /// An error saying `description`.
    public init(_ description: String, isUsageError: Bool = true) {
        self.description = description
        self.isUsageError = isUsageError
    }
}

/// Where the database is: `postgres://user:password@host:port/database`, or
/// `postgres://user@/database?host=/socket/directory` for a Unix socket.
public struct DatabaseURL: Sendable, CustomStringConvertible {
    /// The connection settings postgres-nio takes.
    let configuration: PostgresConnection.Configuration
    /// The URL without its password, for messages.
    public let description: String
    /// The user, for messages about refused credentials.
    let user: String
    /// Where a connection goes, for messages: `host:port`, or the socket's path.
    let endpoint: Endpoint

    /// Where a connection goes.
    enum Endpoint: Sendable {
        case tcp(host: String, port: Int)
        case socket(path: String, directory: String, port: Int)
    }

    /// Parses `text`; throws a `CampaignStoreError` naming what is wrong with it.
    public init(_ text: String) throws(CampaignStoreError) {
        guard let components = URLComponents(string: text), ["postgres", "postgresql"].contains(components.scheme ?? "") else {
            throw CampaignStoreError("--db \(Self.redacted(text)): not a postgres:// URL (postgres://user:password@host:port/database)")
        }
        let user = components.user.flatMap { $0.removingPercentEncoding } ?? "postgres"
        let password = components.password.flatMap { $0.removingPercentEncoding }
        let database = components.path.isEmpty ? nil : String(components.path.dropFirst()).removingPercentEncoding
        let socketDirectory = components.queryItems?.first { $0.name == "host" }?.value
        let port = components.port ?? 5432
        var shown = components
        if shown.password != nil { shown.password = "***" }
        description = shown.string ?? "postgres://"
        self.user = user
        if let socketDirectory, socketDirectory.hasPrefix("/") {
            let path = "\(socketDirectory)/.s.PGSQL.\(port)"
            configuration = .init(unixSocketPath: path, username: user, password: password, database: database)
            endpoint = .socket(path: path, directory: socketDirectory, port: port)
        } else {
            guard let host = components.host, !host.isEmpty else {
                throw CampaignStoreError("--db \(description): no host (postgres://user:password@host:port/database)")
            }
            configuration = .init(host: host, port: port, username: user, password: password, database: database, tls: .disable)
            endpoint = .tcp(host: host, port: port)
        }
    }

    private static func redacted(_ text: String) -> String {
        guard var components = URLComponents(string: text), components.password != nil else { return text }
        components.password = "***"
        return components.string ?? "(unparseable)"
    }
}

/// One connection to the campaign database, with the schema checked.
///
/// Every value reaches the server as a bound parameter (postgres-nio's `PostgresQuery`
/// interpolation); no SQL text is ever built from input.
public final class CampaignDatabase: Sendable {
    let connection: PostgresConnection
    let logger: Logger
    /// Where it is, for messages.
    public let url: DatabaseURL

    /// Connects and brings the schema up to date (refusing a newer one).
    ///
    /// - Parameters:
    ///   - url: where the database is.
    ///   - applicationName: what `pg_stat_activity` shows for the connection.
    /// - Throws: `CampaignStoreError`: the database is unreachable, refuses the credentials,
    ///   or holds a schema of a newer Salvo.
    public static func connect(_ url: DatabaseURL, applicationName: String = "salvo") async throws(CampaignStoreError)
        -> CampaignDatabase
    {
        var logger = Logger(label: "salvo.campaigns")
        logger.logLevel = .critical
        var configuration = url.configuration
        configuration.options.additionalStartupParameters.append(("application_name", applicationName))
        let connection: PostgresConnection
        do {
            connection = try await PostgresConnection.connect(configuration: configuration, id: 1, logger: logger)
        } catch {
            throw Self.describe(error, connecting: url)
        }
        let database = CampaignDatabase(connection: connection, logger: logger, url: url)
        do {
            try await Schema.prepare(database)
        } catch let error as CampaignStoreError {
            await database.close()
            throw error
        } catch {
            await database.close()
            throw database.describe(error, while: "preparing the schema")
        }
        return database
    }

    private init(connection: PostgresConnection, logger: Logger, url: DatabaseURL) {
        self.connection = connection
        self.logger = logger
        self.url = url
    }

    /// Closes the connection.
    public func close() async { try? await connection.close() }

    @discardableResult
    func query(_ query: PostgresQuery) async throws -> PostgresRowSequence {
        // postgres-nio 1.33.2 never answers a query written to a connection the server has
        // closed (pg_terminate_backend, a restart): ask first, so that a lost database is
        // an error, not a wait without end.
        try checkOpen()
        return try await connection.query(query, logger: logger)
    }

    /// Throws when the connection is closed.
    func checkOpen() throws(CampaignStoreError) {
        guard !connection.isClosed else {
            throw CampaignStoreError("\(url): lost the connection to the database", isUsageError: false)
        }
    }

    /// Runs `body` in a transaction: committed when it returns, rolled back when it throws
    /// (its error is rethrown as it was).
    func transaction<T: Sendable>(_ body: (CampaignDatabase) async throws -> T) async throws -> T {
        try await query("BEGIN")
        do {
            let value = try await body(self)
            try await query("COMMIT")
            return value
        } catch {
            _ = try? await query("ROLLBACK")
            throw error
        }
    }

    /// Runs `body` in a transaction (`transaction(_:)`), and again when PostgreSQL aborted
    /// it to break a deadlock or a serialization conflict (SQLSTATE 40P01, 40001), up to
    /// `attempts` runs in all: such an abort says nothing about the transaction itself, and
    /// PostgreSQL asks clients to retry it. Only for a body that does nothing but queries:
    /// it may run more than once.
    func transaction<T: Sendable>(retryingConflicts attempts: Int,
                                  _ body: (CampaignDatabase) async throws -> T) async throws -> T {
        var attempt = 1
        while true {
            do {
                return try await transaction(body)
            } catch where attempt < attempts && Self.isConflict(error) {
                attempt += 1
            }
        }
    }

    /// Whether `error` is PostgreSQL aborting a transaction to let a concurrent one go on.
    static func isConflict(_ error: any Error) -> Bool {
        // 40P01 deadlock_detected, 40001 serialization_failure.
        guard let state = (error as? PSQLError)?.serverInfo?[.sqlState] else { return false }
        return state == "40P01" || state == "40001"
    }

    /// `error` from a query, as a message naming the database and what was being done.
    func describe(_ error: any Error, while doing: String) -> CampaignStoreError {
        if let error = error as? CampaignStoreError { return error }
        if let error = error as? CampaignError { return CampaignStoreError(error.description) }
        guard let error = error as? PSQLError else { return CampaignStoreError("\(url): \(doing): \(error)", isUsageError: false) }
        if let message = error.serverInfo?[.message] {
            let state = error.serverInfo?[.sqlState].map { " (SQLSTATE \($0))" } ?? ""
            return CampaignStoreError("\(url): \(doing): \(message)\(state)", isUsageError: false)
        }
        return CampaignStoreError("\(url): \(doing): lost the connection to the database (\(error.code))", isUsageError: false)
    }

    /// A failed connection attempt as a message: unreachable, or refused credentials.
    static func describe(_ error: any Error, connecting url: DatabaseURL) -> CampaignStoreError {
        guard let error = error as? PSQLError else { return CampaignStoreError("cannot reach the database \(url): \(error)") }
        if let state = error.serverInfo?[.sqlState] {
            let message = error.serverInfo?[.message] ?? "refused"
            // 28P01 invalid_password, 28000 invalid_authorization_specification.
            if state.hasPrefix("28") {
                return CampaignStoreError("the database \(url) refused the credentials of user \(url.user): \(message)")
            }
            return CampaignStoreError("the database \(url) refused the connection: \(message) (SQLSTATE \(state))")
        }
        let cause = error.underlying.map { "\($0)" } ?? "\(error.code)"
        return CampaignStoreError("cannot reach the database \(url): " + unreachable(url.endpoint, cause: cause))
    }

    /// Why nothing answered at `endpoint`, and what to check, from postgres-nio's `cause`
    /// (its errors name system calls and socket types, not what the user can do).
    static func unreachable(_ endpoint: DatabaseURL.Endpoint, cause: String) -> String {
        switch endpoint {
        case .socket(let path, let directory, let port):
            if cause.contains("No such file") {
                return "there is no PostgreSQL socket \(path); is PostgreSQL running, with \(directory) among its "
                    + "unix_socket_directories and port \(port)? (check --db's host= and port)"
            }
            if cause.contains("Permission denied") {
                return "permission denied on the socket \(path): this user may not enter \(directory) or use the socket"
            }
            if cause.contains("Connection refused") {
                return "nothing accepts connections on the socket \(path) (a stale socket file?); is PostgreSQL running?"
            }
            return "cannot connect to the socket \(path) (\(cause)); is PostgreSQL running?"
        case .tcp(let host, let port):
            if cause.contains("Connection refused") {
                return "nothing listens on \(host) port \(port) (connection refused); is PostgreSQL running there, and "
                    + "listening on that address and port (listen_addresses and port in postgresql.conf)?"
            }
            if cause.contains("UnknownHost") || cause.contains("Name or service not known") || cause.contains("DNS error") {
                return "the host name \(host) is not known (DNS); check --db's host"
            }
            if cause.contains("unreachable") || cause.contains("No route") {
                return "no route to \(host) (network unreachable); check --db's host and this machine's network"
            }
            if cause.contains("connectTimeout") || cause.contains("timed out") || cause.contains("serverClosedConnection") {
                return "no answer from \(host) port \(port) within the connect timeout; is the host up, the port right, "
                    + "and no firewall dropping the connection?"
            }
            return "cannot connect to \(host) port \(port) (\(cause)); is PostgreSQL running there?"
        }
    }
}
