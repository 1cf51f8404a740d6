import Foundation
import SalvoIO

/// Where and how `salvo serve` reports notifications that ended rejected or failed
/// (`--webhook URL`): see ``WebhookDelivery``.
///
/// The secret never appears in `description` or in reflection: only the URL's scheme,
/// host, port and path name a webhook (its user, password and query may carry tokens too).
public struct WebhookConfiguration: Sendable, CustomStringConvertible, CustomReflectable {
    /// The receiver: an `http` or `https` URL that takes a POST.
    public var url: String
    /// The HMAC-SHA256 key the receiver shares, to check that a batch came from us.
    public var secret: [UInt8]
    /// The most events one POST carries.
    public var batchLimit = 1000
    /// How long an event may wait for others to join its batch: fewer, larger POSTs.
    public var flushInterval: Duration = .milliseconds(250)
    /// The most events held (buffered or being posted) while the receiver is slow or
    /// down. Past it new events are dropped and counted: sends never wait for a webhook.
    public var bufferLimit = 100_000
    /// POSTs per batch before it is abandoned and counted.
    public var attempts = 8
    /// The pause before the first retry; each retry doubles it, up to `maximumRetryDelay`.
    /// Each pause is drawn between half and all of that, so that many senders whose
    /// receiver came back do not retry in step.
    public var retryDelay: Duration = .milliseconds(250)
    /// The longest pause between two attempts.
    public var maximumRetryDelay: Duration = .seconds(30)
    /// How long one POST may take, connecting included.
    public var requestTimeout: Duration = .seconds(10)
    /// How long a graceful shutdown may spend delivering what is still held.
    public var drainTimeout: Duration = .seconds(5)
    /// The proxy the POSTs go through; TLS to the receiver stays end to end.
    public var proxy: ProxyConfiguration?
    /// What an `https` receiver's certificate is verified against (it always is).
    public var trustRoots: TrustRoots = .system

    /// A webhook to `url`, signed with `secret`, with the defaults above.
    public init(url: String, secret: [UInt8]) {
        self.url = url
        self.secret = secret
    }

    /// The receiver without what may be a credential: `https://host:port/path`.
    public var description: String {
        guard let components = URLComponents(string: url), let scheme = components.scheme, let host = components.host else {
            return "<unusable webhook URL>"
        }
        return "\(scheme)://\(host)\(components.port.map { ":\($0)" } ?? "")\(components.path)"
    }

    /// The description only: the secret must not reach a dump or a debugger's summary.
    public var customMirror: Mirror { Mirror(self, children: ["url": description], displayStyle: .struct) }
}

/// Why a ``WebhookConfiguration`` cannot be used, in a sentence that says what to change.
/// It never contains the secret.
public struct WebhookConfigurationError: Error, Sendable, Hashable, CustomStringConvertible {
    public var description: String

    public init(_ description: String) {
        self.description = description
    }
}
