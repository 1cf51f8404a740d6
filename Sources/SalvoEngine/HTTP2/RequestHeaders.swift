import SalvoIO
import SalvoWire

/// The header fields of a connection's requests, made from staged request records: the
/// fields that repeat (method, scheme, authority, topic, push type, authorization, a
/// broadcast's path) are indexed once per connection by the session's HPACK encoder, what
/// varies (a device's `:path`, `apns-id`, a line's expiration and collapse id, a channel
/// id) is written into a buffer that lives until the request is encoded (when it is
/// submitted). Reused request after request; nothing is allocated per request.
struct RequestHeaders: ~Copyable {
    /// The fields of the last request made by `make`, for `ClientSession.submit`.
    private(set) var fields = HeaderFields(capacity: 12)
    /// `bearer <provider token>`; empty with certificates.
    var authorization: [UInt8] = []
    private let values: UnsafeMutableRawBufferPointer
    private let authority: [UInt8]
    /// `apns-topic` per push type (the bundle id with the type's suffix); empty: none.
    private let topics: [[UInt8]]
    /// `/4/broadcasts/apps/` and the sender's bundle id: the path of its broadcasts.
    private let broadcastPath: [UInt8]
    private let pushTypeNames: [[UInt8]]
    /// Makes the `apns-id`s of notifications that name none: the same notification gets the
    /// same id each time it is sent, within a run.
    private let idSeed: UInt64

    /// - Parameters:
    ///   - authority: the gateway's host name, as `:authority`.
    ///   - topic: the bundle id, when the sender has one; a line may name its own.
    ///   - idSeed: the `apns-id`s made for notifications that name none derive from it.
    init(authority: String, topic: String?, idSeed: UInt64) {
        // The longest: a broadcast's path with a line's own bundle id, its request id and expiration.
        values = .allocate(byteCount: 512, alignment: 16)
        self.authority = Array(authority.utf8)
        topics = APNsPushType.allCases.map { type in topic.map { Array(($0 + (type.topicSuffix ?? "")).utf8) } ?? [] }
        broadcastPath = Array((APNsRequestHeader.broadcastPathPrefix.description + (topic ?? "")).utf8)
        pushTypeNames = APNsPushType.allCases.map { Array($0.name.utf8) }
        self.idSeed = idSeed
    }

    deinit { values.deallocate() }

    /// Makes `fields` for `record`, read from `position` of `source`.
    mutating func make(for record: RequestRecord, position: SourcePosition, source: SourceID) {
        fields.removeAll()
        fields.add(":method", "POST")
        fields.add(":scheme", "https")
        authority.withUnsafeBytes { fields.add(":authority", $0) }
        guard !record.isBroadcast else {
            makeBroadcast(for: record, position: position, source: source)
            return
        }
        let prefix = APNsRequestHeader.devicePathPrefix
        let pathLength = prefix.utf8CodeUnitCount + 2 * DeviceToken.byteCount
        values.copyMemory(from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
        record.token.writeHex(into: UnsafeMutableRawBufferPointer(rebasing: values[prefix.utf8CodeUnitCount..<pathLength]))
        fields.addUnique(":path", UnsafeRawBufferPointer(rebasing: values[..<pathLength]))
        if !authorization.isEmpty { authorization.withUnsafeBytes { fields.add("authorization", $0) } }
        let pushType = record.pushType
        if let topic = record.topic {
            fields.add("apns-topic", topic)
        } else if !topics[Int(pushType.rawValue)].isEmpty {
            topics[Int(pushType.rawValue)].withUnsafeBytes { fields.add("apns-topic", $0) }
        }
        pushTypeNames[Int(pushType.rawValue)].withUnsafeBytes { fields.add("apns-push-type", $0) }
        let expiryStart = addID("apns-id", for: record, position: position, source: source, at: pathLength)
        addExpiryAndPriority(of: record, at: expiryStart)
        if let collapse = record.collapseID { fields.addUnique("apns-collapse-id", collapse) }
    }

    /// A broadcast's fields: its bundle id's path, the channel, `apns-request-id` for the
    /// id, and no topic (Apple refuses one: the bundle id is in the path).
    private mutating func makeBroadcast(for record: RequestRecord, position: SourcePosition, source: SourceID) {
        var idStart = 0
        if let bundleID = record.topic {
            let prefix = APNsRequestHeader.broadcastPathPrefix
            values.copyMemory(from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
            idStart = prefix.utf8CodeUnitCount + bundleID.count
            UnsafeMutableRawBufferPointer(rebasing: values[prefix.utf8CodeUnitCount..<idStart]).copyMemory(from: bundleID)
            fields.add(":path", UnsafeRawBufferPointer(rebasing: values[..<idStart]))
        } else {
            broadcastPath.withUnsafeBytes { fields.add(":path", $0) }
        }
        if !authorization.isEmpty { authorization.withUnsafeBytes { fields.add("authorization", $0) } }
        fields.addUnique("apns-channel-id", record.channelID)
        pushTypeNames[Int(APNsPushType.liveactivity.rawValue)].withUnsafeBytes { fields.add("apns-push-type", $0) }
        let expiryStart = addID("apns-request-id", for: record, position: position, source: source, at: idStart)
        addExpiryAndPriority(of: record, at: expiryStart)
    }

    /// Adds the request's id as `name`: the record's, or one made from its position (the
    /// same each time it is sent). Written at `start` of `values`; returns where it ends.
    private mutating func addID(_ name: StaticString, for record: RequestRecord, position: SourcePosition, source: SourceID,
                                at start: Int) -> Int {
        let id = record.apnsID ?? APNsID(random: SplitMix64.draw(seed: idSeed, key: position.sequence),
                                         SplitMix64.draw(seed: idSeed ^ 0x1D, key: position.offset ^ UInt64(source) << 48))
        let end = start + APNsID.textLength
        id.write(into: UnsafeMutableRawBufferPointer(rebasing: values[start..<end]))
        fields.addUnique(name, UnsafeRawBufferPointer(rebasing: values[start..<end]))
        return end
    }

    /// Adds `apns-expiration` (written at `start` of `values`) and `apns-priority` when the
    /// record has them.
    private mutating func addExpiryAndPriority(of record: RequestRecord, at start: Int) {
        if record.expiry == 0 {
            // Every broadcast to a channel that stores nothing says 0: indexed, it costs
            // both ends one byte after the first request.
            fields.add("apns-expiration", "0")
        } else if let expiry = record.expiry {
            let count = Self.writeDecimal(expiry, into: UnsafeMutableRawBufferPointer(rebasing: values[start...]))
            fields.addUnique("apns-expiration", UnsafeRawBufferPointer(rebasing: values[start..<start + count]))
        }
        switch record.priority {
        case 10?: fields.add("apns-priority", "10")
        case 5?: fields.add("apns-priority", "5")
        case 1?: fields.add("apns-priority", "1")
        default: break
        }
    }

    /// Writes `value` in decimal at the start of `destination`; returns the digit count.
    private static func writeDecimal(_ value: UInt32, into destination: UnsafeMutableRawBufferPointer) -> Int {
        var digits = 1
        var rest = value / 10
        while rest > 0 {
            digits += 1
            rest /= 10
        }
        var remaining = value
        for place in stride(from: digits - 1, through: 0, by: -1) {
            destination[place] = UInt8(ascii: "0") + UInt8(remaining % 10)
            remaining /= 10
        }
        return digits
    }
}
