/// The BlackBerry Dynamics Push Channel back-end protocol ("GNP 1.0"), as the NOC and an
/// enterprise BlackBerry Proxy serve it: where requests go, the headers they carry, and the
/// result codes that come back in `X-Good-GNP-Code` next to HTTP 200.
///
/// What is confirmed and what is assumed is listed in the SalvoBlackBerry catalog
/// ("Push Channel protocol notes").
public enum GNP {
    /// The request target of `notify`: `POST`, the payload as the body.
    public static let notifyTarget = "/GNP1.0?method=notify"
    /// The request target of `checkToken`: `GET`, no body.
    public static let checkTokenTarget = "/GNP1.0?method=checkToken"
    /// The header that carries the Push Channel token.
    public static let tokenHeader = "X-Good-GNP-Token"
    /// The response header that carries the result code and its text (`402 Invalid Token`).
    public static let codeHeader = "X-Good-GNP-Code"
    /// The content type of a `notify` body.
    public static let contentType = "text/plain; charset=utf-8"
    /// The NOC's HTTPS port.
    public static let nocPort = 443
    /// A BlackBerry Proxy's plain-HTTP port in BlackBerry's samples.
    public static let proxyHTTPPort = 17080
    /// A BlackBerry Proxy's HTTPS port in BlackBerry's samples.
    public static let proxyHTTPSPort = 17433
    /// The largest payload Salvo sends, in UTF-8 bytes, unless told otherwise. Assumed (4 KiB):
    /// the public documentation that was searched gives no number.
    public static let defaultMaximumPayloadBytes = 4096
}

/// A result code of the `X-Good-GNP-Code` header: a number and its text.
public struct GNPCode: Sendable, Hashable, CustomStringConvertible {
    /// The number: 100 for success.
    public var number: Int
    /// The text after the number (`Invalid Token`); may be empty.
    public var text: String

    /// A code with this number and text.
    public init(_ number: Int, _ text: String) {
        self.number = number
        self.text = text
    }

    /// Parses a header value such as `402 Invalid Token` (leading digits, then optional text);
    /// nil when it does not start with a number.
    public init?(headerValue: some StringProtocol) {
        let trimmed = headerValue.drop { $0 == " " || $0 == "\t" }
        let digits = trimmed.prefix { $0.isASCII && $0.isNumber }
        guard !digits.isEmpty, digits.count <= 4, let number = Int(digits) else { return nil }
        self.number = number
        text = String(trimmed.dropFirst(digits.count).drop { $0 == " " || $0 == "\t" })
            .trimmingTrailing { $0 == " " || $0 == "\t" }
    }

    /// `100 OK`: the notification was accepted (or the token is valid).
    public static let ok = GNPCode(100, "OK")
    /// `402 Invalid Token`: the channel is closed or the token unknown; the token is dead.
    public static let invalidToken = GNPCode(402, "Invalid Token")
    /// `413 Message Too Large` (assumed number and text): the payload is over the NOC's limit.
    public static let messageTooLarge = GNPCode(413, "Message Too Large")
    /// `503 Service Unavailable` (assumed number and text): try again later.
    public static let serviceUnavailable = GNPCode(503, "Service Unavailable")

    /// The header value: `number text`.
    public var description: String { text.isEmpty ? "\(number)" : "\(number) \(text)" }
}

/// What a sender makes of one answer to `notify` or `checkToken`.
public enum GNPVerdict: Sendable, Hashable {
    /// Code 100: accepted (notify), or the token is valid (checkToken).
    case accepted
    /// Code 402: the token is dead; it belongs in the rejected list.
    case rejected(GNPCode)
    /// An HTTP 5xx, or a 5xx result code: the NOC cannot take it now; try again (bounded).
    case retry(reason: String)
    /// Anything else: fails with this reason, which names the code (nothing is guessed).
    case failed(reason: String)

    /// The verdict on an answer with HTTP status `status` and the parsed `X-Good-GNP-Code`
    /// header (nil when absent or unparsable).
    ///
    /// Conservative where the protocol is unknown: a 5xx of either kind is retried, and any
    /// code other than 100 and 402 fails with the code in the reason.
    public static func of(status: Int, code: GNPCode?) -> GNPVerdict {
        if (500...599).contains(status) { return .retry(reason: "http_\(status)") }
        guard status == 200 else { return .failed(reason: "http_\(status)") }
        guard let code else { return .failed(reason: "missing_gnp_code") }
        switch code.number {
        case GNPCode.ok.number: return .accepted
        case GNPCode.invalidToken.number: return .rejected(code)
        case GNPCode.messageTooLarge.number: return .failed(reason: "payload_too_large")
        case 500...599: return .retry(reason: "gnp_\(code.number)")
        default: return .failed(reason: "unknown_gnp_code_\(code.number)")
        }
    }
}

extension StringProtocol {
    fileprivate func trimmingTrailing(while drop: (Character) -> Bool) -> String {
        var text = String(self)
        while let last = text.last, drop(last) { text.removeLast() }
        return text
    }
}
