/// Why a gateway refused a notification, in either protocol: the binary protocol's status
/// byte, or the HTTP/2 provider API's HTTP status with Apple's reason and, for 410, since
/// when the device token has been invalid.
///
/// Reports group rejections by `reasonName`; the rejected-token CSV writes `statusCode`,
/// `reasonName` and `timestamp`, the list a provider cleans its token database with
/// (`isTokenProblem` says which rows to act on).
public enum Rejection: Sendable, Hashable, CustomStringConvertible {
    /// An error response of the binary protocol named the notification.
    case binary(Status)
    /// The HTTP/2 provider API answered its stream with an error status.
    ///
    /// - `status`: the HTTP status (400, 410, …).
    /// - `reason`: Apple's reason as sent (`BadDeviceToken`), empty when the answer had none.
    /// - `timestamp`: for 410, the milliseconds since 1970 from when the token was invalid.
    case http(status: Int, reason: String, timestamp: Int64?)

    /// The binary status byte (8), or the HTTP status (410).
    public var statusCode: Int {
        switch self {
        case .binary(let status): Int(status.rawValue)
        case .http(let status, _, _): status
        }
    }

    /// What reports group by: the binary status's name (`invalid_token`), or Apple's reason
    /// (`Unregistered`; `http_<status>` for an answer without one).
    public var reasonName: String {
        switch self {
        case .binary(let status): status.name
        case .http(let status, let reason, _): reason.isEmpty ? "http_\(status)" : reason
        }
    }

    /// For HTTP 410: since when the token has been invalid (milliseconds since 1970). Keep a
    /// token that was registered again after this.
    public var timestamp: Int64? {
        if case .http(_, _, let timestamp) = self { return timestamp }
        return nil
    }

    /// Apple's reason, when the answer carried one this library knows.
    public var apnsReason: APNsReason? {
        if case .http(_, let reason, _) = self { return APNsReason(name: reason) }
        return nil
    }

    /// Whether the device token itself is at fault, so that the provider should stop
    /// sending to it: binary status 5 or 8 (see `Status.isTokenProblem`); HTTP 410
    /// (Unregistered, ExpiredToken), or 400 BadDeviceToken (a malformed token, or one of the
    /// other environment).
    public var isTokenProblem: Bool {
        switch self {
        case .binary(let status): status.isTokenProblem
        case .http(let status, let reason, _): status == 410 || reason == APNsReason.badDeviceToken.name
        }
    }

    /// `status 8 (invalid_token)`, `400 BadDeviceToken`, `410 Unregistered since 1764000000000`.
    public var description: String {
        switch self {
        case .binary(let status): "status \(status.rawValue) (\(status.name))"
        case .http(let status, _, let timestamp): "\(status) \(reasonName)" + (timestamp.map { " since \($0)" } ?? "")
        }
    }
}
