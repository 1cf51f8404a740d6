import SalvoWire

/// One channel management request, as Apple's management host
/// (`api-manage-broadcast…push.apple.com`) takes them: fed its headers and body as they
/// arrive, answered once it is complete. Pure but for the registry it acts on, so it is
/// tested without sockets; the connection adds the transport (the request id it makes
/// up when none came, the frames).
///
/// | operation | request | success |
/// |---|---|---|
/// | create | `POST /1/apps/<bundle id>/channels`, body `{"message-storage-policy": 0 or 1, "push-type": "LiveActivity"}` | 201, `apns-channel-id` |
/// | read | `GET /1/apps/<bundle id>/channels`, `apns-channel-id` | 200, `{"message-storage-policy": n, "push-type": "LiveActivity"}` |
/// | delete | `DELETE /1/apps/<bundle id>/channels`, `apns-channel-id` | 204 |
/// | list | `GET /1/apps/<bundle id>/all-channels` | 200, `{"channels": [ids]}` |
///
/// Checks, in this order (the first that fails answers): 404 BadPath (neither path, or no
/// bundle id in it); 405 MethodNotAllowed (the path's methods are above); with token
/// authentication 403 MissingProviderToken, InvalidProviderToken, ExpiredProviderToken,
/// 429 TooManyProviderTokenUpdates; 400 FeatureNotEnabled (the gateway plays an app
/// without the broadcast capability); 400 DuplicateHeaders; 403 TopicMismatch (a bundle id
/// `allowedTopics` does not list: the credential does not cover it); 400 BadMessageId (an
/// `apns-request-id` that is not a canonical UUID); then the operation's own: create, 400
/// BadRequestPayload for any fault of the body (not a JSON object, a field missing, a
/// storage policy other than the integer 0 or 1 — which reason Apple gives for that is
/// unconfirmed, and the mock picks one reason for every body fault — a push type other than
/// `LiveActivity`, or more than `bodyLimit` bytes) and 400 CannotCreateChannelConfig past
/// the registry's limit; read and delete, 400 MissingChannelId, BadChannelId (not base64),
/// ChannelNotRegistered (not this bundle id's channel). The create body's `push-type` may
/// also be spelled `liveactivity` (node-apn sends it so; whether Apple takes it is
/// unconfirmed, so the mock is tolerant here, where a sender's spelling is not its to fix).
struct ChannelRequest {
    /// What a successful request did.
    enum Operation: String, CaseIterable, Sendable {
        case create, read, delete, list
    }

    private enum Method: UInt8 {
        case get, post, delete, other
    }

    private enum Endpoint {
        case channels, allChannels
    }

    /// The most body bytes a create may carry; its body is a few dozen.
    static let bodyLimit = 4096

    private var method = Method.other
    private var path: [UInt8] = []
    private var channelID: [UInt8]?
    private var seen: UInt16 = 0
    private var duplicated = false
    private var badRequestID = false
    private var body: [UInt8] = []
    private var bodyTooLarge = false
    /// `apns-request-id` as sent, once it parsed: echoed in the answer.
    private(set) var requestID: MessageID?
    /// Set by the connection after judging the token.
    var authorization = RequestValidation.Authorization.absent

    init() {}

    /// Takes one request header.
    mutating func header(_ header: APNsRequestHeader, _ value: UnsafeRawBufferPointer) {
        let bit: UInt16 = 1 << UInt16(header.rawValue)
        if seen & bit != 0 { duplicated = true }
        seen |= bit
        switch header {
        case .method:
            method = Self.spells("GET", value) ? .get : Self.spells("POST", value) ? .post
                : Self.spells("DELETE", value) ? .delete : .other
        case .path:
            path = Array(value)
        case .channelId:
            channelID = Array(value)
        case .requestId:
            requestID = MessageID(value)
            badRequestID = requestID == nil
        case .authorization, .pushType, .topic, .id, .expiration, .priority, .collapseId:
            break  // authorization is judged by the connection; the rest mean nothing here
        }
    }

    /// Takes a chunk of the body (kept up to `bodyLimit` bytes).
    mutating func body(_ chunk: UnsafeRawBufferPointer) {
        guard !bodyTooLarge else { return }
        if body.count + chunk.count > Self.bodyLimit {
            bodyTooLarge = true
            body = []
        } else {
            body.append(contentsOf: chunk)
        }
    }

