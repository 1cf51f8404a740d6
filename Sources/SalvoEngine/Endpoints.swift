/// A host and port to connect to, with Apple's historic endpoints as presets.
public struct Endpoint: Sendable, Hashable, CustomStringConvertible {
    /// A host name or an IP address (IPv6 without brackets).
    public var host: String
    /// The TCP port.
    public var port: Int

    /// Which service an endpoint is for; decides what the preset names and a missing port mean.
    public enum Service: Sendable, Hashable {
        /// The notification gateway (port 2195).
        case gateway
        /// The feedback service (port 2196).
        case feedback

        /// The service's standard port.
        public var defaultPort: Int {
            switch self {
            case .gateway: 2195
            case .feedback: 2196
            }
        }
    }

    /// `gateway.push.apple.com:2195`.
    public static let production = Endpoint(host: "gateway.push.apple.com", port: 2195)
    /// `gateway.sandbox.push.apple.com:2195`.
    public static let sandbox = Endpoint(host: "gateway.sandbox.push.apple.com", port: 2195)
    /// `feedback.push.apple.com:2196`.
    public static let feedbackProduction = Endpoint(host: "feedback.push.apple.com", port: 2196)
    /// `feedback.sandbox.push.apple.com:2196`.
    public static let feedbackSandbox = Endpoint(host: "feedback.sandbox.push.apple.com", port: 2196)

    public init(host: String, port: Int) {
        self.host = host
        self.port = port
    }

    /// Parses `host:port`, `[ipv6]:port`, a bare `host` or `[ipv6]` (the service's
    /// standard port), or a preset name: `production` or `sandbox`, meaning the gateway or
    /// the feedback endpoint depending on `service`.
    ///
    /// - Throws: `EndpointError` naming what is wrong (an empty host, a bad port, an IPv6
    ///   address without brackets).
    public init(parsing text: String, service: Service = .gateway) throws(EndpointError) {
        switch (text, service) {
        case ("production", .gateway): self = .production; return
        case ("sandbox", .gateway): self = .sandbox; return
        case ("production", .feedback): self = .feedbackProduction; return
        case ("sandbox", .feedback): self = .feedbackSandbox; return
        default: break
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

/// Why an endpoint could not be parsed.
public struct EndpointError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was given.
    public var text: String
    /// What is wrong with it.
    public var reason: String

    public var description: String {
        "'\(text)' is not an endpoint: \(reason) (use host:port, [ipv6]:port, production or sandbox)"
    }
}
