

/// Why an endpoint could not be parsed.
public struct EndpointError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What was given.
    public var text: String
    /// What is wrong with it.
    public var reason: String

    /// The problem and the forms an endpoint takes, for error messages.
    public var description: String {
        "'\(text)' is not an endpoint: \(reason) (use host:port, [ipv6]:port, production or sandbox)"
    }
}
