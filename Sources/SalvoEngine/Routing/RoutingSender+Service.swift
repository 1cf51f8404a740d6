import ServiceLifecycle

extension RoutingSender: Service {
    /// Runs every sender as its `Service` (`Sender.run()`): metrics every second, and a
    /// finish on a graceful shutdown; reports the per-topic counters beside them.
    public func run() async throws {
        guard routing != nil else { return try await senders[0].run() }
        await withTaskGroup(of: Void.self) { group in
            for sender in senders { group.addTask { try? await sender.run() } }
            group.addTask {
                while !Task.isCancelled {
                    self.reportTopicMetrics(self.progress)
                    try? await Task.sleep(for: Sender.metricsInterval)
                }
            }
            // The senders end when they finish; the metrics loop with them.
            for _ in senders { await group.next() }
            group.cancelAll()
        }
    }
}
