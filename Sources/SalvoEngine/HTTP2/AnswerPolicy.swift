import SalvoWire

/// What an answer on one stream means, decided without I/O: for its notification (taken,
/// refused for good, sent again at once, later or on another connection, failed after its
/// retries), for its connection (a 503 retires it) and for the run (refused credentials
/// stop it). Apple's statuses and reasons, and the retry limits, in one table; the
/// connection does what it says.
///
/// | answer                                   | decision                                          |
/// |------------------------------------------|---------------------------------------------------|
/// | 200                                      | accept                                            |
/// | 403 ExpiredProviderToken                 | renew the token (the signer judges), send again   |
/// | other 403                                | credentials fault: the run stops                  |
/// | 429 TooManyProviderTokenUpdates          | before any acceptance: credentials fault; after:  |
/// |                                          | send again after a backoff, then credentials fault|
/// | 429 TooManyRequests                      | send again after a backoff, then fail `throttled` |
/// | 503 (ServiceUnavailable, Shutdown)       | send again elsewhere, retire the connection, then |
/// |                                          | fail `server_error`                               |
/// | other 5xx (500 InternalServerError)      | send again at once, then fail `server_error`      |
/// | any other status (400s, 410, 413, …)     | reject with Apple's reason (410: its timestamp)   |
struct AnswerPolicy: Equatable {
    /// How many times a notification answered 429 TooManyRequests is sent again.
    var throttleRetries: Int
    /// How many times a notification answered 500 or 503 is sent again.
    var serverErrorRetries: Int

    enum Decision: Equatable {
        case accept
        case reject(Rejection)
        /// Send again after the `attempt`-th throttle backoff.
        case retryAfterBackoff(attempt: Int)
        /// Send again at once, on any connection: a 500 is the request's.
        case retryNow
        /// Send again on another connection, and retire this one: the server behind it is
        /// overloaded or going away. `rejection` says which answer it was.
        case retryElsewhere(Rejection)
        /// 403 ExpiredProviderToken: whether a newer token is due is the signer's to say.
        case renewToken
        /// Failed for good: its retries are used up.
        case fail(FailureReason)
        /// The gateway refuses the credentials, not the notification: the run stops.
        case credentialsFault(CredentialsFault)
    }

    /// Why the credentials are refused.
    enum CredentialsFault: Equatable {
        /// A 403 other than ExpiredProviderToken: a token the gateway does not take, or a
        /// certificate.
        case refused(Rejection)
        /// 429 TooManyProviderTokenUpdates: another process's token is the team's.
        case tokenUpdatesRefused(beforeAnyAcceptance: Bool)
    }

    /// The decision for an answer of `status` with Apple's `reason` (and, for 410,
    /// `timestamp`), to a notification that went through `attempts` before; `anyAccepted`:
    /// whether anything of the run was accepted yet.
    func decide(status: Int, reason: String, timestamp: Int64?, attempts: Attempts, anyAccepted: Bool) -> Decision {
        let rejection = Rejection.http(status: status, reason: reason, timestamp: timestamp)
        switch status {
        case 200:
            return .accept
        case 403 where reason == APNsReason.expiredProviderToken.name:
            return .renewToken
        case 403:
            return .credentialsFault(.refused(rejection))
        case 429 where reason == APNsReason.tooManyProviderTokenUpdates.name:
            // Before anything was accepted the gateway never took this run's token: another
            // process holds the team's, and retrying would only wait out its 20 minutes.
            // Later, ours was taken and then replaced: a few retries may see it back.
            guard anyAccepted, Int(attempts.throttled) < throttleRetries else {
                return .credentialsFault(.tokenUpdatesRefused(beforeAnyAcceptance: !anyAccepted))
            }
            return .retryAfterBackoff(attempt: Int(attempts.throttled) + 1)
        case 429:
            guard Int(attempts.throttled) < throttleRetries else { return .fail(.throttled) }
            return .retryAfterBackoff(attempt: Int(attempts.throttled) + 1)
        case 500...599:
            guard Int(attempts.serverErrors) < serverErrorRetries else { return .fail(.serverError) }
            return status == 503 ? .retryElsewhere(rejection) : .retryNow
        default:
            return .reject(rejection)
        }
    }
}
