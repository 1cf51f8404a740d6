import SalvoEngine
import SalvoWire

/// Why a notification's JSON was refused, in words for whoever wrote it.
public struct NotificationLineError: Error, Sendable, Hashable, CustomStringConvertible {
    /// What is wrong, naming the key (`"payload" must be a JSON object, not an array`).
    public var reason: String

    public init(reason: String) { self.reason = reason }

    public var description: String { reason }
}

/// Reads one notification written as a JSON object, by the rules of a campaign file's JSONL
/// line (`CampaignSource.jsonl` lists them): what `CampaignReader` reads each line with, and
/// `salvo serve` each notification of a request, so that both take and refuse the same.
///
/// Good lines allocate nothing: the payload is minified into the parser's own storage and
/// escaped request strings are decoded into its scratch space, both sized once for the
/// longest value a good line can hold.
public final class NotificationLineParser {
    /// The protocol lines are read for: the payload limits, the priorities, whether the
    /// HTTP/2 request fields are read.
    public let campaignProtocol: CampaignProtocol
    /// The largest payload a line may hold after minifying (5120 for HTTP/2, voip's).
    public var maximumPayloadLength: Int { payloadStorage.count }

    private let payloadStorage: UnsafeMutableRawBufferPointer
    /// Where a line's escaped request strings are decoded (see `Scratch`); empty for the
    /// binary protocol, which reads none.
    private let scratch: UnsafeMutableRawBufferPointer
    /// Holds the request fields a line's notification points to (for HTTP/2, when the
    /// line sets any).
    private let requestFields: UnsafeMutablePointer<RequestFields>

    /// The parts of `scratch`, each as large as the longest value it must hold: decoding
    /// never needs more, and a longer value is a bad line whatever it holds.
    private enum Scratch {
        /// An apns-topic: at most 255 bytes.
        static let topic = 0..<topicLimit
        /// An apns-collapse-id: at most 64 bytes.
        static let collapseID = topic.upperBound..<(topic.upperBound + APNsRequestHeader.collapseIdLimit)
        /// A push type name or an apns-id, each turned into a value before the next is read:
        /// 36 bytes, the length of a UUID, longer than any push type name.
        static let word = collapseID.upperBound..<(collapseID.upperBound + APNsID.textLength)
        /// A broadcast's channel id.
        static let channelID = word.upperBound..<(word.upperBound + BroadcastRules.channelIDLimit)
        static let size = channelID.upperBound

        static let topicLimit = 255
    }

    /// A parser for lines read for `campaignProtocol`.
    public init(for campaignProtocol: CampaignProtocol) {
        self.campaignProtocol = campaignProtocol
        payloadStorage = .allocate(byteCount: campaignProtocol.largestPayloadLength, alignment: 16)
        let readsRequestFields = if case .http2 = campaignProtocol { true } else { false }
        scratch = .allocate(byteCount: readsRequestFields ? Scratch.size : 0, alignment: 1)
        requestFields = .allocate(capacity: 1)
        requestFields.initialize(to: RequestFields())
    }

    deinit {
        payloadStorage.deallocate()
        scratch.deallocate()
        requestFields.deallocate()
    }

