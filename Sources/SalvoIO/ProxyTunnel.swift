#if canImport(Glibc)
import Glibc
#endif

/// Opening a tunnel through a proxy to a gateway, without I/O: it says what to write
/// (`pendingOutput`), takes what was read (`receive`) and tells how many of those bytes were
/// the proxy's, until the tunnel is open or has failed. Bytes after the proxy's answer are
/// the gateway's (its TLS): they are never taken, so a caller that peeks at the socket and
/// reads only what was taken leaves them for the TLS stream.
///
/// ```
/// HTTP:    write CONNECT ──> read status line + headers up to the empty line ──> open (2xx)
/// SOCKS5:  write greeting ──> read method ──┬─(no auth)──────────────────────┐
///                                          └─(user/pass) write auth, read ───┤
///          write CONNECT (address, or name for socks5h) ──> read reply ──> open (reply 0)
/// ```
/// Any other answer fails the tunnel with a `ProxyTunnelError` that names the proxy
/// (`host:port`, never the credentials), the target and what the proxy answered.
public struct ProxyTunnel: Sendable {
    public enum State: Sendable, Equatable {
        /// Writing `pendingOutput`, or waiting for the proxy's answer.
        case negotiating
        /// The tunnel carries the gateway's bytes from here on.
        case open
        case failed(ProxyTunnelError)
    }

    private enum Step: Sendable {
        case httpResponse
        case socksMethod
        case socksAuthentication
        case socksReply
        case done
    }

    public let proxy: ProxyConfiguration
    /// The gateway, as messages name it.
    public let targetHost: String
    public let targetPort: Int
    public private(set) var state: State = .negotiating
    /// Bytes to write to the proxy now (then `didWrite`); empty while waiting for its answer.
    public private(set) var pendingOutput: [UInt8]
    private var written = 0
    private var step: Step
    /// The proxy's answer so far (the current step's).
    private var answer: [UInt8] = []
    /// The SOCKS5 CONNECT request, written after authentication.
    private var socksRequest: [UInt8] = []

    /// The most an HTTP proxy's answer headers may take.
    static let headerLimit = 16 * 1024

    /// A tunnel to `targetHost:targetPort`. A `socks5` proxy is given `targetAddress` (the
    /// gateway's address resolved here), or the host itself when it is an IP address; a
    /// `socks5h` or HTTP proxy is given the name.
    public init(proxy: ProxyConfiguration, targetHost: String, targetPort: Int, targetAddress: SocketAddress? = nil) {
        self.proxy = proxy
        self.targetHost = targetHost
        self.targetPort = targetPort
        switch proxy.kind {
        case .http:
            step = .httpResponse
            pendingOutput = Self.connectRequest(proxy: proxy, host: targetHost, port: targetPort)
        case .socks5, .socks5h:
            step = .socksMethod
            pendingOutput = [5, proxy.credentials == nil ? 1 : 2, 0x00] + (proxy.credentials == nil ? [] : [0x02])
            socksRequest = Self.socksConnect(host: targetHost, port: targetPort,
                                             address: proxy.kind == .socks5 ? targetAddress ?? Self.literalAddress(targetHost) : nil)
        }
    }

    /// The gateway as messages name it: `host:port` (`[v6]:port`).
    public var target: String { targetHost.contains(":") ? "[\(targetHost)]:\(targetPort)" : "\(targetHost):\(targetPort)" }

    /// `count` bytes of `pendingOutput` were written.
    public mutating func didWrite(_ count: Int) {
        written += count
        if written >= pendingOutput.count {
            pendingOutput = []
            written = 0
        } else {
            pendingOutput.removeFirst(count)
            written = 0
        }
    }

    /// Takes the proxy's bytes from the start of `bytes` (what was read, or peeked at) and
    /// returns how many were its: at most up to the end of its answer. Throws (and moves
    /// to `.failed`) when the answer refuses the tunnel.
    @discardableResult
    public mutating func receive(_ bytes: UnsafeRawBufferPointer) throws(ProxyTunnelError) -> Int {
        guard case .negotiating = state, pendingOutput.isEmpty else { return 0 }
        var taken = 0
        do throws(ProxyTunnelError) {
            while taken < bytes.count, case .negotiating = state, pendingOutput.isEmpty {
                switch step {
                case .httpResponse:
                    taken += try takeHTTPHeaders(UnsafeRawBufferPointer(rebasing: bytes[taken...]))
                case .socksMethod, .socksAuthentication, .socksReply:
                    let needed = socksAnswerLength() - answer.count
                    let chunk = min(needed, bytes.count - taken)
                    answer += bytes[taken..<taken + chunk]
                    taken += chunk
                    if answer.count == socksAnswerLength() { try socksAnswered() }
                case .done:
                    return taken
                }
            }
        } catch {
            state = .failed(error)
            throw error
        }
        return taken
    }

