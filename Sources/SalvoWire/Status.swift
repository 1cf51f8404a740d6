/// The status byte of an APNs error response (`08 status identifier`).
///
/// A `RawRepresentable` wrapper rather than an enum: the gateway may send codes this
/// library has never heard of, and those must survive a round trip unchanged.
///
/// Classification, for a sender deciding what to do with a rejected notification:
///
/// | status | `isTokenProblem` | `isRetryable` | what to do |
/// |---|---|---|---|
/// | 1 processing error | no | yes | resend on a new connection |
/// | 2 missing device token | no | no | a bug in the encoder: fix the code |
/// | 3, 4, 6, 7 topic / payload | no | no | fix the notification |
/// | 5 invalid token size | yes | no | the stored token is malformed: drop it |
/// | 8 invalid token | yes | no | the token is dead or from the wrong environment: drop it |
/// | 10 shutdown | no | yes | the named notification *succeeded*; resend what follows |
/// | 128 protocol error | no | no | a framing bug: fix the code |
/// | 255 unknown | no | yes | resend on a new connection |
///
/// Status 5 counts as a token problem because every encoder in this library writes
/// exactly 32 bytes, so the gateway only says "invalid token size" when the token the
/// provider stored had the wrong length; retrying it can never succeed, and the provider
/// database should stop handing it out. A provider that wants to be conservative can drop
/// only on ``invalidToken`` and log ``invalidTokenSize``.
public struct Status: RawRepresentable, Hashable, Sendable, CustomStringConvertible {
    /// The byte as it appears on the wire.
    public let rawValue: UInt8

    /// Wraps any byte, known or not.
    @inlinable
    public init(rawValue: UInt8) {
        self.rawValue = rawValue
    }

    /// 0: no errors encountered (never sent in practice; the gateway stays silent instead).
    public static let noErrors = Status(rawValue: 0)
    /// 1: the gateway failed internally; the notification may be resent.
    public static let processingError = Status(rawValue: 1)
    /// 2: the frame had no device token.
    public static let missingDeviceToken = Status(rawValue: 2)
    /// 3: no topic (certificate-derived in the binary protocol; not produced by our mock).
    public static let missingTopic = Status(rawValue: 3)
    /// 4: the frame had no payload.
    public static let missingPayload = Status(rawValue: 4)
    /// 5: the device token was not 32 bytes.
    public static let invalidTokenSize = Status(rawValue: 5)
    /// 6: the topic had an invalid size.
    public static let invalidTopicSize = Status(rawValue: 6)
    /// 7: the payload was empty or longer than the gateway's maximum.
    public static let invalidPayloadSize = Status(rawValue: 7)
    /// 8: the token is not valid for this gateway (unregistered, or the other environment).
    public static let invalidToken = Status(rawValue: 8)
    /// 10: the gateway is shutting down; the identifier names the *last successful*
    /// notification on the connection.
    public static let shutdown = Status(rawValue: 10)
    /// 128: the gateway could not parse the stream.
    public static let protocolError = Status(rawValue: 128)
    /// 255: unknown error.
    public static let unknown = Status(rawValue: 255)

    /// The statuses an error response rejects a notification with: every documented one
    /// but 0 (never sent) and 10 (a shutdown, after which the named one was accepted).
    public static let rejections: [Status] = [
        .processingError, .missingDeviceToken, .missingTopic, .missingPayload, .invalidTokenSize, .invalidTopicSize,
        .invalidPayloadSize, .invalidToken, .protocolError, .unknown,
    ]

    /// A stable snake_case name for logs, metrics and reports, e.g. `"invalid_token"`;
    /// codes without a name render as `"status_NN"` (decimal).
    public var name: String {
        switch rawValue {
        case 0: "no_errors"
        case 1: "processing_error"
        case 2: "missing_device_token"
        case 3: "missing_topic"
        case 4: "missing_payload"
        case 5: "invalid_token_size"
        case 6: "invalid_topic_size"
        case 7: "invalid_payload_size"
        case 8: "invalid_token"
        case 10: "shutdown"
        case 128: "protocol_error"
        case 255: "unknown"
        default: "status_\(rawValue)"
        }
    }

    /// A human sentence saying what happened, including the code.
    public var description: String {
        let sentence: String
        switch rawValue {
        case 0: sentence = "No errors encountered."
        case 1: sentence = "The gateway had a processing error; resend on a new connection."
        case 2: sentence = "The notification had no device token."
        case 3: sentence = "The notification had no topic."
        case 4: sentence = "The notification had no payload."
        case 5: sentence = "The device token did not have the required 32 bytes."
        case 6: sentence = "The topic had an invalid size."
        case 7: sentence = "The payload was empty or larger than the gateway accepts."
        case 8: sentence = "The device token is not valid for this gateway; stop sending to it."
        case 10: sentence = "The gateway is shutting down; the named notification was the last one accepted."
        case 128: sentence = "The gateway could not parse the notification stream."
        case 255: sentence = "The gateway reported an unknown error; resend on a new connection."
        default: sentence = "The gateway reported an unrecognised status."
        }
        return "\(sentence) (status \(rawValue))"
    }

    /// True when the device token itself is at fault (5 invalid token size, 8 invalid
    /// token): remove it from the provider's database rather than retrying.
    @inlinable
    public var isTokenProblem: Bool {
        rawValue == 8 || rawValue == 5
    }

    /// True when the same bytes may succeed on a new connection (1 processing error,
    /// 10 shutdown, 255 unknown). Token, payload and format problems are not retryable:
    /// sending the same frame again gets the same answer.
    ///
    /// For ``shutdown`` it is the notifications *after* the named one that are resent;
    /// the named one itself was accepted.
    @inlinable
    public var isRetryable: Bool {
        rawValue == 1 || rawValue == 10 || rawValue == 255
    }
}
