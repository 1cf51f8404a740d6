import NIOSSL
import SalvoIO

/// Turns the TLS configuration `salvo send` uses (SalvoIO's, OpenSSL) into swift-nio-ssl's,
/// for AsyncHTTPClient: the same client certificate, trust roots and verification switch,
/// TLS 1.2 or newer.
enum ChannelTLS {
    /// The swift-nio-ssl configuration of `configuration`.
    ///
    /// `configuration` is first built as send builds it (`TLSContext`), so that a key file
    /// every user may read, a wrong passphrase or a key that does not match its certificate
    /// is refused with send's message, before swift-nio-ssl reads the files again.
    ///
    /// - Throws: `TLSError` (from that check), or swift-nio-ssl's error.
    static func configuration(_ configuration: SalvoIO.TLSConfiguration) throws -> NIOSSL.TLSConfiguration {
        _ = try TLSContext(configuration, role: .client)
        var tls = NIOSSL.TLSConfiguration.makeClientConfiguration()
        tls.minimumTLSVersion = .tlsv12
        tls.maximumTLSVersion = configuration.maximumVersion == .v1_2 ? .tlsv12 : .tlsv13
        if let chain = configuration.certificateChain, let key = configuration.privateKey {
            tls.certificateChain = try NIOSSLCertificate.fromPEMBytes(try bytes(of: chain)).map { .certificate($0) }
            // A passphrase callback even for a plain key: without one, BoringSSL would prompt
            // on the terminal for an encrypted key.
            let passphrase = Array((configuration.passphrase ?? "").utf8)
            tls.privateKey = .privateKey(try NIOSSLPrivateKey(bytes: try bytes(of: key), format: .pem) { set in set(passphrase) })
        }
        if case .certificates(let roots) = configuration.trustRoots {
            tls.trustRoots = .certificates(try NIOSSLCertificate.fromPEMBytes(try bytes(of: roots)))
        }
        if !configuration.verifyPeer { tls.certificateVerification = .none }
        return tls
    }

    private static func bytes(of source: PEMSource) throws -> [UInt8] {
        switch source {
        case .file(let path): try readSmallFile(path, limit: 1 << 20)
        case .text(let text): Array(text.utf8)
        }
    }
}
