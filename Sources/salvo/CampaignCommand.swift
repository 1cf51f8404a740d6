import ArgumentParser
import Foundation
import SalvoPostgres
import SalvoCampaignFiles
import SalvoEngine
import SalvoIO

/// `salvo campaign`: campaigns in PostgreSQL, sent by any number of workers.
struct CampaignCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "campaign",
        abstract: "Campaigns in PostgreSQL, shared by any number of `salvo campaign run` workers.",
        discussion: """
            create loads a campaign (COPY, streamed); run sends it: each worker leases chunks \
            (FOR UPDATE SKIP LOCKED, with an expiry), sends them with its own connections and writes \
            their outcomes back; a worker that dies leaves its chunks to be taken over when their leases \
            expire. status shows progress and the report; rejected lists rejected tokens; cancel stops it.
            """,
        subcommands: [Create.self, Run.self, Status.self, Rejected.self, Cancel.self])
}

/// `--db URL` and `--name N`, shared by the campaign subcommands.
struct CampaignTarget: ParsableArguments {
    @Option(help: ArgumentHelp("The database: postgres://user:password@host:port/database.", valueName: "url"))
    var db: String

    @Option(help: ArgumentHelp("The campaign's name.", valueName: "name"))
    var name: String

    func validate() throws {
        do { _ = try DatabaseURL(db) } catch { throw ValidationError(error.description) }
        guard !name.isEmpty else { throw ValidationError("--name must not be empty") }
    }
}

/// `--topic` and `--environment`: the registry's app and environment.
struct RegistryScopeOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The app's bundle id the tokens belong to, in the device registry.", valueName: "bundle-id"))
    var topic: String?

    @Option(help: "The APNs environment of the tokens: production or sandbox.")
    var environment: RegistryScope.Environment = .production

    var scope: RegistryScope? { topic.map { RegistryScope(topic: $0, environment: environment) } }
}

extension RegistryScope.Environment: ExpressibleByArgument {
    /// APNs' environments only: Push Channel tokens are scoped by `salvo send --target blackberry --app-id`.
    public init?(argument: String) {
        guard let environment = Self(rawValue: argument), Self.apns.contains(environment) else { return nil }
        self = environment
    }

    /// The values `--environment` takes, for help and errors.
    public static var allValueStrings: [String] { apns.map(\.rawValue) }
}

/// Runs `body` with a connected database; a database error is printed, exit 2 (the user's
/// to fix: unreachable, credentials, newer schema, a name taken) or 1.
func withCampaignDatabase<T>(_ url: String, command: String, _ body: (CampaignDatabase) async throws -> T) async throws -> T {
    do {
        let database = try await CampaignDatabase.connect(try DatabaseURL(url))
        do {
            let value = try await body(database)
            await database.close()
            return value
        } catch {
            await database.close()
            throw error
        }
    } catch let error as CampaignStoreError {
        printError("salvo \(command): \(error)")
        throw ExitCode(error.isUsageError ? 2 : 1)
    }
}

