/// A proxy that connections to a gateway go through: an HTTP proxy (one `CONNECT` tunnel per
/// connection) or a SOCKS5 proxy. TLS stays end to end: the tunnel carries the gateway's
/// handshake, and the gateway's certificate and name are verified as without a proxy.
///
/// Parsed from a URL as curl takes one: `http://[user:password@]host[:port]`,
/// `socks5://…` (the gateway's name is resolved here, the proxy is given an address) or
/// `socks5h://…` (the proxy resolves the name). The port defaults to 1080, as curl's does;
/// user and password may be percent-encoded.
///
/// The credentials never appear in `description`, in errors or in reflection: only
/// `kind://host:port` names a proxy.
public struct ProxyConfiguration: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
    /// How the proxy is asked for a tunnel.
    public enum Kind: String, Sendable, Hashable, CaseIterable {
        /// HTTP `CONNECT host:port` (RFC 9110 §9.3.6), with Basic credentials when given.
        case http
        /// SOCKS5 (RFC 1928) with the gateway's address resolved locally.
        case socks5
        /// SOCKS5 with the gateway's name resolved by the proxy.
        case socks5h
    }

    /// A user and password for the proxy: HTTP Basic, or SOCKS5 username/password (RFC 1929).
    public struct Credentials: Sendable, Hashable, CustomStringConvertible, CustomReflectable {
        public var user: String
        public var password: String

        public init(user: String, password: String) {
            self.user = user
            self.password = password
        }

        /// Never the values: a credential printed by mistake must not leak.
        public var description: String { "<proxy credentials>" }
        public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
    }

    /// Why a proxy URL cannot be used; the text never contains its credentials.
    public struct ParseError: Error, Sendable, Equatable, CustomStringConvertible {
        public var description: String
        public init(description: String) { self.description = description }
    }

    public var kind: Kind
    /// The proxy's host name or IP address (IPv6 without brackets).
    public var host: String
    public var port: Int
    public var credentials: Credentials?

    public init(kind: Kind, host: String, port: Int, credentials: Credentials? = nil) {
        self.kind = kind
        self.host = host
        self.port = port
        self.credentials = credentials
    }

    /// The port a proxy URL without one means (curl's default for every kind).
    public static let defaultPort = 1080

    /// Parses `http://[user:password@]host[:port]`, `socks5://…` or `socks5h://…` (a URL
    /// without a scheme is `http://`, as for curl).
    public init(url text: String) throws(ParseError) {
        var rest = Substring(text.trimmingSpaces)
        guard !rest.isEmpty else { throw ParseError(description: "the proxy URL is empty") }
        var kind = Kind.http
        if let colon = rest.firstIndex(of: ":"), rest[colon...].hasPrefix("://") {
            let scheme = rest[..<colon].lowercased()
            guard let parsed = Kind(rawValue: scheme) else {
                let hint = scheme == "https" ? " (TLS to the proxy is not supported: use http://, the tunnel carries TLS to the gateway)"
                    : scheme == "socks4" || scheme == "socks4a" ? " (SOCKS4 is not supported: use socks5:// or socks5h://)" : ""
                throw ParseError(description: "the proxy URL's scheme \(scheme)://\(hint): use http://, socks5:// or socks5h://")
            }
            kind = parsed
            rest = rest[rest.index(colon, offsetBy: 3)...]
        }
        if rest.hasSuffix("/") { rest = rest.dropLast() }
        guard !rest.contains("/"), !rest.contains("?"), !rest.contains("#") else {
            throw ParseError(description: "a proxy URL is \(kind.rawValue)://[user:password@]host:port, with no path")
        }
        var credentials: Credentials?
        if let at = rest.lastIndex(of: "@") {
            let userInfo = rest[..<at]
            rest = rest[rest.index(after: at)...]
            let user: Substring, password: Substring
            if let colon = userInfo.firstIndex(of: ":") {
                user = userInfo[..<colon]
                password = userInfo[userInfo.index(after: colon)...]
            } else {
                (user, password) = (userInfo, "")
            }
            guard let decodedUser = Self.percentDecoded(user), let decodedPassword = Self.percentDecoded(password) else {
                throw ParseError(description: "the proxy URL's user or password has a malformed %-escape")
            }
            guard !decodedUser.isEmpty else { throw ParseError(description: "the proxy URL has a password but no user") }
            if kind != .http, decodedUser.utf8.count > 255 || decodedPassword.utf8.count > 255 {
                throw ParseError(description: "a SOCKS5 user and password are at most 255 bytes each (RFC 1929)")
            }
            credentials = Credentials(user: decodedUser, password: decodedPassword)
        }
        let host: Substring, portText: Substring?
        if rest.hasPrefix("[") {
            guard let close = rest.firstIndex(of: "]") else { throw ParseError(description: "the proxy URL's IPv6 address lacks its ]") }
            host = rest[rest.index(after: rest.startIndex)..<close]
            let after = rest[rest.index(after: close)...]
            guard after.isEmpty || after.hasPrefix(":") else {
                throw ParseError(description: "the proxy URL has \(after) after its IPv6 address")
            }
            portText = after.isEmpty ? nil : after.dropFirst()
        } else if let colon = rest.lastIndex(of: ":") {
            host = rest[..<colon]
            portText = rest[rest.index(after: colon)...]
        } else {
            (host, portText) = (rest, nil)
        }
        guard !host.isEmpty else { throw ParseError(description: "the proxy URL names no host") }
        var port = Self.defaultPort
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw ParseError(description: "the proxy URL's port \(portText.isEmpty ? "(empty)" : String(portText)) is not 1...65535")
            }
            port = value
        }
        self.init(kind: kind, host: String(host), port: port, credentials: credentials)
    }

    /// `host:port`, or `[v6]:port`: how messages name the proxy.
    public var address: String { host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)" }

    /// `kind://host:port`, without the credentials.
    public var description: String { "\(kind.rawValue)://\(address)" }

    public var customMirror: Mirror {
        Mirror(self, children: ["kind": kind, "host": host, "port": port, "hasCredentials": credentials != nil],
               displayStyle: .struct)
    }

    /// nil when an escape is malformed or the bytes are not UTF-8.
    private static func percentDecoded(_ text: Substring) -> String? {
        var bytes: [UInt8] = []
        var utf8 = text.utf8.makeIterator()
        while let byte = utf8.next() {
            guard byte == UInt8(ascii: "%") else { bytes.append(byte); continue }
            guard let high = utf8.next().flatMap(hexValue), let low = utf8.next().flatMap(hexValue) else { return nil }
            bytes.append(high << 4 | low)
        }
        return String(validating: bytes, as: UTF8.self)
    }

    private static func hexValue(_ byte: UInt8) -> UInt8? {
        switch byte {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): byte - UInt8(ascii: "0")
        case UInt8(ascii: "a")...UInt8(ascii: "f"): byte - UInt8(ascii: "a") + 10
        case UInt8(ascii: "A")...UInt8(ascii: "F"): byte - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}

