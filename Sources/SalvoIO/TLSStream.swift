internal import COpenSSL
internal import COpenSSLShims
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Where a nonblocking TLS operation stands.
public enum TLSProgress: Sendable, Equatable {
    /// Done.
    case complete
    /// Call again when the socket is readable.
    case wantRead
    /// Call again when the socket is writable.
    case wantWrite
}

/// The outcome of `TLSStream.read`.
public enum TLSReadResult: Sendable, Equatable {
    /// Bytes were read into the buffer.
    case bytes(Int)
    /// Nothing to read yet; call again on the event given.
    case wouldBlock(TLSProgress)
    /// The peer closed the stream; `clean` when it sent close_notify first.
    case closed(clean: Bool)
}

/// The outcome of `TLSStream.write`.
public enum TLSWriteResult: Sendable, Equatable {
    /// This many bytes were taken (partial writes are enabled).
    case wrote(Int)
    /// Nothing was taken; retry with the same bytes on the event given.
    case wouldBlock(TLSProgress)
}

/// A TLS session a client can resume on its next connection to the same server: the
/// handshake then skips certificate signing and verification. Owns its `SSL_SESSION *`.
///
/// Thread rule: any thread; the session is never changed here (OpenSSL counts its references atomically).
public final class TLSSession: @unchecked Sendable {
    let session: OpaquePointer
    init(_ session: OpaquePointer) { self.session = session }
    deinit { SSL_SESSION_free(session) }

    /// Whether the server sent a ticket for it (a TLS 1.2 server that keeps its sessions
    /// by id sends none).
    var hasTicket: Bool { SSL_SESSION_has_ticket(session) == 1 }
}

/// One TLS connection over a nonblocking socket: owns the `SSL *` and the socket.
///
/// Follows OpenSSL's retry contract: after `.wouldBlock`, call again with the same
/// bytes (moving buffers and partial writes are enabled, so "the same bytes" may live at a
/// new address and may be followed by more). The error queue is cleared before every call,
/// so a failure reports its own reasons and not a stale neighbour's.
public final class TLSStream {
    /// The most plaintext one TLS record carries (RFC 8446 §5.1): a write of this much is
    /// one full record, the unit whose fixed cost writers spread over many messages.
    package static let recordPayloadLimit = 16384

    private let ssl: OpaquePointer
    private let isServer: Bool
    /// The socket carrying the stream.
    public let socket: Socket
    /// The peer name for messages: the server name given, else the socket's peer address.
    public let peerDescription: String

