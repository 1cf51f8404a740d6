import SalvoWire
import Testing
@testable import SalvoEngine

/// The answer policy, row by row of the outcome table (SalvoEngine.docc/HTTP2Outcomes.md):
/// every status and reason Apple documents, what it means for the notification, its
/// connection and the run, with the retry limits.
@Suite struct AnswerPolicyTests {
    static let policy = AnswerPolicy(throttleRetries: 5, serverErrorRetries: 3)

    static func decide(_ status: Int, _ reason: String = "", timestamp: Int64? = nil, throttled: UInt8 = 0,
                       serverErrors: UInt8 = 0, anyAccepted: Bool = true) -> AnswerPolicy.Decision {
        var attempts = Attempts()
        attempts.throttled = throttled
        attempts.serverErrors = serverErrors
        return policy.decide(status: status, reason: reason, timestamp: timestamp, attempts: attempts, anyAccepted: anyAccepted)
    }

    @Test func twoHundredIsAccepted() {
        #expect(Self.decide(200) == .accept)
    }

    /// 410 and the 4xx that fault the notification: rejected with Apple's reason, 410 with
    /// since when the token is gone.
    @Test(arguments: [
        (410, "Unregistered", Int64(1_764_000_000_000)), (410, "ExpiredToken", 1_764_000_000_000),
        (400, "BadDeviceToken", nil), (400, "DeviceTokenNotForTopic", nil), (400, "BadTopic", nil),
        (400, "TopicDisallowed", nil), (400, "PayloadEmpty", nil), (400, "BadExpirationDate", nil),
        (400, "InvalidPushType", nil), (404, "BadPath", nil), (405, "MethodNotAllowed", nil), (413, "PayloadTooLarge", nil),
    ] as [(Int, String, Int64?)])
    func theNotificationsFaultsAreRejectedWithTheirReason(status: Int, reason: String, timestamp: Int64?) {
        #expect(Self.decide(status, reason, timestamp: timestamp)
                == .reject(.http(status: status, reason: reason, timestamp: timestamp)))
    }

    @Test func tooManyRequestsIsRetriedAfterABackoffThenFailsAsThrottled() {
        #expect(Self.decide(429, "TooManyRequests") == .retryAfterBackoff(attempt: 1))
        #expect(Self.decide(429, "TooManyRequests", throttled: 4) == .retryAfterBackoff(attempt: 5))
        #expect(Self.decide(429, "TooManyRequests", throttled: 5) == .fail(.throttled))
    }

    @Test func anInternalServerErrorIsRetriedAtOnceThenFailsAsServerError() {
        #expect(Self.decide(500, "InternalServerError") == .retryNow)
        #expect(Self.decide(502) == .retryNow, "any other 5xx as 500")
        #expect(Self.decide(500, "InternalServerError", serverErrors: 3) == .fail(.serverError))
    }

    @Test(arguments: ["ServiceUnavailable", "Shutdown"])
    func aServiceUnavailableRetiresTheConnectionAndIsRetriedElsewhere(reason: String) {
        #expect(Self.decide(503, reason) == .retryElsewhere(.http(status: 503, reason: reason, timestamp: nil)))
        #expect(Self.decide(503, reason, serverErrors: 3) == .fail(.serverError))
    }

    @Test func anExpiredProviderTokenIsTheSignersToRenew() {
        #expect(Self.decide(403, "ExpiredProviderToken") == .renewToken)
    }

    @Test(arguments: ["InvalidProviderToken", "MissingProviderToken", "BadCertificate", "BadCertificateEnvironment",
                      "Forbidden", "UnrelatedKeyIdInToken", "BadEnvironmentKeyIdInToken", "BadEnvironmentKeyInToken"])
    func anyOther403IsACredentialsFault(reason: String) {
        #expect(Self.decide(403, reason) == .credentialsFault(.refused(.http(status: 403, reason: reason, timestamp: nil))))
    }

    /// Refused before anything was accepted: another process's token is the team's, and
    /// retrying would wait out 20 minutes. After: a few retries, then the fault.
    @Test func tooManyProviderTokenUpdatesStopsAtOnceBeforeAnyAcceptanceElseAfterItsRetries() {
        #expect(Self.decide(429, "TooManyProviderTokenUpdates", anyAccepted: false)
                == .credentialsFault(.tokenUpdatesRefused(beforeAnyAcceptance: true)))
        #expect(Self.decide(429, "TooManyProviderTokenUpdates") == .retryAfterBackoff(attempt: 1))
        #expect(Self.decide(429, "TooManyProviderTokenUpdates", throttled: 5)
                == .credentialsFault(.tokenUpdatesRefused(beforeAnyAcceptance: false)))
    }

    @Test func anErrorWithoutAReasonIsRejectedByItsStatus() {
        #expect(Self.decide(400) == .reject(.http(status: 400, reason: "", timestamp: nil)))
    }
}