extension ProxyConfiguration {
    /// The proxy the environment names for an HTTPS connection to `host`, as curl reads it:
    /// `https_proxy`/`HTTPS_PROXY`, else `all_proxy`/`ALL_PROXY`; nil when none is set or
    /// `no_proxy`/`NO_PROXY` matches `host` (see `bypasses(host:noProxy:)`).
    public static func fromEnvironment(_ environment: [String: String], for host: String) throws(ParseError) -> ProxyConfiguration? {
        func value(_ names: String...) -> String? {
            names.lazy.compactMap { environment[$0] }.first { !$0.trimmingSpaces.isEmpty }
        }
        guard let url = value("https_proxy", "HTTPS_PROXY", "all_proxy", "ALL_PROXY") else { return nil }
        if let noProxy = value("no_proxy", "NO_PROXY"), bypasses(host: host, noProxy: noProxy) { return nil }
        do {
            return try ProxyConfiguration(url: url)
        } catch {
            throw ParseError(description: "the environment's proxy: \(error.description)")
        }
    }

    /// Whether `noProxy` (comma-separated, curl's rules, case-insensitive) exempts `host`: `*`
    /// exempts every host; an entry matches the same host name or IP address, and a host
    /// name it is a domain suffix of (`example.com` and `.example.com` both match
    /// `api.example.com`). Ports in entries are ignored.
    public static func bypasses(host: String, noProxy: String) -> Bool {
        let target = normalized(host)
        for raw in noProxy.split(whereSeparator: { $0 == "," || $0 == " " || $0 == "\t" }) {
            var entry = Substring(raw)
            if entry == "*" { return true }
            if entry.hasPrefix("[") , let close = entry.firstIndex(of: "]") {
                entry = entry[entry.index(after: entry.startIndex)..<close]
            } else if entry.filter({ $0 == ":" }).count == 1, let colon = entry.lastIndex(of: ":") {
                entry = entry[..<colon]  // host:port (an IPv6 address has several colons)
            }
            while entry.hasPrefix(".") { entry = entry.dropFirst() }
            let name = normalized(String(entry))
            guard !name.isEmpty else { continue }
            if target == name || target.hasSuffix("." + name) { return true }
        }
        return false
    }

    private static func normalized(_ host: String) -> String {
        var name = host.lowercased()
        if name.hasPrefix("["), name.hasSuffix("]") { name = String(name.dropFirst().dropLast()) }
        while name.hasSuffix(".") { name.removeLast() }
        return name
    }
}

extension StringProtocol {
    fileprivate var trimmingSpaces: Substring {
        let scalars = unicodeScalars
        guard let first = scalars.firstIndex(where: { !$0.properties.isWhitespace }) else { return "" }
        let last = scalars.lastIndex(where: { !$0.properties.isWhitespace })!
        return Substring(self[first...last])
    }
}
