import SalvoWire

/// What the gateway answered on one stream, gathered as its frames arrive: the `:status`
/// and the start of the JSON body (`{"reason":"BadDeviceToken"}`, for 410 with a
/// `"timestamp"`), and what that means for the notification (`verdict`). A value of fixed
/// size, one per stream slot, reused: the answer path allocates nothing but for rejections.
struct StreamAnswer {
    /// The HTTP status; 0 until the response headers came.
    private(set) var status = 0
    /// The first `bodyCapacity` bytes of the body: Apple's bodies are a few dozen bytes.
    private var body: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                       UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    private var bodyCount = 0
    static let bodyCapacity = 128

    /// What an answer means for its notification.
    enum Verdict: Equatable {
        /// 200: the gateway took it.
        case accepted
        /// A refusal for good: a bad token (410, 400 BadDeviceToken), a bad request.
        case rejected(Rejection)
        /// 429 TooManyRequests (too many notifications for this device): again, later.
        case throttled(Rejection)
        /// 429 TooManyProviderTokenUpdates: the team's token came too soon after another
        /// one. Again, later, with the same token; the token's fault, not the notification's.
        case tokenUpdateRefused(Rejection)
        /// 500 InternalServerError (and any 5xx but 503): again.
        case serverError(Rejection)
        /// 503 ServiceUnavailable or Shutdown: the server behind the connection is
        /// overloaded or going away. Again, on another connection.
        case unavailable(Rejection)
        /// 403 ExpiredProviderToken: again, with a newer token.
        case expiredProviderToken
        /// Another 403 (InvalidProviderToken, MissingProviderToken, BadCertificate, …): the
        /// gateway refuses the provider's credentials, not the notification.
        case credentialsRefused(Rejection)
    }

    /// The `:status` header's value: three digits, or it is not taken.
    mutating func status(_ value: UnsafeRawBufferPointer) {
        guard value.count == 3 else { return }
        var code = 0
        for digit in value {
            guard digit &- UInt8(ascii: "0") < 10 else { return }
            code = code * 10 + Int(digit &- UInt8(ascii: "0"))
        }
        status = code
    }

    mutating func body(_ chunk: UnsafeRawBufferPointer) {
        let count = min(chunk.count, Self.bodyCapacity - bodyCount)
        guard count > 0 else { return }
        let start = bodyCount
        withUnsafeMutableBytes(of: &body) { storage in
            UnsafeMutableRawBufferPointer(rebasing: storage[start..<start + count])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: chunk[..<count]))
        }
        bodyCount += count
    }

    /// The verdict once the stream ended with a response (`status` is not 0).
    var verdict: Verdict {
        if status == 200 { return .accepted }
        let (reason, timestamp) = reasonAndTimestamp()
        let rejection = Rejection.http(status: status, reason: reason, timestamp: timestamp)
        switch status {
        case 403 where reason == APNsReason.expiredProviderToken.name: return .expiredProviderToken
        case 403: return .credentialsRefused(rejection)
        case 429 where reason == APNsReason.tooManyProviderTokenUpdates.name: return .tokenUpdateRefused(rejection)
        case 429: return .throttled(rejection)
        case 503: return .unavailable(rejection)
        case 500...599: return .serverError(rejection)
        default: return .rejected(rejection)
        }
    }

    /// The body's `reason`, empty when there is none (also GOAWAY's debug data).
    var reason: String { reasonAndTimestamp().0 }

    /// The body's `reason` (empty when there is none) and `timestamp`.
    private func reasonAndTimestamp() -> (String, Int64?) {
        withUnsafeBytes(of: body) { storage in
            let json = UnsafeRawBufferPointer(rebasing: storage[..<bodyCount])
            var reason = ""
            var timestamp: Int64?
            var members = JSONObjectMembers(json)
            while let member = try? members.next() {
                if member.keyEquals("reason", in: json), member.kind == .string {
                    reason = (try? JSONScanner.string(json, range: member.valueRange)) ?? ""
                } else if member.keyEquals("timestamp", in: json), member.kind == .number {
                    timestamp = try? JSONScanner.int64(json, range: member.valueRange)
                }
            }
            return (reason, timestamp)
        }
    }
}
