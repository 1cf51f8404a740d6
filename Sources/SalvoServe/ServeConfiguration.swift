import SalvoCampaignFiles
import SalvoEngine

/// How `salvo serve` takes requests: where it listens, who may call, and its bounds.
public struct ServeConfiguration: Sendable {
    /// The address to listen on; anything but loopback needs `apiKeys` or client certificates.
    public var host = "127.0.0.1"
    /// The port; 0 picks a free one (`NotificationServer` reports it).
    public var port = 8080
    /// What a notification may hold: the campaign rules of the protocol the sender speaks.
    public var campaignProtocol: CampaignProtocol
    /// The most notifications one request may carry.
    public var batchLimit = 10_000
    /// The largest request body, in bytes.
    public var bodyLimit = 32 << 20
    /// The most notifications taken and not yet final: past it a request is answered 429.
    public var queueLimit = 100_000
    /// The longest `?wait` a request may ask for.
    public var waitLimit: Duration = .seconds(60)
    /// How long a final status is kept (for `GET`, and to recognise a repeated `apns_id`
    /// or `Idempotency-Key`).
    public var statusRetention: Duration = .seconds(3600)
    /// The most final statuses kept; the oldest are forgotten first.
    public var statusCapacity = 1_000_000
    /// The callers let in; nil: anyone who can connect (loopback only, unless client
    /// certificates are asked for).
    public var apiKeys: APIKeys?
    /// Notifications per second each caller may post; nil: no limit but the queue's.
    public var callerRate: Double?
    /// HTTPS (and HTTP/2, by ALPN), and client certificates; nil: plain HTTP/1.1.
    public var tls: ServeTLS?

    public init(campaignProtocol: CampaignProtocol) {
        self.campaignProtocol = campaignProtocol
    }

    /// Why the configuration cannot serve, nil when it can.
    public var problem: String? {
        if apiKeys == nil, tls?.clientCA == nil, !Self.isLoopback(host) {
            return "listening on \(host) lets anyone who reaches it send: give --api-keys FILE or --client-ca FILE, or listen on loopback"
        }
        if queueLimit < batchLimit { return "the queue (\(queueLimit)) must hold at least one full batch (\(batchLimit))" }
        if let callerRate, !(callerRate > 0) { return "the rate per caller must be above 0, got \(callerRate)" }
        return nil
    }

    static func isLoopback(_ host: String) -> Bool {
        host == "localhost" || host == "::1" || host.hasPrefix("127.")
    }
}

/// `salvo serve`'s TLS: its certificate and key, and the authority its callers'
/// certificates must chain to, when it asks for them.
public struct ServeTLS: Sendable {
    /// PEM certificate chain.
    public var certificate: String
    /// PEM private key.
    public var privateKey: String
    /// PEM certificates of the authority client certificates must chain to; nil: none asked.
    public var clientCA: String?

    public init(certificate: String, privateKey: String, clientCA: String? = nil) {
        self.certificate = certificate
        self.privateKey = privateKey
        self.clientCA = clientCA
    }
}
