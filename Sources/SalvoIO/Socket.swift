internal import CLinuxShim
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// An IPv4 or IPv6 socket address.
public struct SocketAddress: Sendable, Hashable, CustomStringConvertible {
    private var storage: sockaddr_storage
    let length: socklen_t

    init(storage: sockaddr_storage, length: socklen_t) {
        self.storage = storage
        self.length = length
    }

    /// Resolves `host` (a name, an IPv4 or an IPv6 literal, with or without brackets) to
    /// its TCP addresses, in the resolver's preferred order.
    public static func resolve(host: String, port: Int) throws(ResolutionError) -> [SocketAddress] {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        hints.ai_family = AF_UNSPEC
        hints.ai_flags = AI_ADDRCONFIG | AI_NUMERICSERV
        var result: UnsafeMutablePointer<addrinfo>?
        let rc = getaddrinfo(bare, String(port), &hints, &result)
        if rc != 0 {
            // AI_ADDRCONFIG hides ::1 on hosts whose only IPv6 address is loopback; try without it.
            hints.ai_flags = AI_NUMERICSERV
            let retry = getaddrinfo(bare, String(port), &hints, &result)
            guard retry == 0 else {
                throw ResolutionError(host: host, port: port, reason: String(cString: gai_strerror(rc)))
            }
        }
        defer { freeaddrinfo(result) }
        var addresses: [SocketAddress] = []
        var cursor = result
        while let info = cursor {
            var storage = sockaddr_storage()
            withUnsafeMutableBytes(of: &storage) { raw in
                raw.copyMemory(from: UnsafeRawBufferPointer(start: info.pointee.ai_addr, count: Int(info.pointee.ai_addrlen)))
            }
            let address = SocketAddress(storage: storage, length: info.pointee.ai_addrlen)
            if !addresses.contains(address) { addresses.append(address) }
            cursor = info.pointee.ai_next
        }
        guard !addresses.isEmpty else {
            throw ResolutionError(host: host, port: port, reason: "no addresses")
        }
        return addresses
    }

    /// The address family (AF_INET or AF_INET6).
    public var family: Int32 { Int32(storage.ss_family) }

    /// The port, in host order.
    public var port: Int {
        withSockaddr { pointer, _ in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin6_port)) }
            }
            return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { Int(UInt16(bigEndian: $0.pointee.sin_port)) }
        }
    }

    /// The numeric host: `127.0.0.1` or `::1`.
    public var host: String {
        var buffer = [CChar](repeating: 0, count: Int(INET6_ADDRSTRLEN) + 1)
        withSockaddr { pointer, _ in
            if family == AF_INET6 {
                pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    var address = sin6.pointee.sin6_addr
                    _ = inet_ntop(AF_INET6, &address, &buffer, socklen_t(buffer.count))
                }
            } else {
                pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    var address = sin.pointee.sin_addr
                    _ = inet_ntop(AF_INET, &address, &buffer, socklen_t(buffer.count))
                }
            }
        }
        return String(decoding: buffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// `127.0.0.1:2195` or `[::1]:2195`.
    public var description: String {
        family == AF_INET6 ? "[\(host)]:\(port)" : "\(host):\(port)"
    }

    func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) throws -> R) rethrows -> R {
        try withUnsafeBytes(of: storage) { raw in
            try body(raw.baseAddress!.assumingMemoryBound(to: sockaddr.self), length)
        }
    }

    public static func == (a: SocketAddress, b: SocketAddress) -> Bool {
        a.length == b.length && withUnsafeBytes(of: a.storage) { ra in
            withUnsafeBytes(of: b.storage) { rb in memcmp(ra.baseAddress!, rb.baseAddress!, Int(a.length)) == 0 }
        }
    }

    public func hash(into hasher: inout Hasher) {
        withUnsafeBytes(of: storage) { hasher.combine(bytes: UnsafeRawBufferPointer(rebasing: $0.prefix(Int(length)))) }
    }
}

/// A host name that could not be resolved.
public struct ResolutionError: Error, Sendable, CustomStringConvertible {
    public var host: String
    public var port: Int
    public var reason: String
    public var description: String { "cannot resolve \(host):\(port): \(reason)" }
}

