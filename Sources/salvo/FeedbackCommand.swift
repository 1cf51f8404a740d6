import ArgumentParser
import SalvoPostgres
import SalvoEngine
import SalvoIO
import SalvoWire

/// `salvo feedback`: prints the tokens the feedback service reports as unusable.
struct FeedbackCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "feedback",
        abstract: "Read the feedback service: tokens that no longer reach their app.",
        discussion: """
            Prints one record per token: when APNs found it unusable (ISO 8601, UTC) and the \
            token in hex. The service forgets what it has sent, so keep the output. Drop a \
            token from your database only if the device has not registered it again since \
            that time.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case csv, json
    }

    @Option(help: ArgumentHelp(
        "The feedback service: host:port, [ipv6]:port, production or sandbox.", valueName: "host:port"))
    var host: String

    @OptionGroup(title: "TLS")
    var tls: TLSOptions

    @OptionGroup(title: "Proxy")
    var proxy: ProxyOptions

    @Option(help: "Output format: csv (with a header line time,token) or json (an array of objects).")
    var format: Format = .csv

    @Option(help: ArgumentHelp("Give up after this many seconds.", valueName: "seconds"))
    var timeout: Int = 30

    @Option(help: ArgumentHelp("Also invalidate the tokens in the device registry of this database (those not registered again since).",
                               valueName: "url"))
    var db: String?

    @OptionGroup(title: "Device registry (--db)")
    var registry: RegistryScopeOptions

    func validate() throws {
        do {
            _ = try Endpoint(parsing: host, service: .feedback)
        } catch {
            throw ValidationError(error.description)
        }
        _ = try proxy.configuration(for: Endpoint(parsing: host, service: .feedback).host)
        guard timeout > 0 else { throw ValidationError("--timeout must be at least 1 second") }
        if let db {
            do { _ = try DatabaseURL(db) } catch { throw ValidationError(error.description) }
            guard registry.topic != nil else { throw ValidationError("--db needs the tokens' --topic BUNDLE_ID") }
        }
    }

    func run() async throws {
        let endpoint = try Endpoint(parsing: host, service: .feedback)
        let context = try tls.makeContext(command: "feedback")
        let proxy = try self.proxy.configuration(for: endpoint.host)
        let tuples: [FeedbackTuple]
        do {
            tuples = try FeedbackClient.fetch(
                host: endpoint.host, port: endpoint.port, context: context, timeout: .seconds(timeout),
                proxy: proxy)
            print(Self.render(tuples, as: format), terminator: "")
            printError("\(tuples.count) token\(tuples.count == 1 ? "" : "s") from \(endpoint)")
        } catch {
            // The service will not send these again: print them before failing.
            if !error.received.isEmpty { print(Self.render(error.received, as: format), terminator: "") }
            throw error
        }
        if let db {
            let invalidated = try await withCampaignDatabase(db, command: "feedback") { database in
                try await DeviceRegistry(database).invalidate(feedback: tuples, in: registry.scope!)
            }
            printError("\(invalidated) invalidated in the registry (the others were registered again since, or unknown)")
        }
    }

    /// The records as text, ending with a newline.
    static func render(_ tuples: [FeedbackTuple], as format: Format) -> String {
        switch format {
        case .csv:
            return "time,token\n" + tuples.map { "\(iso8601(unixSeconds: $0.timestamp)),\($0.token.hex)\n" }.joined()
        case .json:
            // Both values are plain ASCII (digits, dashes, hex), so no escaping is needed.
            let objects = tuples.map { #"  {"time": "\#(iso8601(unixSeconds: $0.timestamp))", "token": "\#($0.token.hex)"}"# }
            return objects.isEmpty ? "[]\n" : "[\n" + objects.joined(separator: ",\n") + "\n]\n"
        }
    }
}
