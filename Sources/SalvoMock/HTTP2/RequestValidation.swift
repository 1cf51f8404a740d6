import SalvoWire

/// One request's checks, as APNs makes them: fed each header and each body chunk as they
/// arrive, judged once at the end of the stream. Of the checks that failed, the answer is
/// the first in `precedence`, whatever order the headers came in.
///
/// Two kinds of request, told apart by their path: a device notification
/// (`/3/device/<token>`) and a broadcast (`/4/broadcasts/apps/<bundle id>`, iOS 18 Live
/// Activities). A broadcast must carry `apns-channel-id` (standard base64; the connection
/// looks it up in the channel registry and sets `registration`), `apns-push-type:
/// liveactivity` (exactly so: the mock takes no other spelling, though Apple's table writes
/// `Liveactivity`, so that a sender never relies on a tolerance Apple may not have),
/// `apns-expiration` (0 on a channel that stores nothing), and no `apns-topic` (the bundle
/// id is in the path); its payload may have 5120 bytes, and its `apns-request-id` (a
/// canonical UUID, optional) is echoed as `apns-id` is for devices.
///
/// A value type of fixed size with no references, so a connection keeps one per open
/// stream in a reused array and the per-request path allocates nothing.
struct RequestValidation {
    /// The outcome of the `authorization` header, decided by the connection (which caches
    /// verified tokens and knows the team's token history).
    enum Authorization: UInt8 {
        case absent, valid, invalid, expired, tooManyUpdates
    }

    /// Whether a broadcast's channel is in the registry, and with what policy, or that the
    /// app has no broadcast capability: set by the connection, which owns the lookup,
    /// before `verdict`.
    enum Registration: UInt8 {
        case unchecked, notRegistered, noStorage, mostRecent, featureNotEnabled
    }

    /// The order in which failed checks are reported: method, path, authentication, then
    /// (a broadcast) the app's broadcast capability, then the headers (for a broadcast:
    /// topic, channel, push type, priority, expiration, request id), then the payload. One order serves both kinds of request; the reasons
    /// of one kind never arise for the other. A broadcast's channel that is not registered
    /// (ChannelNotRegistered) ranks right after a malformed one; a nonzero expiration on a
    /// channel that stores nothing is BadExpirationDate, where a malformed one ranks.
    static let precedence: [APNsReason] = [
        .methodNotAllowed, .badPath,
        .missingProviderToken, .invalidProviderToken, .expiredProviderToken, .tooManyProviderTokenUpdates, .featureNotEnabled,
        .duplicateHeaders, .missingDeviceToken, .badDeviceToken, .missingTopic, .badTopic, .topicDisallowed,
        .missingChannelId, .badChannelId, .channelNotRegistered, .missingPushType,
        .invalidPushType, .badPriority, .badExpirationDate, .badCollapseId, .badMessageId,
        .payloadEmpty, .payloadTooLarge,
    ]

    /// The largest broadcast payload.
    static let broadcastPayloadLimit = 5120

    /// Each reason's bit in `failures` (its place in `precedence`); reasons never
    /// produced by validation have none.
    private static let bits: [UInt32] = APNsReason.allCases.map { reason in
        precedence.firstIndex(of: reason).map { 1 << UInt32($0) } ?? 0
    }

    private var failures: UInt32 = 0
    private var seen: UInt16 = 0
    private var sawTopic = false
    /// The push type whose topic suffix the topic carries, if any.
    private var topicOwner: APNsPushType?
    /// Set by the connection after judging the token.
    var authorization = Authorization.absent
    /// The device token from `:path`, once it parsed.
    private(set) var token: DeviceToken?
    private(set) var pushType: APNsPushType?
    /// `apns-id` as sent (36 bytes), once it parsed.
    private(set) var messageID: MessageID?
    private(set) var payloadLength = 0
    /// The path is a broadcast's (`/4/broadcasts/apps/<bundle id>`).
    private(set) var isBroadcast = false
    /// A broadcast's `apns-channel-id`, as far as it parsed (nil: none sent).
    private(set) var channel: ChannelID.Parsed?
    /// A broadcast's bundle id as the registry numbers it (-1: no channel ever made for
    /// it); set by the connection.
    var bundle: Int32 = -1
    /// Set by the connection from the registry for a broadcast whose channel id parsed.
    var registration = Registration.unchecked
    /// A broadcast's `apns-request-id` as sent, once it parsed.
    private(set) var requestID: MessageID?
    /// A broadcast's `apns-expiration` is all zeros.
    private var expirationIsZero = false

    init() {}

    /// Whether `header` was sent.
    private func saw(_ header: APNsRequestHeader) -> Bool { seen & 1 << UInt16(header.rawValue) != 0 }

    private static func bit(_ reason: APNsReason) -> UInt32 { bits[Int(reason.rawValue)] }

    private mutating func fail(_ reason: APNsReason) { failures |= Self.bits[Int(reason.rawValue)] }

