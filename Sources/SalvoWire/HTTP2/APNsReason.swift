/// Why the HTTP/2 provider API refused a request: the `reason` of the response's JSON body
/// (`{"reason":"BadDeviceToken"}`), each with the HTTP status Apple documents for it.
///
/// The raw value is a small index (for tables and counters); `name` is the text on the wire.
public enum APNsReason: UInt8, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    // 400
    /// `apns-collapse-id` is over 64 bytes.
    case badCollapseId
    /// The device token is not 64 hex digits, or not a token for this environment.
    case badDeviceToken
    /// `apns-expiration` is not a UNIX time in seconds.
    case badExpirationDate
    /// `apns-id` is not a canonical UUID.
    case badMessageId
    /// `apns-priority` is not 10, 5 or 1 (or not 5 for a background push).
    case badPriority
    /// `apns-topic` is malformed.
    case badTopic
    /// The device token belongs to another app than the topic names.
    case deviceTokenNotForTopic
    /// A header field was given more than once.
    case duplicateHeaders
    /// The connection was idle too long; sent with GOAWAY.
    case idleTimeout
    /// `apns-push-type` is unknown, or the topic lacks the type's suffix.
    case invalidPushType
    /// The path names no device token.
    case missingDeviceToken
    /// No `apns-topic`, where the certificate covers several topics or a token is used.
    case missingTopic
    /// The request has no body.
    case payloadEmpty
    /// The topic is not one this provider may push to.
    case topicDisallowed
    // 400, broadcast and channel management (iOS 18)
    /// The app's broadcast capability is off.
    case featureNotEnabled
    /// A broadcast, or a channel read or delete, has no `apns-channel-id`.
    case missingChannelId
    /// `apns-channel-id` is not a channel id.
    case badChannelId
    /// The channel does not exist (never created, deleted, or of the other environment).
    case channelNotRegistered
    /// A channel management request's parameters are wrong.
    case badRequestParams
    /// A channel management request's body is not what it should be.
    case badRequestPayload
    /// A broadcast has no `apns-push-type`.
    case missingPushType
    /// The app has its 10,000 channels in this environment already.
    case cannotCreateChannelConfig
    // 403
    /// The client certificate was refused.
    case badCertificate
    /// The certificate is for the other environment (sandbox or production).
    case badCertificateEnvironment
    /// The provider token is over an hour old: sign a new one and send again.
    case expiredProviderToken
    /// The provider may not do this.
    case forbidden
    /// The provider token does not verify against the key id and team: a configuration fault.
    case invalidProviderToken
    /// Neither a certificate nor an `authorization` header: a configuration fault.
    case missingProviderToken
    /// The token's key id does not belong to its team.
    case unrelatedKeyIdInToken
    /// The token's key is not valid for this environment.
    case badEnvironmentKeyIdInToken
    /// The certificate's topic is not the bundle id the request names.
    case topicMismatch
    // 404, 405, 410, 413, 429, 500, 503
    /// The `:path` is none of the API's.
    case badPath
    /// The `:method` is not `POST`.
    case methodNotAllowed
    /// 410: the token is no longer active for the topic (the app was removed); drop it. Comes with a timestamp.
    case unregistered
    /// 410: the token has expired; drop it. Comes with a timestamp.
    case expiredToken
    /// The payload is over the push type's limit (4096 bytes, 5120 for VoIP).
    case payloadTooLarge
    /// A new provider token for the team less than 20 minutes after the last one.
    case tooManyProviderTokenUpdates
    /// Too many notifications to one device token in a short time; retry later.
    case tooManyRequests
    /// APNs failed internally; retry, on another connection.
    case internalServerError
    /// APNs is unavailable for now; retry, on another connection.
    case serviceUnavailable
    /// The server is shutting down; retry on another connection.
    case shutdown

    /// The reason as Apple spells it in the response body.
    public var name: String {
        switch self {
        case .badCollapseId: "BadCollapseId"
        case .badDeviceToken: "BadDeviceToken"
        case .badExpirationDate: "BadExpirationDate"
        case .badMessageId: "BadMessageId"
        case .badPriority: "BadPriority"
        case .badTopic: "BadTopic"
        case .deviceTokenNotForTopic: "DeviceTokenNotForTopic"
        case .duplicateHeaders: "DuplicateHeaders"
        case .idleTimeout: "IdleTimeout"
        case .invalidPushType: "InvalidPushType"
        case .missingDeviceToken: "MissingDeviceToken"
        case .missingTopic: "MissingTopic"
        case .payloadEmpty: "PayloadEmpty"
        case .topicDisallowed: "TopicDisallowed"
        case .featureNotEnabled: "FeatureNotEnabled"
        case .missingChannelId: "MissingChannelId"
        case .badChannelId: "BadChannelId"
        case .channelNotRegistered: "ChannelNotRegistered"
        case .badRequestParams: "BadRequestParams"
        case .badRequestPayload: "BadRequestPayload"
        case .missingPushType: "MissingPushType"
        case .cannotCreateChannelConfig: "CannotCreateChannelConfig"
        case .badCertificate: "BadCertificate"
        case .badCertificateEnvironment: "BadCertificateEnvironment"
        case .expiredProviderToken: "ExpiredProviderToken"
        case .forbidden: "Forbidden"
        case .invalidProviderToken: "InvalidProviderToken"
        case .missingProviderToken: "MissingProviderToken"
        case .unrelatedKeyIdInToken: "UnrelatedKeyIdInToken"
        case .badEnvironmentKeyIdInToken: "BadEnvironmentKeyIdInToken"
        case .topicMismatch: "TopicMismatch"
        case .badPath: "BadPath"
        case .methodNotAllowed: "MethodNotAllowed"
        case .unregistered: "Unregistered"
        case .expiredToken: "ExpiredToken"
        case .payloadTooLarge: "PayloadTooLarge"
        case .tooManyProviderTokenUpdates: "TooManyProviderTokenUpdates"
        case .tooManyRequests: "TooManyRequests"
        case .internalServerError: "InternalServerError"
        case .serviceUnavailable: "ServiceUnavailable"
        case .shutdown: "Shutdown"
        }
    }

    /// The HTTP status a response with this reason carries.
    /// Whether an answer with this reason rejects its notification for good: the request
    /// itself is wrong, or the token is (400, 404, 405, 410, 413). The others are retried
    /// (429, 500, 503), configuration faults (403), or the connection's (IdleTimeout).
    public var isRejection: Bool {
        [400, 404, 405, 410, 413].contains(status) && self != .idleTimeout
    }

    public var status: Int {
        switch self {
        case .badCollapseId, .badDeviceToken, .badExpirationDate, .badMessageId, .badPriority, .badTopic,
             .deviceTokenNotForTopic, .duplicateHeaders, .idleTimeout, .invalidPushType, .missingDeviceToken,
             .missingTopic, .payloadEmpty, .topicDisallowed, .featureNotEnabled, .missingChannelId, .badChannelId,
             .channelNotRegistered, .badRequestParams, .badRequestPayload, .missingPushType, .cannotCreateChannelConfig:
            400
        case .badCertificate, .badCertificateEnvironment, .expiredProviderToken, .forbidden, .invalidProviderToken,
             .missingProviderToken, .unrelatedKeyIdInToken, .badEnvironmentKeyIdInToken, .topicMismatch:
            403
        case .badPath: 404
        case .methodNotAllowed: 405
        case .unregistered, .expiredToken: 410
        case .payloadTooLarge: 413
        case .tooManyProviderTokenUpdates, .tooManyRequests: 429
        case .internalServerError: 500
        case .serviceUnavailable, .shutdown: 503
        }
    }

    /// The reason named `name`; also takes `BadEnvironmentKeyInToken`, a spelling seen on
    /// the wire for `badEnvironmentKeyIdInToken`.
    public init?(name: some StringProtocol) {
        if name == "BadEnvironmentKeyInToken" {
            self = .badEnvironmentKeyIdInToken
            return
        }
        guard let reason = Self.allCases.first(where: { $0.name == name }) else { return nil }
        self = reason
    }

    /// The response body: `{"reason":"<name>"}`.
    public var body: [UInt8] { Array(#"{"reason":"\#(name)"}"#.utf8) }

    /// The reason as Apple spells it, as `name` gives it.
    public var description: String { name }
}
