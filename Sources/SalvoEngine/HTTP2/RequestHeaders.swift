import SalvoIO
import SalvoWire

/// The header fields of a connection's requests, made from staged request records: the
/// fields that repeat (method, scheme, authority, topic, push type, authorization) are
/// indexed once per connection by the session's HPACK encoder, what varies (`:path`,
/// `apns-id`, a line's expiration and collapse id) is written into a buffer that lives
/// until the request is encoded (when it is submitted). Reused request after request;
/// nothing is allocated per request.
struct RequestHeaders: ~Copyable {
    /// The fields of the last request made by `make`, for `ClientSession.submit`.
    private(set) var fields = HeaderFields(capacity: 12)
    /// `bearer <provider token>`; empty with certificates.
    var authorization: [UInt8] = []
    private let values: UnsafeMutableRawBufferPointer
    private let authority: [UInt8]
    /// `apns-topic` per push type (the bundle id with the type's suffix); empty: none.
    private let topics: [[UInt8]]
    private let pushTypeNames: [[UInt8]]
    /// Makes the `apns-id`s of notifications that name none: the same notification gets the
    /// same id each time it is sent, within a run.
    private let idSeed: UInt64

    /// - Parameters:
    ///   - authority: the gateway's host name, as `:authority`.
    ///   - topic: the bundle id, when the sender has one; a line may name its own.
    ///   - idSeed: the `apns-id`s made for notifications that name none derive from it.
    init(authority: String, topic: String?, idSeed: UInt64) {
        values = .allocate(byteCount: 256, alignment: 16)
        self.authority = Array(authority.utf8)
        topics = APNsPushType.allCases.map { type in topic.map { Array(($0 + (type.topicSuffix ?? "")).utf8) } ?? [] }
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
        let idStart = pathLength
        let id = record.apnsID ?? APNsID(random: SplitMix64.draw(seed: idSeed, key: position.sequence),
                                         SplitMix64.draw(seed: idSeed ^ 0x1D, key: position.offset ^ UInt64(source) << 48))
        id.write(into: UnsafeMutableRawBufferPointer(rebasing: values[idStart..<idStart + APNsID.textLength]))
        fields.addUnique("apns-id", UnsafeRawBufferPointer(rebasing: values[idStart..<idStart + APNsID.textLength]))
        if let expiry = record.expiry {
            let start = idStart + APNsID.textLength
            let count = Self.writeDecimal(expiry, into: UnsafeMutableRawBufferPointer(rebasing: values[start...]))
            fields.addUnique("apns-expiration", UnsafeRawBufferPointer(rebasing: values[start..<start + count]))
        }
        switch record.priority {
        case 10?: fields.add("apns-priority", "10")
        case 5?: fields.add("apns-priority", "5")
        case 1?: fields.add("apns-priority", "1")
        default: break
        }
        if let collapse = record.collapseID { fields.addUnique("apns-collapse-id", collapse) }
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