    /// The notification `line` holds, found at `position` of its source, and its `id` (any
    /// JSON value, as written; nil when absent or null); nil for a blank line.
    ///
    /// The notification's payload and request, and the id, point into the parser's storage
    /// and into `line`: valid until the next call, and while `line` is.
    ///
    /// - Throws: `NotificationLineError`, which says what is wrong with the line.
    public func parse(_ line: UnsafeRawBufferPointer, at position: SourcePosition)
        throws(NotificationLineError) -> (notification: SourceNotification, id: UnsafeRawBufferPointer?)?
    {
        guard Self.firstNonBlank(line) != nil else { return nil }
        // Read for HTTP/2: the push type the line is sent as, which sets its payload limit
        // and its priorities. Nil for the binary protocol.
        let defaultPushType: APNsPushType? = if case .http2(let type) = campaignProtocol { type } else { nil }
        let fields: JSONLineFields
        do throws(JSONScanError) {
            fields = try JSONLineFields(scanning: line, requestFields: defaultPushType != nil)
        } catch {
            throw NotificationLineError(reason: error.description)
        }
        if let duplicate = fields.duplicateKey { throw NotificationLineError(reason: "\"\(duplicate)\" is given more than once") }

        var request = RequestFields()
        let token: DeviceToken
        if let channelMember = fields.channelID, channelMember.kind != .null {
            guard defaultPushType != nil else {
                throw NotificationLineError(reason: "\"channel_id\" makes a broadcast, which only the HTTP/2 provider API has (--protocol h2)")
            }
            if fields.token.map({ $0.kind != .null }) ?? false {
                throw NotificationLineError(reason: "give \"token\" (a device) or \"channel_id\" (a broadcast), not both")
            }
            request.channelID = try channelIDField(channelMember, in: line)
            token = Self.broadcastToken
        } else {
            guard let tokenMember = fields.token else { throw NotificationLineError(reason: "missing \"token\" (or \"channel_id\" for a broadcast)") }
            token = try Self.token(tokenMember, in: line)
        }

        var pushType: APNsPushType?
        if let defaultPushType {
            request.pushType = try pushTypeField(fields.pushType, in: line)
            pushType = request.channelID != nil ? .liveactivity : request.pushType ?? defaultPushType
            if request.channelID != nil, let named = request.pushType, named != .liveactivity {
                throw NotificationLineError(reason: "a broadcast updates a Live Activity: \"push_type\" must be liveactivity (or absent), not \(named)")
            }
        }

        guard let payloadMember = fields.payload, payloadMember.kind != .null else {
            throw NotificationLineError(reason: "missing \"payload\"")
        }
        guard payloadMember.kind == .object else {
            throw NotificationLineError(reason: "\"payload\" must be a JSON object, not \(payloadMember.kind.phrase)")
        }
        let payloadLimit = request.channelID != nil ? BroadcastRules.payloadLimit
            : pushType?.payloadLimit ?? maximumPayloadLength
        let payloadRoom = UnsafeMutableRawBufferPointer(rebasing: payloadStorage[..<payloadLimit])
        guard let payloadLength = JSONScanner.minify(line, range: payloadMember.valueRange, into: payloadRoom) else {
            let length = JSONScanner.minifiedCount(line, range: payloadMember.valueRange)
            let limit = request.channelID != nil ? "the limit for a broadcast is \(payloadLimit)"
                : pushType.map { "the limit for \($0) is \(payloadLimit)" } ?? "the limit is \(payloadLimit)"
            throw NotificationLineError(reason: "payload is \(length) bytes; \(limit)")
        }

        let expiry = try expiryField(fields, in: line)
        let priority = try priorityField(fields.priority, pushType: pushType, in: line)
        if let pushType {
            request.topic = try topicField(fields.topic, in: line)
            if request.channelID != nil {
                try Self.checkBroadcast(topic: request.topic, collapseID: fields.collapseID)
            } else if let topic = request.topic {
                try Self.checkSuffix(of: topic, for: pushType, named: request.pushType != nil)
            }
            request.collapseID = try collapseIDField(fields.collapseID, in: line)
            request.apnsID = try apnsIDField(fields.apnsID, in: line)
        }
        requestFields.pointee = request
        let notification = SourceNotification(
            token: token, payload: UnsafeRawBufferPointer(rebasing: payloadStorage[..<payloadLength]),
            expiry: expiry, priority: priority, position: position,
            request: request.isEmpty ? nil : UnsafePointer(requestFields))
        return (notification, fields.id.flatMap { $0.kind == .null ? nil : $0.value(in: line) })
    }

