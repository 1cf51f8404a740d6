import ArgumentParser
import Foundation
import Logging
import SalvoIO
import SalvoMock

/// The flags only `salvo mock --protocol h2` takes.
struct H2MockOptions: ParsableArguments {
    @Option(name: .customLong("auth-key"),
            help: ArgumentHelp("Token authentication: an AuthKey .p8 (PEM) whose tokens are valid; repeatable, one per key of every team played, each with its --key-id and --team-id (in the same order).",
                               valueName: "file"))
    var authKeys: [String] = []

    @Option(name: .customLong("key-id"), help: ArgumentHelp("Token authentication: the key id (kid) of the --auth-key at the same place.", valueName: "id"))
    var keyIDs: [String] = []

    @Option(name: .customLong("team-id"), help: ArgumentHelp("Token authentication: the team (iss) of the --auth-key at the same place.", valueName: "id"))
    var teamIDs: [String] = []

    @Option(name: .customLong("credentials"),
            help: ArgumentHelp("Token authentication: the keys of a `salvo send --credentials` file are valid too (its certificates are the CA's business: --require-client-cert).",
                               valueName: "file"))
    var credentialsFile: String?

    @Option(name: .customLong("max-streams"), help: ArgumentHelp("SETTINGS_MAX_CONCURRENT_STREAMS once a valid token was seen (default 1000).", valueName: "n"))
    var maxStreams: Int?

    @Option(help: "production, or development (successful responses carry apns-unique-id).")
    var environment: H2MockGateway.Environment?

    @Option(name: .customLong("topic"), help: ArgumentHelp("A bundle id topics may name; repeatable. Others get 400 TopicDisallowed. Default: any.", valueName: "bundle-id"))
    var topics: [String] = []

    @Flag(name: .customLong("record-requests"),
          help: "Report each accepted request's token and APNs headers (acceptedRequests; the first 100,000).")
    var recordRequests = false

    @Option(name: .customLong("channels-port"),
            help: ArgumentHelp("Channel management port (Apple's separate host for broadcast channels); 0 picks a free one (the default).",
                               valueName: "port"))
    var channelsPort: Int?

    @Option(name: .customLong("channel-limit"),
            help: ArgumentHelp("Most broadcast channels per bundle id; past it, 400 CannotCreateChannelConfig (default 10000, Apple's).",
                               valueName: "n"))
    var channelLimit: Int?

    @Option(name: .customLong("preset-channels"),
            help: ArgumentHelp("Broadcast channels made at the start, with ids known in advance (MockChannelRegistry.presetID), for benchmarks: BUNDLE_ID=COUNT, repeatable.",
                               valueName: "bundle-id=n"))
    var presetChannels: [String] = []

    @Flag(name: .customLong("no-broadcast-capability"),
          help: "Play an app without the broadcast capability: broadcasts and channel requests get 400 FeatureNotEnabled.")
    var noBroadcastCapability = false

    /// The first of these flags that was given, for refusing it with the binary protocol.
    var givenFlag: String? {
        firstGivenFlag([
            ("--auth-key", !authKeys.isEmpty), ("--key-id", !keyIDs.isEmpty), ("--team-id", !teamIDs.isEmpty),
            ("--credentials", credentialsFile != nil),
            ("--max-streams", maxStreams != nil), ("--environment", environment != nil), ("--topic", !topics.isEmpty),
            ("--record-requests", recordRequests), ("--channels-port", channelsPort != nil), ("--channel-limit", channelLimit != nil),
            ("--no-broadcast-capability", noBroadcastCapability), ("--preset-channels", !presetChannels.isEmpty),
        ])
    }

    /// Checks the channel flags' ranges.
    func checkChannels() throws(UsageError) {
        if let channelsPort, !(0...65535).contains(channelsPort) {
            throw UsageError("--channels-port must be 0...65535, got \(channelsPort)")
        }
        if let channelLimit, channelLimit < 0 { throw UsageError("--channel-limit must not be negative, got \(channelLimit)") }
        _ = try presets()
    }