    /// `receive` for tests and simple callers.
    @discardableResult
    public mutating func receive(_ bytes: [UInt8]) throws(ProxyTunnelError) -> Int {
        var result: Result<Int, ProxyTunnelError> = .success(0)
        bytes.withUnsafeBytes { raw in
            do throws(ProxyTunnelError) { result = .success(try receive(raw)) } catch { result = .failure(error) }
        }
        return try result.get()
    }

    /// The proxy closed the connection before the tunnel opened: the error that says so.
    public mutating func proxyClosed() -> ProxyTunnelError {
        let error = ProxyTunnelError(
            "the \(proxyName) closed the connection before it \(step == .httpResponse || answer.isEmpty ? "answered" : "finished answering") "
            + "(asked for a tunnel to \(target))", isPermanent: false)
        state = .failed(error)
        return error
    }

    private var proxyName: String { proxy.kind == .http ? "proxy \(proxy.address)" : "SOCKS5 proxy \(proxy.address)" }

    // MARK: HTTP CONNECT

    private static func connectRequest(proxy: ProxyConfiguration, host: String, port: Int) -> [UInt8] {
        let authority = host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
        var request = "CONNECT \(authority) HTTP/1.1\r\nHost: \(authority)\r\n"
        if let credentials = proxy.credentials {
            let token = base64(Array("\(credentials.user):\(credentials.password)".utf8))
            request += "Proxy-Authorization: Basic \(token)\r\n"
        }
        return Array((request + "\r\n").utf8)
    }

    /// Takes header bytes up to and including the empty line that ends them.
    private mutating func takeHTTPHeaders(_ bytes: UnsafeRawBufferPointer) throws(ProxyTunnelError) -> Int {
        for (index, byte) in bytes.enumerated() {
            answer.append(byte)
            if byte == UInt8(ascii: "\n"), answer.count >= 2 {
                let before = answer[answer.count - 2]
                let endsHeaders = before == UInt8(ascii: "\n")
                    || (before == UInt8(ascii: "\r") && answer.count >= 4 && answer[answer.count - 3] == UInt8(ascii: "\n"))
                if endsHeaders {
                    try httpAnswered()
                    return index + 1
                }
            }
            if answer.count > Self.headerLimit {
                throw ProxyTunnelError("the \(proxyName) answered with headers over \(Self.headerLimit) bytes "
                                       + "(asked for a tunnel to \(target))", isPermanent: false)
            }
        }
        return bytes.count
    }

    private mutating func httpAnswered() throws(ProxyTunnelError) {
        let lineEnd = answer.firstIndex(of: UInt8(ascii: "\n")) ?? answer.count
        var statusLine = String(decoding: answer[..<lineEnd], as: UTF8.self)
        if statusLine.hasSuffix("\r") { statusLine.removeLast() }
        let parts = statusLine.split(separator: " ", maxSplits: 2, omittingEmptySubsequences: true)
        guard parts.count >= 2, parts[0].hasPrefix("HTTP/1."), parts[1].count == 3, let status = Int(parts[1]) else {
            throw ProxyTunnelError("the \(proxyName) did not answer CONNECT with HTTP (it said \(Self.quoted(statusLine))): "
                                   + "is it an HTTP proxy?", isPermanent: true)
        }
        answer = []
        if (200...299).contains(status) {
            step = .done
            state = .open
            return
        }
        let reason = parts.count > 2 ? " " + Self.quoted(String(parts[2]), limit: 80, quotes: false) : ""
        let answered = "the \(proxyName) answered \(status)\(reason) to CONNECT \(target)"
        switch status {
        case 407, 401:  // tinyproxy answers a refused CONNECT with 401
            throw ProxyTunnelError(answered + (proxy.credentials == nil
                ? ": it wants credentials: give them in the proxy URL (http://user:password@\(proxy.address))"
                : ": check the proxy's user and password"), isPermanent: true)
        case 403:
            throw ProxyTunnelError(answered + ": it does not allow this tunnel (check its access rules and the ports it "
                                   + "allows CONNECT to)", isPermanent: true)
        case 400...499:
            throw ProxyTunnelError(answered, isPermanent: true)
        default:
            throw ProxyTunnelError(answered + (status >= 500 ? ": it could not reach the gateway" : ""), isPermanent: false)
        }
    }

