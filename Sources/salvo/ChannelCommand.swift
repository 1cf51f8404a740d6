import ArgumentParser
import Foundation
import SalvoChannels
import SalvoEngine
import SalvoIO

/// `salvo channel`: an app's broadcast channels (iOS 18 Live Activities) on APNs's channel
/// management gateway.
struct ChannelCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "channel",
        abstract: "Create, read, delete and list an app's broadcast channels (Live Activities, iOS 18).",
        discussion: """
            A broadcast channel updates every Live Activity subscribed to it with one push. \
            Channels live on APNs's management gateway: --gateway production \
            (api-manage-broadcast.push.apple.com:2196), sandbox \
            (api-manage-broadcast.sandbox.push.apple.com:2195) or HOST:PORT. Authenticate as for \
            salvo send: --auth-key AuthKey_<KEYID>.p8 --key-id --team-id (the team's provider token, \
            shared with salvo send through the token cache) or --cert/--key.

            Output: the channel's id and settings, one per line (create --count N: the N ids, one \
            per line), or JSON with --json.

            Exit status: 0 done; 1 APNs refused (its reason and the apns-request-id are shown) or \
            could not be reached; 2 usage errors.
            """,
        subcommands: [Create.self, Read.self, Delete.self, List.self])

    struct Create: AsyncParsableCommand {
        static let configuration = CommandConfiguration(
            abstract: "Create channels; APNs chooses their ids.",
            discussion: "An app has at most 10,000 channels per environment; a channel's storage policy cannot change.")

        @Option(name: .customLong("storage-policy"),
                help: ArgumentHelp("no-storage (default: offline devices miss the message; a larger publishing budget) or "
                                   + "most-recent (APNs keeps the latest message up to 8 hours).", valueName: "policy"))
        var storagePolicy: MessageStoragePolicy?

        @Option(help: ArgumentHelp("Create this many (1 to 10,000) and print their ids, one per line.", valueName: "n"))
        var count: Int?

        @OptionGroup var options: ChannelOptions

        func validate() throws {
            if let count, !(1...BroadcastChannels.maximumChannels).contains(count) {
                throw ValidationError("--count must be 1 to \(BroadcastChannels.maximumChannels.formatted()) (an app's most "
                                      + "channels per environment), got \(count)")
            }
        }

        func run() async throws {
            let policy = storagePolicy ?? .noStorage
            try await options.withClient(command: "channel create") { channels throws(BroadcastChannelError) in
                guard let count else {
                    options.print(try await channels.create(storagePolicy: policy))
                    return
                }
                let batch = try await channels.create(count: count, storagePolicy: policy)
                // What was made is printed even when the batch stopped: those channels exist now.
                options.print(batch, policy: policy)
                if let error = batch.error {
                    printError("salvo channel create: created \(batch.channels.count) of \(count) (printed), then stopped")
                    throw error
                }
            }
        }
    }

    struct Read: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Show a channel's settings.")

        @OptionGroup var channel: ChannelIDOption
        @OptionGroup var options: ChannelOptions

        func run() async throws {
            try await options.withClient(command: "channel read") { channels throws(BroadcastChannelError) in
                options.print(try await channels.read(channel.id))
            }
        }
    }

    struct Delete: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "Delete a channel (its id is never used again).")

        @OptionGroup var channel: ChannelIDOption
        @OptionGroup var options: ChannelOptions

        func run() async throws {
            try await options.withClient(command: "channel delete") { channels throws(BroadcastChannelError) in
                try await channels.delete(channel.id)
                options.printJSONOrText(["channel-id": .string(channel.id), "deleted": .bool(true)], text: "deleted \(channel.id)")
            }
        }
    }

    struct List: AsyncParsableCommand {
        static let configuration = CommandConfiguration(abstract: "List the ids of the app's channels, one per line.")

        @OptionGroup var options: ChannelOptions

        func run() async throws {
            try await options.withClient(command: "channel list") { channels throws(BroadcastChannelError) in
                let ids = try await channels.list()
                options.printJSONOrText(["channels": .array(ids.map { .string($0) })], text: ids.joined(separator: "\n"),
                                        emptyText: ids.isEmpty)
                printError("\(counted(ids.count, "channel")) of \(options.bundleID) at \(options.gateway)")
            }
        }
    }
}

extension MessageStoragePolicy: ExpressibleByArgument {
    public init?(argument: String) { self.init(name: argument) }
    public static var allValueStrings: [String] { allCases.map(\.name) }
}

/// `--channel-id`: the channel `read` and `delete` act on.
struct ChannelIDOption: ParsableArguments {
    @Option(name: .customLong("channel-id"), help: ArgumentHelp("The channel, as create printed it.", valueName: "id"))
    var id: String
}

/// What every `salvo channel` command takes: the app, the gateway, the output form, and
/// the credentials and proxy as `salvo send` takes them.
struct ChannelOptions: ParsableArguments {
    @Option(name: .customLong("bundle-id"), help: ArgumentHelp("The app's bundle id (no push-type suffix).", valueName: "id"))
    var bundleID: String

    @Option(help: ArgumentHelp("production, sandbox, or host:port of a management gateway (a mock's channels port).",
                               valueName: "gateway"))
    var gateway: String

    @Flag(help: "Print JSON instead of text.")
    var json = false

    @OptionGroup(title: "Token authentication")
    var token: ProviderTokenOptions

    @OptionGroup(title: "TLS (and certificate authentication)")
    var tls: TLSOptions

