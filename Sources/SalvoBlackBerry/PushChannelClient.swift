import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SalvoHTTPClientProxy
import SalvoIO
import SalvoWire
#if canImport(Glibc)
import Glibc
#endif

/// How a `PushChannelClient` reaches the Push Channel service and how hard it tries.
public struct PushChannelConfiguration: Sendable, Hashable {
    /// Where requests go.
    public enum Route: Sendable, Hashable {
        /// Straight to a NOC over HTTPS; a campaign line's `host` replaces `host` (and its
        /// port, when it names one).
        case noc(host: String, port: Int)
        /// Through an enterprise BlackBerry Proxy, over HTTP or HTTPS (`tls`). Every request
        /// goes to the proxy, which relays it to the NOC; a line's `host` is not used.
        case proxy(host: String, port: Int, tls: Bool)
    }

    /// Where requests go.
    public var route: Route
    /// Connections kept open to each host (HTTP/1.1 keep-alive, one request at a time on
    /// each): the run's concurrency. 16 by default: see the catalog's protocol notes.
    public var connections = PushChannelConfiguration.defaultConnections
    /// Attempts per notification for answers and failures worth retrying (HTTP 5xx, a 5xx
    /// code, a dropped connection, a failed connect), the first included.
    public var maximumAttempts = 3
    /// The wait before the second attempt; it doubles for each later one.
    public var retryBackoff: Duration = .milliseconds(100)
    /// The longest a request may take, connecting included.
    public var requestTimeout: Duration = .seconds(30)
    /// PEM file of the certificate authorities to trust instead of the system's.
    public var trustedCertificatesFile: String?
    /// Verify the server's certificate and name (off only for development).
    public var verifyCertificates = true
    /// The HTTP proxy (or SOCKS5 proxy without credentials) the connections go through,
    /// whichever the route; nil: direct. Not to be confused with `Route.proxy`, BlackBerry's
    /// own relay.
    public var networkProxy: ProxyConfiguration?

    /// The default connection count.
    public static let defaultConnections = 16

    /// A configuration for `route` with the defaults.
    public init(route: Route) {
        self.route = route
    }
}

/// A network proxy the client cannot go through, said in a sentence.
public struct PushChannelProxyError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// One notification's (or token check's) result, with how it got there.
public struct PushChannelResult: Sendable, Hashable {
    /// How it ended.
    public var outcome: PushChannelOutcome
    /// Attempts after the first.
    public var resent = 0
    /// Of `resent`: those after a connection dropped once the request was written (the NOC
    /// may have taken the earlier copy).
    public var possibleDuplicates = 0
    /// The last attempt could not connect (refused, TLS failure, timeout while connecting):
    /// the service is out of reach, not just this notification's luck.
    public var unreachable = false
    /// What went wrong on the last attempt that got no answer, for a message to the user.
    public var lastError: String?
}

/// Sends Push Channel requests (`notify`, `checkToken`) over HTTP/1.1 keep-alive and TLS
/// with AsyncHTTPClient: many connections, one request at a time on each, bounded retries.
///
/// Answers are judged by `GNPVerdict`: 100 accepted, 402 rejected, 5xx (of either kind)
/// retried up to `maximumAttempts`, anything else failed with the code in the reason.
public final class PushChannelClient: Sendable {
    /// The configuration it runs with.
    public let configuration: PushChannelConfiguration
    private let client: HTTPClient

