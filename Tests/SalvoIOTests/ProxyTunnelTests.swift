import SalvoIO
import Testing

/// The tunnel's exchange with HTTP and SOCKS5 proxies, byte by byte, without sockets.
@Suite struct ProxyTunnelTests {
    static let http = try! ProxyConfiguration(url: "http://alice:s3cret@127.0.0.1:8888")
    static let socks = try! ProxyConfiguration(url: "socks5://alice:s3cret@127.0.0.1:1080")
    static let socksh = try! ProxyConfiguration(url: "socks5h://127.0.0.1:1080")

    static func tunnel(_ proxy: ProxyConfiguration, address: SocketAddress? = nil) -> ProxyTunnel {
        ProxyTunnel(proxy: proxy, targetHost: "api.push.apple.com", targetPort: 443, targetAddress: address)
    }

    /// Writes what the tunnel wants written, as one write.
    static func written(_ tunnel: inout ProxyTunnel) -> [UInt8] {
        let bytes = tunnel.pendingOutput
        tunnel.didWrite(bytes.count)
        return bytes
    }

    static func failure(_ tunnel: inout ProxyTunnel, _ answer: String) -> ProxyTunnelError? {
        failure(&tunnel, bytes: Array(answer.utf8))
    }

    static func failure(_ tunnel: inout ProxyTunnel, bytes: [UInt8]) -> ProxyTunnelError? {
        _ = written(&tunnel)
        do { try tunnel.receive(bytes); return nil } catch { return error }
    }

    // MARK: HTTP CONNECT

