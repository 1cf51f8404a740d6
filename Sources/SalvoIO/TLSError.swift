internal import COpenSSL
#if canImport(Glibc)
import Glibc
#endif

/// A TLS failure with OpenSSL's own reasons, e.g.
/// `TLS handshake with 127.0.0.1:2195 failed: certificate verify failed: unable to get local issuer certificate`.
public struct TLSError: Error, Sendable, CustomStringConvertible {
    public enum Stage: String, Sendable {
        case configuration = "TLS configuration"
        case handshake = "TLS handshake"
        case read = "TLS read"
        case write = "TLS write"
    }

    /// Where it failed.
    public var stage: Stage
    /// The peer (for connections) or the file (for configuration), when known.
    public var subject: String?
    /// OpenSSL's reasons, most specific last, or our own words for configuration mistakes.
    public var reason: String

    public init(_ stage: Stage, subject: String? = nil, reason: String) {
        self.stage = stage
        self.subject = subject
        self.reason = reason
    }

    public var description: String {
        switch (stage, subject) {
        case (.configuration, let subject?): "\(stage.rawValue) (\(subject)): \(reason)"
        case (_, let subject?): "\(stage.rawValue) with \(subject) failed: \(reason)"
        case (_, nil): "\(stage.rawValue) failed: \(reason)"
        }
    }

    /// Drains OpenSSL's thread-local error queue into one readable line.
    static func drainErrorQueue() -> String {
        var reasons: [String] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            if let reason = ERR_reason_error_string(code) {
                reasons.append(String(cString: reason))
            } else {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        return reasons.isEmpty ? "unknown OpenSSL error" : reasons.joined(separator: ": ")
    }
}
