import CoreMetrics
import HTTPTypes
import Hummingbird
import HummingbirdCore
import HummingbirdHTTP2
import Logging
import NIOCore
import NIOSSL
import SalvoCampaignFiles
import SalvoEngine
import SalvoTelemetry
import SalvoWire
import ServiceLifecycle
import Synchronization

/// `salvo serve`: the engine behind an HTTP API.
///
/// - `POST /v1/notifications`: one notification (a JSON object, a campaign line's fields)
///   or a batch (an array of up to `batchLimit`). 202 with each one's id once taken (in
///   the bounded queue; with a journal, in PostgreSQL too); with `?wait=SECONDS`, 200
///   with each one's status once final (or the wait is over). A bad notification is
///   refused alone (`errors`, by index); a request with none good is 400.
/// - `GET /v1/notifications/{id}`: its status, while the store keeps it.
/// - `/health`, `/ready` (503 while the queue is full), `/metrics` (when given).
///
/// It runs its services (the sender's drain, the webhook) under the same graceful
/// shutdown: on SIGTERM the server stops taking requests and finishes those it has, the
/// sender finishes every notification taken, and the webhook delivers what they produced.
public struct NotificationServer: Sendable {
    public let configuration: ServeConfiguration
    private let dispatcher: Dispatcher
    private let routing: TopicRouting?
    private let metricsText: (@Sendable () -> [UInt8])?
    private let logger: Logger
    private let instruments = Instruments()

    /// A server sending through `sender`.
    ///
    /// - Parameters:
    ///   - routing: the topics the sender's routes serve (several apps); nil: any topic.
    ///   - metricsText: the Prometheus text `/metrics` answers; nil: no `/metrics`.
    ///   - onRefusal: told of each notification that ended rejected or failed (a webhook);
    ///     called on the sender's threads, so it must not block.
    ///   - journal: `--db`: notifications are journaled before they are answered 202, and
    ///     what lapsed instances held is sent; nil: statuses in memory only.
    public init(configuration: ServeConfiguration, sender: RoutingSender, routing: TopicRouting?, logger: Logger,
                metricsText: (@Sendable () -> [UInt8])? = nil,
                onRefusal: (@Sendable (NotificationStatus) -> Void)? = nil, journal: NotificationJournal? = nil) {
        self.configuration = configuration
        self.routing = routing
        self.metricsText = metricsText
        self.logger = logger
        dispatcher = Dispatcher(sender: sender,
                                store: StatusStore(retention: configuration.statusRetention, capacity: configuration.statusCapacity),
                                queueLimit: configuration.queueLimit, logger: logger, onRefusal: onRefusal, journal: journal)
        if let journal {
            recovery = JournalRecovery(journal: journal, dispatcher: dispatcher, campaignProtocol: configuration.campaignProtocol,
                                       retention: configuration.statusRetention, logger: logger)
        } else {
            recovery = nil
        }
        idempotency = IdempotencyCache(retention: configuration.statusRetention, capacity: 100_000)
        rateLimit = configuration.callerRate.map(CallerRateLimit.init(perSecond:))
    }

    private let idempotency: IdempotencyCache
    private let rateLimit: CallerRateLimit?
    /// With a journal: sends what lapsed instances held; stops first at a graceful shutdown.
    private let recovery: JournalRecovery?
    /// Why the sender gave up on the gateway, once it has: unreachable, or the credentials
    /// refused. It will send nothing more, so the service says it is unhealthy (an
    /// orchestrator restarts it) and refuses new notifications rather than failing them.
    private let gaveUp = GaveUp()

    /// The status of the notification `id` (an apns-id), as `GET /v1/notifications/{id}`
    /// answers it; nil when it is not known.
    public func status(of id: String) -> NotificationStatus? {
        Array(id.utf8).withUnsafeBytes { APNsID(text: $0) }.flatMap { dispatcher.store.status(of: $0) }
    }

