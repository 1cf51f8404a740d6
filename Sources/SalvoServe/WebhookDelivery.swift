import AsyncHTTPClient
import CoreMetrics
import Crypto
import Foundation
import Logging
import NIOCore
import NIOSSL
import SalvoHTTPClientProxy
import SalvoIO
import ServiceLifecycle

/// Posts the notifications that ended rejected or failed to a webhook, in signed batches,
/// without ever making a send wait.
///
/// The engine's threads hand each final status to ``enqueue(_:)``, which only appends to a
/// bounded buffer. ``run()`` takes batches of up to `batchLimit` events from it (letting a
/// small batch fill for `flushInterval`), POSTs each as a ``WebhookPayload``, and retries
/// with backoff. When the receiver is slow or down, events accumulate up to `bufferLimit`;
/// past it they are dropped and counted, since holding the sender back for a report would
/// be worse than losing the report.
///
/// Each POST carries `X-Salvo-Signature: sha256=<hex>`, the HMAC-SHA256 of its body under
/// the shared secret (``signature(of:secret:)``). A receiver answers 2xx once it has the
/// batch; 408, 429 and 5xx (and no answer) are retried, any other status abandons the batch,
/// since sending it again would be refused again.
///
/// ```swift
/// let webhook = try WebhookDelivery(WebhookConfiguration(url: url, secret: secret), logger: logger)
/// // In the ServiceGroup of `salvo serve`, after the engine so that it stops later:
/// // its graceful shutdown delivers what is held, for at most `drainTimeout`.
/// webhook.enqueue(NotificationStatus(id: id, rejection: rejection))
/// ```
public final class WebhookDelivery: Service, Sendable {
    /// The configuration it runs with.
    public let configuration: WebhookConfiguration
    private let http: HTTPClient.Configuration
    private let logger: Logger
    private let state = Locked(State())
    /// Wakes the delivery loop: the buffer became non-empty or full, a pause ended, stop.
    private let wakeups: AsyncStream<Void>
    private let wake: AsyncStream<Void>.Continuation
    /// Tells the deadline watcher that a stop was requested.
    private let stops: AsyncStream<Void>
    private let stop: AsyncStream<Void>.Continuation
    private let deliveredEvents: Counter
    private let droppedEvents: Counter
    private let abandonedEvents: Counter

    /// Checks `configuration` and prepares the HTTP client; nothing connects before ``run()``.
    /// It logs problems with the receiver (never a payload or the secret) through `logger`,
    /// by default nowhere, and counts events in `salvo_serve_webhook_events_total{outcome}`.
    ///
    /// - Throws: when the URL is not `http` or `https` with a host, the secret is empty, a
    ///   limit is not positive, the trust roots cannot be read, or the proxy is SOCKS5 with
    ///   credentials (which AsyncHTTPClient cannot give).
    public init(_ configuration: WebhookConfiguration,
                logger: Logger = Logger(label: "salvo.webhook") { _ in SwiftLogNoOpLogHandler() },
                metricsFactory: any MetricsFactory = MetricsSystem.factory) throws(WebhookConfigurationError) {
        self.configuration = configuration
        http = try Self.httpConfiguration(configuration)
        var logger = logger
        logger[metadataKey: "webhook"] = "\(configuration)"
        self.logger = logger
        (wakeups, wake) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        (stops, stop) = AsyncStream.makeStream(bufferingPolicy: .bufferingNewest(1))
        let label = "salvo_serve_webhook_events_total"
        deliveredEvents = Counter(label: label, dimensions: [("outcome", "delivered")], factory: metricsFactory)
        droppedEvents = Counter(label: label, dimensions: [("outcome", "dropped")], factory: metricsFactory)
        abandonedEvents = Counter(label: label, dimensions: [("outcome", "abandoned")], factory: metricsFactory)
    }

    /// Counts so far; see ``WebhookCounts`` for what adds up.
    public var counts: WebhookCounts {
        state.withLock { $0.counts }
    }

    // MARK: Taking events

