#if canImport(Glibc)
import Glibc
#endif

/// Blocking conveniences over the nonblocking stream, waiting with poll(2) up to a
/// deadline. For simple clients (the feedback reader, tests, the benchmark's ceiling
/// probe); the engine drives streams from its event loop instead.
extension TLSStream {
    /// Connects to `host:port` and completes the handshake, verifying the server as `context`
    /// says; through `proxy` when given (a tunnel to `host:port`, then TLS with `host`).
    public static func connect(
        host: String, port: Int, context: TLSContext, serverName: String? = nil, timeout: Duration = .seconds(10),
        proxy: ProxyConfiguration? = nil
    ) throws(TLSConnectError) -> TLSStream {
        let deadline = Instant.now() + timeout
        let socket: Socket
        if let proxy {
            do {
                socket = try Socket.connect(host: proxy.host, port: proxy.port, timeout: timeout)
            } catch {
                throw .proxy(ProxyTunnelError("cannot reach the proxy \(proxy.address): \(error)", isPermanent: false))
            }
            do throws(ProxyTunnelError) {
                var address: SocketAddress?
                if proxy.kind == .socks5 {
                    do {
                        address = try SocketAddress.resolve(host: host, port: port).first
                    } catch {
                        throw ProxyTunnelError("\(error) (socks5:// resolves the gateway here; socks5h:// lets the proxy resolve it)",
                                               isPermanent: true)
                    }
                }
                var tunnel = ProxyTunnel(proxy: proxy, targetHost: host, targetPort: port, targetAddress: address)
                try tunnel.open(on: socket, timeout: deadline.since(.now()))
            } catch {
                throw .proxy(error)
            }
        } else {
            do { socket = try Socket.connect(host: host, port: port, timeout: timeout) } catch { throw .connect(error) }
        }
        do throws(TLSError) {
            let stream = try TLSStream(context: context, socket: socket, serverName: serverName ?? host)
            try stream.completeHandshake(timeout: deadline.since(.now()))
            return stream
        } catch {
            throw .tls(error)
        }
    }

    /// Runs the handshake to completion, waiting as needed.
    public func completeHandshake(timeout: Duration = .seconds(10)) throws(TLSError) {
        let deadline = Instant.now() + timeout
        while true {
            let progress = try handshake()
            if progress == .complete { return }
            guard wait(for: progress, until: deadline) else {
                throw TLSError(.handshake, subject: peerDescription, reason: "timed out", cause: .timedOut)
            }
        }
    }

    /// Writes all of `bytes`, waiting as needed.
    public func writeAll(_ bytes: UnsafeRawBufferPointer, timeout: Duration = .seconds(10)) throws(TLSError) {
        let deadline = Instant.now() + timeout
        var offset = 0
        while offset < bytes.count {
            switch try write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .wrote(let n): offset += n
            case .wouldBlock(let progress):
                guard wait(for: progress, until: deadline) else {
                    throw TLSError(.write, subject: peerDescription, reason: "timed out with \(bytes.count - offset) bytes unsent",
                                   cause: .timedOut)
                }
            }
        }
    }

    /// Reads once, waiting until bytes arrive, the peer closes, or the deadline passes
    /// (then `.wouldBlock`).
    public func readSome(into buffer: UnsafeMutableRawBufferPointer, timeout: Duration = .seconds(10)) throws(TLSError) -> TLSReadResult {
        let deadline = Instant.now() + timeout
        while true {
            let result = try read(into: buffer)
            guard case .wouldBlock(let progress) = result else { return result }
            guard wait(for: progress, until: deadline) else { return result }
        }
    }

    /// Reads until the peer closes; returns everything read.
    public func readToEnd(timeout: Duration = .seconds(10), limit: Int = 64 << 20) throws(TLSError) -> [UInt8] {
        let deadline = Instant.now() + timeout
        var collected: [UInt8] = []
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 1)
        defer { chunk.deallocate() }
        while true {
            switch try read(into: chunk) {
            case .bytes(let n):
                collected.append(contentsOf: chunk[0..<n])
                guard collected.count <= limit else {
                    throw TLSError(.read, subject: peerDescription, reason: "more than \(limit) bytes")
                }
            case .closed: return collected
            case .wouldBlock(let progress):
                guard wait(for: progress, until: deadline) else {
                    throw TLSError(.read, subject: peerDescription, reason: "timed out before the peer closed", cause: .timedOut)
                }
            }
        }
    }

    /// Polls the socket for what `progress` asks; false when the deadline passed.
    func wait(for progress: TLSProgress, until deadline: Instant) -> Bool {
        guard Instant.now() < deadline else { return false }
        var poller = pollfd(fd: socket.fd.rawValue, events: Int16(progress == .wantWrite ? POLLOUT : POLLIN), revents: 0)
        do {
            // The timeout is computed in the body: after EINTR the retry waits only what is left.
            let ready = try syscallOrThrow("poll") {
                poll(&poller, 1, Int32(clamping: (deadline.since(.now()).nanosecondsClamped + 999_999) / 1_000_000))
            }
            return ready != 0
        } catch {
            return true  // poll itself failed (not on a live socket): the next call reports the socket's error
        }
    }
}

/// Why a TLS connection could not be opened.
public enum TLSConnectError: Error, Sendable, CustomStringConvertible {
    case connect(ConnectError)
    /// The proxy could not be reached or did not open the tunnel.
    case proxy(ProxyTunnelError)
    case tls(TLSError)

    public var description: String {
        switch self {
        case .connect(let error): error.description
        case .proxy(let error): error.description
        case .tls(let error): error.description
        }
    }
}
