import ArgumentParser
import CoreMetrics
import Foundation
import Logging
import Prometheus
import SalvoCampaignFiles
import SalvoEngine
import SalvoIO
import SalvoPrometheus
import SalvoServe
import SalvoTelemetry
import ServiceLifecycle
import UnixSignals

/// `salvo serve`: the engine as a service other systems call over HTTP.
struct ServeCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "serve",
        abstract: "Take notifications over HTTP and send them: the engine as a service.",
        discussion: """
            POST /v1/notifications takes one notification (a JSON object with the fields of a campaign line: \
            "token" or "channel_id", "payload", and the optional "push_type", "topic", "priority", "expiration", \
            "collapse_id", "apns_id") or a batch (an array of them). It answers 202 with each one's id (its \
            apns-id) once taken (with --db, once in PostgreSQL), with the bad ones refused by index; with ?wait=SECONDS, 200 \
            with each one's status once final. GET /v1/notifications/ID answers a status: pending, accepted, \
            rejected (Apple's status, reason and timestamp) or failed. A repeated apns_id, or a request repeated \
            with its Idempotency-Key header, sends nothing again. Past --queue-limit notifications in flight, \
            requests are answered 429 with Retry-After. /health, /ready and /metrics answer too.

            Without --db, statuses are held in memory: a crash loses the notifications taken and not yet \
            answered by the gateway, and the statuses kept. With --db postgres://..., each notification is in \
            PostgreSQL before its 202; after a crash the next serve on that database (or another one already \
            running) sends what was pending once the dead one's leases lapse, counting possible duplicates. \
            SIGTERM drains: no new requests, every notification taken is finished, the webhook is told, then \
            salvo exits 0.

            Listening on anything but loopback needs --api-keys FILE (lines "NAME SHA256-OF-KEY"; callers send \
            Authorization: Bearer KEY) or --client-ca FILE (callers present certificates).
            """)

    @Option(help: ArgumentHelp("Where to listen: HOST:PORT (port 0 picks a free one, printed on stderr).", valueName: "host:port"))
    var listen = "127.0.0.1:8080"

    @Option(help: ArgumentHelp("The gateway: production, sandbox (Apple's HTTP/2 API), host:port or [ipv6]:port.",
                               valueName: "host:port"))
    var gateway: String

    @Option(name: .customLong("protocol"),
            help: "h2 (Apple's HTTP/2 provider API) or binary. Default: h2 for production and sandbox, binary for host:port.")
    var wireProtocol: WireProtocol?

    @OptionGroup(title: "HTTP/2 (--protocol h2)")
    var http2: ProviderAPIOptions

    @OptionGroup(title: "TLS")
    var tls: TLSOptions

    @OptionGroup(title: "Engine")
    var engine: EngineOptions

    @OptionGroup(title: "Proxy")
    var proxy: ProxyOptions

    @OptionGroup(title: "The service")
    var service: ServiceOptions

    @OptionGroup(title: "Durability")
    var journal: ServeJournalOptions

    @Option(name: .customLong("log-level"),
            help: ArgumentHelp("Log to stderr at this level and above (trace ... critical). Default: notice.", valueName: "level"))
    var logLevel: Logger.Level = .notice

    @Option(name: .customLong("log-format"), help: "Log lines as text or json (one object per line).")
    var logFormat: StandardErrorLogHandler.Format = .text

    func validate() throws {
        try SendCommand.validateGateway(gateway, wireProtocol, http2: http2, tls: tls, engine: engine)
        _ = try proxyConfiguration()
        _ = try service.listenAddress(listen)
        try service.check()
    }

    func proxyConfiguration() throws -> ProxyConfiguration? {
        let host = try Endpoint(parsing: gateway, service: ProviderAPIOptions.wireProtocol(wireProtocol, gateway: gateway).service).host
        return try proxy.configuration(for: host)
    }

    func run() async throws {
        let (level, format) = (logLevel, logFormat)
        LoggingSystem.bootstrap { StandardErrorLogHandler(label: $0, format: format, level: level) }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(MetricsEndpoint.factory(for: registry))
        let logger = Logger(label: "salvo.serve")

        let (senderConfiguration, campaignProtocol) = try SendCommand.senderConfiguration(
            gateway, wireProtocol, http2: http2, tls: tls, engine: engine, command: "serve", proxy: proxyConfiguration())
        let routes = try SendCommand.credentialRoutes(http2, gateway: gateway, base: senderConfiguration, tls: tls, command: "serve")
        var configuration = ServeConfiguration(campaignProtocol: campaignProtocol)
        (configuration.host, configuration.port) = try service.listenAddress(listen)
        let webhook: WebhookDelivery?
        do {
            try service.apply(to: &configuration, allowWorldReadableKey: tls.allowWorldReadableKey)
            webhook = try service.webhookConfiguration().map { try WebhookDelivery($0, logger: logger) }
        } catch {
            printError("salvo serve: \(error)")
            throw ExitCode(2)
        }
        if let problem = configuration.problem {
            printError("salvo serve: \(problem)")
            throw ExitCode(2)
        }
        let sender: RoutingSender
        do {
            sender = try routes.map { try RoutingSender(routes: $0, defaultTopic: http2.topic, logger: logger) }
                ?? RoutingSender(senderConfiguration, logger: logger)
        } catch {
            printError("salvo serve: \(error)")
            throw ExitCode(2)
        }
        let routing = routes.map { TopicRouting(topics: $0.flatMap(\.topics), defaultTopic: http2.topic) }
        let metricsText: @Sendable () -> [UInt8] = {
            sender.reportMetrics()
            var text: [UInt8] = []
            registry.emit(into: &text)
            return text
        }
        var onRefusal: (@Sendable (NotificationStatus) -> Void)?
        if let webhook { onRefusal = { webhook.enqueue($0) } }
        let server = NotificationServer(configuration: configuration, sender: sender, routing: routing, logger: logger,
                                        metricsText: metricsText, onRefusal: onRefusal,
                                        journal: try await journal.connect(gateway: gateway, defaultTopic: http2.topic, logger: logger))
        let scheme = configuration.tls == nil ? "http" : "https"
        let host = configuration.host.contains(":") ? "[\(configuration.host)]" : configuration.host
        let group = ServiceGroup(
            services: [ServerService(server: server, services: webhook.map { [$0] } ?? [], onListening: { port in
                printError("salvo serve: listening on \(scheme)://\(host):\(port)/v1/notifications")
            })],
            gracefulShutdownSignals: [.sigterm, .sigint], logger: logger)
        do {
            try await group.run()
        } catch {
            printError("salvo serve: \(error)")
            throw ExitCode(1)
        }
        let report = sender.progress
        printError("salvo serve: stopped; accepted \(report.accepted), rejected \(report.rejected), failed \(report.failed)")
    }
}