    // MARK: SOCKS5

    private static func socksConnect(host: String, port: Int, address: SocketAddress?) -> [UInt8] {
        var request: [UInt8] = [5, 1, 0]
        if let address, let raw = address.rawIPBytes {
            request.append(raw.count == 4 ? 1 : 4)
            request += raw
        } else {
            let name = Array(host.utf8.prefix(255))
            request += [3, UInt8(name.count)] + name
        }
        request += [UInt8(port >> 8 & 0xFF), UInt8(port & 0xFF)]
        return request
    }

    private static func literalAddress(_ host: String) -> SocketAddress? {
        let bare = host.hasPrefix("[") && host.hasSuffix("]") ? String(host.dropFirst().dropLast()) : host
        guard bare.allSatisfy({ $0.isHexDigit || $0 == "." || $0 == ":" }) else { return nil }
        return try? SocketAddress.resolve(host: bare, port: 0).first
    }

    /// How long the current step's answer is (a reply's length shows in its fifth byte).
    private func socksAnswerLength() -> Int {
        switch step {
        case .socksMethod, .socksAuthentication: return 2
        case .socksReply:
            guard answer.count >= 5 else { return 5 }
            switch answer[3] {
            case 1: return 4 + 4 + 2
            case 4: return 4 + 16 + 2
            case 3: return 4 + 1 + Int(answer[4]) + 2
            default: return 5  // checked in socksAnswered
            }
        default: return 0
        }
    }

    private mutating func socksAnswered() throws(ProxyTunnelError) {
        let answer = self.answer
        self.answer = []
        switch step {
        case .socksMethod:
            guard answer[0] == 5 else {
                throw ProxyTunnelError("the \(proxyName) is not a SOCKS5 proxy (it answered version \(answer[0]))", isPermanent: true)
            }
            switch answer[1] {
            case 0x00:
                step = .socksReply
                pendingOutput = socksRequest
            case 0x02 where proxy.credentials != nil:
                let credentials = proxy.credentials!
                let user = Array(credentials.user.utf8.prefix(255)), password = Array(credentials.password.utf8.prefix(255))
                step = .socksAuthentication
                pendingOutput = [1, UInt8(user.count)] + user + [UInt8(password.count)] + password
            case 0xFF where proxy.credentials == nil:
                throw ProxyTunnelError("the \(proxyName) wants credentials: give them in the proxy URL "
                                       + "(\(proxy.kind.rawValue)://user:password@\(proxy.address))", isPermanent: true)
            case 0xFF:
                throw ProxyTunnelError("the \(proxyName) accepts neither no authentication nor a user and password",
                                       isPermanent: true)
            default:
                throw ProxyTunnelError("the \(proxyName) chose authentication method \(answer[1]), which was not offered",
                                       isPermanent: true)
            }
        case .socksAuthentication:
            guard answer[1] == 0 else {
                throw ProxyTunnelError("the \(proxyName) refused the user and password (RFC 1929 status \(answer[1])): "
                                       + "check the proxy's user and password", isPermanent: true)
            }
            step = .socksReply
            pendingOutput = socksRequest
        case .socksReply:
            guard answer[0] == 5 else {
                throw ProxyTunnelError("the \(proxyName) answered CONNECT with version \(answer[0]), not 5", isPermanent: true)
            }
            if answer[1] != 0 {
                let code = answer[1]
                let verb = code == 2 || code == 5 ? "refused the connection to" : "could not connect to"
                throw ProxyTunnelError("the \(proxyName) \(verb) \(target) (reply \(code): \(Self.socksReplyMeaning(code)))",
                                       isPermanent: code == 2 || code == 7 || code == 8)
            }
            guard [1, 3, 4].contains(answer[3]) else {
                throw ProxyTunnelError("the \(proxyName) answered CONNECT with address type \(answer[3]), which SOCKS5 does not have",
                                       isPermanent: true)
            }
            step = .done
            state = .open
        default:
            break
        }
    }

    /// RFC 1928 §6.
    static func socksReplyMeaning(_ code: UInt8) -> String {
        switch code {
        case 1: "general SOCKS server failure"
        case 2: "connection not allowed by ruleset"
        case 3: "network unreachable"
        case 4: "host unreachable"
        case 5: "connection refused"
        case 6: "TTL expired"
        case 7: "command not supported"
        case 8: "address type not supported"
        default: "unassigned reply code"
        }
    }

    // MARK: Helpers

