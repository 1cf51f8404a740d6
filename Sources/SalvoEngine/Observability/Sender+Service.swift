import ServiceLifecycle

extension Sender: Service {
    /// Runs the sender as a swift-service-lifecycle `Service`: reports its metrics every
    /// second (`reportMetrics()`) until `finish()` is called or the service group shuts
    /// down gracefully (SIGTERM, when the group is set up so) or is cancelled; then
    /// finishes: no new notification is taken (a `send` in progress throws
    /// `SendError.finished`, after what it handed over is final), the error wait or the
    /// open streams end, at most `SenderConfiguration.drainTimeout` (cancelled meanwhile:
    /// at once), and `finish()` (the host's, or a later one) returns the report.
    ///
    /// ```swift
    /// let sender = try Sender(configuration, logger: logger)
    /// let group = ServiceGroup(services: [sender], gracefulShutdownSignals: [.sigterm], logger: logger)
    /// ```
    public func run() async throws {
        // Interrupted by a graceful shutdown or a cancellation: finish either way.
        try? await cancelWhenGracefulShutdown {
            try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { for await _ in self.finishStarted.stream {} }
                group.addTask {
                    while true {
                        self.reportMetrics()
                        try await Task.sleep(for: Self.metricsInterval)
                    }
                }
                _ = try await group.next()
                group.cancelAll()
            }
        }
        if !hasFinished { logger.notice("shutting down: finishing what was sent") }
        // A second signal (the group cancels) ends the drain at once, a gateway that does
        // not answer must not hold the process.
        _ = await withTaskCancellationHandler {
            await finish(timeout: configuration.drainTimeout)
        } onCancel: {
            abandonUnsettled()
        }
    }

    /// How often a running sender reports its metrics.
    static let metricsInterval = Duration.seconds(1)
}
