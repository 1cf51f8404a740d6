internal import COpenSSL
internal import COpenSSLShims
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Where PEM material comes from.
public enum PEMSource: Sendable, Hashable {
    /// A file on disk.
    case file(String)
    /// PEM text held in memory (throwaway test certificates, secrets from a vault).
    case text(String)
}

/// What a `TLSContext` trusts when it verifies its peer.
public enum TrustRoots: Sendable, Hashable {
    /// The operating system's certificate store.
    case system
    /// One or more CA certificates in PEM.
    case certificates(PEMSource)
}

/// A TLS protocol version Salvo speaks (1.2 is the oldest it accepts).
public enum TLSVersion: String, Sendable, Hashable, CaseIterable {
    case v1_2 = "1.2"
    case v1_3 = "1.3"
}

/// How a TLS endpoint is set up. The defaults are the safe ones: the peer is verified,
/// and a client also checks the server's host name or IP address.
public struct TLSConfiguration: Sendable {
    /// Our certificate, followed by any intermediates.
    public var certificateChain: PEMSource?
    /// Our private key.
    public var privateKey: PEMSource?
    /// The passphrase of an encrypted private key.
    public var passphrase: String?
    /// What we trust when verifying the peer.
    public var trustRoots: TrustRoots = .system
    /// Client: verify the server's certificate and name. Server: ask for a client
    /// certificate and verify it when one is sent. Turning it off is the `insecure` switch.
    public var verifyPeer = true
    /// Server only: refuse clients that present no certificate.
    public var requireClientCertificate = false
    /// ALPN protocol names to offer (client) or accept (server), most preferred first. A
    /// server refuses clients that offer ALPN names but none of these (no_application_protocol).
    public var applicationProtocols: [String] = []
    /// Ask OpenSSL to move record encryption into the kernel (kTLS). Whether it engaged is
    /// reported per connection by `TLSStream.isKernelTLSSending`.
    public var kernelTLS = false
    /// Accept a private key file that other users may read. Off: such files are refused.
    public var allowWorldReadableKey = false
    /// The newest TLS version offered (the oldest is always 1.2).
    public var maximumVersion: TLSVersion = .v1_3
    /// Free a connection's record buffers whenever they are empty, and read one record at a
    /// time. For many connections that mostly wait (an HTTP/2 client waiting for its
    /// answers): between reads and writes they then hold none, and a buffer of one record
    /// is one the allocator keeps at hand for the next. Off: each connection keeps its
    /// buffers, and reads several records per call.
    public var releasesIdleBuffers = false

    public init() {}

    /// A client that verifies servers against `trustRoots`, optionally presenting a certificate.
    public static func client(
        certificateChain: PEMSource? = nil, privateKey: PEMSource? = nil, passphrase: String? = nil,
        trustRoots: TrustRoots = .system
    ) -> TLSConfiguration {
        var configuration = TLSConfiguration()
        configuration.certificateChain = certificateChain
        configuration.privateKey = privateKey
        configuration.passphrase = passphrase
        configuration.trustRoots = trustRoots
        return configuration
    }

    /// A server presenting `certificateChain`; with `clientCertificateRoots`, it requires
    /// and verifies client certificates issued by them.
    public static func server(
        certificateChain: PEMSource, privateKey: PEMSource, passphrase: String? = nil,
        clientCertificateRoots: TrustRoots? = nil
    ) -> TLSConfiguration {
        var configuration = TLSConfiguration()
        configuration.certificateChain = certificateChain
        configuration.privateKey = privateKey
        configuration.passphrase = passphrase
        configuration.verifyPeer = clientCertificateRoots != nil
        configuration.requireClientCertificate = clientCertificateRoots != nil
        configuration.trustRoots = clientCertificateRoots ?? .system
        return configuration
    }
}

/// One immutable `SSL_CTX`, built once and shared by every connection on every thread
/// (OpenSSL allows concurrent `SSL_new` on a context that is no longer modified).
///
/// Thread rule: any thread; nothing changes after `init` (OpenSSL locks its session cache itself).
public final class TLSContext: @unchecked Sendable {
    /// Client or server.
    public enum Role: Sendable { case client, server }

    let context: OpaquePointer
    /// The role this context was built for.
    public let role: Role
    /// The configuration it was built from.
    public let configuration: TLSConfiguration
    private let alpnServerList: UnsafeMutableRawBufferPointer?

    public init(_ configuration: TLSConfiguration, role: Role) throws(TLSError) {
        ERR_clear_error()
        guard let context = SSL_CTX_new(role == .client ? TLS_client_method() : TLS_server_method()) else {
            throw TLSError(.configuration, reason: TLSError.drainErrorQueue())
        }
        self.context = context
        self.role = role
        self.configuration = configuration
        var alpnServerList: UnsafeMutableRawBufferPointer?
        do throws(TLSError) {
            try Self.configure(context, configuration, role: role, alpnServerList: &alpnServerList)
        } catch {
            SSL_CTX_free(context)
            alpnServerList?.deallocate()
            throw error
        }
        self.alpnServerList = alpnServerList
    }

