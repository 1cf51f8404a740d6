import ArgumentParser
import Foundation
import Logging
import SalvoIO
import SalvoPostgres
import SalvoServe

/// `salvo serve --db`: notifications journaled in PostgreSQL before they are answered.
struct ServeJournalOptions: ParsableArguments {
    @Option(help: ArgumentHelp("Journal every notification in this database before answering 202, and send what a serve "
                               + "killed or crashed on it left: postgres://user:password@host:port/database. With --gateway "
                               + "production or sandbox, 410s and bad tokens also invalidate the token in its device registry.",
                               valueName: "url"))
    var db: String?

    @Option(name: .customLong("lease-seconds"),
            help: ArgumentHelp("With --db: how long this serve's hold on what it took lasts unless renewed: how soon "
                               + "another serve (or the next run) sends what a dead one held.", valueName: "s"))
    var leaseSeconds: Double = 10

    func validate() throws {
        if let db {
            do { _ = try DatabaseURL(db) } catch { throw ValidationError(error.description) }
        }
        guard leaseSeconds >= 0.3 else { throw ValidationError("--lease-seconds must be at least 0.3") }
    }

    /// The journal, connected; nil without --db. Refusals prune the registry of `gateway`'s
    /// environment (Apple's gateways only), `defaultTopic` for notifications that name none.
    /// A database error is printed: exit 2 (the user's to fix: unreachable, credentials, a
    /// newer schema) or 1.
    func connect(gateway: String, defaultTopic: String?, logger: Logger) async throws -> NotificationJournal? {
        guard let db else { return nil }
        // Unique per run, a random part included: a restarted serve (pid 1 again in a
        // container) must not take its previous run's leases for its own.
        let instance = "\(ProcessInfo.processInfo.hostName)-\(getpid())-\(String(UInt32.random(in: .min ... .max), radix: 16))"
        do {
            return try await NotificationJournal.connect(try DatabaseURL(db), instance: instance,
                                                         leaseDuration: .milliseconds(Int64(leaseSeconds * 1000)),
                                                         registry: Self.registry(gateway: gateway, defaultTopic: defaultTopic),
                                                         logger: logger)
        } catch {
            printError("salvo serve: \(error)")
            throw ExitCode(error.isUsageError ? 2 : 1)
        }
    }

    /// The registry a gateway's refusals prune: Apple's environments only (a relay or a mock
    /// at host:port says nothing of which environment its tokens belong to).
    static func registry(gateway: String, defaultTopic: String?) -> ServeJournal.Registry? {
        guard gateway == "production" || gateway == "sandbox", let environment = RegistryScope.Environment(rawValue: gateway)
        else { return nil }
        return ServeJournal.Registry(environment: environment, defaultTopic: defaultTopic)
    }
}
