import ArgumentParser
import Foundation
import SalvoEngine
import SalvoWire

/// Which protocol `salvo send`, `demo` and `mock` speak.
enum WireProtocol: String, ExpressibleByArgument, CaseIterable {
    /// The legacy binary provider protocol.
    case binary
    /// Apple's HTTP/2 provider API.
    case h2
}

extension APNsPushType: ExpressibleByArgument {
    public init?(argument: String) {
        guard let type = Self.allCases.first(where: { $0.name == argument }) else { return nil }
        self = type
    }

    public static var allValueStrings: [String] { allCases.map(\.name) }

    /// None: help lists the names (ArgumentParser would key descriptions by the raw values).
    public static var allValueDescriptions: [String: String] { [:] }
}

/// The flags of Apple's HTTP/2 provider API (`--protocol h2`): the topic, what every
/// notification's headers default to, and token authentication (`ProviderTokenOptions`).
struct ProviderAPIOptions: ParsableArguments {
    @Option(name: [.customLong("topic"), .customLong("bundle-id")],
            help: ArgumentHelp("The app's bundle id: apns-topic, with the push type's suffix (.voip, .push-type.liveactivity, ...); the path of broadcasts. Needed with --auth-key and --broadcast.",
                               valueName: "bundle-id"))
    var topic: String?

    // Optional, with the default in the text: ArgumentParser would show a defaulted enum's raw value.
    @Option(name: .customLong("push-type"), help: "apns-push-type of lines that name none (default: alert).")
    var pushTypeChoice: APNsPushType?

    /// `--push-type`, or alert.
    var pushType: APNsPushType { pushTypeChoice ?? .alert }

    @Option(help: ArgumentHelp("apns-priority of lines that name none: 10, 5 or 1 (default: APNs's 10; background is always 5).",
                               valueName: "n"))
    var priority: UInt8?

    @Option(help: ArgumentHelp("apns-expiration (UNIX seconds; 0: deliver once or not at all) of lines that name none.",
                                valueName: "seconds"))
    var expiration: UInt32?

    @Option(name: .customLong("collapse-id"), help: ArgumentHelp("apns-collapse-id (at most 64 bytes) of lines that name none.", valueName: "id"))
    var collapseID: String?

    @OptionGroup var token: ProviderTokenOptions

    /// `--auth-key`: the `.p8` signing key of token authentication.
    var authKey: String? { token.authKey }

    @Option(name: .customLong("answer-timeout"),
            help: ArgumentHelp("How long a stream may wait for its answer (default 15): a connection with one waiting longer, or allowed no stream that long, is dropped; three in a row without an answer end the run.",
                               valueName: "s"))
    var answerTimeoutSeconds: Double?

    @Option(name: .customLong("max-streams"),
            help: ArgumentHelp("The most streams open per connection (default 1000, Apple's limit).", valueName: "n"))
    var maximumStreams: Int?

    /// The first of these flags given, for the message that says they need `--protocol h2`.
    var givenFlag: String? {
        firstGivenFlag([
            ("--topic", topic != nil), ("--push-type", pushTypeChoice != nil), ("--priority", priority != nil),
            ("--expiration", expiration != nil), ("--collapse-id", collapseID != nil),
        ]) ?? token.givenFlag
            ?? firstGivenFlag([("--max-streams", maximumStreams != nil), ("--answer-timeout", answerTimeoutSeconds != nil)])
    }

    func validate() throws {
        if let maximumStreams, maximumStreams < 1 { throw ValidationError("--max-streams must be at least 1") }
        if let answerTimeoutSeconds, !(0.1...3600).contains(answerTimeoutSeconds) {
            throw ValidationError("--answer-timeout must be 0.1...3600 seconds")
        }
    }

    /// Where the team's provider token is shared (`ProviderTokenOptions.providerTokenStore`).
    func providerTokenStore(fallback: (any ProviderTokenStore)? = nil) throws -> (any ProviderTokenStore)? {
        try token.providerTokenStore(fallback: fallback)
    }

    /// The protocol `gateway` is spoken in: as `--protocol` says, else HTTP/2 for Apple's
    /// endpoints (`production`, `sandbox`) and the binary protocol for `HOST:PORT`.
    static func wireProtocol(_ given: WireProtocol?, gateway: String) throws -> WireProtocol {
        let preset = Endpoint.preset(gateway, service: .providerAPI) != nil
        switch given {
        case .binary? where preset:
            throw ValidationError("--gateway \(gateway) is Apple's HTTP/2 provider API; Apple retired its binary gateways in 2021 "
                                  + "(give HOST:PORT for a gateway that still speaks the binary protocol)")
        case let given?: return given
        case nil: return preset ? .h2 : .binary
        }
    }

    /// The HTTP/2 transport these flags describe, with the campaign-wide header defaults
    /// set on `configuration`. Reads the `.p8` key (refusing one every user may read unless
    /// `allowWorldReadableKey`); tokens are shared through `tokenStore`. Returns the doubts
    /// about the key and its ids (`ProviderCredentials.warnings`), for the user to see
    /// before anything is sent.
    @discardableResult
    func apply(to configuration: inout SenderConfiguration, allowWorldReadableKey: Bool,
               tokenStore: (any ProviderTokenStore)?) throws -> [String] {
        var authentication = HTTP2Authentication.certificate
        var warnings: [String] = []
        if let credentials = try token.credentials(allowWorldReadableKey: allowWorldReadableKey) {
            warnings = credentials.warnings
            authentication = .token(credentials)
        }
        var options = HTTP2Options(topic: topic, pushType: pushType, authentication: authentication)
        options.tokenStore = tokenStore
        options.collapseID = collapseID
        if let maximumStreams { options.maximumConcurrentStreams = maximumStreams }
        if let answerTimeoutSeconds { options.answerTimeout = .milliseconds(Int(answerTimeoutSeconds * 1000)) }
        configuration.transport = .http2(options)
        configuration.defaultPriority = priority
        configuration.defaultExpiry = expiration
        return warnings
    }
}