    /// Serves until a graceful shutdown (SIGTERM, under a `ServiceGroup`), then drains.
    ///
    /// - Parameters:
    ///   - services: run beside the server and shut down after the sender has drained, in
    ///     reverse order (a webhook, to deliver the last refusals).
    ///   - onListening: called with the port once the server listens.
    public func run(services: [any Service] = [], onListening: @escaping @Sendable (Int) async -> Void = { _ in }) async throws {
        let application = Application(
            router: router(), server: try serverBuilder(),
            configuration: ApplicationConfiguration(address: .hostname(configuration.host, port: configuration.port),
                                                    serverName: "salvo"),
            // Shut down in reverse: the server first (no new requests, the open ones
            // answered), then the sender (every notification taken made final), then these.
            services: services + [EngineDrain(dispatcher: dispatcher), GiveUpWatch(sender: dispatcher.sender, gaveUp: gaveUp, logger: logger)]
                + (recovery.map { [$0] } ?? []),
            onServerRunning: { channel in await onListening(channel.localAddress?.port ?? 0) },
            logger: logger)
        try await application.run()
    }

    private func serverBuilder() throws -> HTTPServerBuilder {
        guard let tls = configuration.tls else { return .http1() }
        var settings = TLSConfiguration.makeServerConfiguration(
            certificateChain: try NIOSSLCertificate.fromPEMFile(tls.certificate).map { .certificate($0) },
            privateKey: .privateKey(try NIOSSLPrivateKey(file: tls.privateKey, format: .pem)))
        if let clientCA = tls.clientCA {
            settings.certificateVerification = .noHostnameVerification
            settings.trustRoots = .file(clientCA)
        }
        return try .http2Upgrade(tlsConfiguration: settings)
    }

    // MARK: Routes

    private func router() -> Router<BasicRequestContext> {
        let router = Router()
        router.post("v1/notifications") { request, _ in await post(request) }
        router.get("v1/notifications/:id") { request, context in await get(request, id: context.parameters.get("id") ?? "") }
        router.get("health") { _, _ in
            if let reason = gaveUp.reason { return Self.gaveUpAnswer(reason).response }
            return Answer(200, Array("{\"status\":\"ok\"}".utf8)).response
        }
        router.get("ready") { _, _ in
            if let reason = gaveUp.reason { return Self.gaveUpAnswer(reason).response }
            return dispatcher.queueDepth < configuration.queueLimit
                ? Answer(200, Array("{\"status\":\"ready\"}".utf8)).response
                : Answer(503, AnswerJSON.error("the queue is full"), retryAfter: .seconds(1)).response
        }
        if let metricsText {
            router.get("metrics") { _, _ in
                Response(status: .ok, headers: [.contentType: "text/plain; version=0.0.4"],
                         body: .init(byteBuffer: ByteBuffer(bytes: metricsText())))
            }
        }
        return router
    }

    private func post(_ request: Request) async -> Response {
        let answer = await takeNotifications(request)
        instruments.requests(answer.status).increment()
        return answer.response
    }

    private func takeNotifications(_ request: Request) async -> Answer {
        guard let caller = authorize(request) else { return Self.unauthorized }
        if let reason = gaveUp.reason { return Self.gaveUpAnswer(reason) }
        var wait: Duration?
        if let text = request.uri.queryParameters.get("wait") {
            guard let seconds = Double(text), seconds >= 0, seconds.isFinite else {
                return Answer(400, AnswerJSON.error("?wait is a number of seconds, got \(text)"))
            }
            wait = min(.milliseconds(Int64(seconds * 1000)), configuration.waitLimit)
        }
        let key = request.headers[Self.idempotencyKey]
        if let key {
            switch idempotency.lookup(key, caller: caller) {
            case .first: break
            case .inProgress:
                return Answer(409, AnswerJSON.error("a request with this Idempotency-Key is being answered"))
            case .answered(let first):
                return Answer(first.status, first.body, replayed: true)
            }
        }
        let answer = await take(request, caller: caller, wait: wait)
        if let key {
            // Kept when something was taken; a refused request may be retried with its key.
            let taken = answer.status == 200 || answer.status == 202
            idempotency.record(taken ? IdempotencyCache.Answer(status: answer.status, body: answer.body) : nil,
                               for: key, caller: caller)
        }
        return answer
    }