    /// Wraps `socket`. A client passes the `serverName` it expects: the name is sent as SNI
    /// (unless it is an IP address) and, when the context verifies peers, checked against
    /// the certificate (DNS name or IP address).
    ///
    /// A client may pass the `resuming` session of an earlier connection to the same server;
    /// it then offers no TLS version newer than that session's (a gateway that spoke TLS
    /// 1.2 is not offered 1.3, which would cost a key share per connection).
    public init(context: TLSContext, socket: Socket, serverName: String? = nil, resuming session: TLSSession? = nil) throws(TLSError) {
        ERR_clear_error()
        guard let ssl = SSL_new(context.context) else {
            throw TLSError(.configuration, reason: TLSError.drainErrorQueue())
        }
        self.ssl = ssl
        self.isServer = context.role == .server
        self.socket = socket
        self.peerDescription = serverName.map { name in socket.peer.map { "\(name) (\($0))" } ?? name }
            ?? socket.peer?.description ?? "peer"
        _ = salvo_SSL_set_partial_write_modes(ssl)
        SSL_set_fd(ssl, socket.fd.rawValue)
        if context.role == .client {
            SSL_set_connect_state(ssl)
            if let session { _ = salvo_SSL_resume_session(ssl, session.session) }
            if let serverName {
                let isAddress = Self.isIPAddress(serverName)
                if !isAddress { _ = salvo_SSL_set_tlsext_host_name(ssl, serverName) }
                if context.configuration.verifyPeer {
                    let ok: Int32
                    if isAddress {
                        ok = X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(ssl), serverName)
                    } else {
                        ok = SSL_set1_host(ssl, serverName)
                    }
                    guard ok == 1 else {
                        SSL_free(ssl)
                        throw TLSError(.configuration, subject: serverName, reason: "cannot set the expected server name")
                    }
                }
            }
        } else {
            SSL_set_accept_state(ssl)
        }
    }

    deinit {
        // A server keeps the session however the connection ended (a client resumes after a
        // drop, or after closing without close_notify). A client's session is taken, when
        // it is resumable, before its stream goes.
        if isServer { salvo_SSL_keep_session(ssl) }
        SSL_free(ssl)
    }

    private static func isIPAddress(_ name: String) -> Bool {
        var v4 = in_addr()
        var v6 = in6_addr()
        return inet_pton(AF_INET, name, &v4) == 1 || inet_pton(AF_INET6, name, &v6) == 1
    }

    /// Advances the handshake.
    public func handshake() throws(TLSError) -> TLSProgress {
        ERR_clear_error()
        let rc = SSL_do_handshake(ssl)
        if rc == 1 { return .complete }
        switch SSL_get_error(ssl, rc) {
        case SSL_ERROR_WANT_READ: return .wantRead
        case SSL_ERROR_WANT_WRITE: return .wantWrite
        case let code: throw failure(.handshake, code: code)
        }
    }

    /// Reads decrypted bytes into `buffer`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(TLSError) -> TLSReadResult {
        ERR_clear_error()
        var count = 0
        if SSL_read_ex(ssl, buffer.baseAddress, buffer.count, &count) == 1 { return .bytes(count) }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_READ: return .wouldBlock(.wantRead)
        case SSL_ERROR_WANT_WRITE: return .wouldBlock(.wantWrite)
        case SSL_ERROR_ZERO_RETURN: return .closed(clean: true)
        case SSL_ERROR_SYSCALL where errno == 0 || errno == EAGAIN:
            return .closed(clean: false)
        case SSL_ERROR_SSL where Self.isUnexpectedEOF():
            // OpenSSL 3 reports a TCP close without close_notify as an error; for us it is
            // just a close (the APNs gateway closes after an error response).
            ERR_clear_error()
            return .closed(clean: false)
        case let code: throw failure(.read, code: code)
        }
    }

    /// Encrypts and sends up to `bytes.count` bytes as TLS records (at most 16 KiB each).
    public func write(_ bytes: UnsafeRawBufferPointer) throws(TLSError) -> TLSWriteResult {
        ERR_clear_error()
        var count = 0
        if SSL_write_ex(ssl, bytes.baseAddress, bytes.count, &count) == 1 { return .wrote(count) }
        switch SSL_get_error(ssl, 0) {
        case SSL_ERROR_WANT_WRITE: return .wouldBlock(.wantWrite)
        case SSL_ERROR_WANT_READ: return .wouldBlock(.wantRead)
        case let code: throw failure(.write, code: code)
        }
    }

    /// Whether OpenSSL holds bytes read from the socket and not yet returned (decrypted or
    /// not: it reads ahead). Level-triggered epoll cannot see them, so a reader drains
    /// until this is false.
    public var hasBufferedBytes: Bool { SSL_has_pending(ssl) == 1 }

    /// Ends the stream: sends close_notify, best effort and without waiting for the
    /// peer's; or, when the peer has already gone (`notifyingPeer` false), only marks the
    /// stream shut down. Either way its session stays resumable: OpenSSL evicts the
    /// session of a stream freed without being shut down.
    public func shutdown(notifyingPeer: Bool = true) {
        ERR_clear_error()
        if notifyingPeer {
            _ = SSL_shutdown(ssl)
        } else {
            salvo_SSL_keep_session(ssl)
        }
        ERR_clear_error()
    }

    /// The session to resume on the next connection, once the server has sent one (TLS 1.3
    /// sends it after the handshake, so it appears after the first read).
    public var resumableSession: TLSSession? {
        guard let session = SSL_get1_session(ssl) else { return nil }
        guard SSL_SESSION_is_resumable(session) == 1 else {
            SSL_SESSION_free(session)
            return nil
        }
        return TLSSession(session)
    }

    /// Whether the handshake resumed an earlier session.
    public var isResumed: Bool { SSL_session_reused(ssl) == 1 }

    /// Whether records are encrypted by the kernel (kTLS) for sending.
    public var isKernelTLSSending: Bool { salvo_BIO_get_ktls_send(ssl) != 0 }

    /// The negotiated protocol version, e.g. "TLSv1.3".
    public var protocolVersion: String { String(cString: SSL_get_version(ssl)) }

    /// The ALPN protocol both sides agreed on, if any.
    public var negotiatedApplicationProtocol: String? {
        var data: UnsafePointer<UInt8>?
        var length: UInt32 = 0
        SSL_get0_alpn_selected(ssl, &data, &length)
        guard let data, length > 0 else { return nil }
        return String(decoding: UnsafeBufferPointer(start: data, count: Int(length)), as: UTF8.self)
    }

    /// The subject of the peer's certificate (one line), if it sent one.
    public var peerCertificateSubject: String? {
        guard let certificate = SSL_get1_peer_certificate(ssl) else { return nil }
        defer { X509_free(certificate) }
        guard let name = X509_NAME_oneline(X509_get_subject_name(certificate), nil, 0) else { return nil }
        defer { CRYPTO_free(name, #file, #line) }
        return String(cString: name)
    }

    private static func isUnexpectedEOF() -> Bool {
        let code = ERR_peek_error()
        return ERR_GET_LIB(code) == ERR_LIB_SSL && ERR_GET_REASON(code) == SSL_R_UNEXPECTED_EOF_WHILE_READING
    }

    private func failure(_ stage: TLSError.Stage, code: Int32) -> TLSError {
        let savedErrno = errno
        if code == SSL_ERROR_SYSCALL {
            let queued = ERR_peek_error() != 0 ? TLSError.drainErrorQueue() : nil
            let socketErrno = savedErrno != 0 ? Errno(rawValue: savedErrno) : nil
            let reason = socketErrno.map { IOError("socket", errno: $0).description } ?? "connection closed by peer"
            return TLSError(stage, subject: peerDescription, reason: queued.map { "\($0): \(reason)" } ?? reason,
                            cause: .io(socketErrno))
        }
        let drained = TLSError.drainErrorQueueWithCodes()
        var reason = drained.reason
        let cause: TLSError.Cause
        if code == SSL_ERROR_ZERO_RETURN {
            cause = .io(nil)  // close_notify where a handshake or a write expected more
        } else {
            cause = .derived(fromErrorCodes: drained.codes, verifyResult: SSL_get_verify_result(ssl))
        }
        if case .certificateVerificationFailed(let verification) = cause {
            reason += ": \(verification)"
        }
        return TLSError(stage, subject: peerDescription, reason: reason, cause: cause)
    }
}
