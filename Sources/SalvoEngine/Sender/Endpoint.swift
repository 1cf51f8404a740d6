/// A host and port to connect to, with Apple's endpoints as presets: the HTTP/2 provider
/// API (`production`, `sandbox`), and the feedback services of the legacy interface.
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// A host name or an IP address (IPv6 without brackets).
    public var host: String
    /// The TCP port.
    public var port: Int

    /// Which service an endpoint is for; decides what the preset names and a missing port mean.
    public enum Service: Sendable, Hashable {
        /// A binary-protocol notification gateway (port 2195). Apple retired its own in
        /// 2021: the preset names mean the HTTP/2 provider API.
        case gateway
        /// The HTTP/2 provider API (port 443).
        case providerAPI
        /// The feedback service of the legacy interface (port 2196).
        case feedback

        /// The service's standard port.
        public var defaultPort: Int {
            switch self {
            case .gateway: 2195
            case .providerAPI: 443
            case .feedback: 2196
            }
        }
    }

    /// `api.push.apple.com:443`, the HTTP/2 provider API for apps in production.
    public static let production = Endpoint(host: "api.push.apple.com", port: 443)
    /// `api.sandbox.push.apple.com:443`, the HTTP/2 provider API for development builds.
    public static let sandbox = Endpoint(host: "api.sandbox.push.apple.com", port: 443)
    /// `feedback.push.apple.com:2196`.
    public static let feedbackProduction = Endpoint(host: "feedback.push.apple.com", port: 2196)
    /// `feedback.sandbox.push.apple.com:2196`.
    public static let feedbackSandbox = Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196)

    /// The endpoint at `host` (a name or an IP address) and `port`.
    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// The endpoint a preset name means for `service`: `production` or `sandbox`, the
    /// HTTP/2 provider API for notifications (whatever the protocol asked for: there are no
    /// binary gateways left to name) and the feedback service for feedback; nil otherwise.
    public static func preset(_ name: String, service: Service) -> Endpoint? {
        switch (name, service) {
        case ("production", .gateway), ("production", .providerAPI): .production
        case ("sandbox", .gateway), ("sandbox", .providerAPI): .sandbox
        case ("production", .feedback): .feedbackProduction
        case ("sandbox", .feedback): .feedbackSandbox
        default: nil
        }
    }

    /// Parses `host:port`, `[ipv6]:port`, a bare `host` or `[ipv6]` (the service's
    /// standard port), or a preset name (see `preset(_:service:)`).
    ///
    /// - Throws: `EndpointError` naming what is wrong (an empty host, a bad port, an IPv6
    ///   address without brackets).
    public init(parsing text: String, service: Service = .gateway) throws(EndpointError) {
        if let preset = Self.preset(text, service: service) {
            self = preset
            return
        }
        let host: Substring
        let portText: Substring?
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else {
                throw EndpointError(text: text, reason: "'[' without a closing ']'")
            }
            host = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            if rest.isEmpty {
                portText = nil
            } else if rest.hasPrefix(":") {
                portText = rest.dropFirst()
            } else {
                throw EndpointError(text: text, reason: "expected ':' and a port after ']'")
            }
        } else if let colon = text.firstIndex(of: ":") {
            guard text[text.index(after: colon)...].firstIndex(of: ":") == nil else {
                throw EndpointError(text: text, reason: "put an IPv6 address in brackets, e.g. [::1]:\(service.defaultPort)")
            }
            host = text[..<colon]
            portText = text[text.index(after: colon)...]
        } else {
            host = text[...]
            portText = nil
        }
        guard !host.isEmpty else { throw EndpointError(text: text, reason: "the host is empty") }
        var port = service.defaultPort
        if let portText {
            guard let value = Int(portText), (1...65535).contains(value) else {
                throw EndpointError(text: text, reason: "the port must be a number from 1 to 65535")
            }
            port = value
        }
        self.init(host: String(host), port: port)
    }

    /// `host:port`, with brackets around an IPv6 address.
    public var description: String {
        host.contains(":") ? "[\(host)]:\(port)" : "\(host):\(port)"
    }
}