/// The server as the process's one service: SIGTERM reaches it as a graceful shutdown.
private struct ServerService: Service {
    let server: NotificationServer
    let services: [any Service]
    let onListening: @Sendable (Int) async -> Void

    func run() async throws {
        try await server.run(services: services, onListening: onListening)
    }
}

/// The service's own flags: who may call, its bounds, the webhook.
struct ServiceOptions: ParsableArguments {
    @Option(name: .customLong("api-keys"),
            help: ArgumentHelp("Callers' keys: lines \"NAME SHA256-HEX\" (printf %s \"$KEY\" | sha256sum); callers send "
                               + "Authorization: Bearer KEY.", valueName: "file"))
    var apiKeys: String?

    @Option(name: .customLong("tls-cert"), help: ArgumentHelp("Serve HTTPS (and HTTP/2) with this certificate chain (PEM).", valueName: "file"))
    var tlsCertificate: String?

    @Option(name: .customLong("tls-key"), help: ArgumentHelp("The private key of --tls-cert (PEM).", valueName: "file"))
    var tlsKey: String?

    @Option(name: .customLong("client-ca"),
            help: ArgumentHelp("Callers must present a certificate issued by this CA (PEM); needs --tls-cert.", valueName: "file"))
    var clientCA: String?

    @Option(name: .customLong("queue-limit"),
            help: ArgumentHelp("Notifications taken and not yet answered, at most; past it requests get 429.", valueName: "n"))
    var queueLimit = 100_000

    @Option(name: .customLong("batch-limit"), help: ArgumentHelp("Notifications one request may carry, at most.", valueName: "n"))
    var batchLimit = 10_000

    @Option(name: .customLong("body-limit"), help: ArgumentHelp("The largest request body, in bytes.", valueName: "bytes"))
    var bodyLimit = 32 << 20

    @Option(name: .customLong("rate-limit"),
            help: ArgumentHelp("Notifications per second each API key may post (429 with Retry-After past it).", valueName: "n"))
    var rateLimit: Double?

