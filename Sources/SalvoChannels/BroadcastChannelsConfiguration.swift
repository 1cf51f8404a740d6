import SalvoEngine
import SalvoIO

/// Where a `BroadcastChannels` client sends its requests, how it authenticates and how
/// hard it tries.
public struct BroadcastChannelsConfiguration: Sendable {
    /// How requests are authenticated.
    public enum Authentication: Sendable {
        /// The client certificate of `tls` (`certificateChain` and `privateKey`).
        case certificate
        /// A provider token signed with `credentials`, shared with the team's other
        /// processes through `store` (nil: this client's own token). Pass the store
        /// `salvo send` uses (the token cache) so that both send the same token.
        case token(ProviderCredentials, store: (any ProviderTokenStore)?)
    }

    /// The management gateway: `productionGateway`, `sandboxGateway` or another.
    public var gateway: Endpoint
    /// The app whose channels these are (its bundle id, without a push-type suffix).
    public var bundleID: String
    /// How requests are authenticated.
    public var authentication: Authentication
    /// TLS as `salvo send` takes it: trust roots (the system's by default), verification
    /// of the server's certificate and name (on by default), and the client certificate
    /// for `.certificate` authentication.
    public var tls: TLSConfiguration
    /// The HTTP proxy requests go through (nil: direct). TLS stays end to end: the
    /// gateway's certificate and name are verified through the tunnel. A SOCKS5 proxy is
    /// taken without a user and password only (the client's SOCKS support has none).
    public var proxy: ProxyConfiguration?
    /// Attempts per request for 429, 500 and 503 answers and failed connects, the first included.
    public var maximumAttempts = 4
    /// The pause before the second attempt; it doubles for each later one.
    public var retryBackoff: Duration = .milliseconds(250)
    /// The longest a request may take, connecting included.
    public var requestTimeout: Duration = .seconds(30)
    /// Requests in flight at once for `create(count:storagePolicy:)`.
    public var batchConcurrency = 8

    /// Apple's management gateway for apps in production, `api-manage-broadcast.push.apple.com:2196`.
    public static let productionGateway = Endpoint(host: "api-manage-broadcast.push.apple.com", port: 2196)
    /// Apple's management gateway for development builds, `api-manage-broadcast.sandbox.push.apple.com:2195`.
    public static let sandboxGateway = Endpoint(host: "api-manage-broadcast.sandbox.push.apple.com", port: 2195)

    /// A configuration with the defaults: the system's trust roots, verification on.
    public init(gateway: Endpoint, bundleID: String, authentication: Authentication, tls: TLSConfiguration = .client()) {
        self.gateway = gateway
        self.bundleID = bundleID
        self.authentication = authentication
        self.tls = tls
    }
}
