import ArgumentParser
import CoreMetrics
import Logging
import Prometheus
import SalvoIO
import SalvoPrometheus
import SalvoTelemetry
import UnixSignals

/// `--log-level`, `--log-format` and `--metrics-port`, shared by `send`, `mock` and `demo`.
struct ObservabilityOptions: ParsableArguments {
    @Option(name: .customLong("log-level"),
            help: ArgumentHelp("Log to stderr at this level and above: trace, debug (rejections, connections), info (adaptations), notice, warning, error (give-ups), critical. Default: no log (the progress line and the summary say what matters).",
                               valueName: "level"))
    var logLevel: Logger.Level?

    @Option(name: .customLong("log-format"), help: "Log lines as text or json (one object per line).")
    var logFormat: StandardErrorLogHandler.Format = .text

    @Option(name: .customLong("metrics-port"),
            help: ArgumentHelp("Serve Prometheus metrics at http://HOST:PORT/metrics (0 picks a free port, printed on stderr).",
                               valueName: "port"))
    var metricsPort: Int?

    @Option(name: .customLong("metrics-host"), help: ArgumentHelp("The address --metrics-port listens on.", valueName: "host"))
    var metricsHost = "127.0.0.1"

    @Option(name: .customLong("metrics-hold"),
            help: ArgumentHelp("send, demo: keep serving /metrics this long after the run, so that a last scrape sees the final counts; SIGTERM or SIGINT ends it sooner.",
                               valueName: "seconds"))
    var metricsHold: Double?

    /// The first flag given, for a run that neither logs nor serves metrics (`--target blackberry`).
    var givenFlag: String? {
        firstGivenFlag([("--log-level", logLevel != nil), ("--log-format", logFormat != .text),
                        ("--metrics-port", metricsPort != nil), ("--metrics-host", metricsHost != "127.0.0.1"),
                        ("--metrics-hold", metricsHold != nil)])
    }

    func validate() throws {
        if let metricsPort, !(0...65535).contains(metricsPort) {
            throw ValidationError("--metrics-port must be 0...65535, got \(metricsPort)")
        }
        if metricsHold != nil, metricsPort == nil { throw ValidationError("--metrics-hold needs --metrics-port") }
        if let metricsHold, !(metricsHold >= 0) { throw ValidationError("--metrics-hold must be 0 or more, got \(metricsHold)") }
    }

    /// Bootstraps swift-log (stderr, or nothing without `--log-level`) and, with
    /// `--metrics-port`, swift-metrics on a Prometheus registry served at /metrics. Once
    /// per process.
    ///
    /// - Parameter watchingSignals: trap SIGTERM and SIGINT for the whole command (send,
    ///   demo), beside the service group that turns them into a graceful shutdown while the
    ///   sender runs: outside it (writing the report, `--metrics-hold`) a signal then ends
    ///   the hold instead of killing the process with its summary unwritten.
    func start(watchingSignals: Bool = false) async throws -> Observability {
        let (level, format) = (logLevel, logFormat)
        LoggingSystem.bootstrap { label in
            guard let level else { return SwiftLogNoOpLogHandler() }
            return StandardErrorLogHandler(label: label, format: format, level: level)
        }
        let signals = watchingSignals ? await UnixSignalsSequence(trapping: .sigterm, .sigint) : nil
        guard let metricsPort else { return Observability(endpoint: nil, hold: nil, signals: signals) }
        let registry = PrometheusCollectorRegistry()
        MetricsSystem.bootstrap(MetricsEndpoint.factory(for: registry))
        let endpoint: MetricsEndpoint
        do {
            endpoint = try MetricsEndpoint(registry: registry, host: metricsHost, port: metricsPort)
        } catch {
            throw ValidationError("--metrics-port \(metricsPort): \(error)")
        }
        printError("metrics: http://\(metricsHost):\(endpoint.port)/metrics")
        return Observability(endpoint: endpoint, hold: metricsHold, signals: signals)
    }
}

/// What `ObservabilityOptions.start()` set up.
struct Observability {
    /// The /metrics server, with `--metrics-port`.
    let endpoint: MetricsEndpoint?
    /// `--metrics-hold`.
    let hold: Double?
    /// SIGTERM and SIGINT, trapped since `start` (send, demo).
    let signals: UnixSignalsSequence?

    /// After a run: serves the final metrics for `--metrics-hold` seconds (or until a
    /// signal, also one that came before), then stops the server.
    func finish() async {
        guard let endpoint else { return }
        if let hold, hold > 0 {
            printError("serving the final metrics for \(hold) s (SIGTERM or SIGINT ends it)")
            await withTaskGroup(of: Void.self) { group in
                if let signals {
                    group.addTask {
                        for await _ in signals { return }
                    }
                }
                group.addTask { try? await Task.sleep(for: .milliseconds(Int64(hold * 1000))) }
                await group.next()
                group.cancelAll()
            }
        }
        endpoint.stop()
    }
}

extension Logger.Level: @retroactive ExpressibleByArgument {}
extension StandardErrorLogHandler.Format: ExpressibleByArgument {}
