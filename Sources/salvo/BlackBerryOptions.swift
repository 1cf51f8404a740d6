import ArgumentParser
import Foundation
import SalvoBlackBerry
import SalvoEngine
import SalvoIO
import SalvoWire

/// Which push service `salvo send` and `salvo check-token` talk to.
enum PushService: String, ExpressibleByArgument, CaseIterable {
    /// Apple's APNs (the binary protocol or the HTTP/2 provider API).
    case apns
    /// The BlackBerry Dynamics Push Channel (the NOC's notify service).
    case blackberry
}

/// The flags of `--target blackberry`: where the Push Channel service is, how hard to try,
/// and the largest payload sent.
struct BlackBerryOptions: ParsableArguments {
    @OptionGroup var connection: BlackBerryConnectionOptions

    @Option(name: .customLong("max-payload-bytes"),
            help: ArgumentHelp("Largest payload sent, UTF-8 bytes; longer lines are bad lines.", valueName: "bytes"))
    var maximumPayloadBytes: Int = GNP.defaultMaximumPayloadBytes

    /// The flag that was given when it should not have been (for APNs).
    var givenFlag: String? { connection.givenFlag }

    func check() throws {
        try connection.check()
        if maximumPayloadBytes < 0 { throw ValidationError("--max-payload-bytes must not be negative") }
    }

    /// The client configuration, with the TLS flags' CA file and verification.
    func configuration(trust: ServerTrustOptions, noProxy: Bool) throws -> PushChannelConfiguration {
        try connection.configuration(trust: trust, noProxy: noProxy)
    }
}