/// A nonblocking TCP socket that owns its descriptor and closes it on deinit.
///
/// Immutable, so it may be shared; the kernel orders concurrent calls on one socket (the
/// engine still gives each socket to one loop thread).
public final class Socket: Sendable {
    /// The descriptor; valid for the socket's lifetime.
    public var fd: FileDescriptor { FileDescriptor(rawValue: descriptor) }
    /// The address this socket connects to, or accepted from; for messages.
    public let peer: SocketAddress?
    /// Stored raw: swift-system leaves `FileDescriptor` non-Sendable, and this class owns it.
    private let descriptor: Int32

    init(fd: Int32, peer: SocketAddress?) {
        self.descriptor = fd
        self.peer = peer
    }

    deinit { close(descriptor) }

    private static func make(family: Int32) throws(IOError) -> Int32 {
        ignoreSIGPIPE()
        return try syscallOrThrow("socket") {
            socket(family, Int32(SOCK_STREAM.rawValue) | Int32(SOCK_NONBLOCK.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
        }
    }

    // MARK: Client

    /// Starts a nonblocking connect. When `isConnected` is false, wait for `.write` and
    /// call `finishConnect()`.
    public static func startConnect(to address: SocketAddress) throws(IOError) -> (socket: Socket, isConnected: Bool) {
        let socket = Socket(fd: try make(family: address.family), peer: address)
        try socket.setNoDelay()
        let result = try syscall("connect to", target: address.description) {
            address.withSockaddr { Glibc.connect(socket.descriptor, $0, $1) }
        }
        if case .processed = result { return (socket, true) }
        return (socket, false)
    }

    /// Completes a nonblocking connect once the socket is writable: throws the connect's error.
    public func finishConnect() throws(IOError) {
        var error: Int32 = 0
        var length = socklen_t(MemoryLayout<Int32>.size)
        try syscallOrThrow("getsockopt(SO_ERROR)") { getsockopt(descriptor, SOL_SOCKET, SO_ERROR, &error, &length) }
        if error != 0 { throw IOError("connect to", errno: Errno(rawValue: error), target: peer?.description) }
    }

    /// Connects to `host:port`, trying each resolved address in turn, waiting at most
    /// `timeout` for each. For setup paths and simple clients; the engine connects through
    /// its event loop instead.
    public static func connect(host: String, port: Int, timeout: Duration) throws(ConnectError) -> Socket {
        let addresses: [SocketAddress]
        do {
            addresses = try SocketAddress.resolve(host: host, port: port)
        } catch {
            throw .resolution(error)
        }
        var lastError: IOError?
        for address in addresses {
            do throws(IOError) {
                let (socket, connected) = try startConnect(to: address)
                if connected { return socket }
                var poller = pollfd(fd: socket.descriptor, events: Int16(POLLOUT), revents: 0)
                let millis = Int32(clamping: timeout.nanosecondsClamped / 1_000_000)
                let ready = try syscallOrThrow("poll", target: address.description) { poll(&poller, 1, millis) }
                if ready == 0 { throw IOError("connect to", errno: .timedOut, target: address.description) }
                try socket.finishConnect()
                return socket
            } catch {
                lastError = error
            }
        }
        throw .io(lastError!)
    }

    public func setNoDelay() throws(IOError) {
        var on: Int32 = 1
        try syscallOrThrow("setsockopt(TCP_NODELAY)") {
            setsockopt(descriptor, Int32(IPPROTO_TCP), TCP_NODELAY, &on, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    /// Sets SO_SNDBUF/SO_RCVBUF; the kernel doubles and caps the values.
    public func setBufferSizes(send: Int?, receive: Int?) {
        if var value = send.map({ Int32(clamping: $0) }) {
            _ = setsockopt(descriptor, SOL_SOCKET, SO_SNDBUF, &value, socklen_t(MemoryLayout<Int32>.size))
        }
        if var value = receive.map({ Int32(clamping: $0) }) {
            _ = setsockopt(descriptor, SOL_SOCKET, SO_RCVBUF, &value, socklen_t(MemoryLayout<Int32>.size))
        }
    }

    // MARK: Server

    /// A listening socket on `host:port` (port 0 picks a free one; see `localAddress`).
    public static func listen(host: String, port: Int, backlog: Int32 = 1024) throws(ConnectError) -> Socket {
        let address: SocketAddress
        do {
            address = try SocketAddress.resolve(host: host, port: port)[0]
        } catch {
            throw .resolution(error)
        }
        do {
            let socket = Socket(fd: try make(family: address.family), peer: nil)
            var on: Int32 = 1
            _ = setsockopt(socket.descriptor, SOL_SOCKET, SO_REUSEADDR, &on, socklen_t(MemoryLayout<Int32>.size))
            try syscallOrThrow("bind", target: address.description) {
                address.withSockaddr { bind(socket.descriptor, $0, $1) }
            }
            try syscallOrThrow("listen", target: address.description) { Glibc.listen(socket.descriptor, backlog) }
            return socket
        } catch {
            throw .io(error)
        }
    }

    /// The bound local address.
    public var localAddress: SocketAddress? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let rc = withUnsafeMutableBytes(of: &storage) {
            getsockname(descriptor, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
        }
        return rc == 0 ? SocketAddress(storage: storage, length: length) : nil
    }

    /// Accepts one pending connection (nonblocking, TCP_NODELAY), or nil when none is waiting.
    public func accept() throws(IOError) -> Socket? {
        var storage = sockaddr_storage()
        var length = socklen_t(MemoryLayout<sockaddr_storage>.size)
        let result = try syscall("accept") {
            withUnsafeMutableBytes(of: &storage) {
                salvo_accept4_nonblocking(descriptor, $0.baseAddress!.assumingMemoryBound(to: sockaddr.self), &length)
            }
        }
        guard case .processed(let client) = result else { return nil }
        let socket = Socket(fd: client, peer: SocketAddress(storage: storage, length: length))
        try? socket.setNoDelay()
        return socket
    }

    // MARK: Plain I/O (the TLS layer does its own through OpenSSL)

    /// Reads into `buffer`: the byte count (0 at end of stream), or `.wouldBlock`.
    public func read(into buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("read", target: peer?.description) { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }
    }

    /// Copies waiting bytes into `buffer` without taking them off the socket: the byte count
    /// (0 at end of stream), or `.wouldBlock`. A proxy tunnel looks at the proxy's answer this
    /// way, then reads only the answer's bytes and leaves what follows it to TLS.
    public func peek(into buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("read", target: peer?.description) { recv(descriptor, buffer.baseAddress, buffer.count, Int32(MSG_PEEK)) }
    }

    /// Writes from `bytes`: the byte count written, or `.wouldBlock`.
    public func write(_ bytes: UnsafeRawBufferPointer) throws(IOError) -> IOResult<Int> {
        try syscall("write", target: peer?.description) { Glibc.write(descriptor, bytes.baseAddress, bytes.count) }
    }

    /// Bytes written to this socket that the peer's TCP has not acknowledged yet (0 when
    /// unknown). What is still in here has certainly not been read by the peer.
    public var unacknowledgedBytes: Int { max(0, Int(salvo_unacknowledged_bytes(descriptor))) }

    /// Bytes of the stream the peer's TCP has acknowledged so far, or nil when the kernel
    /// does not say.
    public var acknowledgedBytes: UInt64? {
        let bytes = salvo_acknowledged_bytes(descriptor)
        return bytes < 0 ? nil : UInt64(bytes)
    }

    /// The kernel's smoothed round-trip time of this connection (TCP_INFO), or nil when it
    /// does not say: the network's part of an answer time, without the peer's.
    public var smoothedRoundTrip: Duration? {
        let microseconds = salvo_smoothed_round_trip_us(descriptor)
        return microseconds < 0 ? nil : .microseconds(microseconds)
    }

    /// Whether a read would not block now: bytes wait, the peer closed, or the socket
    /// failed. One `poll` that does not wait. (Not `recv(MSG_PEEK)`: that takes a pending
    /// error such as ECONNRESET off the socket, and the read after it sees a plain end.)
    public var isReadable: Bool {
        var entry = pollfd(fd: descriptor, events: Int16(POLLIN), revents: 0)
        return poll(&entry, 1, 0) > 0
    }

    /// Shuts down the sending direction (the peer reads end of stream).
    public func shutdownWrite() { _ = shutdown(descriptor, Int32(SHUT_WR)) }
}

/// Why a connection or listener could not be set up.
public enum ConnectError: Error, Sendable, CustomStringConvertible {
    case resolution(ResolutionError)
    case io(IOError)

    public var description: String {
        switch self {
        case .resolution(let error): error.description
        case .io(let error): error.description
        }
    }
}

/// Sets SIGPIPE to ignored, once per process: a write to a closed socket then fails with
/// EPIPE (an error we report) instead of killing the process.
func ignoreSIGPIPE() { _ = sigpipeIgnored }
private let sigpipeIgnored: Void = salvo_ignore_sigpipe()
