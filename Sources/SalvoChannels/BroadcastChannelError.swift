import SalvoWire

/// A channel management request that did not succeed. `description` says which request,
/// where, what went wrong and, when Apple answered, its reason and `apns-request-id`.
public struct BroadcastChannelError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What went wrong.
    public enum Kind: Sendable, Hashable {
        /// APNs answered with an error: its HTTP status and reason.
        case refused(status: Int, reason: Reason)
        /// No answer: the gateway could not be reached, the TLS handshake failed (a
        /// certificate or name that does not verify), or the connection broke.
        case transport(String)
        /// The provider token could not be made or renewed: the token store failed, the
        /// signing key could not sign, or APNs called a fresh token expired (a clock fault).
        case credentials(String)
        /// APNs answered success in a form the protocol does not allow (a create without
        /// `apns-channel-id`, a body that does not parse).
        case unexpectedAnswer(String)
        /// The request was not sent: what is wrong with it (an empty bundle id, a count
        /// over the limit).
        case invalidRequest(String)
    }

    /// Apple's reason for a refusal: one it documents, or the text it sent.
    public enum Reason: Sendable, Hashable, CustomStringConvertible {
        /// A reason of Apple's table.
        case apns(APNsReason)
        /// Anything else: the body's `reason`, or a note that there was none.
        case other(String)

        /// The reason as Apple spells it.
        public var description: String {
            switch self {
            case .apns(let reason): reason.name
            case .other(let text): text
            }
        }
    }

    /// What went wrong.
    public var kind: Kind
    /// The request: `create`, `read`, `delete`, `list`, `create 5`.
    public var operation: String
    /// The channel the request named (read, delete), if any.
    public var channelID: String?
    /// The gateway asked, `host:port`.
    public var gateway: String
    /// The request's `apns-request-id` (APNs's echo when it sent one); nil when nothing was sent.
    public var requestID: String?

    /// The error of `operation` on `gateway`.
    public init(_ kind: Kind, operation: String, channelID: String? = nil, gateway: String, requestID: String? = nil) {
        self.kind = kind
        self.operation = operation
        self.channelID = channelID
        self.gateway = gateway
        self.requestID = requestID
    }

    /// Apple's reason, when APNs refused the request with one of its documented reasons.
    public var reason: APNsReason? {
        if case .refused(_, .apns(let reason)) = kind { return reason }
        return nil
    }

    /// E.g. `channel read of ID at api-manage-broadcast.push.apple.com:2196: refused 400
    /// ChannelNotRegistered (no such channel …) (apns-request-id …)`.
    public var description: String {
        let subject = "channel \(operation)\(channelID.map { " of \($0)" } ?? "") at \(gateway)"
        let request = requestID.map { " (apns-request-id \($0))" } ?? ""
        switch kind {
        case .refused(let status, let reason):
            let hint = Self.hint(reason).map { ": \($0)" } ?? ""
            return "\(subject): refused, \(status) \(reason)\(hint)\(request)"
        case .transport(let what):
            return "\(subject): no answer: \(what)\(request)"
        case .credentials(let what):
            return "\(subject): \(what)"
        case .unexpectedAnswer(let what):
            return "\(subject): an answer the protocol does not allow: \(what)\(request)"
        case .invalidRequest(let what):
            return "\(subject): not sent: \(what)"
        }
    }

    /// What a reason most likely means for channels, where Apple's generic text misleads.
    private static func hint(_ reason: Reason) -> String? {
        guard case .apns(let reason) = reason else { return nil }
        switch reason {
        case .channelNotRegistered:
            return "no such channel for this app in this environment (deleted, or made in the other environment)"
        case .badChannelId, .missingChannelId: return "the channel id is not one APNs gave"
        case .featureNotEnabled: return "turn on the Broadcast Capability for the app id in your developer account"
        case .cannotCreateChannelConfig:
            return "the app has its 10,000 channels in this environment: delete some (salvo channel list, delete)"
        case .topicMismatch, .badCertificate, .badCertificateEnvironment:
            return "the certificate is not for this bundle id or environment"
        case .invalidProviderToken, .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken:
            return "check the key id, team id and AuthKey file"
        case .expiredProviderToken: return "the provider token was refused again after a renewal: is this machine's clock right?"
        case .tooManyProviderTokenUpdates:
            return "this team's provider token changed too often: share one (the token cache) instead of signing one per process"
        case .tooManyRequests: return "APNs asks for fewer channel requests: try again later, or fewer at once"
        default: return nil
        }
    }
}
