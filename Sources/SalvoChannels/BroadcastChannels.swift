import AsyncHTTPClient
import NIOCore
import NIOHTTP1
import NIOPosix
import NIOSSL
import SalvoEngine
import SalvoHTTPClientProxy
import SalvoIO
import SalvoWire
#if canImport(Glibc)
import Glibc
#endif

/// Creates, reads, deletes and lists an app's broadcast channels (iOS 18 Live Activities)
/// on APNs's channel management gateway.
///
/// Requests go over HTTP/2 and TLS 1.2+ (AsyncHTTPClient; NIO stays out of the engine),
/// each with a fresh `apns-request-id` that errors quote. With token authentication the
/// provider token is the team's, from the same signer and token store as `salvo send`'s,
/// so channel requests never make APNs see a second token for the team. A 403
/// ExpiredProviderToken renews the token once and sends again; 429, 500 and 503 are sent
/// again after a pause, up to `maximumAttempts`.
///
/// ```swift
/// let channels = try BroadcastChannels(BroadcastChannelsConfiguration(
///     gateway: BroadcastChannelsConfiguration.sandboxGateway, bundleID: "com.example.scores",
///     authentication: .token(credentials, store: ProviderTokenCache(path: cachePath))))
/// let channel = try await channels.create(storagePolicy: .mostRecent)
/// try await channels.shutdown()
/// ```
public final class BroadcastChannels: Sendable {
    /// At most this many channels per app and environment, Apple's limit (past it, 400
    /// CannotCreateChannelConfig): also the most `create(count:storagePolicy:)` makes.
    public static let maximumChannels = 10_000

    /// The configuration it runs with.
    public let configuration: BroadcastChannelsConfiguration
    private let client: HTTPClient
    private let tokens: ChannelTokens?
    private let origin: String