    /// Holds `status` for the next batch, or drops and counts it when `bufferLimit` events are
    /// held or delivery has ended. Any thread; takes a lock for an append, never suspends.
    public func enqueue(_ status: NotificationStatus) {
        let batchLimit = configuration.batchLimit
        let bufferLimit = configuration.bufferLimit
        let outcome = state.withLock { state -> Enqueued in
            guard !state.hasEnded, state.counts.pending < bufferLimit else {
                state.counts.dropped += 1
                return .dropped
            }
            state.events.append(status)
            state.counts.pending += 1
            switch state.buffered {
            case 1:
                state.oldest = .now
                return .wake
            case batchLimit:
                return .wake
            default:
                return .held
            }
        }
        switch outcome {
        case .held: break
        case .wake: wake.yield()
        case .dropped: droppedEvents.increment()
        }
    }

    private enum Enqueued { case held, wake, dropped }

    // MARK: Running

    /// Delivers until stopped: by a graceful shutdown of its `ServiceGroup` (then it goes on
    /// delivering what is held for at most `drainTimeout`), by ``finish(within:)``, or at once
    /// by cancellation. Events still held when it returns are counted as abandoned, and
    /// later ones as dropped. Call once.
    public func run() async {
        let client = HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: http)
        await withGracefulShutdownHandler {
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.deliver(through: client) }
                // Bounds the draining: cancels the delivery (a POST, a backoff) at the deadline.
                group.addTask { await self.awaitDeadline() }
                await group.next()
                group.cancelAll()
            }
        } onGracefulShutdown: {
            self.requestStop(by: .now + self.configuration.drainTimeout)
        }
        try? await client.shutdown()
        end()
    }

    /// Delivers what is held (events enqueued meanwhile included) for at most `limit`, then
    /// stops ``run()``, and returns once it has: call it while `run()` runs or is about to.
    /// The first stop's deadline holds (a graceful shutdown's, or an earlier call's).
    public func finish(within limit: Duration) async {
        requestStop(by: .now + limit)
        await withCheckedContinuation { (finished: CheckedContinuation<Void, Never>) in
            let hasEnded = state.withLock { state in
                if !state.hasEnded { state.finishing.append(finished) }
                return state.hasEnded
            }
            if hasEnded { finished.resume() }
        }
    }

    private func requestStop(by deadline: ContinuousClock.Instant) {
        let isFirst = state.withLock { state in
            guard state.deadline == nil else { return false }
            state.deadline = deadline
            return true
        }
        guard isFirst else { return }
        stop.yield()
        wake.yield()
    }

    private func awaitDeadline() async {
        for await _ in stops {
            guard let deadline = state.withLock({ $0.deadline }) else { continue }
            try? await Task.sleep(until: deadline, clock: .continuous)
            return
        }
    }

    private func end() {
        let (leftOver, finishing) = state.withLock { state in
            state.hasEnded = true
            let leftOver = state.counts.pending
            state.counts.abandoned += leftOver
            state.counts.pending = 0
            state.events = []
            state.head = 0
            defer { state.finishing = [] }
            return (leftOver, state.finishing)
        }
        if leftOver > 0 {
            abandonedEvents.increment(by: Int64(leftOver))
            logger.warning("webhook stopped with events undelivered", metadata: ["events": "\(leftOver)"])
        }
        for waiter in finishing { waiter.resume() }
    }

    // MARK: The delivery loop

    private func deliver(through client: HTTPClient) async {
        var wakeups = self.wakeups.makeAsyncIterator()
        let batchLimit = configuration.batchLimit
        while !Task.isCancelled {
            let (buffered, oldest, isStopping) = state.withLock { ($0.buffered, $0.oldest, $0.deadline != nil) }
            if buffered == 0 {
                if isStopping { return }
                _ = await wakeups.next()
                continue
            }
            if buffered < batchLimit, !isStopping, let oldest, ContinuousClock.now < oldest + configuration.flushInterval {
                await pause(until: oldest + configuration.flushInterval, &wakeups)
                continue
            }
            let batch = state.withLock { $0.take(batchLimit) }
            switch await post(batch, through: client) {
            case .delivered:
                state.withLock { $0.settle(batch.count, delivered: true) }
                deliveredEvents.increment(by: Int64(batch.count))
            case .abandoned:
                state.withLock { $0.settle(batch.count, delivered: false) }
                abandonedEvents.increment(by: Int64(batch.count))
            case .interrupted:
                return  // `end()` counts the batch with what else is held
            }
        }
    }

    /// Waits until `end`, or any earlier wake-up: the caller decides again either way.
    private func pause(until end: ContinuousClock.Instant, _ wakeups: inout AsyncStream<Void>.Iterator) async {
        await withTaskGroup(of: Void.self) { timer in
            timer.addTask { [wake] in
                if (try? await Task.sleep(until: end, clock: .continuous)) != nil { wake.yield() }
            }
            _ = await wakeups.next()
            timer.cancelAll()
        }
    }

    private enum BatchOutcome { case delivered, abandoned, interrupted }

    private func post(_ events: [NotificationStatus], through client: HTTPClient) async -> BatchOutcome {
        var delay = configuration.retryDelay
        var lastProblem = ""
        for attempt in 1...configuration.attempts {
            if attempt > 1 {
                do { try await Task.sleep(for: delay * Double.random(in: 0.5...1)) } catch { return .interrupted }
                delay = min(delay * 2, configuration.maximumRetryDelay)
            }
            state.withLock { $0.counts.attempts += 1 }
            switch await send(events, through: client) {
            case .accepted:
                report(nil)
                return .delivered
            case .refused(let status):
                report("the receiver refused a batch with HTTP \(status): not retried")
                return .abandoned
            case .failed(let problem):
                if Task.isCancelled { return .interrupted }
                logger.debug("webhook POST failed, will retry", metadata: ["problem": "\(problem)", "attempt": "\(attempt)"])
                lastProblem = problem
            }
        }
        report("a batch was abandoned after \(configuration.attempts) attempts, the last one: \(lastProblem)")
        return .abandoned
    }

    /// Logs a problem when it differs from the last one, and the recovery from one: a
    /// receiver that is down must not flood the log with a line per batch.
    private func report(_ problem: String?) {
        let last = state.withLock { state in
            defer { state.lastProblem = problem }
            return state.lastProblem
        }
        guard problem != last else { return }
        if let problem {
            logger.warning("webhook: \(problem)")
        } else {
            logger.info("webhook: delivering again")
        }
    }

    private enum Answer { case accepted, refused(status: Int), failed(String) }

    private func send(_ events: [NotificationStatus], through client: HTTPClient) async -> Answer {
        let sentAt = Int64((Date().timeIntervalSince1970 * 1000).rounded())
        let body = WebhookPayload(events: events, sentAt: sentAt).encoded()
        var request = HTTPClientRequest(url: configuration.url)
        request.method = .POST
        request.headers.add(name: "Content-Type", value: "application/json")
        request.headers.add(name: "User-Agent", value: "salvo")
        request.headers.add(name: "X-Salvo-Signature", value: "sha256=" + Self.signature(of: body, secret: configuration.secret))
        request.body = .bytes(body)
        do {
            let response = try await client.execute(request, timeout: .init(configuration.requestTimeout))
            // Read (a bounded part of) the answer so that the connection can carry the next batch.
            _ = try? await response.body.collect(upTo: 64 << 10)
            switch Int(response.status.code) {
            case 200..<300: return .accepted
            case 408, 429, 500..<600: return .failed("HTTP \(response.status.code)")
            case let status: return .refused(status: status)
            }
        } catch {
            return .failed("\(error)")
        }
    }

    // MARK: Signing

    /// The `X-Salvo-Signature` value without its `sha256=` prefix: the lower-case hex
    /// HMAC-SHA256 of `body` under `secret`.
    ///
    /// A receiver checks a POST by computing the HMAC of the body bytes exactly as received
    /// (before any JSON parsing) and comparing it in constant time with the header's, as
    /// ``isValidSignature(_:of:secret:)`` does; a plain `==` would let an attacker learn the
    /// expected value a byte at a time from response times.
    public static func signature(of body: some DataProtocol, secret: [UInt8]) -> String {
        let code = HMAC<Crypto.SHA256>.authenticationCode(for: body, using: SymmetricKey(data: secret))
        return code.map { byte in
            let hex = String(byte, radix: 16)
            return byte < 16 ? "0" + hex : hex
        }.joined()
    }

    /// Whether `header` (an `X-Salvo-Signature` value, `sha256=<hex>`) signs `body` under
    /// `secret`; the comparison takes the same time wherever the values differ.
    public static func isValidSignature(_ header: String, of body: some DataProtocol, secret: [UInt8]) -> Bool {
        guard header.hasPrefix("sha256="), let code = bytes(ofHex: header.dropFirst("sha256=".count)) else { return false }
        return HMAC<Crypto.SHA256>.isValidAuthenticationCode(code, authenticating: body, using: SymmetricKey(data: secret))
    }

    private static func bytes(ofHex hex: Substring) -> [UInt8]? {
        let digits = Array(hex.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        bytes.reserveCapacity(digits.count / 2)
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }

    // MARK: Configuration

    private static func httpConfiguration(_ configuration: WebhookConfiguration) throws(WebhookConfigurationError)
        -> HTTPClient.Configuration {
        guard let url = URLComponents(string: configuration.url), ["http", "https"].contains(url.scheme?.lowercased()),
              let host = url.host, !host.isEmpty else {
            throw WebhookConfigurationError("the webhook URL must be http:// or https:// with a host, as http://host:port/path")
        }
        guard !configuration.secret.isEmpty else {
            throw WebhookConfigurationError("the webhook needs a secret to sign its batches with")
        }
        guard configuration.batchLimit > 0, configuration.bufferLimit > 0, configuration.attempts > 0,
              configuration.requestTimeout > .zero else {
            throw WebhookConfigurationError("the webhook's batch limit, buffer limit, attempts and request timeout must be positive")
        }
        var tls = NIOSSL.TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        if case .certificates(let source) = configuration.trustRoots {
            do {
                let pem: [UInt8] = switch source {
                case .file(let path): try readSmallFile(path, limit: 1 << 20)
                case .text(let text): Array(text.utf8)
                }
                tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(pem))
            } catch {
                throw WebhookConfigurationError("the webhook's trust roots cannot be used: \(error)")
            }
        }
        var http = HTTPClient.Configuration(tlsConfiguration: tls)
        http.redirectConfiguration = .disallow
        // A failed connect fails its attempt at once: retries are ours, with backoff.
        http.connectionPool.retryConnectionEstablishment = false
        http.timeout = .init(connect: .init(configuration.requestTimeout), read: .init(configuration.requestTimeout))
        if let proxy = configuration.proxy {
            guard let form = proxy.httpClientProxy else { throw WebhookConfigurationError(proxy.httpClientRefusal) }
            http.proxy = form
        }
        return http
    }

    // MARK: State

    private struct State {
        /// Buffered events are `events[head...]`: taking a batch moves `head` instead of
        /// shifting the rest under the lock the engine's threads append through.
        var events: [NotificationStatus] = []
        var head = 0
        /// When the oldest buffered event arrived (roughly, after a partial take).
        var oldest: ContinuousClock.Instant?
        var counts = WebhookCounts()
        /// Set by the first stop request.
        var deadline: ContinuousClock.Instant?
        var hasEnded = false
        var finishing: [CheckedContinuation<Void, Never>] = []
        var lastProblem: String?

        var buffered: Int { events.count - head }

        mutating func take(_ limit: Int) -> [NotificationStatus] {
            let end = min(head + limit, events.count)
            let batch = Array(events[head..<end])
            head = end
            if head == events.count {
                events.removeAll(keepingCapacity: true)
                head = 0
                oldest = nil
            } else if head >= 1024, head * 2 >= events.count {
                events.removeFirst(head)
                head = 0
            }
            return batch
        }

        mutating func settle(_ count: Int, delivered: Bool) {
            counts.pending -= count
            if delivered { counts.delivered += count } else { counts.abandoned += count }
        }
    }
}
