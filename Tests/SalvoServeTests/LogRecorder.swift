import Logging
import Synchronization

/// Keeps what a logger was given, timed, to show with a failed expectation.
final class LogRecorder: Sendable {
    private let recorded = Mutex<[String]>([])
    private let start = ContinuousClock.now

    var lines: String { recorded.withLock { $0.joined(separator: "\n") } }

    var logger: Logger {
        var logger = Logger(label: "test") { _ in Handler(recorder: self) }
        logger.logLevel = .trace
        return logger
    }

    private struct Handler: LogHandler {
        let recorder: LogRecorder
        var metadata: Logger.Metadata = [:]
        var logLevel: Logger.Level = .trace

        subscript(metadataKey key: String) -> Logger.Metadata.Value? {
            get { metadata[key] }
            set { metadata[key] = newValue }
        }

        func log(level: Logger.Level, message: Logger.Message, metadata: Logger.Metadata?, source: String, file: String,
                 function: String, line: UInt) {
            let at = ContinuousClock.now - recorder.start
            let all = self.metadata.merging(metadata ?? [:]) { $1 }.filter { $0.key != "webhook" }
            recorder.recorded.withLock { $0.append("\(at) \(level) \(message) \(all)") }
        }
    }
}