    /// `--preset-channels`: each bundle id and how many channels it gets.
    func presets() throws(UsageError) -> [(bundleID: String, count: Int)] {
        try presetChannels.map { (text) throws(UsageError) in
            let parts = text.split(separator: "=", maxSplits: 1)
            guard parts.count == 2, !parts[0].isEmpty, let count = Int(parts[1]),
                  (1...(channelLimit ?? MockChannelRegistry.defaultLimit)).contains(count) else {
                throw UsageError("--preset-channels wants BUNDLE_ID=COUNT with 1 <= COUNT <= the channel limit, got '\(text)'")
            }
            return (String(parts[0]), count)
        }
    }

    /// The verifiers for token authentication, one per key; none without it.
    func tokenVerifiers() throws(UsageError) -> [ProviderTokenVerifier] {
        guard authKeys.count == keyIDs.count, authKeys.count == teamIDs.count else {
            throw UsageError("--auth-key, --key-id and --team-id go together (token authentication): give each as often as "
                             + "the others, the n-th of each for the same key")
        }
        var keys = zip(authKeys, zip(keyIDs, teamIDs)).map { ($0, $1.0, $1.1) }
        if let credentialsFile {
            do { keys += try CredentialsFile(path: credentialsFile).signingKeys.map { ($0.path, $0.keyID, $0.teamID) } } catch {
                throw UsageError("\(error)")
            }
        }
        if Set(keys.map(\.1)).count < keys.count { throw UsageError("--key-id: each key id once (tokens find their key by it)") }
        return try keys.map { (item) throws(UsageError) -> ProviderTokenVerifier in
            let (authKey, keyID, teamID) = item
            let pem: [UInt8]
            do { pem = try readSmallFile(authKey, limit: 64 << 10) } catch {
                throw UsageError("--auth-key \(authKey): \(error)")
            }
            do {
                return try ProviderTokenVerifier(authKeyPEM: String(decoding: pem, as: UTF8.self), keyID: keyID, teamID: teamID)
            } catch {
                throw UsageError("--auth-key \(authKey): \(error)")
            }
        }
    }

    /// The stream limit after the first valid token.
    func maximumConcurrentStreams() throws(UsageError) -> UInt32 {
        guard let maxStreams else { return 1000 }
        guard let limit = UInt32(exactly: maxStreams), (1...Int(Int32.max)).contains(maxStreams) else {
            throw UsageError("--max-streams must be 1...\(Int32.max), got \(maxStreams)")
        }
        return limit
    }
}

extension H2MockGateway.Environment: ExpressibleByArgument {}

extension MockCommand {
    /// The first binary-only flag given, for refusing it with --protocol h2.
    var binaryOnlyFlag: String? {
        failures.binaryOnlyFlag ?? firstGivenFlag([
            ("--feedback-port", feedbackPort != nil), ("--feedback-tuple", !feedbackTuples.isEmpty),
            ("--receive-buffer-kib", receiveBufferKiB != nil), ("--ingest-probe", ingestProbe != nil),
        ])
    }

    /// `--protocol h2`: the HTTP/2 gateway until a signal or the duration, then its report.
    func runH2(_ serverTLS: TLSConfiguration) async throws {
        var configuration = H2MockGateway.Configuration(
            host: host, port: port ?? 2197, tls: serverTLS,
            maximumConcurrentStreams: try h2.maximumConcurrentStreams(), environment: h2.environment ?? .production,
            allowedTopics: h2.topics, failurePlan: try failures.h2Plan(), recordAccepted: recordAccepted,
            recordRequests: h2.recordRequests, channelManagementPort: h2.channelsPort ?? 0,
            channelLimit: h2.channelLimit ?? MockChannelRegistry.defaultLimit, broadcastsEnabled: !h2.noBroadcastCapability)
        configuration.tokenVerifiers = try h2.tokenVerifiers()
        if let loops { configuration.loops = loops }
        let gateway = try H2MockGateway(configuration, logger: Logger(label: "salvo.mock"))
        for (bundleID, count) in try h2.presets() {
            try gateway.channels.createPresets(bundleID: bundleID, count: count, policy: .noStorage)
        }
        // Watch the signals before announcing the port: whoever reads the line may signal at once.
        let stop = StopSignal(duration: duration)
        // The channel port after the gateway's, as a field of its own: readers that take
        // the `gateway=` field keep working.
        print("listening gateway=\(gateway.port) channels=\(gateway.channelsPort ?? 0)")
        fflush(nil)  // all streams: other processes wait for this line

        await serve(gateway, until: stop)
        try writeReport(gateway.statistics())
    }
}