    private static func token(_ member: JSONMember, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> DeviceToken {
        guard member.kind == .string else {
            throw NotificationLineError(reason: "\"token\" must be a string of 64 hex characters, not \(member.kind.phrase)")
        }
        do throws(DeviceTokenError) {
            if let plain = JSONScanner.plainString(line, range: member.valueRange) {
                return try DeviceToken(hex: plain)
            }
            // Escapes in a hex token are odd but legal JSON; decoding allocates, which is
            // fine off the common path. The scanner already validated the string.
            let decoded = (try? JSONScanner.string(line, range: member.valueRange)) ?? ""
            return try DeviceToken(hex: decoded)
        } catch {
            throw NotificationLineError(reason: error.description)
        }
    }

    /// `expiry`, or `expiration` (its HTTP/2 name), when one of them is given.
    private func expiryField(_ fields: JSONLineFields, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> UInt32? {
        let expiry = fields.expiry.flatMap { $0.kind == .null ? nil : $0 }
        let expiration = fields.expiration.flatMap { $0.kind == .null ? nil : $0 }
        if expiry != nil, expiration != nil {
            throw NotificationLineError(reason: "\"expiry\" and \"expiration\" are the same field; give one of them")
        }
        guard let member = expiry ?? expiration else { return nil }
        guard let value = Self.integer(member, in: line), let fitting = UInt32(exactly: value) else {
            let key = expiry != nil ? "expiry" : "expiration"
            throw NotificationLineError(reason:
                "\"\(key)\" must be an integer from 0 to \(UInt32.max) (UNIX seconds), not \(Self.excerpt(member, in: line))")
        }
        return fitting
    }

    /// `priority`: 5 or 10 for the binary protocol; 10, 5 or 1 for HTTP/2 (`pushType` set),
    /// and 5 for a background push, which APNs refuses at any other priority.
    private func priorityField(_ member: JSONMember?, pushType: APNsPushType?, in line: UnsafeRawBufferPointer)
        throws(NotificationLineError) -> UInt8?
    {
        guard let member, member.kind != .null else { return nil }
        let value = Self.integer(member, in: line)
        guard let pushType else {
            guard let value, value == 5 || value == 10 else {
                throw NotificationLineError(reason: "\"priority\" must be 5 or 10, not \(Self.excerpt(member, in: line))")
            }
            return UInt8(value)
        }
        guard let value, value == 10 || value == 5 || value == 1 else {
            throw NotificationLineError(reason: "\"priority\" must be 10, 5 or 1, not \(Self.excerpt(member, in: line))")
        }
        if pushType == .background, value != 5 {
            throw NotificationLineError(reason: "\"priority\" must be 5 for a background push, not \(value)")
        }
        return UInt8(value)
    }

    private func pushTypeField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> APNsPushType? {
        guard let member, member.kind != .null else { return nil }
        if let name = try text(member, in: line, scratch: Scratch.word), let type = Self.pushType(named: name) {
            return type
        }
        let names = APNsPushType.allCases.map(\.name).joined(separator: ", ")
        throw NotificationLineError(reason: "\"push_type\" must be one of \(names); not \(Self.excerpt(member, in: line))")
    }

    /// `topic`: the whole apns-topic, checked as APNs checks it (see `isTopic`).
    private func topicField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> UnsafeRawBufferPointer? {
        guard let member, member.kind != .null else { return nil }
        guard member.kind == .string else {
            throw NotificationLineError(reason: "\"topic\" must be a string, not \(member.kind.phrase)")
        }
        guard let topic = try text(member, in: line, scratch: Scratch.topic) else {
            throw NotificationLineError(reason: "\"topic\" is \(try Self.decodedLength(member, in: line)) bytes; the limit is \(Scratch.topicLimit)")
        }
        guard !topic.isEmpty else { throw NotificationLineError(reason: "\"topic\" is empty") }
        guard Self.isTopic(topic) else {
            throw NotificationLineError(reason:
                "\"topic\" must be a bundle id: dot-separated parts of letters, digits, '-' and '_'; not \(Self.excerpt(member, in: line))")
        }
        return topic
    }

    /// A line's own topic is the whole apns-topic, so it must carry its push type's suffix
    /// and no other type's, as APNs requires (it answers 400 InvalidPushType otherwise):
    /// refused here, before it is sent, saying which suffix. `named`: the line gives its
    /// push type (else it is the default).
    private static func checkSuffix(of topic: UnsafeRawBufferPointer, for pushType: APNsPushType, named: Bool)
        throws(NotificationLineError)
    {
        let owner = APNsPushType.owningSuffix(of: topic)
        if let suffix = pushType.topicSuffix {
            guard owner != pushType else { return }
            throw NotificationLineError(reason: "\"topic\" \(String(decoding: topic, as: UTF8.self)) does not end in \"\(suffix)\": a "
                              + "\(pushType) push goes to the app's bundle id followed by \"\(suffix)\"")
        }
        guard let owner else { return }
        let whose = named ? "the line's \"push_type\" is \(pushType)" : "the line names no \"push_type\" (the default is \(pushType))"
        throw NotificationLineError(reason: "\"topic\" \(String(decoding: topic, as: UTF8.self)) ends in \"\(owner.topicSuffix!)\", the suffix of "
                          + "\(owner) pushes, but \(whose): give \"push_type\": \"\(owner)\", or the bare bundle id")
    }

    /// The token of a broadcast's notification: none (its target is its channel).
    private static let broadcastToken = [UInt8](repeating: 0, count: 32).withUnsafeBytes { try! DeviceToken(bytes: $0) }

    /// `channel_id`: a broadcast channel's id as Apple made it, base64.
    private func channelIDField(_ member: JSONMember, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> UnsafeRawBufferPointer {
        guard member.kind == .string else {
            throw NotificationLineError(reason: "\"channel_id\" must be a string (the channel's base64 id), not \(member.kind.phrase)")
        }
        guard let id = try text(member, in: line, scratch: Scratch.channelID), BroadcastRules.isChannelID(id) else {
            throw NotificationLineError(reason: "\"channel_id\" must be 1 to \(BroadcastRules.channelIDLimit) base64 characters, as "
                              + "Apple made the channel's id; not \(Self.excerpt(member, in: line))")
        }
        return id
    }

    /// A broadcast's path carries the bare bundle id, and it has no collapse id.
    private static func checkBroadcast(topic: UnsafeRawBufferPointer?, collapseID: JSONMember?) throws(NotificationLineError) {
        if let collapseID, collapseID.kind != .null {
            throw NotificationLineError(reason: "\"collapse_id\" does not apply to a broadcast (\"channel_id\")")
        }
        if let topic, let owner = APNsPushType.owningSuffix(of: topic) {
            throw NotificationLineError(reason: "a broadcast's \"topic\" is the bare bundle id, without \"\(owner.topicSuffix!)\"")
        }
    }

    /// `collapse_id`: at most 64 bytes, and a valid HTTP/2 header value.
    private func collapseIDField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> UnsafeRawBufferPointer? {
        guard let member, member.kind != .null else { return nil }
        guard member.kind == .string else {
            throw NotificationLineError(reason: "\"collapse_id\" must be a string, not \(member.kind.phrase)")
        }
        guard let id = try text(member, in: line, scratch: Scratch.collapseID) else {
            throw NotificationLineError(reason:
                "\"collapse_id\" is \(try Self.decodedLength(member, in: line)) bytes; the limit is \(APNsRequestHeader.collapseIdLimit)")
        }
        guard !id.isEmpty else { throw NotificationLineError(reason: "\"collapse_id\" is empty") }
        // Escapes can make what an HTTP/2 field value must not hold (RFC 9113, 8.2.1); the
        // gateway would reset the stream, so the line is refused here, saying why.
        for index in 0..<id.count {
            let byte = id[index]
            if byte == 0x00 || byte == 0x0A || byte == 0x0D {
                throw NotificationLineError(reason: "\"collapse_id\" must not contain NUL, CR or LF (an HTTP/2 header value cannot)")
            }
        }
        if Self.isSpaceOrTab(id[0]) || Self.isSpaceOrTab(id[id.count - 1]) {
            throw NotificationLineError(reason: "\"collapse_id\" must not start or end with a space or tab (an HTTP/2 header value cannot)")
        }
        return id
    }

    private func apnsIDField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> APNsID? {
        guard let member, member.kind != .null else { return nil }
        if let text = try text(member, in: line, scratch: Scratch.word), let id = APNsID(text: text) { return id }
        throw NotificationLineError(reason: "\"apns_id\" must be a UUID (8-4-4-4-12 hex digits); not \(Self.excerpt(member, in: line))")
    }

    /// A string member's text: where it lies in the line when it has no escapes, else
    /// decoded into `scratch[part]`. Nil when it does not fit that part (or is no string).
    private func text(_ member: JSONMember, in line: UnsafeRawBufferPointer, scratch part: Range<Int>)
        throws(NotificationLineError) -> UnsafeRawBufferPointer?
    {
        guard member.kind == .string else { return nil }
        if let plain = JSONScanner.plainString(line, range: member.valueRange) {
            return plain.count <= part.count ? plain : nil
        }
        let room = UnsafeMutableRawBufferPointer(rebasing: scratch[part])
        let length: Int
        do throws(JSONScanError) {
            length = try JSONScanner.decodeString(line, range: member.valueRange, into: room)
        } catch {
            throw NotificationLineError(reason: error.description)  // the scanner validated the line: not expected
        }
        return length <= room.count ? UnsafeRawBufferPointer(rebasing: room[..<length]) : nil
    }

    /// A string member's length after decoding, for an error message.
    private static func decodedLength(_ member: JSONMember, in line: UnsafeRawBufferPointer) throws(NotificationLineError) -> Int {
        do throws(JSONScanError) {
            return try JSONScanner.decodeString(line, range: member.valueRange, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
        } catch {
            throw NotificationLineError(reason: error.description)
        }
    }

    /// The push type named exactly `name`. A loop over raw values rather than
    /// `APNsPushType(name:)`, which allocates per call in debug builds (its `allCases`
    /// array among others): good lines allocate nothing in any build.
    private static func pushType(named name: UnsafeRawBufferPointer) -> APNsPushType? {
        var raw: UInt8 = 0
        while let type = APNsPushType(rawValue: raw) {
            if type.name.utf8.elementsEqual(name) { return type }
            raw += 1
        }
        return nil
    }

    /// Whether `topic` is an apns-topic as the gateway takes it: dot-separated parts, none
    /// empty, of letters, digits, `-` and `_` (the rule `checkTopic` in SalvoMock's
    /// RequestValidation applies). Its length is checked before.
    private static func isTopic(_ topic: UnsafeRawBufferPointer) -> Bool {
        var previous = UInt8(ascii: ".")
        for index in 0..<topic.count {
            let byte = topic[index]
            switch byte {
            case UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "A")...UInt8(ascii: "Z"),
                 UInt8(ascii: "0")...UInt8(ascii: "9"), UInt8(ascii: "-"), UInt8(ascii: "_"):
                break
            case UInt8(ascii: "."):
                if previous == UInt8(ascii: ".") { return false }
            default:
                return false
            }
            previous = byte
        }
        return previous != UInt8(ascii: ".")
    }

    private static func isSpaceOrTab(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 }

    /// The member's integer value, or nil when it is not an integer.
    private static func integer(_ member: JSONMember, in line: UnsafeRawBufferPointer) -> Int64? {
        guard member.kind == .number else { return nil }
        return try? JSONScanner.int64(line, range: member.valueRange)
    }

    /// A value as written, shortened for an error message.
    private static func excerpt(_ member: JSONMember, in line: UnsafeRawBufferPointer) -> String {
        let bytes = member.value(in: line)
        let limit = 40
        if bytes.count <= limit { return String(decoding: bytes, as: UTF8.self) }
        return String(decoding: bytes.prefix(limit), as: UTF8.self) + "…"
    }

    /// The first byte that is not a space, tab or CR. A plain loop rather than
    /// `firstIndex(where:)`, which allocates per element in unoptimised builds.
    static func firstNonBlank(_ line: UnsafeRawBufferPointer) -> UInt8? {
        for index in 0..<line.count {
            let byte = line[index]
            if byte != 0x20, byte != 0x09, byte != 0x0D { return byte }
        }
        return nil
    }
}

/// The members of one JSONL line that the reader understands, found in one validating pass.
private struct JSONLineFields {
    var token: JSONMember?
    var payload: JSONMember?
    var expiry: JSONMember?
    /// `expiry` by its HTTP/2 name; accepted for both protocols.
    var expiration: JSONMember?
    var priority: JSONMember?
    var id: JSONMember?
    /// The request fields, looked for only when the line is read for HTTP/2: for the
    /// binary protocol they are keys like any other the reader does not know.
    var pushType: JSONMember?
    var topic: JSONMember?
    var collapseID: JSONMember?
    var apnsID: JSONMember?
    /// A broadcast's channel; looked for whatever the protocol, so that a binary campaign
    /// is told it cannot broadcast.
    var channelID: JSONMember?
    /// The first known key that appeared twice.
    var duplicateKey: StaticString?

    init(scanning line: UnsafeRawBufferPointer, requestFields: Bool) throws(JSONScanError) {
        var members = JSONObjectMembers(line)
        while let member = try members.next() {
            if member.keyEquals("token", in: line) {
                if Self.take(member, into: &token) { noteDuplicate("token") }
            } else if member.keyEquals("payload", in: line) {
                if Self.take(member, into: &payload) { noteDuplicate("payload") }
            } else if member.keyEquals("expiry", in: line) {
                if Self.take(member, into: &expiry) { noteDuplicate("expiry") }
            } else if member.keyEquals("expiration", in: line) {
                if Self.take(member, into: &expiration) { noteDuplicate("expiration") }
            } else if member.keyEquals("priority", in: line) {
                if Self.take(member, into: &priority) { noteDuplicate("priority") }
            } else if member.keyEquals("id", in: line) {
                if Self.take(member, into: &id) { noteDuplicate("id") }
            } else if member.keyEquals("channel_id", in: line) {
                if Self.take(member, into: &channelID) { noteDuplicate("channel_id") }
            } else if !requestFields {
                continue
            } else if member.keyEquals("push_type", in: line) {
                if Self.take(member, into: &pushType) { noteDuplicate("push_type") }
            } else if member.keyEquals("topic", in: line) {
                if Self.take(member, into: &topic) { noteDuplicate("topic") }
            } else if member.keyEquals("collapse_id", in: line) {
                if Self.take(member, into: &collapseID) { noteDuplicate("collapse_id") }
            } else if member.keyEquals("apns_id", in: line) {
                if Self.take(member, into: &apnsID) { noteDuplicate("apns_id") }
            }
        }
    }

    /// Stores `member` in `slot`; true when the slot already held one (the key is repeated).
    private static func take(_ member: JSONMember, into slot: inout JSONMember?) -> Bool {
        defer { slot = member }
        return slot != nil
    }

    private mutating func noteDuplicate(_ key: StaticString) {
        if duplicateKey == nil { duplicateKey = key }
    }
}