/// Where the Push Channel service is and how hard to try: what `salvo send --target
/// blackberry` and `salvo check-token` share.
struct BlackBerryConnectionOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The NOC, HTTPS (--target blackberry). A campaign line's \"host\" replaces it.",
                               valueName: "host:port"))
    var noc: String?

    /// Shared by the two targets of `salvo send` (ArgumentParser takes one option per name):
    /// `--target blackberry` reads it as the BlackBerry Proxy, APNs as a proxy URL.
    @Option(help: ArgumentHelp("--target blackberry: an enterprise BlackBerry Proxy instead of the NOC (plain HTTP, e.g. port "
                               + "17080, unless --proxy-tls), or with a scheme (http://…) a network proxy for the NOC "
                               + "connections. salvo send to APNs: the HTTP or SOCKS5 proxy the gateway "
                               + "connections go through, http://[user:password@]host:port, socks5://… or socks5h://… "
                               + "(default: HTTPS_PROXY or ALL_PROXY unless NO_PROXY names the gateway; see --no-proxy).",
                               valueName: "host:port|url"))
    var proxy: String?

    @Flag(name: .customLong("proxy-tls"), help: "Talk HTTPS to --proxy (port 17433 in BlackBerry's samples).")
    var proxyTLS = false

    @Option(name: .customLong("noc-connections"),
            help: ArgumentHelp("Connections kept open to the NOC or proxy (HTTP/1.1 keep-alive, one request at a time on each).",
                               valueName: "n"))
    var connections: Int = PushChannelConfiguration.defaultConnections

    @Option(help: ArgumentHelp("Attempts per notification for 5xx answers and dropped or failed connections.",
                               valueName: "n"))
    var attempts: Int = 3

    @Option(name: .customLong("request-timeout-ms"), help: ArgumentHelp("Longest a request may take (connecting: at most 10 s of it).",
                                                                       valueName: "ms"))
    var requestTimeoutMilliseconds: Int = 30_000

    /// The flag that was given when it should not have been (for APNs, which reads --proxy
    /// as its proxy URL).
    var givenFlag: String? {
        firstGivenFlag([("--noc", noc != nil), ("--proxy-tls", proxyTLS)])
    }

    /// `--proxy` with a scheme (`http://`, `socks5://`): the network proxy the connections
    /// go through, as for APNs.
    var networkProxyURL: String? { proxy.flatMap { $0.contains("://") ? $0 : nil } }
    /// `--proxy HOST:PORT`: an enterprise BlackBerry Proxy, which relays to the NOC.
    var blackBerryProxy: String? { proxy.flatMap { $0.contains("://") ? nil : $0 } }

    func check() throws {
        var networkProxy: ProxyConfiguration?
        if let networkProxyURL {
            do { networkProxy = try ProxyConfiguration(url: networkProxyURL) } catch { throw ValidationError("--proxy: \(error.description)") }
        }
        switch (noc, blackBerryProxy) {
        case (nil, nil):
            if let networkProxy {
                throw ValidationError("--proxy \(networkProxy) is a network proxy the NOC connections go through: give --noc HOST:PORT too")
            }
            throw ValidationError("--target blackberry needs --noc HOST:PORT or --proxy HOST:PORT")
        case (_?, _?): throw ValidationError("give --noc or --proxy, not both")
        default: break
        }
        if proxyTLS, blackBerryProxy == nil { throw ValidationError("--proxy-tls goes with --proxy HOST:PORT (a BlackBerry Proxy)") }
        _ = try route()
        if connections < 1 || connections > 1024 { throw ValidationError("--noc-connections must be 1...1024, got \(connections)") }
        if attempts < 1 || attempts > 20 { throw ValidationError("--attempts must be 1...20, got \(attempts)") }
        if requestTimeoutMilliseconds < 1 { throw ValidationError("--request-timeout-ms must be positive") }
    }

    func route() throws -> PushChannelConfiguration.Route {
        if let proxy = blackBerryProxy {
            let (host, port) = try Self.hostAndPort(proxy, flag: "--proxy")
            return .proxy(host: host, port: port, tls: proxyTLS)
        }
        let (host, port) = try Self.hostAndPort(noc ?? "", flag: "--noc")
        return .noc(host: host, port: port)
    }

    /// The client configuration, with the CA file and verification of `trust`, and the
    /// network proxy of `--proxy URL` or the environment (unless `noProxy`).
    func configuration(trust: ServerTrustOptions, noProxy: Bool) throws -> PushChannelConfiguration {
        var configuration = PushChannelConfiguration(route: try route())
        let host = switch configuration.route {
        case .noc(let host, _), .proxy(let host, _, _): host
        }
        configuration.networkProxy = try ProxySelection.configuration(url: networkProxyURL, noProxy: noProxy, host: host)
        configuration.connections = connections
        configuration.maximumAttempts = attempts
        configuration.requestTimeout = .milliseconds(requestTimeoutMilliseconds)
        configuration.trustedCertificatesFile = trust.trustedCertificates
        configuration.verifyCertificates = !trust.insecure
        return configuration
    }

    /// `HOST:PORT` or `[V6]:PORT`.
    static func hostAndPort(_ text: String, flag: String) throws -> (String, Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]),
              (1...65535).contains(port) else {
            throw ValidationError("\(flag) wants HOST:PORT, got '\(text)'")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("\(flag) wants HOST:PORT, got '\(text)'") }
        return (host, port)
    }
}

extension CampaignOptions {
    /// The campaign as a Push Channel source: JSONL, or the token list with the payload
    /// file as text (it must be UTF-8).
    func pushChannelSource(maximumPayloadBytes: Int) throws -> PushChannelCampaignSource {
        if let input { return .jsonl(input) }
        let bytes = try readWholeFile(payload!, limit: 1 << 20, what: "payload file")
        guard String(validating: bytes, as: UTF8.self) != nil else {
            throw FileInputError(description: "the payload file \(payload!) is not UTF-8 text (a Push Channel payload is text)")
        }
        guard bytes.count <= maximumPayloadBytes else {
            throw FileInputError(description: "the payload file \(payload!) is \(bytes.count) bytes, over the limit of "
                                 + "\(maximumPayloadBytes) (--max-payload-bytes)")
        }
        return .tokens(tokens!, payload: bytes)
    }
}

extension SendCommand {
    /// `--target blackberry`: the APNs-only flags are refused, the Push Channel ones checked.
    func validateBlackBerry() throws {
        let apnsOnly = firstGivenFlag([("--gateway", gateway != nil), ("--protocol", wireProtocol != nil),
                                       ("--cert", tls.certificate != nil)]) ?? http2.givenFlag ?? engine.givenFlag
            ?? observability.givenFlag
        if let apnsOnly { throw ValidationError("\(apnsOnly) is for APNs, not --target blackberry") }
        try blackberry.check()
        try registry.check()
    }
}
