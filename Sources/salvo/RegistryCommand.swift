import ArgumentParser
import Foundation
import SalvoPostgres

/// `salvo registry`: the device-token registry in PostgreSQL.
struct RegistryCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "registry",
        abstract: "The device-token registry: import tokens, or serve the registration endpoint apps call.",
        discussion: """
            Table devices: token, topic, environment, registered and last-seen times, and when and why a \
            token was invalidated. Campaigns prune it (410 Unregistered unless registered again after \
            Apple's timestamp, BadDeviceToken, binary status 8; salvo feedback --db) and skip what it \
            has invalidated.
            """,
        subcommands: [Import.self, Serve.self])
}

extension RegistryCommand {
    struct Import: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load a file of hex tokens into the registry (COPY, streamed), as registrations of --topic.")

        @Option(help: ArgumentHelp("The database: postgres://user:password@host:port/database.", valueName: "url"))
        var db: String

        @Option(help: ArgumentHelp("A list of hex device tokens, one per line.", valueName: "file"))
        var tokens: String

        @Option(help: ArgumentHelp("The app's bundle id the tokens belong to.", valueName: "bundle-id"))
        var topic: String

        @Option(help: "The APNs environment of the tokens: production or sandbox.")
        var environment: RegistryScope.Environment = .production

        func validate() throws {
            do { _ = try DatabaseURL(db) } catch { throw ValidationError(error.description) }
            guard !topic.isEmpty else { throw ValidationError("--topic must not be empty: give the app's bundle id") }
            try refuseDirectory(tokens, flag: "--tokens")
        }

        func run() async throws {
            let count = try await withCampaignDatabase(db, command: "registry import") { database in
                try await DeviceRegistry(database).importTokens(from: tokens, into: RegistryScope(topic: topic, environment: environment))
            }
            print("imported \(count) token\(count == 1 ? "" : "s") into the registry (\(topic), \(environment.rawValue))")
        }
    }

    struct Serve: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Serve the registration endpoint: POST /devices {\"token\", \"topic\", \"environment\"}.",
            discussion: """
                201 for a new token, 200 for one registered again (idempotent; an invalidated token becomes \
                valid again), 400 with the reason for a bad request. Prints the port on its first line.
                """)

        @Option(help: ArgumentHelp("The database: postgres://user:password@host:port/database.", valueName: "url"))
        var db: String

        @Option(help: ArgumentHelp("The port to listen on (0: any free port).", valueName: "port"))
        var port: Int

        @Option(help: ArgumentHelp("The address to listen on.", valueName: "address"))
        var host = "127.0.0.1"

        func validate() throws {
            do { _ = try DatabaseURL(db) } catch { throw ValidationError(error.description) }
            guard (0...65535).contains(port) else { throw ValidationError("--port must be 0...65535") }
        }

        func run() async throws {
            try await withCampaignDatabase(db, command: "registry serve") { database in
                let server: RegistrationServer
                do {
                    server = try await RegistrationServer(registry: DeviceRegistry(database), host: host, port: port)
                } catch {
                    throw CampaignStoreError("cannot listen on \(host):\(port): \(error)")
                }
                print("listening on \(host):\(server.port)")
                fflush(nil)  // all streams: the caller waits for this line
                try await server.run()
            }
        }
    }
}