    @Test func anHTTPProxyIsAskedForATunnelWithBasicCredentials() throws {
        var tunnel = Self.tunnel(Self.http)
        let request = String(decoding: Self.written(&tunnel), as: UTF8.self)
        #expect(request == "CONNECT api.push.apple.com:443 HTTP/1.1\r\nHost: api.push.apple.com:443\r\n"
                + "Proxy-Authorization: Basic YWxpY2U6czNjcmV0\r\n\r\n")
        #expect(tunnel.pendingOutput.isEmpty && tunnel.state == .negotiating)
    }

    @Test func withoutCredentialsNoProxyAuthorizationIsSent() {
        var tunnel = Self.tunnel(try! ProxyConfiguration(url: "http://127.0.0.1:8888"))
        #expect(!String(decoding: Self.written(&tunnel), as: UTF8.self).contains("Proxy-Authorization"))
    }

    @Test func aPartialWriteLeavesTheRestToWrite() {
        var tunnel = Self.tunnel(Self.http)
        let all = tunnel.pendingOutput
        tunnel.didWrite(10)
        #expect(tunnel.pendingOutput == Array(all.dropFirst(10)))
    }

    @Test func a2xxOpensTheTunnelAndTheBytesAfterTheHeadersAreLeftForTLS() throws {
        var tunnel = Self.tunnel(Self.http)
        _ = Self.written(&tunnel)
        let answer = Array("HTTP/1.1 200 Connection established\r\nProxy-Agent: tinyproxy/1.11.1\r\n\r\n".utf8)
        let taken = try tunnel.receive(answer + [0x16, 0x03, 0x03])
        #expect(taken == answer.count)
        #expect(tunnel.state == .open)
    }

    @Test func anAnswerSplitIntoSingleBytesIsTakenWhole() throws {
        var tunnel = Self.tunnel(Self.http)
        _ = Self.written(&tunnel)
        let answer = Array("HTTP/1.0 200 OK\r\n\r\n".utf8)
        for (index, byte) in answer.enumerated() {
            #expect(tunnel.state == .negotiating, "open after \(index) bytes")
            #expect(try tunnel.receive([byte]) == 1)
        }
        #expect(tunnel.state == .open)
        #expect(try tunnel.receive([0x16]) == 0, "a byte after the answer is TLS's")
    }

    @Test func headersEndingInBareLineFeedsAreTaken() throws {
        var tunnel = Self.tunnel(Self.http)
        _ = Self.written(&tunnel)
        #expect(try tunnel.receive(Array("HTTP/1.1 200 OK\nVia: x\n\nTLS".utf8)) == 24)
        #expect(tunnel.state == .open)
    }

    @Test func a407NamesTheProxyAndTheCredentialsButNotTheirValues() throws {
        var tunnel = Self.tunnel(Self.http)
        let error = try #require(Self.failure(&tunnel, "HTTP/1.1 407 Proxy Authentication Required\r\nProxy-Authenticate: Basic\r\n\r\n"))
        #expect(error.description == "the proxy 127.0.0.1:8888 answered 407 Proxy Authentication Required to CONNECT "
                + "api.push.apple.com:443: check the proxy's user and password")
        #expect(error.isPermanent)
        #expect(!error.description.contains("alice") && !error.description.contains("s3cret"))
        #expect(tunnel.state == .failed(error))
    }

    @Test func a401IsTakenAsRefusedCredentialsAsTinyproxySendsIt() throws {
        var tunnel = Self.tunnel(Self.http)
        let error = try #require(Self.failure(&tunnel, "HTTP/1.0 401 Unauthorized\r\n\r\n"))
        #expect(error.description.hasSuffix("answered 401 Unauthorized to CONNECT api.push.apple.com:443: check the proxy's user and password"))
        #expect(error.isPermanent)
    }

    @Test func a407WithoutCredentialsSaysToGiveThem() throws {
        var tunnel = Self.tunnel(try ProxyConfiguration(url: "http://127.0.0.1:8888"))
        let error = try #require(Self.failure(&tunnel, "HTTP/1.1 407 Proxy Authentication Required\r\n\r\n"))
        #expect(error.description.hasSuffix("it wants credentials: give them in the proxy URL (http://user:password@127.0.0.1:8888)"))
    }

    @Test func a403SaysTheProxyForbidsTheTunnel() throws {
        var tunnel = Self.tunnel(Self.http)
        let error = try #require(Self.failure(&tunnel, "HTTP/1.1 403 Access violation\r\nContent-Length: 0\r\n\r\n"))
        #expect(error.description.hasPrefix("the proxy 127.0.0.1:8888 answered 403 Access violation to CONNECT api.push.apple.com:443: "
                                            + "it does not allow this tunnel"))
        #expect(error.isPermanent)
    }

    @Test func a502SaysTheProxyCouldNotReachTheGatewayAndMayBeRetried() throws {
        var tunnel = Self.tunnel(Self.http)
        let error = try #require(Self.failure(&tunnel, "HTTP/1.1 502 Bad Gateway\r\n\r\n"))
        #expect(error.description.hasSuffix("answered 502 Bad Gateway to CONNECT api.push.apple.com:443: it could not reach the gateway"))
        #expect(!error.isPermanent)
    }

    @Test func anAnswerThatIsNotHTTPIsNamed() throws {
        var tunnel = Self.tunnel(Self.http)
        let error = try #require(Self.failure(&tunnel, "\u{5}\u{0}garbage\r\n\r\n"))
        #expect(error.description.hasPrefix("the proxy 127.0.0.1:8888 did not answer CONNECT with HTTP"))
    }

    @Test func headersWithoutEndAreRefusedPastTheLimit() throws {
        var tunnel = Self.tunnel(Self.http)
        _ = Self.written(&tunnel)
        _ = try tunnel.receive(Array("HTTP/1.1 200 OK\r\n".utf8))
        #expect(throws: ProxyTunnelError.self) { try tunnel.receive([UInt8](repeating: UInt8(ascii: "a"), count: 20_000)) }
    }

    @Test func theProxyClosingBeforeAnsweringIsNamed() {
        var tunnel = Self.tunnel(Self.http)
        _ = Self.written(&tunnel)
        #expect(tunnel.proxyClosed().description
                == "the proxy 127.0.0.1:8888 closed the connection before it answered (asked for a tunnel to api.push.apple.com:443)")
    }

    // MARK: SOCKS5

    @Test func aSOCKS5ProxyIsOfferedUserAndPasswordThenGivenTheAddress() throws {
        let address = try SocketAddress.resolve(host: "17.188.143.34", port: 443)[0]
        var tunnel = Self.tunnel(Self.socks, address: address)
        #expect(Self.written(&tunnel) == [5, 2, 0, 2])
        #expect(try tunnel.receive([5, 2]) == 2)
        #expect(Self.written(&tunnel) == [1, 5] + Array("alice".utf8) + [6] + Array("s3cret".utf8))
        #expect(try tunnel.receive([1, 0]) == 2)
        #expect(Self.written(&tunnel) == [5, 1, 0, 1, 17, 188, 143, 34, 1, 187])
        let reply: [UInt8] = [5, 0, 0, 1, 127, 0, 0, 1, 0x9C, 0x40]
        #expect(try tunnel.receive(reply + [0x16, 0x03]) == reply.count, "what follows the reply is TLS's")
        #expect(tunnel.state == .open)
    }

    @Test func anIPv6GatewayIsGivenAsAnIPv6Address() throws {
        let address = try SocketAddress.resolve(host: "::1", port: 443)[0]
        var tunnel = ProxyTunnel(proxy: try ProxyConfiguration(url: "socks5://127.0.0.1:1080"), targetHost: "::1",
                                 targetPort: 443, targetAddress: address)
        #expect(Self.written(&tunnel) == [5, 1, 0])
        try tunnel.receive([5, 0])
        #expect(Self.written(&tunnel) == [5, 1, 0, 4] + [UInt8](repeating: 0, count: 15) + [1, 1, 187])
    }

    @Test func socks5hGivesTheNameAndNoAuthentication() throws {
        var tunnel = Self.tunnel(Self.socksh)
        #expect(Self.written(&tunnel) == [5, 1, 0])
        try tunnel.receive([5, 0])
        #expect(Self.written(&tunnel) == [5, 1, 0, 3, 18] + Array("api.push.apple.com".utf8) + [1, 187])
        // A reply with a domain name, in pieces.
        let reply: [UInt8] = [5, 0, 0, 3, 4] + Array("host".utf8) + [0, 80]
        for byte in reply.dropLast() { #expect(try tunnel.receive([byte]) == 1) }
        #expect(tunnel.state == .negotiating)
        #expect(try tunnel.receive([reply.last!, 0x16]) == 1)
        #expect(tunnel.state == .open)
    }

    @Test func aRefusedUserAndPasswordIsNamedWithoutThem() throws {
        var tunnel = Self.tunnel(Self.socks, address: try SocketAddress.resolve(host: "127.0.0.1", port: 443)[0])
        _ = Self.written(&tunnel)
        try tunnel.receive([5, 2])
        let error = try #require(Self.failure(&tunnel, "\u{1}\u{1}"))
        #expect(error.description == "the SOCKS5 proxy 127.0.0.1:1080 refused the user and password (RFC 1929 status 1): "
                + "check the proxy's user and password")
        #expect(error.isPermanent && !error.description.contains("alice") && !error.description.contains("s3cret"))
    }

    @Test func noAcceptableMethodWithoutCredentialsSaysToGiveThem() throws {
        var tunnel = Self.tunnel(Self.socksh)
        _ = Self.written(&tunnel)
        let error = try #require(Self.failure(&tunnel, bytes: [5, 0xFF]))
        #expect(error.description == "the SOCKS5 proxy 127.0.0.1:1080 wants credentials: give them in the proxy URL "
                + "(socks5h://user:password@127.0.0.1:1080)")
    }

    @Test func aProxyThatIsNotSOCKS5IsNamed() throws {
        var tunnel = Self.tunnel(Self.socksh)
        let error = try #require(Self.failure(&tunnel, "HT"))
        #expect(error.description == "the SOCKS5 proxy 127.0.0.1:1080 is not a SOCKS5 proxy (it answered version 72)")
    }

    @Test(arguments: [(UInt8(1), "could not connect to api.push.apple.com:443 (reply 1: general SOCKS server failure)"),
                      (2, "refused the connection to api.push.apple.com:443 (reply 2: connection not allowed by ruleset)"),
                      (3, "could not connect to api.push.apple.com:443 (reply 3: network unreachable)"),
                      (4, "could not connect to api.push.apple.com:443 (reply 4: host unreachable)"),
                      (5, "refused the connection to api.push.apple.com:443 (reply 5: connection refused)"),
                      (6, "could not connect to api.push.apple.com:443 (reply 6: TTL expired)"),
                      (7, "could not connect to api.push.apple.com:443 (reply 7: command not supported)"),
                      (8, "could not connect to api.push.apple.com:443 (reply 8: address type not supported)"),
                      (9, "could not connect to api.push.apple.com:443 (reply 9: unassigned reply code)")])
    func everySOCKS5ReplyCodeIsNamed(code: UInt8, text: String) throws {
        var tunnel = Self.tunnel(Self.socksh)
        _ = Self.written(&tunnel)
        try tunnel.receive([5, 0])
        _ = Self.written(&tunnel)
        #expect(throws: ProxyTunnelError("the SOCKS5 proxy 127.0.0.1:1080 " + text, isPermanent: [2, 7, 8].contains(code))) {
            try tunnel.receive([5, code, 0, 1, 0, 0, 0, 0, 0, 0])
        }
    }

    @Test func nothingIsTakenWhileARequestWaitsToBeWritten() throws {
        var tunnel = Self.tunnel(Self.socksh)
        #expect(try tunnel.receive([5, 0]) == 0)
    }

    // MARK: Configuration

    @Test func proxyURLsAreParsed() throws {
        let http = try ProxyConfiguration(url: "http://us%40er:p%3Ass@proxy.example:3128/")
        #expect(http.kind == .http && http.host == "proxy.example" && http.port == 3128)
        #expect(http.credentials == .init(user: "us@er", password: "p:ss"))
        #expect(http.description == "http://proxy.example:3128")
        #expect(!String(describing: http.credentials!).contains("p:ss"))
        var dumped = ""
        dump(http, to: &dumped)
        #expect(!dumped.contains("p:ss") && !dumped.contains("us@er"), "\(dumped)")
        #expect(try ProxyConfiguration(url: "socks5h://[::1]:1080") == ProxyConfiguration(kind: .socks5h, host: "::1", port: 1080))
        #expect(try ProxyConfiguration(url: "proxy.example").port == 1080, "curl's default port and scheme")
        #expect(try ProxyConfiguration(url: "SOCKS5://h:1").kind == .socks5)
    }

    @Test(arguments: [
        ("", "the proxy URL is empty"),
        ("https://h:1", "the proxy URL's scheme https:// (TLS to the proxy is not supported: use http://, the tunnel carries TLS to the gateway): use http://, socks5:// or socks5h://"),
        ("socks4://h:1", "the proxy URL's scheme socks4:// (SOCKS4 is not supported: use socks5:// or socks5h://): use http://, socks5:// or socks5h://"),
        ("http://h:0", "the proxy URL's port 0 is not 1...65535"),
        ("http://h:", "the proxy URL's port (empty) is not 1...65535"),
        ("http://user:secret@:8080", "the proxy URL names no host"),
        ("http://h:1/path", "a proxy URL is http://[user:password@]host:port, with no path"),
        ("http://u:%zz@h:1", "the proxy URL's user or password has a malformed %-escape"),
    ])
    func badProxyURLsAreRefusedWithoutTheirCredentials(url: String, message: String) {
        #expect(throws: ProxyConfiguration.ParseError(description: message)) { try ProxyConfiguration(url: url) }
    }

    @Test func theEnvironmentIsReadAsCurlReadsIt() throws {
        #expect(try ProxyConfiguration.fromEnvironment([:], for: "api.push.apple.com") == nil)
        #expect(try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": "http://h:1"], for: "x")?.host == "h")
        #expect(try ProxyConfiguration.fromEnvironment(["https_proxy": "http://a:1", "HTTPS_PROXY": "http://b:1"], for: "x")?.host == "a")
        #expect(try ProxyConfiguration.fromEnvironment(["ALL_PROXY": "socks5h://s:1", "http_proxy": "http://n:1"], for: "x")?.kind == .socks5h)
        #expect(try ProxyConfiguration.fromEnvironment(["https_proxy": "http://h:1", "ALL_PROXY": "socks5://s:1"], for: "x")?.host == "h")
        #expect(try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": "http://h:1", "NO_PROXY": "push.apple.com"], for: "api.push.apple.com") == nil)
        #expect(throws: ProxyConfiguration.ParseError.self) { try ProxyConfiguration.fromEnvironment(["HTTPS_PROXY": "ftp://h"], for: "x") }
    }

    @Test func noProxyMatchesNamesSuffixesAddressesAndStar() {
        #expect(ProxyConfiguration.bypasses(host: "api.push.apple.com", noProxy: "*"))
        #expect(ProxyConfiguration.bypasses(host: "api.push.apple.com", noProxy: "localhost, .apple.com"))
        #expect(ProxyConfiguration.bypasses(host: "API.Push.Apple.COM", noProxy: "push.apple.com"))
        #expect(ProxyConfiguration.bypasses(host: "apple.com", noProxy: ".apple.com"))
        #expect(!ProxyConfiguration.bypasses(host: "notapple.com", noProxy: "apple.com"))
        #expect(ProxyConfiguration.bypasses(host: "127.0.0.1", noProxy: "10.0.0.1,127.0.0.1"))
        #expect(!ProxyConfiguration.bypasses(host: "127.0.0.10", noProxy: "127.0.0.1"))
        #expect(ProxyConfiguration.bypasses(host: "::1", noProxy: "[::1]"))
        #expect(ProxyConfiguration.bypasses(host: "::1", noProxy: "::1"))
        #expect(ProxyConfiguration.bypasses(host: "gw.example", noProxy: "gw.example:443"))
        #expect(!ProxyConfiguration.bypasses(host: "gw.example", noProxy: ""))
    }
}