    /// Answers the request, acting on `registry` when it is valid. `allowedTopics`, when
    /// not empty, lists the bundle ids the client's credential covers; without
    /// `broadcastsEnabled`, every authenticated request is FeatureNotEnabled.
    func respond(registry: MockChannelRegistry, tokenAuthentication: Bool, allowedTopics: [[UInt8]],
                 broadcastsEnabled: Bool = true) -> ChannelResponse {
        guard let (bundleBytes, endpoint) = Self.route(path) else { return .refused(.badPath) }
        switch (endpoint, method) {
        case (.channels, .get), (.channels, .post), (.channels, .delete), (.allChannels, .get): break
        default: return .refused(.methodNotAllowed)
        }
        if tokenAuthentication {
            switch authorization {
            case .valid: break
            case .absent: return .refused(.missingProviderToken)
            case .invalid: return .refused(.invalidProviderToken)
            case .expired: return .refused(.expiredProviderToken)
            case .tooManyUpdates: return .refused(.tooManyProviderTokenUpdates)
            }
        }
        if !broadcastsEnabled { return .refused(.featureNotEnabled) }
        if duplicated { return .refused(.duplicateHeaders) }
        if !allowedTopics.isEmpty && !allowedTopics.contains(bundleBytes) { return .refused(.topicMismatch) }
        if badRequestID { return .refused(.badMessageId) }
        let bundleID = String(decoding: bundleBytes, as: UTF8.self)
        switch (endpoint, method) {
        case (.allChannels, _):
            let ids = registry.list(bundleID: bundleID).map { "\"\($0)\"" }.joined(separator: ",")
            return ChannelResponse(status: 200, body: Array(#"{"channels":[\#(ids)]}"#.utf8), operation: .list)
        case (.channels, .post):
            guard !bodyTooLarge, let policy = Self.storagePolicy(ofCreateBody: body) else { return .refused(.badRequestPayload) }
            do {
                let id = try registry.create(bundleID: bundleID, policy: policy)
                return ChannelResponse(status: 201, channelID: id, operation: .create)
            } catch {
                return .refused(.cannotCreateChannelConfig)
            }
        default:
            guard let channelID else { return .refused(.missingChannelId) }
            let parsed = channelID.withUnsafeBytes { ChannelID.parse($0) }
            guard parsed != .malformed else { return .refused(.badChannelId) }
            let text = String(decoding: channelID, as: UTF8.self)
            if method == .delete {
                guard registry.delete(text, bundleID: bundleID) else { return .refused(.channelNotRegistered) }
                return ChannelResponse(status: 204, operation: .delete)
            }
            guard let policy = registry.policy(of: text, bundleID: bundleID) else { return .refused(.channelNotRegistered) }
            let body = #"{"message-storage-policy":\#(policy.rawValue),"push-type":"LiveActivity"}"#
            return ChannelResponse(status: 200, body: Array(body.utf8), operation: .read)
        }
    }

    // MARK: Parsing

    private static func spells(_ word: StaticString, _ bytes: UnsafeRawBufferPointer) -> Bool { word.isSpelled(by: bytes) }

    /// The bundle id and endpoint of `/1/apps/<bundle id>/channels` or `…/all-channels`
    /// (a query string, if any, ignored); nil for any other path.
    private static func route(_ path: [UInt8]) -> ([UInt8], Endpoint)? {
        let prefix = Array("/1/apps/".utf8)
        let path = path.prefix { $0 != UInt8(ascii: "?") }
        guard path.starts(with: prefix), let slash = path.lastIndex(of: UInt8(ascii: "/")), slash >= prefix.count else {
            return nil
        }
        let bundle = Array(path[prefix.count..<slash])
        let endpoint: Endpoint
        switch String(decoding: path[(slash + 1)...], as: UTF8.self) {
        case "channels": endpoint = .channels
        case "all-channels": endpoint = .allChannels
        default: return nil
        }
        guard bundle.withUnsafeBytes({ RequestValidation.isBundleID($0) }) else { return nil }
        return (bundle, endpoint)
    }

    /// The storage policy a create body asks for, or nil when the body is not
    /// `{"message-storage-policy": 0 or 1, "push-type": "LiveActivity"}` (other fields
    /// allowed; `liveactivity` taken too).
    static func storagePolicy(ofCreateBody body: [UInt8]) -> MockChannelRegistry.StoragePolicy? {
        guard let fields = FlatJSON.object(body),
              case .integer(let raw)? = fields["message-storage-policy"],
              let policy = MockChannelRegistry.StoragePolicy(rawValue: raw),
              case .string(let pushType)? = fields["push-type"],
              pushType == "LiveActivity" || pushType == "liveactivity"
        else { return nil }
        return policy
    }
}

/// A channel management answer: its status, the reason of an error, the new channel's id
/// (create), its JSON body (read, list, errors), and the operation it counts as.
struct ChannelResponse: Equatable {
    var status: Int
    var reason: APNsReason?
    var channelID: String?
    var body: [UInt8] = []
    var operation: ChannelRequest.Operation?

    /// An error answer: Apple's status for `reason`, and `{"reason":…}`.
    static func refused(_ reason: APNsReason) -> ChannelResponse {
        ChannelResponse(status: reason.status, reason: reason, body: reason.body)
    }
}

/// Just enough JSON for a create body: one object whose values are strings, integers or
/// literals (nested values make it unreadable, as do fractions). No Foundation in this
/// module, and the body is a few dozen bytes.
enum FlatJSON {
    enum Value: Equatable {
        case string(String)
        case integer(Int)
        case literal
    }

    /// The object's fields (the last of a repeated key wins), or nil when `bytes` is not
    /// such an object.
    static func object(_ bytes: [UInt8]) -> [String: Value]? {
        var scanner = Scanner(bytes: bytes)
        guard scanner.take(UInt8(ascii: "{")) else { return nil }
        var fields: [String: Value] = [:]
        if !scanner.take(UInt8(ascii: "}")) {
            repeat {
                guard let key = scanner.string(), scanner.take(UInt8(ascii: ":")), let value = scanner.value() else { return nil }
                fields[key] = value
            } while scanner.take(UInt8(ascii: ","))
            guard scanner.take(UInt8(ascii: "}")) else { return nil }
        }
        scanner.skipSpace()
        return scanner.atEnd ? fields : nil
    }

    private struct Scanner {
        let bytes: [UInt8]
        var index = 0

        var atEnd: Bool { index == bytes.count }

        mutating func skipSpace() {
            while index < bytes.count, [0x20, 0x09, 0x0A, 0x0D].contains(bytes[index]) { index += 1 }
        }

        /// Takes `byte` after any space.
        mutating func take(_ byte: UInt8) -> Bool {
            skipSpace()
            guard index < bytes.count, bytes[index] == byte else { return false }
            index += 1
            return true
        }

        mutating func string() -> String? {
            guard take(UInt8(ascii: "\"")) else { return nil }
            var text: [UInt8] = []
            while index < bytes.count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: "\""): return String(decoding: text, as: UTF8.self)
                case UInt8(ascii: "\\"):
                    guard index < bytes.count else { return nil }
                    let escaped = bytes[index]
                    index += 1
                    switch escaped {
                    case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): text.append(escaped)
                    case UInt8(ascii: "n"): text.append(0x0A)
                    case UInt8(ascii: "t"): text.append(0x09)
                    case UInt8(ascii: "r"): text.append(0x0D)
                    case UInt8(ascii: "b"): text.append(0x08)
                    case UInt8(ascii: "f"): text.append(0x0C)
                    case UInt8(ascii: "u"):
                        guard index + 4 <= bytes.count,
                              let code = UInt32(String(decoding: bytes[index..<index + 4], as: UTF8.self), radix: 16),
                              let scalar = Unicode.Scalar(code) else { return nil }
                        index += 4
                        text.append(contentsOf: Array(String(Character(scalar)).utf8))
                    default: return nil
                    }
                case 0x00..<0x20: return nil
                default: text.append(byte)
                }
            }
            return nil
        }

        mutating func value() -> Value? {
            skipSpace()
            guard index < bytes.count else { return nil }
            switch bytes[index] {
            case UInt8(ascii: "\""):
                return string().map(Value.string)
            case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
                let start = index
                if bytes[index] == UInt8(ascii: "-") { index += 1 }
                while index < bytes.count, (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(bytes[index]) { index += 1 }
                // A fraction or an exponent: not an integer.
                if index < bytes.count, [UInt8(ascii: "."), UInt8(ascii: "e"), UInt8(ascii: "E")].contains(bytes[index]) { return nil }
                return Int(String(decoding: bytes[start..<index], as: UTF8.self)).map(Value.integer)
            default:
                for literal in ["true", "false", "null"] where bytes[index...].starts(with: literal.utf8) {
                    index += literal.utf8.count
                    return .literal
                }
                return nil
            }
        }
    }
}
