import Logging

extension EventHub {
    /// Logs what a shard reported, with its fields as metadata: connection events at
    /// debug (a reconnect says why the last connection closed), failed attempts and
    /// notifications failed together at warning, a raised error wait at notice, give-ups
    /// at error. Per-notification events (`failed`) only at debug.
    func log(_ event: SenderEvent) {
        switch event {
        case .rejected:
            break  // logged by `rejected(target:rejection:sequence:)`, which every rejection goes through
        case .failed(let target, let reason, let sequence):
            logger.debug("failed", metadata: ["target": "\(target)", "reason": "\(reason.rawValue)", "sequence": "\(sequence)"])
        case .failedUnnamed(let count, let reason, let firstSequence, let detail):
            logger.warning("notifications failed together", metadata: [
                "count": "\(count)", "reason": "\(reason.rawValue)", "detail": "\(detail)",
                "first_sequence": "\(firstSequence.map(String.init) ?? "unknown")",
            ])
        case .errorWaitRaised(let raise):
            logger.notice("error wait raised: an error response arrived later than it", metadata: [
                "from_ms": "\(raise.from.nanosecondsClamped / 1_000_000)", "to_ms": "\(raise.to.nanosecondsClamped / 1_000_000)",
                "latency_ms": "\(raise.latency.map { String($0.nanosecondsClamped / 1_000_000) } ?? "beyond the records kept")",
            ])
        case .connected(let shard, let connection, let resumed, let kernelTLS):
            logger.debug("connected", metadata: [
                "shard": "\(shard)", "connection": "\(connection)", "resumed_tls": "\(resumed)", "ktls": "\(kernelTLS)",
            ])
        case .disconnected(let shard, let connection, let reason):
            logger.debug("disconnected; the connection reconnects when it has work", metadata: [
                "shard": "\(shard)", "connection": "\(connection)", "cause": "\(reason)",
            ])
        case .connectionFailed(let shard, let connection, let reason):
            logger.warning("connection attempt failed; retrying with backoff", metadata: [
                "shard": "\(shard)", "connection": "\(connection)", "cause": "\(reason)",
            ])
        case .unreachable(let reason):
            logger.error("giving up on the gateway: unreachable", metadata: ["cause": "\(reason)"])
        case .credentialsRefused(let reason):
            logger.error("giving up on the gateway: it refuses the credentials", metadata: ["cause": "\(reason)"])
        case .streamLimit(let shard, let connection, let limit):
            logger.debug("stream limit", metadata: ["shard": "\(shard)", "connection": "\(connection)", "limit": "\(limit)"])
        }
    }
}