    private func take(_ request: Request, caller: String, wait: Duration?) async -> Answer {
        let collected: ByteBuffer
        do {
            collected = try await request.body.collect(upTo: configuration.bodyLimit)
        } catch is NIOTooManyBytesError {
            return Answer(413, AnswerJSON.error("the body is over \(configuration.bodyLimit) bytes"))
        } catch {
            return Answer(400, AnswerJSON.error("the body could not be read: \(error)"))
        }
        let body = JSONBody(copying: collected.readableBytesView)
        let decoded: (items: [JSONBatchItem], errors: [JSONBatchItemError])
        do throws(JSONBatchDecoder.Refusal) {
            decoded = try JSONBatchDecoder(campaignProtocol: configuration.campaignProtocol, routing: routing,
                                       batchLimit: configuration.batchLimit).decode(body)
        } catch {
            switch error {
            case .malformed(let reason): return Answer(400, AnswerJSON.error(reason))
            case .tooMany(let count, let limit):
                return Answer(413, AnswerJSON.error("the batch holds \(count) notifications; a request takes at most \(limit)"))
            }
        }
        instruments.notifications("invalid").increment(by: decoded.errors.count)
        guard !decoded.items.isEmpty else { return Answer(400, Self.itemsJSON([], errors: decoded.errors, statuses: nil)) }
        if let rateLimit, let retryAfter = rateLimit.take(decoded.items.count, for: caller) {
            instruments.notifications("throttled").increment(by: decoded.items.count)
            return Answer(429, AnswerJSON.error("over \(rateLimit.perSecond) notifications per second for this key"),
                               retryAfter: retryAfter)
        }
        switch await dispatcher.take(decoded.items, of: body, campaignProtocol: configuration.campaignProtocol) {
        case .full:
            instruments.notifications("throttled").increment(by: decoded.items.count)
            instruments.queueDepth.record(dispatcher.queueDepth)
            return Answer(429, AnswerJSON.error("the queue is full (\(configuration.queueLimit) notifications not yet answered)"),
                               retryAfter: .seconds(1))
        case .unavailable(let reason):
            return Answer(503, AnswerJSON.error("nothing was taken: the journal is unavailable (\(reason))"), retryAfter: .seconds(1))
        case .taken(let batch):
            instruments.notifications("taken").increment(by: batch.fresh.count)
            instruments.notifications("duplicate").increment(by: batch.items.count - batch.fresh.count)
            instruments.queueDepth.record(dispatcher.queueDepth)
            let durability = dispatcher.journal == nil ? "memory" : "database"
            guard let wait else { return Answer(202, Self.itemsJSON(batch, errors: decoded.errors, statuses: nil, durability: durability)) }
            await batch.final(within: wait)
            let statuses = dispatcher.store.statuses(of: batch.items.map(\.id))
            return Answer(200, Self.itemsJSON(batch, errors: decoded.errors, statuses: statuses, durability: durability))
        }
    }

    private func get(_ request: Request, id text: String) async -> Response {
        guard authorize(request) != nil else { return Self.unauthorized.response }
        guard let id = Array(text.utf8).withUnsafeBytes({ APNsID(text: $0) }) else {
            return Answer(400, AnswerJSON.error("\(text) is no apns-id (8-4-4-4-12 hex digits)")).response
        }
        var known = dispatcher.store.status(of: id)
        if known == nil, let journal = dispatcher.journal {
            // The journal holds what an earlier run, or another instance, took.
            do { known = try await journal.status(of: id) } catch {
                return Answer(503, AnswerJSON.error("the journal is unavailable (\(error))"), retryAfter: .seconds(1)).response
            }
        }
        guard let status = known else {
            return Answer(404, AnswerJSON.error("no notification \(id) is known: never taken, or forgotten after \(configuration.statusRetention)")).response
        }
        var json = AnswerJSON()
        json.raw("{\"id\":")
        json.id(id)
        json.statusMembers(status)
        json.raw("}")
        return Answer(200, json.bytes).response
    }