    /// Takes one request header. `allowedTopics`, when not empty, lists the bundle ids a
    /// topic may name (before its push type's suffix).
    mutating func header(_ header: APNsRequestHeader, _ value: UnsafeRawBufferPointer, allowedTopics: [[UInt8]]) {
        let bit: UInt16 = 1 << UInt16(header.rawValue)
        if seen & bit != 0 {
            fail(.duplicateHeaders)
            return
        }
        seen |= bit
        switch header {
        case .method:
            if !("POST" as StaticString).isSpelled(by: value) { fail(.methodNotAllowed) }
        case .path:
            checkPath(value, allowedTopics: allowedTopics)
        case .authorization:
            break  // judged by the connection
        case .pushType:
            pushType = APNsPushType(name: value)
            if pushType == nil { fail(.invalidPushType) }
        case .topic:
            sawTopic = true
            checkTopic(value, allowedTopics: allowedTopics)
        case .id:
            messageID = MessageID(value)
            if messageID == nil { fail(.badMessageId) }
        case .expiration:
            if !(1...19).contains(value.count) || !value.allSatisfy(Self.isDigit) { fail(.badExpirationDate) }
            if isBroadcast { expirationIsZero = value.allSatisfy { $0 == UInt8(ascii: "0") } }
        case .priority:
            if !APNsRequestHeader.priorities.contains(where: { $0.isSpelled(by: value) }) { fail(.badPriority) }
        case .collapseId:
            if value.count > APNsRequestHeader.collapseIdLimit { fail(.badCollapseId) }
        case .channelId:
            // Devices' requests ignore it, as APNs does headers it does not use.
            if isBroadcast {
                channel = ChannelID.parse(value)
                if channel == .malformed { fail(.badChannelId) }
            }
        case .requestId:
            if isBroadcast {
                requestID = MessageID(value)
                if requestID == nil { fail(.badMessageId) }
            }
        }
    }

    /// Counts a chunk of the payload.
    mutating func body(_ chunk: UnsafeRawBufferPointer) { payloadLength += chunk.count }

    /// The reason to refuse the request, or nil when it passes. With `tokenAuthentication`,
    /// a request without a valid token, or without a topic, is refused.
    func verdict(tokenAuthentication: Bool) -> APNsReason? {
        var failures = self.failures
        if tokenAuthentication {
            switch authorization {
            case .valid: break
            case .absent: failures |= Self.bits[Int(APNsReason.missingProviderToken.rawValue)]
            case .invalid: failures |= Self.bits[Int(APNsReason.invalidProviderToken.rawValue)]
            case .expired: failures |= Self.bits[Int(APNsReason.expiredProviderToken.rawValue)]
            case .tooManyUpdates: failures |= Self.bits[Int(APNsReason.tooManyProviderTokenUpdates.rawValue)]
            }
        }
        if isBroadcast { return broadcastVerdict(failures) }
        // With a certificate APNs takes the certificate's topic when the request names none
        // (clients that send with single-topic certificates leave it out); tokens name no topic.
        if !sawTopic && tokenAuthentication { failures |= Self.bits[Int(APNsReason.missingTopic.rawValue)] }
        // A topic must carry its push type's suffix and no other type's. Without a push
        // type, APNs infers it, from the topic among other things.
        if let pushType, sawTopic, topicOwner != (pushType.topicSuffix == nil ? nil : pushType) {
            failures |= Self.bits[Int(APNsReason.invalidPushType.rawValue)]
        }
        if payloadLength == 0 { failures |= Self.bits[Int(APNsReason.payloadEmpty.rawValue)] }
        if payloadLength > (pushType ?? topicOwner ?? .alert).payloadLimit {
            failures |= Self.bits[Int(APNsReason.payloadTooLarge.rawValue)]
        }
        guard failures != 0 else { return nil }
        return Self.precedence[failures.trailingZeroBitCount]
    }

    /// A broadcast's verdict, given the failures found so far and the authentication's.
    private func broadcastVerdict(_ failures: UInt32) -> APNsReason? {
        // Any topic is one too many (the bundle id is in the path), well-formed or not.
        var failures = failures & ~Self.bit(.badTopic)
        if sawTopic { failures |= Self.bit(.topicDisallowed) }
        switch channel {
        case nil: failures |= Self.bit(.missingChannelId)
        case .malformed?: break  // failed as it came
        case .foreign?: failures |= Self.bit(.channelNotRegistered)
        case .id?:
            switch registration {
            case .unchecked, .notRegistered, .featureNotEnabled: failures |= Self.bit(.channelNotRegistered)
            case .noStorage: if saw(.expiration) && !expirationIsZero { failures |= Self.bit(.badExpirationDate) }
            case .mostRecent: break
            }
        }
        if registration == .featureNotEnabled { failures |= Self.bit(.featureNotEnabled) }
        if !saw(.pushType) {
            failures |= Self.bit(.missingPushType)
        } else if pushType != .liveactivity {
            failures |= Self.bit(.invalidPushType)
        }
        if !saw(.expiration) { failures |= Self.bit(.badExpirationDate) }
        if payloadLength == 0 { failures |= Self.bit(.payloadEmpty) }
        if payloadLength > Self.broadcastPayloadLimit { failures |= Self.bit(.payloadTooLarge) }
        guard failures != 0 else { return nil }
        return Self.precedence[failures.trailingZeroBitCount]
    }

