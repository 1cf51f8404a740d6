import ArgumentParser
import Foundation
import SalvoIO

/// `--proxy URL` and `--no-proxy` of `salvo campaign run`, `salvo feedback` and `salvo channel`: the HTTP or
/// SOCKS5 proxy the gateway connections go through. (`salvo send` takes `--no-proxy` alone:
/// its `--proxy` is shared with `--target blackberry`, see `BlackBerryConnectionOptions`.)
struct ProxyOptions: ParsableArguments {
    @Option(help: ArgumentHelp("The HTTP or SOCKS5 proxy gateway connections go through: http://[user:password@]host:port, "
                               + "socks5://… or socks5h://… (the proxy resolves the gateway's name). Default: "
                               + "HTTPS_PROXY or ALL_PROXY from the environment, unless NO_PROXY names the gateway.",
                               valueName: "url"))
    var proxy: String?

    @OptionGroup var bypass: NoProxyOption

    /// The proxy for connections to `host`, from `--proxy` or the environment.
    func configuration(for host: String) throws -> ProxyConfiguration? {
        try ProxySelection.configuration(url: proxy, noProxy: bypass.noProxy, host: host)
    }
}

/// `--no-proxy`: connect directly, whatever the environment says.
struct NoProxyOption: ParsableArguments {
    @Flag(name: .customLong("no-proxy"),
          help: "Connect directly: ignore HTTPS_PROXY, https_proxy, ALL_PROXY and all_proxy.")
    var noProxy = false
}

/// How the command line and the environment pick a proxy, as curl does: `--proxy` wins,
/// `--no-proxy` ignores the environment; otherwise `https_proxy`/`HTTPS_PROXY`, then
/// `all_proxy`/`ALL_PROXY`, unless `no_proxy`/`NO_PROXY` names the host.
enum ProxySelection {
    static func configuration(url: String?, noProxy: Bool, host: String,
                              environment: [String: String] = ProcessInfo.processInfo.environment) throws -> ProxyConfiguration? {
        if let url {
            guard !noProxy else { throw ValidationError("give --proxy or --no-proxy, not both") }
            do { return try ProxyConfiguration(url: url) } catch { throw ValidationError("--proxy: \(error.description)") }
        }
        if noProxy { return nil }
        do {
            return try ProxyConfiguration.fromEnvironment(environment, for: host)
        } catch {
            throw ValidationError("\(error.description) (or give --no-proxy)")
        }
    }
}
