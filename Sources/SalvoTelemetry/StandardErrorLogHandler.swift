#if canImport(Glibc)
import Glibc
#endif
import Logging

/// A swift-log handler that writes one line per message to standard error, as text or as
/// JSON (one object per line, for log shippers). Lines are written with one `write(2)`
/// each, so lines from several threads never interleave.
///
/// Text: `2026-11-26T01:02:03.456Z warning salvo.sender: connection failed reason=… shard=0`.
/// JSON: `{"time":"…","level":"warning","label":"salvo.sender","message":"connection failed","reason":"…","shard":"0"}`.
public struct StandardErrorLogHandler: LogHandler {
    /// How each line is written.
    public enum Format: String, Sendable, CaseIterable {
        /// Time, level, label, message, then `key=value` pairs.
        case text
        /// One JSON object per line: time, level, label, message and the metadata.
        case json
    }

    /// The line format.
    public let format: Format
    /// The logger's label (`salvo.sender`, `salvo.mock`).
    public let label: String
    /// The lowest level written.
    public var logLevel: Logger.Level
    /// Metadata added to every message of this logger.
    public var metadata: Logger.Metadata = [:]

    /// A handler for `label` writing `format` lines at `level` and above.
    public init(label: String, format: Format, level: Logger.Level) {
        self.label = label
        self.format = format
        logLevel = level
    }

    /// The value of one metadata key.
    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    /// Writes one line.
    public func log(event: LogEvent) {
        let merged = metadata.merging(event.metadata ?? [:]) { _, new in new }
        let line = Self.line(format: format, time: Self.timestamp(), level: event.level, label: label,
                             message: event.message.description, metadata: merged)
        var bytes = Array(line.utf8)
        bytes.append(UInt8(ascii: "\n"))
        bytes.withUnsafeBytes { _ = write(STDERR_FILENO, $0.baseAddress, $0.count) }
    }

    /// One line, without its line feed (pure, for tests).
    static func line(format: Format, time: String, level: Logger.Level, label: String, message: String,
                     metadata: Logger.Metadata) -> String {
        let pairs = metadata.sorted { $0.key < $1.key }
        switch format {
        case .text:
            return "\(time) \(level) \(label): \(message)" + pairs.map { " \($0.key)=\($0.value)" }.joined()
        case .json:
            let fields = [("time", time), ("level", level.rawValue), ("label", label), ("message", message)]
                + pairs.map { ($0.key, "\($0.value)") }
            return "{" + fields.map { "\(jsonString($0.0)):\(jsonString($0.1))" }.joined(separator: ",") + "}"
        }
    }

    /// `text` as a JSON string literal.
    static func jsonString(_ text: String) -> String {
        var quoted = "\""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\"": quoted += "\\\""
            case "\\": quoted += "\\\\"
            case "\n": quoted += "\\n"
            case "\r": quoted += "\\r"
            case "\t": quoted += "\\t"
            case let control where control.value < 0x20:
                let hex = String(control.value, radix: 16)
                quoted += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            default: quoted.unicodeScalars.append(scalar)
            }
        }
        return quoted + "\""
    }

    /// UTC now, ISO 8601 with milliseconds.
    static func timestamp() -> String {
        var now = timespec()
        clock_gettime(CLOCK_REALTIME, &now)
        var seconds = now.tv_sec
        var parts = tm()
        gmtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        let milliseconds = now.tv_nsec / 1_000_000
        let fraction = milliseconds < 10 ? "00\(milliseconds)" : milliseconds < 100 ? "0\(milliseconds)" : "\(milliseconds)"
        return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T\(two(parts.tm_hour)):"
            + "\(two(parts.tm_min)):\(two(parts.tm_sec)).\(fraction)Z"
    }
}