    // MARK: Checks

    private mutating func checkPath(_ path: UnsafeRawBufferPointer, allowedTopics: [[UInt8]]) {
        let prefix = APNsRequestHeader.devicePathPrefix
        guard prefix.isSpelled(by: UnsafeRawBufferPointer(rebasing: path.prefix(prefix.utf8CodeUnitCount))) else {
            checkBroadcastPath(path, allowedTopics: allowedTopics)
            return
        }
        let hex = UnsafeRawBufferPointer(rebasing: path[prefix.utf8CodeUnitCount...])
        if hex.isEmpty {
            fail(.missingDeviceToken)
        } else if hex.count == 2 * DeviceToken.byteCount, let parsed = try? DeviceToken(hex: hex) {
            token = parsed
        } else {
            fail(.badDeviceToken)
        }
    }

    /// Not a device's path: a broadcast's, `/4/broadcasts/apps/<bundle id>`, or BadPath. A
    /// bundle id that is not one is BadPath too (the path names nothing); one that
    /// `allowedTopics` does not list, TopicDisallowed, as for a device's topic.
    private mutating func checkBroadcastPath(_ path: UnsafeRawBufferPointer, allowedTopics: [[UInt8]]) {
        guard let bundleID = Self.broadcastBundleID(path), Self.isBundleID(bundleID) else {
            fail(.badPath)
            return
        }
        isBroadcast = true
        if !allowedTopics.isEmpty, !allowedTopics.contains(where: { $0.elementsEqual(bundleID) }) {
            fail(.topicDisallowed)
        }
    }

    /// The bundle id of a broadcast's path, or nil when `path` is not one.
    static func broadcastBundleID(_ path: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer? {
        let prefix = APNsRequestHeader.broadcastPathPrefix
        guard prefix.isSpelled(by: UnsafeRawBufferPointer(rebasing: path.prefix(prefix.utf8CodeUnitCount))) else { return nil }
        return UnsafeRawBufferPointer(rebasing: path[prefix.utf8CodeUnitCount...])
    }

    /// Whether `bytes` is a bundle id: 1 to 255 bytes of letters, digits, `-`, `_` and `.`,
    /// in dot-separated parts none of which is empty.
    static func isBundleID(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var previous = UInt8(ascii: ".")
        for byte in bytes {
            let isDot = byte == UInt8(ascii: ".")
            guard isBundleCharacter(byte), !(isDot && previous == UInt8(ascii: ".")) else { return false }
            previous = byte
        }
        return (1...255).contains(bytes.count) && previous != UInt8(ascii: ".")
    }

    /// A topic is a bundle id: 1 to 255 bytes of letters, digits, `-`, `_` and `.`, in
    /// dot-separated parts none of which is empty.
    private mutating func checkTopic(_ topic: UnsafeRawBufferPointer, allowedTopics: [[UInt8]]) {
        var previous = UInt8(ascii: ".")
        for byte in topic {
            let isDot = byte == UInt8(ascii: ".")
            guard Self.isBundleCharacter(byte), !(isDot && previous == UInt8(ascii: ".")) else {
                fail(.badTopic)
                return
            }
            previous = byte
        }
        guard (1...255).contains(topic.count), previous != UInt8(ascii: ".") else {
            fail(.badTopic)
            return
        }
        topicOwner = APNsPushType.owningSuffix(of: topic)
        guard !allowedTopics.isEmpty else { return }
        let bundleID = topic.prefix(topic.count - (topicOwner?.topicSuffix?.utf8.count ?? 0))
        if !allowedTopics.contains(where: { $0.elementsEqual(bundleID) }) { fail(.topicDisallowed) }
    }

    private static func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    private static func isBundleCharacter(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
             UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"), UInt8(ascii: "."):
            true
        default: false
        }
    }
}

/// An `apns-id`: a UUID in canonical form (8-4-4-4-12 hex digits, either case), kept as
/// sent so that the response echoes it byte for byte.
struct MessageID {
    static let length = 36
    private var storage: (UInt64, UInt64, UInt64, UInt64, UInt32) = (0, 0, 0, 0, 0)

    /// Nil unless `text` is a canonical UUID (`APNsID`'s rule).
    init?(_ text: UnsafeRawBufferPointer) {
        guard APNsID(text: text) != nil else { return nil }
        withUnsafeMutableBytes(of: &storage) { $0.copyMemory(from: text) }
    }

    /// A version-4 UUID from 128 bits, in lowercase canonical form.
    init(random high: UInt64, _ low: UInt64) {
        withUnsafeMutableBytes(of: &storage) { APNsID(random: high, low).write(into: $0) }
    }

    /// Calls `body` with the 36 bytes of text.
    func withText<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        withUnsafeBytes(of: storage) { body(UnsafeRawBufferPointer(rebasing: $0[..<Self.length])) }
    }
}
