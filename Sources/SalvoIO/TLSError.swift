internal import COpenSSL
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// A TLS failure with OpenSSL's own reasons, e.g.
/// `TLS handshake with 127.0.0.1:2195 failed: certificate verify failed: unable to get local issuer certificate`,
/// and what it means as a type (`cause`), for code that decides what to do next.
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
    /// What went wrong; decisions switch on this, never on `reason`'s text.
    public var cause: Cause

    public init(_ stage: Stage, subject: String? = nil, reason: String, cause: Cause) {
        self.stage = stage
        self.subject = subject
        self.reason = reason
        self.cause = cause
    }

    /// A failure in our own words: a configuration mistake (cause `.configuration`) when
    /// `stage` is `.configuration`, else cause `.other`.
    public init(_ stage: Stage, subject: String? = nil, reason: String) {
        self.init(stage, subject: subject, reason: reason, cause: stage == .configuration ? .configuration : .other)
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
        drainErrorQueueWithCodes().reason
    }

    /// Drains OpenSSL's thread-local error queue: the readable line, and the packed error
    /// codes (oldest first) that `Cause` is derived from.
    static func drainErrorQueueWithCodes() -> (reason: String, codes: [UInt]) {
        var reasons: [String] = []
        var codes: [UInt] = []
        while true {
            let code = ERR_get_error()
            if code == 0 { break }
            codes.append(code)
            if let reason = ERR_reason_error_string(code) {
                reasons.append(String(cString: reason))
            } else {
                var buffer = [CChar](repeating: 0, count: 256)
                ERR_error_string_n(code, &buffer, buffer.count)
                reasons.append(String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self))
            }
        }
        return (reasons.isEmpty ? "unknown OpenSSL error" : reasons.joined(separator: ": "), codes)
    }
}

extension TLSError {
    /// What a TLS failure means, derived from OpenSSL's error queue and the certificate
    /// verification result rather than from message text.
    public enum Cause: Sendable, Hashable {
        /// We checked the peer's certificate and it failed, for this X509 reason
        /// (untrusted issuer, expired, a host name it does not hold, ...).
        case certificateVerificationFailed(CertificateVerification)
        /// We require a certificate from the peer and it sent none.
        case peerCertificateMissing
        /// The peer refused our certificate (or the lack of one): it sent this alert, e.g.
        /// `unknownCA`, `badCertificate`, `certificateExpired`, `certificateRequired`.
        case certificateRejected(Alert)
        /// The peer ended the connection with another alert (`handshakeFailure`, ...).
        case alert(Alert)
        /// The two ends have no TLS version or ALPN protocol in common (detected here, or
        /// the peer's protocol_version / no_application_protocol alert).
        case protocolMismatch(ProtocolMismatch)
        /// The socket failed (with its errno), or the peer closed it mid-stream (nil).
        case io(Errno?)
        /// A blocking helper's deadline passed.
        case timedOut
        /// A local mistake: files, keys, settings.
        case configuration
        /// Something else OpenSSL reported; `reason` says what.
        case other

        /// Whether trying again, with the same configuration, cannot help: the certificates,
        /// trust, versions or protocols of the two ends do not fit. Alerts outside those,
        /// I/O failures, timeouts and the unclassified are worth a retry.
        public var isPermanent: Bool {
            switch self {
            case .configuration, .certificateVerificationFailed, .peerCertificateMissing, .certificateRejected,
                 .protocolMismatch:
                true
            case .alert, .io, .timedOut, .other:
                false
            }
        }
    }

    /// Which part of the protocol the two ends could not agree on.
    public enum ProtocolMismatch: Sendable, Hashable {
        /// No common TLS version (or the peer does not speak TLS at all).
        case version
        /// No common ALPN protocol (e.g. the client offers only http/1.1, the server h2).
        case applicationProtocol
    }

    /// A TLS alert description (RFC 8446 §6), e.g. `unknownCA` (48). `description` is
    /// OpenSSL's long name ("unknown CA").
    public struct Alert: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: UInt8
        public init(rawValue: UInt8) { self.rawValue = rawValue }

