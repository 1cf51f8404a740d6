import AsyncHTTPClient
import SalvoIO

extension ProxyConfiguration {
    /// The proxy as AsyncHTTPClient takes it, for the clients outside the engine's hot path
    /// (channel management, the BlackBerry NOC). TLS to the server stays end to end.
    ///
    /// - Returns: nil for SOCKS5 with a user and password, which AsyncHTTPClient cannot
    ///   give: the caller says so (`httpClientRefusal`).
    public var httpClientProxy: HTTPClient.Configuration.Proxy? {
        switch kind {
        case .http:
            return .server(host: host, port: port, authorization: credentials.map { .basic(username: $0.user, password: $0.password) })
        case .socks5, .socks5h:
            // AsyncHTTPClient names the server to the SOCKS5 proxy, as socks5h does.
            return credentials == nil ? .socksServer(host: host, port: port) : nil
        }
    }

    /// Why `httpClientProxy` is nil, in a sentence naming the proxy (never its credentials).
    public var httpClientRefusal: String {
        "a SOCKS5 proxy with a user and password (\(self)) cannot carry these requests: give an HTTP proxy, "
            + "or a SOCKS5 proxy without credentials"
    }
}
