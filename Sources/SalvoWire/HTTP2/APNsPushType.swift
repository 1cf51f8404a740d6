/// The `apns-push-type` of a request, and what it asks of the topic and the payload.
public enum APNsPushType: UInt8, CaseIterable, Sendable, Hashable, CustomStringConvertible {
    /// A notification the user sees or hears: an alert, a sound, a badge.
    case alert
    /// A silent push that wakes the app to fetch content (`content-available`); always priority 5.
    case background
    /// A VoIP call (PushKit); the topic ends in `.voip`, the payload may be 5120 bytes.
    case voip
    /// An update for a watchOS complication; the topic ends in `.complication`.
    case complication
    /// A File Provider extension's change signal; the topic ends in `.pushkit.fileprovider`.
    case fileprovider
    /// A mobile device management check-in request; the topic is the MDM push topic.
    case mdm
    /// A location query for a Location Push Service extension; the topic ends in `.location-query`.
    case location
    /// A Live Activity start, update or end; the topic ends in `.push-type.liveactivity`.
    case liveactivity
    /// A Push to Talk message; the topic ends in `.voip-ptt`.
    case pushtotalk
    /// A widget reload; the topic ends in `.push-type.widgets`.
    case widgets
    /// A Control Center control reload; the topic ends in `.push-type.controls`.
    case controls

    /// The header value.
    public var name: String { nameText.description }

    /// What `apns-topic` must end with for this type (after the bundle id); nil when the
    /// topic is the bare bundle id (or, for `mdm`, the MDM push topic).
    public var topicSuffix: String? { topicSuffixText?.description }

    // The texts as static strings, which requests' bytes are matched against without
    // making a String (the mock does so for every request).
    private var nameText: StaticString {
        switch self {
        case .alert: "alert"
        case .background: "background"
        case .voip: "voip"
        case .complication: "complication"
        case .fileprovider: "fileprovider"
        case .mdm: "mdm"
        case .location: "location"
        case .liveactivity: "liveactivity"
        case .pushtotalk: "pushtotalk"
        case .widgets: "widgets"
        case .controls: "controls"
        }
    }

    private var topicSuffixText: StaticString? {
        switch self {
        case .voip: ".voip"
        case .complication: ".complication"
        case .fileprovider: ".pushkit.fileprovider"
        case .location: ".location-query"
        case .liveactivity: ".push-type.liveactivity"
        case .pushtotalk: ".voip-ptt"
        case .widgets: ".push-type.widgets"
        case .controls: ".push-type.controls"
        case .alert, .background, .mdm: nil
        }
    }

    /// The largest payload APNs takes for this type: 5120 bytes for VoIP, 4096 otherwise.
    public var payloadLimit: Int { self == .voip ? 5120 : 4096 }

    /// The type whose header value is `bytes` (exact, lowercase), if any.
    public init?(name bytes: UnsafeRawBufferPointer) {
        // The length, and where types share one the first byte, names the candidate; one
        // compare confirms. (The mock asks for every request.)
        let candidate: APNsPushType
        switch bytes.count {
        case 3: candidate = .mdm
        case 4: candidate = .voip
        case 5: candidate = .alert
        case 7: candidate = .widgets
        case 8: candidate = bytes[0] == UInt8(ascii: "l") ? .location : .controls
        case 10: candidate = bytes[0] == UInt8(ascii: "b") ? .background : .pushtotalk
        case 12:
            switch bytes[0] {
            case UInt8(ascii: "c"): candidate = .complication
            case UInt8(ascii: "f"): candidate = .fileprovider
            default: candidate = .liveactivity
            }
        default: return nil
        }
        guard candidate.nameText.isSpelled(by: bytes) else { return nil }
        self = candidate
    }

    /// The type whose topic suffix ends `topic` (after at least one byte of bundle id), if any.
    /// A loop over raw values, not `allCases`, which allocates per call in debug builds:
    /// the mock asks for every request, the campaign reader for every line with a topic.
    public static func owningSuffix(of topic: UnsafeRawBufferPointer) -> APNsPushType? {
        var raw: UInt8 = 0
        while let type = APNsPushType(rawValue: raw) {
            if type.isSuffix(of: topic) { return type }
            raw += 1
        }
        return nil
    }

    /// Whether `topic` ends in this type's suffix after at least one byte of bundle id;
    /// false for a type without one.
    public func isSuffix(of topic: UnsafeRawBufferPointer) -> Bool {
        guard let suffix = topicSuffixText, topic.count > suffix.utf8CodeUnitCount else { return false }
        return suffix.isSpelled(by: UnsafeRawBufferPointer(rebasing: topic[(topic.count - suffix.utf8CodeUnitCount)...]))
    }

    /// The header value, as `name` gives it.
    public var description: String { name }
}