    /// Makes the client; connections open on the first requests.
    ///
    /// - Throws: `NIOSSLError` when the CA file cannot be read, `PushChannelProxyError`
    ///   for a network proxy the client cannot use.
    public init(_ configuration: PushChannelConfiguration) throws {
        self.configuration = configuration
        var tls = TLSConfiguration.makeClientConfiguration()
        if let file = configuration.trustedCertificatesFile {
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMFile(file))
        }
        if !configuration.verifyCertificates { tls.certificateVerification = .none }
        var http = HTTPClient.Configuration(tlsConfiguration: tls)
        http.httpVersion = .http1Only
        http.decompression = .disabled
        http.redirectConfiguration = .disallow
        http.connectionPool = .init(idleTimeout: .seconds(60),
                                    concurrentHTTP1ConnectionsPerHostSoftLimit: configuration.connections)
        // A failed connect fails its request at once: the retries are ours, bounded and counted.
        http.connectionPool.retryConnectionEstablishment = false
        // Connecting gets at most 10 s: a NOC that does not answer SYNs is out of reach, and
        // every worker waits that long before the run stops.
        http.timeout = .init(connect: .init(min(configuration.requestTimeout, .seconds(10))),
                             read: .init(configuration.requestTimeout))
        if let proxy = configuration.networkProxy {
            guard let form = proxy.httpClientProxy else { throw PushChannelProxyError(description: proxy.httpClientRefusal) }
            http.proxy = form
        }
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http)
    }

    /// Sends `item` to the notify service.
    public func notify(_ item: PushChannelItem) async -> PushChannelResult {
        await exchange(method: .POST, target: GNP.notifyTarget, token: item.token, body: item.payload, host: item.host)
    }

    /// Asks the checkToken service whether `token` is alive (100) or dead (402).
    public func checkToken(_ token: String, host: String? = nil) async -> PushChannelResult {
        await exchange(method: .GET, target: GNP.checkTokenTarget, token: token, body: nil, host: host)
    }

    /// Closes every connection. Call once, when done.
    public func shutdown() async throws {
        try await client.shutdown()
    }

    /// Where a request for a campaign line with `lineHost` goes: `https://host:port` (or
    /// `http://` to a plain proxy). Direct to a NOC, the line's host wins, with the NOC's
    /// port unless it names its own; through a proxy, everything goes to the proxy.
    public func origin(lineHost: String?) -> String {
        switch configuration.route {
        case .proxy(let host, let port, let tls):
            return "\(tls ? "https" : "http")://\(Self.bracketed(host)):\(port)"
        case .noc(let host, let port):
            guard let lineHost else { return "https://\(Self.bracketed(host)):\(port)" }
            // HOST, HOST:PORT, [V6] or [V6]:PORT.
            if lineHost.hasPrefix("[") || lineHost.filter({ $0 == ":" }).count == 1 {
                return lineHost.hasSuffix("]") ? "https://\(lineHost):\(port)" : "https://\(lineHost)"
            }
            return "https://\(Self.bracketed(lineHost)):\(port)"
        }
    }

    private static func bracketed(_ host: String) -> String { host.contains(":") ? "[\(host)]" : host }

    private func exchange(method: HTTPMethod, target: String, token: String, body: [UInt8]?, host: String?) async
        -> PushChannelResult
    {
        var request = HTTPClientRequest(url: origin(lineHost: host) + target)
        request.method = method
        request.headers.add(name: GNP.tokenHeader, value: token)
        if let body {
            request.headers.add(name: "Content-Type", value: GNP.contentType)
            request.body = .bytes(ByteBuffer(bytes: body))
        }
        var result = PushChannelResult(outcome: .failed(reason: "gateway_unreachable"))
        for attempt in 1...max(1, configuration.maximumAttempts) {
            if attempt > 1 {
                result.resent += 1
                try? await Task.sleep(for: configuration.retryBackoff * (1 << min(attempt - 2, 16)))
            }
            do {
                let response = try await client.execute(request, timeout: .init(configuration.requestTimeout))
                // Read the (empty) body: the connection goes back to the pool only after it.
                _ = try await response.body.collect(upTo: 1 << 16)
                let code = response.headers.first(name: GNP.codeHeader).flatMap { GNPCode(headerValue: $0) }
                result.unreachable = false
                switch GNPVerdict.of(status: Int(response.status.code), code: code) {
                case .accepted: result.outcome = .accepted
                case .rejected(let code): result.outcome = .rejected(code)
                case .failed(let reason): result.outcome = .failed(reason: reason)
                case .retry(let reason):
                    result.outcome = .failed(reason: "server_error")
                    result.lastError = reason
                    continue
                }
                return result
            } catch {
                result.lastError = "\(error)"
                if Self.isConnectFailure(error) {
                    result.unreachable = true
                    result.outcome = .failed(reason: "gateway_unreachable")
                } else {
                    // Written, maybe taken, and no answer: sending again may duplicate it.
                    result.unreachable = false
                    result.outcome = .failed(reason: "retry_budget_exhausted")
                    if attempt < configuration.maximumAttempts { result.possibleDuplicates += 1 }
                }
            }
        }
        return result
    }

    /// Whether `error` happened before the request could be written: connecting or the
    /// TLS handshake.
    static func isConnectFailure(_ error: any Error) -> Bool {
        if error is NIOConnectionError { return true }
        if let error = error as? NIOSSLError, case .handshakeFailed = error { return true }
        if let error = error as? ChannelError, case .connectTimeout = error { return true }
        if let error = error as? HTTPClientError {
            return [.connectTimeout, .tlsHandshakeTimeout, .getConnectionFromPoolTimeout].contains(error)
        }
        if let error = error as? NIOCore.IOError { return [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH].contains(error.errnoCode) }
        return false
    }
}