    /// The caller's key name; "" without `--api-keys`; nil when refused.
    private func authorize(_ request: Request) -> String? {
        guard let keys = configuration.apiKeys else { return "" }
        return keys.caller(authorization: request.headers[.authorization])
    }

    // MARK: Answers

    /// A request's answer: each notification taken, by index, with its id (and with
    /// `statuses`, its status; a repeated id says `"duplicate":true` and the status it had),
    /// then the refused ones.
    /// `durability`: `database` (journaled before the answer) or `memory` (a crash loses what is pending).
    private static func itemsJSON(_ batch: TakenBatch, errors: [JSONBatchItemError], statuses: [NotificationStatus?]?,
                                  durability: String) -> [UInt8] {
        var json = AnswerJSON(capacity: 64 + batch.items.count * (statuses == nil ? 64 : 96))
        json.raw("{\"taken\":")
        json.int(batch.fresh.count)
        json.raw(",\"duplicates\":")
        json.int(batch.items.count - batch.fresh.count)
        json.raw(",\"refused\":")
        json.int(errors.count)
        json.raw(",\"durability\":")
        json.string(durability)
        json.raw(",\"notifications\":[")
        for (offset, item) in batch.items.enumerated() {
            if offset > 0 { json.raw(",") }
            json.raw("{\"index\":")
            json.int(item.index)
            json.raw(",\"id\":")
            json.id(item.id)
            if let known = batch.known[offset] {
                // As the store has it now, or as it was known when taken (from the journal).
                json.raw(",\"duplicate\":true")
                json.statusMembers(statuses?[offset] ?? known)
            } else if let statuses {
                json.statusMembers(statuses[offset] ?? NotificationStatus(id: item.id.description, state: .pending))
            } else {
                json.raw(",\"state\":\"pending\"")
            }
            json.raw("}")
        }
        json.raw("]")
        appendErrors(errors, to: &json)
        json.raw("}")
        return json.bytes
    }

    /// The answer to a request with no good notification.
    private static func itemsJSON(_ items: [JSONBatchItem], errors: [JSONBatchItemError], statuses: [NotificationStatus]?) -> [UInt8] {
        var json = AnswerJSON()
        json.raw("{\"error\":\"no notification of the request can be sent\"")
        appendErrors(errors, to: &json)
        json.raw("}")
        return json.bytes
    }

    private static func appendErrors(_ errors: [JSONBatchItemError], to json: inout AnswerJSON) {
        json.raw(",\"errors\":[")
        for (offset, error) in errors.enumerated() {
            if offset > 0 { json.raw(",") }
            json.raw("{\"index\":")
            json.int(error.index)
            json.raw(",\"reason\":")
            json.string(error.reason)
            json.raw("}")
        }
        json.raw("]")
    }

    private static let idempotencyKey = HTTPField.Name("Idempotency-Key")!

    private static func gaveUpAnswer(_ reason: String) -> Answer {
        Answer(503, AnswerJSON.error("the sender gave up on the gateway: \(reason); restart salvo serve once it is fixed"))
    }

    private static let unauthorized: Answer = {
        var answer = Answer(401, AnswerJSON.error("give an API key: Authorization: Bearer KEY"))
        answer.challenge = true
        return answer
    }()
}

/// An answer of the API: its status and JSON body, kept as bytes so that an
/// `Idempotency-Key`'s first answer can be given again.
struct Answer: Sendable {
    var status: Int
    var body: [UInt8]
    /// `Retry-After`, for a 429 or 503.
    var retryAfter: Duration?
    /// `Idempotent-Replayed: true`: the answer of an earlier request with the same key.
    var replayed = false
    /// `WWW-Authenticate: Bearer`, for a 401.
    var challenge = false