    @OptionGroup(title: "Proxy")
    var proxy: ProxyOptions

    func validate() throws {
        _ = try proxy.configuration(for: try endpoint().host)
        if token.credentialsFile != nil {
            throw ValidationError("--credentials is for send and campaign run: channel management is one app's, with --auth-key or --cert")
        }
        switch (token.authKey, tls.certificate) {
        case (_?, _?): throw ValidationError("give --auth-key (token authentication) or --cert (certificate authentication), not both")
        case (nil, nil):
            throw ValidationError("give credentials: --auth-key AuthKey_<KEYID>.p8 --key-id ID --team-id ID (token), or "
                                  + "--cert FILE (certificate)")
        default: break
        }
        if bundleID.isEmpty { throw ValidationError("--bundle-id is empty") }
    }

    /// `--gateway`: Apple's two management hosts by name, or HOST:PORT (a port is needed:
    /// Apple's hosts use 2195 and 2196, and a mock its own).
    func endpoint() throws -> Endpoint {
        switch gateway {
        case "production": return BroadcastChannelsConfiguration.productionGateway
        case "sandbox": return BroadcastChannelsConfiguration.sandboxGateway
        default:
            let endpoint: Endpoint
            do { endpoint = try Endpoint(parsing: gateway, service: .providerAPI) } catch {
                throw ValidationError("--gateway: \(error.description)")
            }
            guard gateway.hasSuffix(":\(endpoint.port)") else {
                throw ValidationError("--gateway \(gateway) needs a port, e.g. \(gateway):2196 (or give production or sandbox)")
            }
            return endpoint
        }
    }

    /// Runs `body` with a client for these flags, then closes it. APNs's refusals and an
    /// unreachable gateway end the command with 1, credentials that cannot be used with 2;
    /// each is said on stderr as `salvo <command>: …`.
    func withClient(command: String, _ body: (BroadcastChannels) async throws(BroadcastChannelError) -> Void) async throws {
        let channels: BroadcastChannels
        do {
            channels = try BroadcastChannels(try configuration(command: command))
        } catch let error as BroadcastChannelError {
            printError("salvo \(command): \(error)")
            throw ExitCode(2)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            printError("salvo \(command): \(error)")
            throw ExitCode(2)
        }
        var failed: BroadcastChannelError?
        do { try await body(channels) } catch { failed = error }
        await channels.shutdown()
        if let failed {
            printError("salvo \(command): \(failed)")
            switch failed.kind {
            case .invalidRequest: throw ExitCode(2)
            case .refused, .transport, .credentials, .unexpectedAnswer: throw ExitCode(1)
            }
        }
    }

    private func configuration(command: String) throws -> BroadcastChannelsConfiguration {
        var authentication = BroadcastChannelsConfiguration.Authentication.certificate
        if let credentials = try token.credentials(allowWorldReadableKey: tls.allowWorldReadableKey) {
            for warning in credentials.warnings { printError("salvo \(command): warning: \(warning)") }
            authentication = .token(credentials, store: try token.providerTokenStore())
        }
        if tls.insecure { _ = try tls.makeContext(command: command) }  // prints the warning
        let gateway = try endpoint()
        var configuration = BroadcastChannelsConfiguration(gateway: gateway, bundleID: bundleID, authentication: authentication,
                                                           tls: try tls.configuration())
        configuration.proxy = try proxy.configuration(for: gateway.host)
        return configuration
    }

    // MARK: Output

    /// A channel: `channel-id: …`, `storage-policy: …`, `apns-request-id: …` lines, or one JSON object.
    func print(_ channel: BroadcastChannel) {
        printJSONOrText(Self.json(channel), text: """
            channel-id: \(channel.id)
            storage-policy: \(channel.storagePolicy.name)
            apns-request-id: \(channel.requestID)
            """)
    }

    /// A batch: its ids, one per line, or `{"channels": [...], "storage-policy": …}`.
    func print(_ batch: ChannelBatch, policy: MessageStoragePolicy) {
        printJSONOrText(["channels": .array(batch.channels.map { .string($0.id) }), "storage-policy": .string(policy.name),
                         "created": .int(batch.channels.count)],
                        text: batch.channels.map(\.id).joined(separator: "\n"), emptyText: batch.channels.isEmpty)
    }

    /// `object` as one line of JSON with `--json`, else `text` (nothing when `emptyText`).
    func printJSONOrText(_ object: [String: ChannelJSON], text: String, emptyText: Bool = false) {
        if json {
            let encoder = JSONEncoder()
            encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
            Swift.print(String(decoding: (try? encoder.encode(object)) ?? Data("{}".utf8), as: UTF8.self))
        } else if !emptyText {
            Swift.print(text)
        }
    }

    private static func json(_ channel: BroadcastChannel) -> [String: ChannelJSON] {
        ["channel-id": .string(channel.id), "storage-policy": .string(channel.storagePolicy.name),
         "message-storage-policy": .int(channel.storagePolicy.rawValue), "push-type": .string("LiveActivity"),
         "apns-request-id": .string(channel.requestID)]
    }
}

/// The values `salvo channel --json` prints.
enum ChannelJSON: Encodable {
    case string(String)
    case int(Int)
    case bool(Bool)
    case array([ChannelJSON])

    func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        switch self {
        case .string(let value): try container.encode(value)
        case .int(let value): try container.encode(value)
        case .bool(let value): try container.encode(value)
        case .array(let values): try container.encode(values)
        }
    }
}
