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
    var authorization: [UInt8] = [] {
        didSet { authorizationVersion &+= 1 }
    }
    /// Tells the authorization's values apart in a run's key.
    private var authorizationVersion: UInt64 = 0
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
    ///
    /// The fields that repeat come in two runs, each with a key that stands for its
    /// contents (`HeaderFields.beginRun`), so that the encoder writes a run again as it
    /// wrote it last: the pseudo-header fields (but a device's `:path`), then the fixed
    /// regular ones. What varies follows each run.
    mutating func make(for record: RequestRecord, position: SourcePosition, source: SourceID) {
        fields.removeAll()
        // A broadcast to the sender's own bundle id has a fixed path; to a line's own, not.
        let fixedPath = record.isBroadcast && record.topic == nil
        fields.beginRun(slot: 0, key: fixedPath ? 1 : 0)
        fields.add(":method", "POST")
        fields.add(":scheme", "https")
        authority.withUnsafeBytes { fields.add(":authority", $0) }
        if fixedPath { broadcastPath.withUnsafeBytes { fields.add(":path", $0) } }
        fields.endRun()
        var used = fixedPath ? 0 : addPath(of: record)
        addFixedFields(of: record)
        if record.isBroadcast {
            // Its bundle id is in the path: no topic (Apple refuses one).
            fields.addUnique("apns-channel-id", record.channelID)
            used = addID("apns-request-id", for: record, position: position, source: source, at: used)
        } else {
            if let topic = record.topic { fields.add("apns-topic", topic) }
            used = addID("apns-id", for: record, position: position, source: source, at: used)
        }
        if let expiry = record.expiry, expiry != 0 {
            let count = Self.writeDecimal(expiry, into: UnsafeMutableRawBufferPointer(rebasing: values[used...]))
            fields.addUnique("apns-expiration", UnsafeRawBufferPointer(rebasing: values[used..<used + count]))
        }
        if let collapse = record.collapseID { fields.addUnique("apns-collapse-id", collapse) }
    }

    /// Adds the `:path` that is not fixed, written at the start of `values`: a device's, or
    /// a broadcast's to a line's own bundle id. Returns where it ends.
    private mutating func addPath(of record: RequestRecord) -> Int {
        if record.isBroadcast, let bundleID = record.topic {
            let prefix = APNsRequestHeader.broadcastPathPrefix
            let end = prefix.utf8CodeUnitCount + bundleID.count
            values.copyMemory(from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
            UnsafeMutableRawBufferPointer(rebasing: values[prefix.utf8CodeUnitCount..<end]).copyMemory(from: bundleID)
            fields.add(":path", UnsafeRawBufferPointer(rebasing: values[..<end]))
            return end
        }
        let prefix = APNsRequestHeader.devicePathPrefix
        let end = prefix.utf8CodeUnitCount + 2 * DeviceToken.byteCount
        values.copyMemory(from: UnsafeRawBufferPointer(start: prefix.utf8Start, count: prefix.utf8CodeUnitCount))
        record.token.writeHex(into: UnsafeMutableRawBufferPointer(rebasing: values[prefix.utf8CodeUnitCount..<end]))
        fields.addUnique(":path", UnsafeRawBufferPointer(rebasing: values[..<end]))
        return end
    }

    /// The run of regular fields that repeat: the authorization, the sender's topic (a
    /// line's own follows the run), the push type, an expiration of 0 and the priority.
    private mutating func addFixedFields(of record: RequestRecord) {
        let pushType = record.isBroadcast ? APNsPushType.liveactivity : record.pushType
        let fixedTopic = !record.isBroadcast && record.topic == nil && !topics[Int(pushType.rawValue)].isEmpty
        let priority: (code: UInt64, text: StaticString)? = switch record.priority {
        case 10?: (1, "10")
        case 5?: (2, "5")
        case 1?: (3, "1")
        default: nil
        }
        fields.beginRun(slot: 1, key: authorizationVersion << 16 | UInt64(pushType.rawValue) << 8 | (priority?.code ?? 0) << 4
                            | (record.expiry == 0 ? 4 : 0) | (fixedTopic ? 2 : 0))
        if !authorization.isEmpty { authorization.withUnsafeBytes { fields.add("authorization", $0) } }
        if fixedTopic { topics[Int(pushType.rawValue)].withUnsafeBytes { fields.add("apns-topic", $0) } }
        pushTypeNames[Int(pushType.rawValue)].withUnsafeBytes { fields.add("apns-push-type", $0) }
        // Every broadcast to a channel that stores nothing says 0: indexed, it costs both
        // ends one byte after the first request.
        if record.expiry == 0 { fields.add("apns-expiration", "0") }
        if let priority { fields.add("apns-priority", priority.text) }
        fields.endRun()
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