    /// At most `limit` characters, control characters shown as `?`.
    private static func quoted(_ text: String, limit: Int = 60, quotes: Bool = true) -> String {
        let clean = String(text.unicodeScalars.prefix(limit).map { $0.value < 0x20 || $0.value == 0x7F ? "?" : Character($0) })
        let shown = text.unicodeScalars.count > limit ? clean + "…" : clean
        return quotes ? "\"\(shown)\"" : shown
    }

    private static func base64(_ bytes: [UInt8]) -> String {
        let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out: [UInt8] = []
        out.reserveCapacity((bytes.count + 2) / 3 * 4)
        var index = 0
        while index < bytes.count {
            let b0 = bytes[index], b1 = index + 1 < bytes.count ? bytes[index + 1] : 0, b2 = index + 2 < bytes.count ? bytes[index + 2] : 0
            out.append(alphabet[Int(b0 >> 2)])
            out.append(alphabet[Int((b0 & 0x03) << 4 | b1 >> 4)])
            out.append(index + 1 < bytes.count ? alphabet[Int((b1 & 0x0F) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(index + 2 < bytes.count ? alphabet[Int(b2 & 0x3F)] : UInt8(ascii: "="))
            index += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

extension ProxyTunnel {
    /// Opens the tunnel on `socket` (connected to the proxy), waiting with poll(2) at most
    /// `timeout` in all. For simple clients (the feedback reader); the engine drives the
    /// tunnel from its event loop instead.
    public mutating func open(on socket: Socket, timeout: Duration) throws(ProxyTunnelError) {
        let deadline = Instant.now() + timeout
        var buffer = [UInt8](repeating: 0, count: 2048)
        do {
            while true {
                if !pendingOutput.isEmpty {
                    let result = try pendingOutput.withUnsafeBytes { bytes throws(IOError) in try socket.write(bytes) }
                    if case .processed(let count) = result { didWrite(count); continue }
                    try wait(socket, for: Int16(POLLOUT), until: deadline)
                    continue
                }
                if case .open = state { return }
                let peeked = try buffer.withUnsafeMutableBytes { raw throws(IOError) in try socket.peek(into: raw) }
                guard case .processed(let count) = peeked else {
                    try wait(socket, for: Int16(POLLIN), until: deadline)
                    continue
                }
                guard count > 0 else { throw proxyClosed() }
                let taken = try buffer.withUnsafeBytes { raw throws(ProxyTunnelError) in
                    try receive(UnsafeRawBufferPointer(rebasing: raw.prefix(count)))
                }
                if taken > 0 {
                    _ = try buffer.withUnsafeMutableBytes { raw throws(IOError) in
                        try socket.read(into: UnsafeMutableRawBufferPointer(rebasing: raw.prefix(taken)))
                    }
                }
            }
        } catch let error as ProxyTunnelError {
            throw error
        } catch {
            throw ProxyTunnelError("the connection to the \(proxyName) failed while opening the tunnel to \(target): \(error)",
                                   isPermanent: false)
        }
    }

    private func wait(_ socket: Socket, for events: Int16, until deadline: Instant) throws(IOError) {
        let left = deadline.since(.now())
        guard left > .zero else { throw IOError("open a tunnel through", errno: .timedOut, target: proxy.address) }
        var entry = pollfd(fd: socket.fd.rawValue, events: events, revents: 0)
        _ = poll(&entry, 1, Int32(clamping: left.nanosecondsClamped / 1_000_000 + 1))
    }
}

/// Why a proxy did not open a tunnel: names the proxy (`host:port`, never its credentials),
/// the gateway asked for and what the proxy answered.
public struct ProxyTunnelError: Error, Sendable, Equatable, CustomStringConvertible {
    public var description: String
    /// Retrying will not help (wrong credentials, a tunnel the proxy forbids).
    public var isPermanent: Bool

    public init(_ description: String, isPermanent: Bool) {
        self.description = description
        self.isPermanent = isPermanent
    }
}

extension SocketAddress {
    /// The address's 4 or 16 bytes, network order.
    var rawIPBytes: [UInt8]? {
        withSockaddr { pointer, _ in
            if family == AF_INET6 {
                return pointer.withMemoryRebound(to: sockaddr_in6.self, capacity: 1) { sin6 in
                    withUnsafeBytes(of: sin6.pointee.sin6_addr) { Array($0) }
                }
            }
            if family == AF_INET {
                return pointer.withMemoryRebound(to: sockaddr_in.self, capacity: 1) { sin in
                    withUnsafeBytes(of: sin.pointee.sin_addr) { Array($0) }
                }
            }
            return nil
        }
    }
}