    init(_ status: Int, _ body: [UInt8], retryAfter: Duration? = nil, replayed: Bool = false) {
        self.status = status
        self.body = body
        self.retryAfter = retryAfter
        self.replayed = replayed
    }

    var response: Response {
        var headers: HTTPFields = [.contentType: "application/json"]
        if let retryAfter {
            // Whole seconds, rounded up: a client retrying sooner would only be refused again.
            let seconds = retryAfter.components.seconds + (retryAfter.components.attoseconds > 0 ? 1 : 0)
            headers[.retryAfter] = String(max(1, seconds))
        }
        if replayed { headers[Self.idempotentReplayed] = "true" }
        if challenge { headers[.wwwAuthenticate] = "Bearer" }
        return Response(status: HTTPResponse.Status(code: status), headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: body)))
    }

    private static let idempotentReplayed = HTTPField.Name("Idempotent-Replayed")!
}

/// What `/metrics` shows of the service, beside the sender's own metrics. The counters are
/// made once: making one looks it up in the metrics backend, too dear for every request.
private struct Instruments: Sendable {
    let queueDepth = Recorder(label: "salvo_serve_queue_depth", aggregate: false)
    private let byStatus: [Int: Counter]
    private let byResult: [String: Counter]

    init() {
        MetricDescriptions.describe([
            "salvo_serve_queue_depth": "Notifications taken by salvo serve and not yet final (the queue --queue-limit bounds).",
            "salvo_serve_requests_total": "POST /v1/notifications requests answered, by HTTP status.",
            "salvo_serve_notifications_total":
                "Notifications posted, by result: taken, duplicate (a known apns_id), invalid, throttled (429).",
        ])
        byStatus = Dictionary(uniqueKeysWithValues: [200, 202, 400, 401, 409, 413, 429, 503].map {
            ($0, Counter(label: "salvo_serve_requests_total", dimensions: [("status", String($0))]))
        })
        byResult = Dictionary(uniqueKeysWithValues: ["taken", "duplicate", "invalid", "throttled"].map {
            ($0, Counter(label: "salvo_serve_notifications_total", dimensions: [("result", $0)]))
        })
    }

    func requests(_ status: Int) -> Counter {
        byStatus[status] ?? Counter(label: "salvo_serve_requests_total", dimensions: [("status", String(status))])
    }

    /// `taken`, `duplicate`, `invalid`, `throttled` (refused by the queue or the rate limit).
    func notifications(_ result: String) -> Counter { byResult[result]! }
}

/// The engine's side of the service: submits what requests hand over while the server
/// runs; at its graceful shutdown (the server has stopped taking requests), submits what
/// is left, makes every notification taken final and settles its status.
private struct EngineDrain: Service {
    let dispatcher: Dispatcher

    func run() async throws {
        async let submitting: Void = dispatcher.runSubmitter()
        try? await gracefulShutdown()
        dispatcher.closeIntake()
        await submitting
        _ = await dispatcher.sender.finish()
        await dispatcher.drained()
        await dispatcher.journal?.close()
    }
}

/// Why the sender gave up, once it has (any thread).
private final class GaveUp: Sendable {
    private let state = Mutex<String?>(nil)

    var reason: String? { state.withLock { $0 } }

    func set(_ reason: String) { state.withLock { $0 = $0 ?? reason } }
}

/// Watches the sender's events for a give-up: the gateway out of reach for good, or the
/// credentials refused. Ends with the server's graceful shutdown.
private struct GiveUpWatch: Service {
    let sender: RoutingSender
    let gaveUp: GaveUp
    let logger: Logger

    func run() async throws {
        await cancelWhenGracefulShutdown {
            for await event in sender.events {
                switch event {
                case .unreachable(let reason), .credentialsRefused(let reason):
                    logger.error("the sender gave up on the gateway; salvo serve reports unhealthy", metadata: ["reason": "\(reason)"])
                    gaveUp.set(reason)
                default:
                    continue
                }
            }
        }
    }
}