    @Option(name: .customLong("wait-limit"), help: ArgumentHelp("The longest ?wait a request may ask for, in seconds.", valueName: "s"))
    var waitLimit: Double = 60

    @Option(name: .customLong("status-retention"),
            help: ArgumentHelp("How long a final status is kept, in seconds (GET, and repeated apns_id or Idempotency-Key).",
                               valueName: "s"))
    var statusRetention: Double = 3600

    @Option(name: .customLong("status-limit"), help: ArgumentHelp("The most final statuses kept; the oldest go first.", valueName: "n"))
    var statusLimit = 1_000_000

    @Option(help: ArgumentHelp("POST rejections and failures here, in signed batches.", valueName: "url"))
    var webhook: String?

    @Option(name: .customLong("webhook-secret-file"),
            help: ArgumentHelp("The webhook's HMAC-SHA256 key (the file's bytes); X-Salvo-Signature: sha256=HEX signs each body.",
                               valueName: "file"))
    var webhookSecretFile: String?

    func check() throws {
        if (tlsCertificate == nil) != (tlsKey == nil) { throw ValidationError("--tls-cert and --tls-key go together") }
        if clientCA != nil, tlsCertificate == nil { throw ValidationError("--client-ca needs --tls-cert and --tls-key") }
        if (webhook == nil) != (webhookSecretFile == nil) {
            throw ValidationError("--webhook and --webhook-secret-file go together: every delivery is signed")
        }
        for (flag, value) in [("--queue-limit", queueLimit), ("--batch-limit", batchLimit), ("--body-limit", bodyLimit),
                              ("--status-limit", statusLimit)] where value < 1 {
            throw ValidationError("\(flag) must be at least 1, got \(value)")
        }
        for (flag, value) in [("--wait-limit", waitLimit), ("--status-retention", statusRetention)] where !(value >= 0) {
            throw ValidationError("\(flag) must be 0 or more seconds, got \(value)")
        }
        if let rateLimit, !(rateLimit > 0) { throw ValidationError("--rate-limit must be above 0, got \(rateLimit)") }
    }

    func listenAddress(_ text: String) throws -> (host: String, port: Int) {
        guard let colon = text.lastIndex(of: ":"), let port = Int(text[text.index(after: colon)...]), (0...65535).contains(port) else {
            throw ValidationError("--listen is HOST:PORT, got \(text)")
        }
        var host = String(text[..<colon])
        if host.hasPrefix("["), host.hasSuffix("]") { host = String(host.dropFirst().dropLast()) }
        guard !host.isEmpty else { throw ValidationError("--listen is HOST:PORT, got \(text)") }
        return (host, port)
    }

    func apply(to configuration: inout ServeConfiguration, allowWorldReadableKey: Bool) throws {
        configuration.apiKeys = try apiKeys.map(APIKeys.init(path:))
        if let tlsCertificate, let tlsKey {
            try refuseWorldReadable(tlsKey, flag: "--tls-key", allow: allowWorldReadableKey)
            configuration.tls = ServeTLS(certificate: tlsCertificate, privateKey: tlsKey, clientCA: clientCA)
        }
        configuration.queueLimit = queueLimit
        configuration.batchLimit = batchLimit
        configuration.bodyLimit = bodyLimit
        configuration.callerRate = rateLimit
        configuration.waitLimit = .milliseconds(Int64(waitLimit * 1000))
        configuration.statusRetention = .milliseconds(Int64(statusRetention * 1000))
        configuration.statusCapacity = statusLimit
    }

    func webhookConfiguration() throws -> WebhookConfiguration? {
        guard let webhook, let webhookSecretFile else { return nil }
        try refuseWorldReadable(webhookSecretFile, flag: "--webhook-secret-file", allow: false)
        let secret = try readWholeFile(webhookSecretFile, limit: 4096, what: "--webhook-secret-file")
        guard !secret.isEmpty else { throw FileInputError(description: "--webhook-secret-file \(webhookSecretFile) is empty") }
        return WebhookConfiguration(url: webhook, secret: secret)
    }
}

/// Refuses a secret (a private key, a webhook key) every user of the machine may read.
private func refuseWorldReadable(_ path: String, flag: String, allow: Bool) throws {
    var info = stat()
    guard !allow, stat(path, &info) == 0, info.st_mode & S_IROTH != 0 else { return }
    throw FileInputError(description: "\(flag) \(path) is readable by every user; run `chmod 600 \(path)`"
                         + (flag == "--tls-key" ? " (or pass --allow-world-readable-key to accept it)" : ""))
}