        public static let handshakeFailure = Alert(rawValue: 40)
        public static let badCertificate = Alert(rawValue: 42)
        public static let unsupportedCertificate = Alert(rawValue: 43)
        public static let certificateRevoked = Alert(rawValue: 44)
        public static let certificateExpired = Alert(rawValue: 45)
        public static let certificateUnknown = Alert(rawValue: 46)
        public static let illegalParameter = Alert(rawValue: 47)
        public static let unknownCA = Alert(rawValue: 48)
        public static let accessDenied = Alert(rawValue: 49)
        public static let decodeError = Alert(rawValue: 50)
        public static let decryptError = Alert(rawValue: 51)
        public static let protocolVersion = Alert(rawValue: 70)
        public static let insufficientSecurity = Alert(rawValue: 71)
        public static let internalError = Alert(rawValue: 80)
        public static let unrecognizedName = Alert(rawValue: 112)
        public static let certificateRequired = Alert(rawValue: 116)
        public static let noApplicationProtocol = Alert(rawValue: 120)

        /// Whether the alert says the sender refused the certificate it was shown (or
        /// missed one): what a peer sends when it does not accept our identity.
        public var refusesCertificate: Bool {
            switch self {
            case .badCertificate, .unsupportedCertificate, .certificateRevoked, .certificateExpired,
                 .certificateUnknown, .unknownCA, .accessDenied, .certificateRequired:
                true
            default:
                false
            }
        }

        public var description: String { String(cString: SSL_alert_desc_string_long(Int32(rawValue))) }
    }

    /// Why a certificate failed verification: OpenSSL's X509 verify result
    /// (`X509_V_ERR_*`). `description` is OpenSSL's text ("certificate has expired").
    public struct CertificateVerification: RawRepresentable, Sendable, Hashable, CustomStringConvertible {
        public let rawValue: Int
        public init(rawValue: Int) { self.rawValue = rawValue }

        public static let unableToGetIssuerCertificate = Self(rawValue: 2)
        public static let certificateSignatureFailure = Self(rawValue: 7)
        public static let certificateNotYetValid = Self(rawValue: 9)
        public static let certificateHasExpired = Self(rawValue: 10)
        public static let selfSignedCertificate = Self(rawValue: 18)
        public static let selfSignedCertificateInChain = Self(rawValue: 19)
        public static let unableToGetLocalIssuerCertificate = Self(rawValue: 20)
        public static let certificateRevoked = Self(rawValue: 23)
        public static let invalidPurpose = Self(rawValue: 26)
        public static let hostnameMismatch = Self(rawValue: 62)
        public static let ipAddressMismatch = Self(rawValue: 64)

        public var description: String { String(cString: X509_verify_cert_error_string(rawValue)) }
    }
}

extension TLSError.Cause {
    /// OpenSSL adds this to an alert's number for the reason code of an alert received.
    static let receivedAlertReasonOffset: Int32 = 1000

    /// The cause behind an `SSL_ERROR_SSL`: OpenSSL's error codes (oldest first) and the
    /// connection's verify result. A verify result counts only with OpenSSL's "certificate
    /// verify failed": without verification (`verifyPeer` off) it is recorded but moot.
    static func derived(fromErrorCodes codes: [UInt], verifyResult: Int) -> TLSError.Cause {
        for code in codes where ERR_GET_LIB(code) == ERR_LIB_SSL {
            let reason = ERR_GET_REASON(code)
            switch reason {
            case SSL_R_CERTIFICATE_VERIFY_FAILED where verifyResult != X509_V_OK:
                return .certificateVerificationFailed(.init(rawValue: verifyResult))
            case receivedAlertReasonOffset + 1...receivedAlertReasonOffset + 255:
                let alert = TLSError.Alert(rawValue: UInt8(reason - receivedAlertReasonOffset))
                switch alert {
                case .protocolVersion: return .protocolMismatch(.version)
                case .noApplicationProtocol: return .protocolMismatch(.applicationProtocol)
                case _ where alert.refusesCertificate: return .certificateRejected(alert)
                default: return .alert(alert)
                }
            case SSL_R_NO_APPLICATION_PROTOCOL:
                return .protocolMismatch(.applicationProtocol)
            case SSL_R_UNSUPPORTED_PROTOCOL, SSL_R_WRONG_VERSION_NUMBER, SSL_R_NO_PROTOCOLS_AVAILABLE,
                 SSL_R_VERSION_TOO_LOW, SSL_R_VERSION_TOO_HIGH:
                return .protocolMismatch(.version)
            case SSL_R_PEER_DID_NOT_RETURN_A_CERTIFICATE:
                return .peerCertificateMissing
            case SSL_R_UNEXPECTED_EOF_WHILE_READING:
                return .io(nil)
            default:
                continue
            }
        }
        return .other
    }
}