    deinit {
        SSL_CTX_free(context)
        alpnServerList?.deallocate()
    }

    /// Sessions a server keeps for resumption (the oldest are dropped first): one per
    /// recently seen client is enough; each holds its client's certificate.
    static let serverSessionCacheSize = 4096

    /// OpenSSL's read buffer: four full records, so that one read call can bring several
    /// (read-ahead). A reader must then drain what OpenSSL holds: `TLSStream.hasBufferedBytes`.
    static let readBufferSize = 4 * singleRecordReadBufferSize
    /// One full record and its overhead.
    static let singleRecordReadBufferSize = 16384 + 256

    private static func configure(
        _ context: OpaquePointer, _ configuration: TLSConfiguration, role: Role,
        alpnServerList: inout UnsafeMutableRawBufferPointer?
    ) throws(TLSError) {
        _ = salvo_SSL_CTX_set_min_tls12(context)
        _ = salvo_SSL_CTX_set_max_proto_version(
            context, configuration.maximumVersion == .v1_2 ? salvo_TLS1_2_VERSION() : salvo_TLS1_3_VERSION())
        var options = salvo_SSL_OP_NO_RENEGOTIATION()
        if configuration.kernelTLS { options |= salvo_SSL_OP_ENABLE_KTLS() }
        _ = salvo_SSL_CTX_set_options(context, options)
        if configuration.releasesIdleBuffers {
            _ = salvo_SSL_CTX_set_release_buffers(context)
            salvo_SSL_CTX_set_read_ahead(context, Self.singleRecordReadBufferSize)
        } else {
            salvo_SSL_CTX_set_read_ahead(context, Self.readBufferSize)
        }

        if role == .client {
            _ = salvo_SSL_CTX_set_client_session_cache(context)
        } else {
            // Resuming a session whose client certificate was verified needs a session id
            // context; without one OpenSSL fails the resumed handshake.
            let name = Array("salvo".utf8)
            _ = SSL_CTX_set_session_id_context(context, name, UInt32(name.count))
            salvo_SSL_CTX_set_server_session_cache(context, Self.serverSessionCacheSize,
                                                   configuration.maximumVersion == .v1_2 ? 1 : 0)
        }
        if let chain = configuration.certificateChain {
            guard let key = configuration.privateKey else {
                throw TLSError(.configuration, reason: "a certificate was given without its private key")
            }
            try useCertificateChain(chain, context)
            try usePrivateKey(key, passphrase: configuration.passphrase,
                              allowWorldReadable: configuration.allowWorldReadableKey, context)
        } else if role == .server {
            throw TLSError(.configuration, reason: "a server needs a certificate and a private key")
        } else if configuration.privateKey != nil {
            throw TLSError(.configuration, reason: "a private key was given without its certificate")
        }

        if configuration.verifyPeer {
            try loadTrustRoots(configuration.trustRoots, context, role: role)
            var mode = SSL_VERIFY_PEER
            if role == .server && configuration.requireClientCertificate { mode |= SSL_VERIFY_FAIL_IF_NO_PEER_CERT }
            SSL_CTX_set_verify(context, mode, nil)
        } else {
            SSL_CTX_set_verify(context, SSL_VERIFY_NONE, nil)
        }

        if !configuration.applicationProtocols.isEmpty {
            var wire: [UInt8] = []
            for name in configuration.applicationProtocols {
                let bytes = Array(name.utf8)
                guard (1...255).contains(bytes.count) else {
                    throw TLSError(.configuration, reason: "ALPN protocol name '\(name)' must be 1 to 255 bytes")
                }
                wire.append(UInt8(bytes.count))
                wire.append(contentsOf: bytes)
            }
            if role == .client {
                guard SSL_CTX_set_alpn_protos(context, wire, UInt32(wire.count)) == 0 else {
                    throw TLSError(.configuration, reason: "cannot set ALPN protocols: \(TLSError.drainErrorQueue())")
                }
            } else {
                let list = UnsafeMutableRawBufferPointer.allocate(byteCount: wire.count + 2, alignment: 1)
                list[0] = UInt8(wire.count & 0xff)
                list[1] = UInt8(wire.count >> 8)
                UnsafeMutableRawBufferPointer(rebasing: list[2...]).copyBytes(from: wire)
                alpnServerList = list
                salvo_SSL_CTX_set_alpn_server_protocols(context, list.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    private static func readPEM(_ source: PEMSource, what: String) throws(TLSError) -> [UInt8] {
        switch source {
        case .text(let text):
            return Array(text.utf8)
        case .file(let path):
            do {
                return try readSmallFile(path, limit: 16 << 20)
            } catch {
                throw TLSError(.configuration, subject: path,
                               reason: "cannot read the \(what): \(error.errno)")
            }
        }
    }

    private static func withMemoryBIO<R>(_ bytes: [UInt8], _ body: (OpaquePointer) throws(TLSError) -> R) throws(TLSError) -> R {
        let bio: OpaquePointer? = bytes.withUnsafeBytes { BIO_new_mem_buf($0.baseAddress, Int32($0.count)) }
        guard let bio else { throw TLSError(.configuration, reason: "out of memory") }
        defer { BIO_free(bio) }
        // BIO_new_mem_buf does not copy: `bytes` must stay alive, which it does for the call.
        return try withExtendedLifetime(bytes) { () throws(TLSError) -> R in try body(bio) }
    }

    private static func useCertificateChain(_ source: PEMSource, _ context: OpaquePointer) throws(TLSError) {
        let subject = source.subject
        let certificates = try readCertificates(source, what: "certificate chain")
        guard let leaf = certificates.first else {
            throw TLSError(.configuration, subject: subject, reason: "no PEM certificate found")
        }
        defer { certificates.forEach { X509_free($0) } }
        ERR_clear_error()
        guard SSL_CTX_use_certificate(context, leaf) == 1 else {
            throw TLSError(.configuration, subject: subject, reason: TLSError.drainErrorQueue())
        }
        for intermediate in certificates.dropFirst() {
            guard salvo_SSL_CTX_add1_chain_cert(context, intermediate) == 1 else {
                throw TLSError(.configuration, subject: subject, reason: TLSError.drainErrorQueue())
            }
        }
    }

    static func readCertificates(_ source: PEMSource, what: String) throws(TLSError) -> [OpaquePointer] {
        let bytes = try readPEM(source, what: what)
        return try withMemoryBIO(bytes) { bio throws(TLSError) in
            var certificates: [OpaquePointer] = []
            while let certificate = PEM_read_bio_X509(bio, nil, nil, nil) {
                certificates.append(certificate)
            }
            ERR_clear_error()  // the loop ends on a "no start line" error
            return certificates
        }
    }

    private static func usePrivateKey(
        _ source: PEMSource, passphrase: String?, allowWorldReadable: Bool, _ context: OpaquePointer
    ) throws(TLSError) {
        if case .file(let path) = source, !allowWorldReadable {
            var info = stat()
            if stat(path, &info) == 0, info.st_mode & S_IROTH != 0 {
                throw TLSError(.configuration, subject: path, reason:
                    "the private key file is readable by every user; run `chmod 600 \(path)` (or pass --allow-world-readable-key to accept it)")
            }
        }
        let bytes = try readPEM(source, what: "private key")
        let key: OpaquePointer? = try withMemoryBIO(bytes) { bio throws(TLSError) in
            ERR_clear_error()
            if let passphrase {
                return passphrase.withCString { PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0)) }
            }
            // An empty passphrase makes OpenSSL fail fast on encrypted keys instead of prompting.
            return "".withCString { PEM_read_bio_PrivateKey(bio, nil, nil, UnsafeMutableRawPointer(mutating: $0)) }
        }
        guard let key else {
            let reason = TLSError.drainErrorQueue()
            let hint = passphrase == nil ? " (is the key encrypted? give its passphrase)" : ""
            // Never include key material in messages: only the file name and OpenSSL's reason.
            throw TLSError(.configuration, subject: source.subject, reason: "cannot load the private key: \(reason)\(hint)")
        }
        defer { EVP_PKEY_free(key) }
        guard SSL_CTX_use_PrivateKey(context, key) == 1, SSL_CTX_check_private_key(context) == 1 else {
            throw TLSError(.configuration, subject: source.subject,
                           reason: "the private key does not match the certificate: \(TLSError.drainErrorQueue())")
        }
    }

    private static func loadTrustRoots(_ roots: TrustRoots, _ context: OpaquePointer, role: Role) throws(TLSError) {
        switch roots {
        case .system:
            guard SSL_CTX_set_default_verify_paths(context) == 1 else {
                throw TLSError(.configuration, reason: "cannot load the system trust store: \(TLSError.drainErrorQueue())")
            }
        case .certificates(let source):
            let certificates = try readCertificates(source, what: "CA certificates")
            defer { certificates.forEach { X509_free($0) } }
            guard !certificates.isEmpty else {
                throw TLSError(.configuration, subject: source.subject, reason: "no PEM certificate found in the CA file")
            }
            let store = SSL_CTX_get_cert_store(context)
            for certificate in certificates {
                X509_STORE_add_cert(store, certificate)
                // A server tells clients which CAs it accepts.
                if role == .server { SSL_CTX_add_client_CA(context, certificate) }
            }
            ERR_clear_error()
        }
    }
}

extension PEMSource {
    var subject: String {
        switch self {
        case .file(let path): path
        case .text: "PEM text"
        }
    }
}

/// Reads a whole small file (a key, a certificate, a passphrase, a payload), refusing
/// anything over `limit` bytes with EFBIG. Shared with the CLI, which reads its own inputs.
package func readSmallFile(_ path: String, limit: Int) throws(IOError) -> [UInt8] {
    let fd = try FileDescriptor.open(path: path, .readOnly)
    defer { try? fd.close() }
    var bytes: [UInt8] = []
    let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 1)
    defer { chunk.deallocate() }
    while true {
        let n = try fd.readSome(into: chunk, target: path)
        if n == 0 { return bytes }
        bytes.append(contentsOf: chunk[0..<n])
        guard bytes.count <= limit else { throw IOError("read", errno: .fileTooLarge, target: path) }
    }
}