    /// Makes the client; the connection opens with the first request.
    ///
    /// - Throws: `.credentials` when the TLS configuration (certificate, key, trust roots)
    ///   cannot be used or no provider token can be signed.
    public init(_ configuration: BroadcastChannelsConfiguration) throws(BroadcastChannelError) {
        self.configuration = configuration
        let gateway = configuration.gateway
        origin = "https://\(gateway.description)"
        let tls: NIOSSL.TLSConfiguration
        do { tls = try ChannelTLS.configuration(configuration.tls) } catch {
            throw BroadcastChannelError(.credentials("TLS: \(error)"), operation: "setup", gateway: gateway.description)
        }
        switch configuration.authentication {
        case .certificate:
            tokens = nil
        case .token(let credentials, let store):
            do { tokens = try ChannelTokens(credentials: credentials, store: store) } catch {
                throw BroadcastChannelError(.credentials(error.description), operation: "setup", gateway: gateway.description)
            }
        }
        var http = HTTPClient.Configuration(tlsConfiguration: tls)
        http.httpVersion = .automatic  // ALPN: h2, which APNs speaks
        http.decompression = .disabled
        http.redirectConfiguration = .disallow
        // A failed connect fails its request at once: retries are ours, bounded.
        http.connectionPool.retryConnectionEstablishment = false
        http.timeout = .init(connect: .init(min(configuration.requestTimeout, .seconds(10))),
                             read: .init(configuration.requestTimeout))
        if let proxy = configuration.proxy {
            guard let form = proxy.httpClientProxy else {
                throw BroadcastChannelError(.credentials(proxy.httpClientRefusal), operation: "setup", gateway: gateway.description)
            }
            http.proxy = form
        }
        client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http)
    }

    /// Creates a channel with `storagePolicy`; APNs chooses its id.
    ///
    /// `POST /1/apps/<bundle id>/channels`, answered 201 with the id in `apns-channel-id`.
    public func create(storagePolicy: MessageStoragePolicy) async throws(BroadcastChannelError) -> BroadcastChannel {
        guard case .channel(let channel) = try await perform(.create(storagePolicy)) else { preconditionFailure("create answers a channel") }
        return channel
    }

    /// Reads channel `id`'s settings (`GET /1/apps/<bundle id>/channels`, the id in
    /// `apns-channel-id`).
    ///
    /// - Throws: refused 400 ChannelNotRegistered when the app has no such channel here.
    public func read(_ id: String) async throws(BroadcastChannelError) -> BroadcastChannel {
        guard case .channel(let channel) = try await perform(.read(channelID: id)) else { preconditionFailure("read answers a channel") }
        return channel
    }

    /// Deletes channel `id` (`DELETE /1/apps/<bundle id>/channels`, the id in
    /// `apns-channel-id`); APNs never reuses its id.
    public func delete(_ id: String) async throws(BroadcastChannelError) {
        _ = try await perform(.delete(channelID: id))
    }

    /// The ids of the app's channels in this environment (`GET /1/apps/<bundle id>/all-channels`).
    public func list() async throws(BroadcastChannelError) -> [String] {
        guard case .channels(let ids) = try await perform(.list) else { preconditionFailure("list answers ids") }
        return ids
    }

    /// Creates `count` channels with `storagePolicy`, `batchConcurrency` requests at a time.
    ///
    /// The first error stops it: no request is started after it, those in flight finish,
    /// and the batch holds every channel made with that error.
    ///
    /// - Throws: `.invalidRequest`, before anything is sent, for a count under 1 or over
    ///   `maximumChannels` (an app cannot hold more).
    public func create(count: Int, storagePolicy: MessageStoragePolicy) async throws(BroadcastChannelError) -> ChannelBatch {
        guard (1...Self.maximumChannels).contains(count) else {
            throw BroadcastChannelError(.invalidRequest("\(count) channels asked for; from 1 to \(Self.maximumChannels.formatted()) (an app has at "
                                               + "most \(Self.maximumChannels.formatted()) per environment)"),
                               operation: "create \(count)", gateway: configuration.gateway.description)
        }
        let concurrency = max(1, configuration.batchConcurrency)
        return await withTaskGroup(of: Result<BroadcastChannel, BroadcastChannelError>.self) { group in
            var batch = ChannelBatch(channels: [], error: nil)
            var started = 0
            func startOne() {
                started += 1
                group.addTask { () async -> Result<BroadcastChannel, BroadcastChannelError> in
                    do throws(BroadcastChannelError) { return .success(try await self.create(storagePolicy: storagePolicy)) } catch {
                        return .failure(error)
                    }
                }
            }
            while started < min(count, concurrency) { startOne() }
            for await result in group {
                switch result {
                case .success(let channel): batch.channels.append(channel)
                case .failure(let error): batch.error = batch.error ?? error
                }
                if batch.error == nil, started < count { startOne() }
            }
            return batch
        }
    }

    /// Closes the connection. Call once, when done.
    public func shutdown() async {
        try? await client.shutdown()
    }

    // MARK: One request

    /// Sends `operation` until it has an answer that ends it: a renewed token after 403
    /// ExpiredProviderToken (once), pauses after 429, 500, 503 and failed connects (up to
    /// `maximumAttempts`).
    private func perform(_ operation: ChannelOperation) async throws(BroadcastChannelError) -> ChannelResult {
        let gateway = configuration.gateway.description
        func failure(_ kind: BroadcastChannelError.Kind, _ requestID: String?) -> BroadcastChannelError {
            BroadcastChannelError(kind, operation: operation.name, channelID: operation.channelID, gateway: gateway, requestID: requestID)
        }
        var token: ProviderTokenSigner.Token?
        do { token = try await tokens?.current() } catch { throw failure(.credentials(error.description), nil) }
        var attempt = 1
        var renewed = false
        while true {
            let requestID = Self.makeRequestID()
            let request: ChannelRequest
            do {
                request = try ChannelRequest(operation, bundleID: configuration.bundleID, requestID: requestID,
                                             authorization: token.map { "bearer \($0.text)" })
            } catch {
                throw failure(.invalidRequest(error.description), nil)
            }
            let answer: (status: Int, headers: HTTPHeaders, body: [UInt8])
            do {
                answer = try await exchange(request)
            } catch {
                guard Self.isConnectFailure(error), attempt < configuration.maximumAttempts else {
                    throw failure(.transport(Self.describe(error, host: configuration.gateway.host, proxy: configuration.proxy)), requestID)
                }
                try? await Task.sleep(for: backoff(attempt))
                attempt += 1
                continue
            }
            let echoed = answer.headers.first(name: "apns-request-id") ?? requestID
            switch ChannelAnswer.verdict(operation, status: answer.status, channelIDHeader: answer.headers.first(name: "apns-channel-id"),
                                         requestID: echoed, body: answer.body) {
            case .success(let result):
                return result
            case .expiredToken:
                guard let refused = token, !renewed else {
                    throw failure(.refused(status: 403, reason: .apns(.expiredProviderToken)), echoed)
                }
                renewed = true
                do { token = try await tokens?.renewal(refusing: refused) } catch {
                    throw failure(.credentials("APNs called the provider token expired (403 ExpiredProviderToken), and "
                                               + error.description), echoed)
                }
            case .retry(let status, let reason):
                guard attempt < configuration.maximumAttempts else {
                    throw failure(.refused(status: status, reason: reason), echoed)
                }
                try? await Task.sleep(for: backoff(attempt))
                attempt += 1
            case .refused(let status, let reason):
                throw failure(.refused(status: status, reason: reason), echoed)
            case .unexpected(let what):
                throw failure(.unexpectedAnswer(what), echoed)
            }
        }
    }

    private func exchange(_ request: ChannelRequest) async throws -> (status: Int, headers: HTTPHeaders, body: [UInt8]) {
        var http = HTTPClientRequest(url: origin + request.path)
        http.method = HTTPMethod(rawValue: request.method)
        for field in request.fields { http.headers.add(name: field.name, value: field.value) }
        if let body = request.body { http.body = .bytes(ByteBuffer(bytes: body)) }
        let response = try await client.execute(http, timeout: .init(configuration.requestTimeout))
        let body = try await response.body.collect(upTo: ChannelAnswer.maximumBodyBytes)
        return (Int(response.status.code), response.headers, Array(buffer: body))
    }

    private func backoff(_ attempt: Int) -> Duration {
        configuration.retryBackoff * (1 << min(attempt - 1, 10))
    }

    /// A fresh `apns-request-id`: a random UUID, lowercase.
    static func makeRequestID() -> String {
        APNsID(random: .random(in: .min ... .max), .random(in: .min ... .max)).description
    }

    /// Whether `error` came before the request was written: connecting or the TLS
    /// handshake (nothing was sent, so sending again cannot make a second channel). A
    /// handshake that failed verification is not worth a second try.
    static func isConnectFailure(_ error: any Error) -> Bool {
        if error is NIOConnectionError { return true }
        if let error = error as? HTTPClientError { return [.connectTimeout, .getConnectionFromPoolTimeout].contains(error) }
        if let error = error as? NIOCore.IOError { return [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH].contains(error.errnoCode) }
        return false
    }

    /// What went wrong, for a user: a handshake that did not verify says how to trust the
    /// server; a proxy's refusal names the proxy (never its credentials).
    static func describe(_ error: any Error, host: String, proxy: ProxyConfiguration?) -> String {
        if let error = error as? NIOSSLExtraError, error == .failedToValidateHostname {
            return "the TLS handshake failed: the server's certificate does not name \(host), so it is not the server asked for"
                + " (--gateway names it as its certificate does; --ca only chooses whom to trust)"
        }
        if error is NIOSSLError || error is NIOSSLExtraError || error is BoringSSLError {
            return "the TLS handshake failed (\(error)): the server's certificate or name did not verify; "
                + "give --ca with the CA that issued it if it is a private one"
        }
        if let error = error as? HTTPClientError, let proxy {
            switch error {
            case .proxyAuthenticationRequired:
                return "the proxy \(proxy.address) answered 407: check the proxy's user and password"
            case .invalidProxyResponse:
                return "the proxy \(proxy.address) refused the tunnel to the gateway: check the proxy's user and password, "
                    + "and that it allows CONNECT to the gateway's port"
            case .socksHandshakeTimeout:
                return "the SOCKS5 proxy \(proxy.address) did not answer its handshake"
            default: break
            }
        }
        if error is NIOConnectionError || (error as? NIOCore.IOError).map({ [ECONNREFUSED, EHOSTUNREACH, ENETUNREACH].contains($0.errnoCode) }) == true {
            return proxy.map { "cannot reach the proxy \($0.address) (\(error))" } ?? "cannot connect (\(error))"
        }
        return "\(error)"
    }
}