extension CampaignCommand {
    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Load a campaign into the database (COPY, streamed: memory does not grow with the file).",
            discussion: """
                From a file: --input FILE.jsonl ({"token", "payload"} per line, optional "expiry" and \
                "priority"), or --tokens FILE with --payload FILE.json. Its tokens are added to the device \
                registry under --topic (and --environment), and tokens the registry has invalidated are left \
                out, unless --no-registry. From the registry: --from-registry --topic T --payload FILE.json \
                [--seen-since DATE]: every valid token of T.
                """)

        @OptionGroup var target: CampaignTarget

        @Option(help: ArgumentHelp("A JSONL campaign: one {\"token\", \"payload\"} object per line.", valueName: "file"))
        var input: String?

        @Option(help: ArgumentHelp("A list of hex device tokens, one per line (use with --payload).", valueName: "file"))
        var tokens: String?

        @Option(help: ArgumentHelp("The JSON payload sent to every token of --tokens or --from-registry.", valueName: "file"))
        var payload: String?

        @Flag(name: .customLong("from-registry"), help: "Send to every valid token of --topic in the device registry.")
        var fromRegistry = false

        @Option(name: .customLong("seen-since"),
                help: ArgumentHelp("With --from-registry: only tokens seen since this date (ISO 8601, e.g. 2026-11-01 or 2026-11-01T12:00:00Z).",
                                   valueName: "date"))
        var seenSince: String?

        @OptionGroup(title: "Device registry")
        var registry: RegistryScopeOptions

        @Flag(name: .customLong("no-registry"), help: "Leave the device registry alone: neither add the file's tokens nor skip invalidated ones.")
        var noRegistry = false

        @Option(name: .customLong("chunk-size"),
                help: ArgumentHelp("Notifications per chunk: what a worker leases, and at most what a worker that dies may have sent twice.",
                                   valueName: "n"))
        var chunkSize = 10_000

        @Option(name: .customLong("on-bad-line"), help: "abort (default) or skip lines that cannot be sent.")
        var onBadLine: CampaignOptions.BadLineChoice = .abort

        @Flag(help: "Replace a campaign of the same name.")
        var replace = false

        func validate() throws {
            guard (1...CampaignDefinition.maximumChunkSize).contains(chunkSize) else {
                throw ValidationError("--chunk-size must be 1 to \(CampaignDefinition.maximumChunkSize)")
            }
            if fromRegistry {
                if let flag = firstGivenFlag([("--input", input != nil), ("--tokens", tokens != nil), ("--no-registry", noRegistry)]) {
                    throw ValidationError("--from-registry reads the registry: \(flag) does not go with it")
                }
                guard registry.topic != nil else { throw ValidationError("--from-registry needs --topic BUNDLE_ID") }
                guard payload != nil else { throw ValidationError("--from-registry needs --payload FILE.json") }
                if let seenSince, Self.date(seenSince) == nil {
                    throw ValidationError("--seen-since \(seenSince): not a date (2026-11-01 or 2026-11-01T12:00:00Z)")
                }
            } else {
                if seenSince != nil { throw ValidationError("--seen-since goes with --from-registry") }
                try CampaignOptions.validateInput(input: input, tokens: tokens, payload: payload)
                if registry.topic == nil, !noRegistry {
                    throw ValidationError("the device registry needs the tokens' --topic BUNDLE_ID (or give --no-registry)")
                }
            }
        }

        static func date(_ text: String) -> Date? {
            let full = ISO8601DateFormatter()
            let day = ISO8601DateFormatter()
            day.formatOptions = [.withFullDate]
            return full.date(from: text) ?? day.date(from: text)
        }

        func run() async throws {
            let campaignInput: CampaignInput
            do {
                let payloadBytes = try payload.map { try readWholeFile($0, limit: 1 << 20, what: "payload file") }
                if fromRegistry {
                    campaignInput = .registry(seenSince: seenSince.flatMap(Self.date), payload: payloadBytes!)
                } else {
                    let policy: BadLinePolicy = onBadLine == .skip ? .skip : .abort
                    campaignInput = .file(input.map { .jsonl($0) } ?? .tokens(tokens!, payload: payloadBytes!), onBadLine: policy)
                }
            } catch {
                printError("salvo campaign create: \(error)")
                throw ExitCode(2)
            }
            let definition = CampaignDefinition(name: target.name, input: campaignInput, registry: noRegistry ? nil : registry.scope,
                                                chunkSize: chunkSize, replace: replace)
            let created = try await withCampaignDatabase(target.db, command: "campaign create") { database in
                try await CampaignStore(database).create(definition)
            }
            var line = "campaign \(target.name): \(counted(created.total, "notification")) in \(counted(created.chunks, "chunk"))"
            if created.skippedInvalidated > 0 {
                line += "; \(counted(created.skippedInvalidated, "token")) left out (invalidated in the registry)"
            }
            if created.badLineCount > 0 {
                line += "; \(counted(created.badLineCount, "bad line")) skipped: "
                    + created.badLines.prefix(10).map(\.description).joined(separator: "; ")
            }
            print(line)
        }
    }

    struct Run: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Send a campaign from the database as one of any number of workers.",
            discussion: """
                Takes `salvo send`'s gateway, TLS, HTTP/2 and engine flags. Leases a chunk at a time, \
                sends it, writes its outcome back, until none is left. Start as many as you like, on any \
                machines. Exit status: 0 when every notification of this worker's chunks was accepted or \
                rejected; 1 when any failed or the database was lost mid-run; 2 for usage errors, an \
                unreachable database or refused credentials.
                """)

        @OptionGroup var target: CampaignTarget

        @Option(help: ArgumentHelp("The gateway: production, sandbox (Apple's HTTP/2 API), host:port or [ipv6]:port.",
                                   valueName: "host:port"))
        var gateway: String

        @Option(name: .customLong("protocol"),
                help: "h2 (Apple's HTTP/2 provider API) or binary. Default: h2 for production and sandbox, binary for host:port.")
        var wireProtocol: WireProtocol?

        @OptionGroup(title: "HTTP/2 (--protocol h2)")
        var http2: ProviderAPIOptions

        @OptionGroup(title: "TLS")
        var tls: TLSOptions

        @OptionGroup(title: "Engine")
        var engine: EngineOptions

        @OptionGroup(title: "Proxy")
        var proxy: ProxyOptions

        @Option(help: ArgumentHelp("This worker's name, unique among the campaign's workers. Default: host-pid.", valueName: "name"))
        var worker: String?

        @Option(name: .customLong("lease-seconds"),
                help: ArgumentHelp("How long a chunk's lease lasts unless renewed: how soon another worker takes over the chunks of one that died.",
                                   valueName: "s"))
        var leaseSeconds: Double = 10

        func validate() throws {
            try SendCommand.validateGateway(gateway, wireProtocol, http2: http2, tls: tls, engine: engine)
            _ = try proxyConfiguration()
            guard leaseSeconds >= 0.3 else { throw ValidationError("--lease-seconds must be at least 0.3") }
        }

        /// `--proxy`, or the environment's, for the gateway's host.
        func proxyConfiguration() throws -> ProxyConfiguration? {
            let host = try Endpoint(parsing: gateway, service: ProviderAPIOptions.wireProtocol(wireProtocol, gateway: gateway).service).host
            return try proxy.configuration(for: host)
        }

        /// The worker's last line: what it did, its possible duplicates counted as `campaign
        /// status` counts them (takeovers included), and said where they come from.
        static func render(_ summary: CampaignWorker.Summary, worker: String) -> String {
            func number(_ n: Int) -> String { n.formatted(.number.grouping(.automatic)) }
            var line = "worker \(worker): \(counted(summary.chunks, "chunk")) (\(number(summary.takeovers)) taken over, "
                + "\(number(summary.lostLeases)) lost); accepted \(number(summary.accepted)), rejected \(number(summary.rejected)), "
                + "failed \(number(summary.failed)), possible duplicates \(number(summary.possibleDuplicates))"
            if summary.takeoverDuplicates > 0 {
                line += " (\(number(summary.takeoverDuplicates)) in the chunks it took over: what the workers before it may have "
                    + "sent after their last write-back; \(number(summary.possibleDuplicates - summary.takeoverDuplicates)) "
                    + "resent after silent drops)"
            }
            line += summary.cancelled ? "; the campaign was cancelled" : ""
            for (topic, counts) in summary.byTopic.sorted(by: { $0.key < $1.key }) {
                line += "\n  \(topic): accepted \(number(counts.accepted)), rejected \(number(counts.rejected)), "
                    + "failed \(number(counts.failed))"
            }
            return line
        }

        func run() async throws {
            // The workers of a campaign share the team's provider token through its database.
            let database = try? DatabaseURL(target.db)
            let (configuration, _) = try SendCommand.senderConfiguration(
                gateway, wireProtocol, http2: http2, tls: tls, engine: engine, command: "campaign run",
                proxy: proxyConfiguration(), tokenStore: database.map(PostgresTokenStore.init))
            let routes = try SendCommand.credentialRoutes(http2, gateway: gateway, base: configuration, tls: tls,
                                                          command: "campaign run", tokenStore: database.map(PostgresTokenStore.init))
            let name = worker ?? "\(ProcessInfo.processInfo.hostName)-\(getpid())"
            let settings = CampaignWorker.Settings(name: name, leaseDuration: .milliseconds(Int(leaseSeconds * 1000)))
            let summary: CampaignWorker.Summary
            do {
                let url = try DatabaseURL(target.db)
                summary = try await CampaignWorker(database: url, campaign: target.name, configuration: configuration,
                                                   routes: routes, defaultTopic: http2.topic, settings: settings).run()
            } catch let error as CampaignStoreError {
                printError("salvo campaign run: \(error)")
                throw ExitCode(error.isUsageError ? 2 : 1)
            } catch {
                printError("salvo campaign run: \(error)")
                throw ExitCode(1)
            }
            print(Self.render(summary, worker: name))
            if summary.failed > 0 { throw ExitCode(1) }
        }
    }

    struct Status: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "A campaign's progress per worker and in total, its rate, and its report.")

        @OptionGroup var target: CampaignTarget

        @Option(help: ArgumentHelp("Write the report, the JSON of `salvo send --report`, to this file.", valueName: "file"))
        var report: String?

        func run() async throws {
            let status = try await withCampaignDatabase(target.db, command: "campaign status") { database in
                try await CampaignStore(database).status(of: target.name)
            }
            print(Self.render(status))
            if let report {
                do {
                    try CampaignRun.writeReport(status.report, badLines: [], badLineCount: 0, resumedAfter: 0, to: report)
                } catch {
                    printError("salvo campaign status: cannot write the report to \(report): \(error)")
                    throw ExitCode(1)
                }
            }
        }

        /// A rate as people read it: whole numbers, grouped; a tenth below 10.
        static func rate(_ perSecond: Double) -> String {
            perSecond < 10 ? String(format: "%.1f", perSecond) : Int(perSecond.rounded()).formatted(.number.grouping(.automatic))
        }

        static func render(_ status: CampaignStatus) -> String {
            func number(_ n: Int) -> String { n.formatted(.number.grouping(.automatic)) }
            func breakdown(_ counts: [String: Int]) -> String {
                counts.isEmpty ? "" : "  (" + counts.sorted { $0.key < $1.key }.map { "\($0.key): \(number($0.value))" }
                    .joined(separator: ", ") + ")"
            }
            let report = status.report
            let state = status.isCancelled ? "cancelled" : status.isFinished ? "finished" : "sending"
            let spoken = status.protocols.isEmpty ? "" : status.isHTTP2 ? ", HTTP/2"
                : status.protocols == ["binary"] ? ", binary protocol" : ", HTTP/2 and binary protocol"
            var lines = [
                "campaign \(status.name) (\(state)\(spoken)): \(counted(status.total, "notification")), \(number(report.submitted)) "
                    + "final; chunks \(number(status.doneChunks))/\(number(status.chunks)) done, \(number(status.leasedChunks)) "
                    + "leased, \(number(status.takeovers)) taken over; \(Self.rate(status.ratePerSecond)) /s over "
                    + "\(String(format: "%.2f", report.seconds)) s active (from the first lease to the last write-back"
                    + (status.leasedChunks > 0 ? ", now" : "") + ")",
            ]
            for worker in status.workers {
                lines.append("  worker \(worker.name): \(counted(worker.chunks, "chunk")), \(number(worker.final)) final "
                             + "(\(number(worker.accepted)) accepted), last write-back "
                             + "\(String(format: "%.1f", worker.secondsSinceSeen)) s ago")
            }
            lines.append("  accepted  \(number(report.accepted))")
            lines.append("  rejected  \(number(report.rejected))" + breakdown(report.rejectedByReason))
            lines.append("  failed    \(number(report.failed))" + breakdown(report.failedByReason))
            for (topic, counts) in report.byTopic.sorted(by: { $0.key < $1.key }) {
                lines.append("  \(topic): accepted \(number(counts.accepted)), rejected \(number(counts.rejected))"
                             + breakdown(counts.rejectedByReason) + ", failed \(number(counts.failed))" + breakdown(counts.failedByReason))
            }
            var duplicates = "  resent \(number(report.resent)), possible duplicates \(number(report.possibleDuplicates))"
            if status.takeoverDuplicates > 0 {
                duplicates += " (\(number(status.takeoverDuplicates)) in chunks taken over: what workers whose leases expired may "
                    + "have sent after their last write-back; \(number(report.possibleDuplicates - status.takeoverDuplicates)) "
                    + "resent after silent drops)"
            }
            lines.append(duplicates)
            lines.append(report.isComplete ? "  accounting: complete (final = accepted + rejected + failed)"
                                           : "  accounting: INCOMPLETE")
            return lines.joined(separator: "\n")
        }
    }

    struct Rejected: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "The campaign's rejected tokens as CSV: token,status,reason,timestamp (as salvo send --rejected).")

        @OptionGroup var target: CampaignTarget

        @Flag(help: "CSV (the only format; the flag says so in scripts).")
        var csv = false

        func run() async throws {
            let count = try await withCampaignDatabase(target.db, command: "campaign rejected") { database in
                try await CampaignStore(database).writeRejected(of: target.name) { print($0, terminator: "") }
            }
            printError("\(count) rejected")
        }
    }

    struct Cancel: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Cancel a campaign: its workers stop at their next lease renewal, after what they sent is final and counted.")

        @OptionGroup var target: CampaignTarget

        func run() async throws {
            let wasRunning = try await withCampaignDatabase(target.db, command: "campaign cancel") { database in
                try await CampaignStore(database).cancel(target.name)
            }
            print(wasRunning ? "campaign \(target.name) cancelled" : "campaign \(target.name) was cancelled already")
        }
    }
}
