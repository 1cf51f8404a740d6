/// How a provider authenticates to the HTTP/2 provider API.
public enum HTTP2Authentication: Sendable {
    /// With the TLS client certificate of `SenderConfiguration.tls`.
    case certificate
    /// With provider tokens (ES256 JSON Web Tokens) signed by this key: one token per team,
    /// shared by every connection, refreshed every 50 minutes.
    case token(ProviderCredentials)
}
