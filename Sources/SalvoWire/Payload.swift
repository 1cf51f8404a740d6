/// A fixed-capacity byte buffer that payloads are built into.
///
/// Allocated once (`init`), reused for every build, freed in `deinit`: building into it
/// allocates nothing. It is a class so that one buffer can be handed around without
/// copying; it is not `Sendable` — keep each buffer on one thread.
public final class PayloadBuffer {
    /// The most bytes the buffer holds.
    public let capacity: Int
    @usableFromInline let storage: UnsafeMutableRawBufferPointer
    /// The length of the payload last built into the buffer (0 after a failed build).
    public internal(set) var count: Int = 0

    /// Allocates a buffer of `capacity` bytes; the default fits the largest APNs payload
    /// (`PayloadBuilder.http2MaximumLength`).
    public init(capacity: Int = PayloadBuilder.http2MaximumLength) {
        precondition(capacity >= 0, "PayloadBuffer capacity must not be negative")
        self.capacity = capacity
        storage = .allocate(byteCount: Swift.max(capacity, 1), alignment: 16)
    }

    deinit { storage.deallocate() }

    /// Calls `body` with the payload bytes (the first `count` bytes). The pointer is valid
    /// only inside `body`, and only until the next build.
    @inlinable
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try body(UnsafeRawBufferPointer(rebasing: storage[..<count]))
    }

    /// A copy of the payload bytes (allocates; not for the hot path).
    public var bytes: [UInt8] { withUnsafeBytes { Array($0) } }
}

@available(*, unavailable, message: "a PayloadBuffer belongs to one thread")
extension PayloadBuffer: Sendable {}

/// Why a payload could not be built.
public enum PayloadError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The payload is longer than `maximumLength` even with its alert body cut down to just
    /// "…" (or, with no alert body or one shorter than "…", as it is). `bytesOver` is how
    /// many bytes the other fields must lose for it to fit.
    case tooLong(bytesOver: Int, maximumLength: Int)
    /// A number at `key` is NaN or infinite, which JSON cannot express.
    case nonFiniteNumber(key: String)
    /// A critical alert volume outside 0.0...1.0.
    case criticalVolumeOutOfRange(Double)
    /// A custom property used a key the payload reserves (`aps`).
    case reservedKey(String)
    /// A Live Activity push lacks `key` (as named in `aps`), which its `event` needs.
    case liveActivityFieldMissing(key: String, event: PayloadBuilder.LiveActivity.Event)
    /// A Live Activity push has `key`, which only an `allowedWith` push takes, not `event`.
    case liveActivityFieldNotAllowed(key: String, event: PayloadBuilder.LiveActivity.Event,
                                     allowedWith: PayloadBuilder.LiveActivity.Event)
    /// The value at `key` must be a JSON object (`content-state`, `attributes`).
    case notAnObject(key: String)

    /// The problem and what to do about it, for error messages.
    public var description: String {
        switch self {
        case .tooLong(let over, let maximum):
            return "payload is \(over) byte\(over == 1 ? "" : "s") over the \(maximum)-byte limit even with the alert body shortened; shorten the other fields or custom properties"
        case .nonFiniteNumber(let key):
            return "\(key) is NaN or infinite; JSON numbers must be finite"
        case .criticalVolumeOutOfRange(let volume):
            return "critical sound volume \(volume) is outside 0.0...1.0"
        case .reservedKey(let key):
            return "custom property \"\(key)\" is reserved for the APNs dictionary; choose another key"
        case .liveActivityFieldMissing(let key, let event):
            return "a Live Activity \(event) needs \(key)"
        case .liveActivityFieldNotAllowed(let key, let event, let allowedWith):
            return "\(key) goes only with a Live Activity \(allowedWith), not \(event)"
        case .notAnObject(let key):
            return "\(key) must be a JSON object"
        }
    }
}

/// Builds APNs JSON payloads, with the features of Pushy's `ApnsPayloadBuilder` plus the
/// newer `aps` keys, writing straight into a `PayloadBuffer`.
///
/// The bytes are deterministic. The top-level object is `aps` first, then the custom
/// properties in the order they were first set. Inside `aps`, keys come in this order,
/// each only when set:
///
///     alert, badge, sound, content-available, mutable-content, category, thread-id,
///     target-content-id, interruption-level, relevance-score, timestamp, event,
///     content-state, stale-date, dismissal-date, attributes-type, attributes,
///     input-push-token, input-push-channel
///
/// and inside a dictionary alert:
///
///     title, subtitle, body, title-loc-key, title-loc-args, subtitle-loc-key,
///     subtitle-loc-args, loc-key, loc-args, action-loc-key, launch-image
///
/// `aps` is always written, as `{}` when nothing in it is set. The `*-loc-args` arrays are
/// written only when non-empty.
///
/// The alert is a plain string when the body is its only content (unless
/// `alwaysUseAlertDictionary`), a dictionary otherwise, and absent when nothing in it is set.
///
/// Building into a reused buffer allocates nothing: strings are copied from their UTF-8
/// storage and numbers are formatted on the stack.
public struct PayloadBuilder: Sendable {
    /// Payload limit of the binary interface since iOS 8 (commands 0, 1, 2).
    public static let binaryMaximumLength = 2048
    /// Payload limit of the original binary interface (before iOS 8).
    public static let legacyMaximumLength = 256
    /// Payload limit of the HTTP/2 interface (non-VoIP).
    public static let http2MaximumLength = 4096
    /// The name of the system's default alert sound.
    public static let defaultSound = "default"

    /// A notification sound.
    public enum Sound: Sendable, Equatable, ExpressibleByStringLiteral {
        /// A sound file in the app bundle, or `PayloadBuilder.defaultSound`; written as a string.
        case named(String)
        /// A critical alert sound: `{"critical":1,"name":…,"volume":…}`, volume in 0.0...1.0.
        case critical(name: String, volume: Double)

        /// The system's default sound.
        public static let `default` = Sound.named(PayloadBuilder.defaultSound)

        /// `"chime.aiff"`: the sound file of that name, `.named`.
        public init(stringLiteral value: String) { self = .named(value) }
    }

    /// How strongly the system presents the notification (iOS 15+).
    public enum InterruptionLevel: String, Sendable, Equatable, CaseIterable {
        /// Added to the list without lighting the screen or playing a sound.
        case passive
        /// Presented at once, lighting the screen and playing a sound if set (the default).
        case active
        /// Presented at once, and breaks through Focus.
        case timeSensitive = "time-sensitive"
        /// Presented at once, and breaks through Focus and the mute switch (an entitlement Apple grants).
        case critical
    }

    // MARK: alert

    /// `alert.body`: the message text. The one field shortened when the payload is too long.
    public var alertBody: String?
    /// `alert.title` (iOS 8.2+).
    public var alertTitle: String?
    /// `alert.subtitle` (iOS 10+).
    public var alertSubtitle: String?
    /// `alert.loc-key`: a key into the app's Localizable.strings for the message.
    public var localizedAlertKey: String?
    /// `alert.loc-args`: the format arguments for `localizedAlertKey`.
    public var localizedAlertArguments: [String] = []
    /// `alert.title-loc-key`.
    public var localizedTitleKey: String?
    /// `alert.title-loc-args`.
    public var localizedTitleArguments: [String] = []
    /// `alert.subtitle-loc-key`.
    public var localizedSubtitleKey: String?
    /// `alert.subtitle-loc-args`.
    public var localizedSubtitleArguments: [String] = []
    /// `alert.action-loc-key`: the localized label of the action button.
    public var localizedActionButtonKey: String?
    /// `alert.launch-image`: the launch image shown when the app opens from the notification.
    public var launchImage: String?
    /// When false, the alert has no action button: it becomes a dictionary carrying
    /// `"action-loc-key": null`, whatever `localizedActionButtonKey` says.
    public var showActionButton = true
    /// Writes the alert as a dictionary even when it only has a body.
    public var alwaysUseAlertDictionary = false

    // MARK: other aps keys

    /// `badge`: the app icon number; 0 removes the badge, nil leaves it unchanged.
    public var badge: Int?
    /// `sound`.
    public var sound: Sound?
    /// `content-available: 1` (background update) when true.
    public var contentAvailable = false
    /// `mutable-content: 1` (lets a notification service extension edit it) when true.
    public var mutableContent = false
    /// `category`: the notification category (actions) identifier.
    public var category: String?
    /// `thread-id`: groups notifications.
    public var threadID: String?
    /// `target-content-id`: the window or content to bring forward.
    public var targetContentID: String?
    /// `interruption-level`.
    public var interruptionLevel: InterruptionLevel?
    /// `relevance-score`: for an alert, 0.0...1.0, its rank in the notification summary;
    /// for a Live Activity, which of the app's activities shows first (higher wins). Must be finite.
    public var relevanceScore: Double?
    /// The Live Activity keys of an `apns-push-type: liveactivity` push; nil for other pushes.
    public var liveActivity: LiveActivity?

    /// The properties written next to `aps`, in writing order. Set with `setCustomProperty`.
    public private(set) var customProperties: [(key: String, value: JSONValue)] = []

    /// An empty payload: `{"aps":{}}` until fields are set.
    public init() {}

    /// The `aps` keys of a Live Activity push (`apns-push-type: liveactivity`), as ActivityKit
    /// reads them. `build` checks Apple's rules: a `start` needs `attributesType`,
    /// `attributes` and `contentState`; an `update` needs `contentState`; `dismissalDate`
    /// goes only with `end`; the `attributes*` and `inputPush*` keys only with `start`.
    public struct LiveActivity: Sendable, Equatable {
        /// What the push does to the activity.
        public enum Event: String, Sendable, Equatable, CaseIterable, CustomStringConvertible {
            /// Starts an activity (push-to-start).
            case start
            /// Updates its content state.
            case update
            /// Ends it; it may stay on the Lock Screen until `dismissalDate`.
            case end
            /// The `event` value on the wire.
            public var description: String { rawValue }
        }

        /// `event`.
        public var event: Event
        /// `timestamp`, UNIX seconds: the device drops a push older than the last one it applied.
        public var timestamp: Int
        /// `content-state`: the activity's `ContentState`, a JSON object.
        public var contentState: JSONValue?
        /// `stale-date`, UNIX seconds: when the system marks the activity out of date.
        public var staleDate: Int?
        /// `dismissal-date`, UNIX seconds: when an ended activity leaves the Lock Screen.
        public var dismissalDate: Int?
        /// `attributes-type`: the name of the app's `ActivityAttributes` type to start.
        public var attributesType: String?
        /// `attributes`: the started activity's `ActivityAttributes`, a JSON object.
        public var attributes: JSONValue?
        /// `input-push-token: 1` when true: the started activity reports an update token.
        public var inputPushToken = false
        /// `input-push-channel`: the broadcast channel the started activity listens on.
        public var inputPushChannel: String?

        /// A push for `event`, made at `timestamp` (UNIX seconds); set the keys the event needs.
        public init(event: Event, timestamp: Int) {
            self.event = event
            self.timestamp = timestamp
        }

        func validate() throws(PayloadError) {
            func require(_ present: Bool, _ key: String) throws(PayloadError) {
                if !present { throw .liveActivityFieldMissing(key: key, event: event) }
            }
            func only(_ allowedWith: Event, _ present: Bool, _ key: String) throws(PayloadError) {
                if present, event != allowedWith {
                    throw .liveActivityFieldNotAllowed(key: key, event: event, allowedWith: allowedWith)
                }
            }
            if event == .start {
                try require(attributesType != nil, "attributes-type")
                try require(attributes != nil, "attributes")
            }
            // An end may leave the last content as it was; a start or update must say it.
            if event != .end { try require(contentState != nil, "content-state") }
            try only(.end, dismissalDate != nil, "dismissal-date")
            try only(.start, attributesType != nil, "attributes-type")
            try only(.start, attributes != nil, "attributes")
            try only(.start, inputPushToken, "input-push-token")
            try only(.start, inputPushChannel != nil, "input-push-channel")
            for (key, value) in [("content-state", contentState), ("attributes", attributes)] {
                guard let value else { continue }
                guard case .object = value else { throw .notAnObject(key: key) }
                if let path = value.firstNonFiniteNumber(path: key) { throw .nonFiniteNumber(key: path) }
            }
        }
    }

    /// Sets a property outside `aps`. Setting an existing key replaces its value and keeps
    /// its position. Allocation happens here, not when building.
    ///
    /// - Throws: `PayloadError.reservedKey` for `aps`; `.nonFiniteNumber` (naming the path
    ///   inside `value`) when `value` holds NaN or an infinity.
    public mutating func setCustomProperty(_ key: String, _ value: JSONValue) throws(PayloadError) {
        guard key != "aps" else { throw .reservedKey(key) }
        if let path = value.firstNonFiniteNumber(path: key) { throw .nonFiniteNumber(key: path) }
        if let index = customProperties.firstIndex(where: { $0.key == key }) {
            customProperties[index].value = value
        } else {
            customProperties.append((key: key, value: value))
        }
    }

    /// Removes the property `key` outside `aps`, if set.
    public mutating func removeCustomProperty(_ key: String) {
        customProperties.removeAll { $0.key == key }
    }

    /// Removes every property outside `aps` (keeping the array's storage for reuse).
    public mutating func removeAllCustomProperties() {
        customProperties.removeAll(keepingCapacity: true)
    }

    // MARK: building

    /// Writes the payload into `buffer` and returns its length (also in `buffer.count`).
    ///
    /// When the JSON is longer than `maximumLength` the alert body is shortened: cut at a
    /// UTF-8 character (Unicode scalar) boundary and ended with "…" (U+2026, 3 bytes), so
    /// that the payload is exactly `maximumLength` bytes. Lengths are counted after
    /// escaping, so a character can cost up to 6 bytes (`\u0001`); when the next character
    /// does not fit whole, the payload ends up to that character's cost minus one byte
    /// short of `maximumLength` — the longest a cut at a character boundary can make it.
    /// A cut may separate the scalars of one grapheme (a skin-tone modifier from its emoji);
    /// the result is still valid UTF-8 and valid JSON.
    ///
    /// - Parameters:
    ///   - buffer: where the bytes go, from its start; reused for every build.
    ///   - maximumLength: at most `buffer.capacity`; use `binaryMaximumLength`,
    ///     `legacyMaximumLength` or `http2MaximumLength`.
    /// - Throws: `PayloadError.tooLong` when even a body of just "…" (or no body at all)
    ///   leaves the payload too long; what `validate` throws otherwise. The buffer's
    ///   `count` is then 0.
    public func build(
        into buffer: PayloadBuffer, maximumLength: Int = PayloadBuilder.binaryMaximumLength
    ) throws(PayloadError) -> Int {
        precondition(
            maximumLength >= 0 && maximumLength <= buffer.capacity,
            "maximumLength \(maximumLength) exceeds the buffer's capacity \(buffer.capacity)")
        buffer.count = 0
        try validate()
        let region = UnsafeMutableRawBufferPointer(rebasing: buffer.storage[..<maximumLength])

        var writer = JSONWriter(into: region)
        let bodyRange = try write(into: &writer, bodyPrefixLength: nil)
        if writer.count <= maximumLength {
            buffer.count = writer.count
            return writer.count
        }

        // Too long: everything but the body is fixed; give the body what is left, minus
        // the ellipsis.
        guard let bodyRange, let body = alertBody else {
            throw .tooLong(bytesOver: writer.count - maximumLength, maximumLength: maximumLength)
        }
        let fixedLength = writer.count - bodyRange.count
        let budget = maximumLength - fixedLength - Self.ellipsisLength
        guard budget >= 0 else {
            // A body shorter than "…" is cheaper kept whole, so the smallest payload is
            // whichever of the two is shorter.
            let smallest = Swift.min(writer.count, fixedLength + Self.ellipsisLength)
            throw .tooLong(bytesOver: smallest - maximumLength, maximumLength: maximumLength)
        }
        let cut = Self.truncationPoint(of: body, escapedBudget: budget)
        var shortened = JSONWriter(into: region)
        _ = try write(into: &shortened, bodyPrefixLength: cut)
        assert(shortened.count <= maximumLength && shortened.fits)
        buffer.count = shortened.count
        return shortened.count
    }

    /// Builds the payload into a new array (allocates; for tools and tests, not the hot path).
    public func build(maximumLength: Int = PayloadBuilder.binaryMaximumLength) throws(PayloadError) -> [UInt8] {
        let buffer = PayloadBuffer(capacity: maximumLength)
        _ = try build(into: buffer, maximumLength: maximumLength)
        return buffer.bytes
    }

    // MARK: internals

    static let ellipsisLength = 3  // "…" U+2026 in UTF-8: E2 80 A6

    /// Whether any alert field is set (the alert is written at all).
    var hasAlert: Bool {
        alertBody != nil || alertTitle != nil || alertSubtitle != nil || localizedAlertKey != nil
            || !localizedAlertArguments.isEmpty || localizedTitleKey != nil
            || !localizedTitleArguments.isEmpty || localizedSubtitleKey != nil
            || !localizedSubtitleArguments.isEmpty || localizedActionButtonKey != nil
            || launchImage != nil || !showActionButton
    }

    /// Whether the alert is written as a plain string: a body and nothing else.
    var alertIsPlainString: Bool {
        alertBody != nil && !alwaysUseAlertDictionary && alertTitle == nil && alertSubtitle == nil
            && localizedAlertKey == nil && localizedAlertArguments.isEmpty && localizedTitleKey == nil
            && localizedTitleArguments.isEmpty && localizedSubtitleKey == nil
            && localizedSubtitleArguments.isEmpty && localizedActionButtonKey == nil
            && launchImage == nil && showActionButton
    }

    /// Checks what `build` cannot write: NaN or infinite numbers, a critical volume outside
    /// 0.0...1.0, a Live Activity push that breaks Apple's rules.
    ///
    /// - Throws: `PayloadError.nonFiniteNumber`, `.criticalVolumeOutOfRange`,
    ///   `.liveActivityFieldMissing`, `.liveActivityFieldNotAllowed` or `.notAnObject`.
    public func validate() throws(PayloadError) {
        try liveActivity?.validate()
        if let relevanceScore, !relevanceScore.isFinite { throw .nonFiniteNumber(key: "relevance-score") }
        if case .critical(_, let volume) = sound {
            guard volume.isFinite else { throw .nonFiniteNumber(key: "sound.volume") }
            guard (0.0...1.0).contains(volume) else { throw .criticalVolumeOutOfRange(volume) }
        }
    }

    /// The length of the longest prefix of `body`'s UTF-8, ending at a scalar boundary,
    /// whose escaped form takes at most `budget` bytes.
    static func truncationPoint(of body: String, escapedBudget budget: Int) -> Int {
        JSONWriter.withUTF8(body) { utf8 in
            var width = 0
            var cut = 0
            for index in 0..<utf8.count {
                let byte = utf8[index]
                if byte & 0xC0 != 0x80 {  // not a continuation byte: a scalar starts here
                    if width > budget { return cut }
                    cut = index
                }
                width += JSONWriter.escapedWidth(byte)
            }
            return width <= budget ? utf8.count : cut
        }
    }

    /// Writes the whole payload; returns where the body's escaped text went, if written.
    func write(into writer: inout JSONWriter, bodyPrefixLength: Int?) throws(PayloadError) -> Range<Int>? {
        var bodyRange: Range<Int>?
        writer.beginObject()
        writer.key(fixed: "aps")
        writer.beginObject()

        if hasAlert {
            writer.key(fixed: "alert")
            if alertIsPlainString, let alertBody {
                bodyRange = writer.string(alertBody, prefixLength: bodyPrefixLength)
            } else {
                bodyRange = writeAlertObject(into: &writer, bodyPrefixLength: bodyPrefixLength)
            }
        }
        if let badge {
            writer.key(fixed: "badge")
            writer.int(Int64(badge))
        }
        try writeSound(into: &writer)
        if contentAvailable {
            writer.key(fixed: "content-available")
            writer.int(1)
        }
        if mutableContent {
            writer.key(fixed: "mutable-content")
            writer.int(1)
        }
        if let category {
            writer.key(fixed: "category")
            writer.string(category)
        }
        if let threadID {
            writer.key(fixed: "thread-id")
            writer.string(threadID)
        }
        if let targetContentID {
            writer.key(fixed: "target-content-id")
            writer.string(targetContentID)
        }
        if let interruptionLevel {
            writer.key(fixed: "interruption-level")
            writer.string(interruptionLevel.rawValue)
        }
        if let relevanceScore {
            writer.key(fixed: "relevance-score")
            do { try writer.double(relevanceScore) } catch { throw .nonFiniteNumber(key: "relevance-score") }
        }
        if let liveActivity { try Self.write(liveActivity, into: &writer) }
        writer.endObject()

        for property in customProperties {
            writer.key(property.key)
            // setCustomProperty rejects non-finite numbers, so this cannot throw in practice.
            do { try writer.value(property.value) } catch { throw .nonFiniteNumber(key: property.key) }
        }
        writer.endObject()
        return bodyRange
    }

    /// Writes the `alert` dictionary; returns where the body's escaped text went, if written.
    private func writeAlertObject(into writer: inout JSONWriter, bodyPrefixLength: Int?) -> Range<Int>? {
        var bodyRange: Range<Int>?
        writer.beginObject()
        if let alertTitle {
            writer.key(fixed: "title")
            writer.string(alertTitle)
        }
        if let alertSubtitle {
            writer.key(fixed: "subtitle")
            writer.string(alertSubtitle)
        }
        if let alertBody {
            writer.key(fixed: "body")
            bodyRange = writer.string(alertBody, prefixLength: bodyPrefixLength)
        }
        Self.writeLocalized(localizedTitleKey, "title-loc-key", localizedTitleArguments, "title-loc-args", into: &writer)
        Self.writeLocalized(localizedSubtitleKey, "subtitle-loc-key", localizedSubtitleArguments, "subtitle-loc-args",
                            into: &writer)
        Self.writeLocalized(localizedAlertKey, "loc-key", localizedAlertArguments, "loc-args", into: &writer)
        if !showActionButton {
            writer.key(fixed: "action-loc-key")
            writer.null()
        } else if let localizedActionButtonKey {
            writer.key(fixed: "action-loc-key")
            writer.string(localizedActionButtonKey)
        }
        if let launchImage {
            writer.key(fixed: "launch-image")
            writer.string(launchImage)
        }
        writer.endObject()
        return bodyRange
    }

    /// Writes `sound`: a name, or the dictionary of a critical alert's sound.
    private func writeSound(into writer: inout JSONWriter) throws(PayloadError) {
        switch sound {
        case nil: break
        case .named(let name)?:
            writer.key(fixed: "sound")
            writer.string(name)
        case .critical(let name, let volume)?:
            writer.key(fixed: "sound")
            writer.beginObject()
            writer.key(fixed: "critical")
            writer.int(1)
            writer.key(fixed: "name")
            writer.string(name)
            writer.key(fixed: "volume")
            do { try writer.double(volume) } catch { throw .nonFiniteNumber(key: "sound.volume") }
            writer.endObject()
        }
    }

    static func write(_ activity: LiveActivity, into writer: inout JSONWriter) throws(PayloadError) {
        writer.key(fixed: "timestamp")
        writer.int(Int64(activity.timestamp))
        writer.key(fixed: "event")
        writer.string(activity.event.rawValue)
        if let contentState = activity.contentState {
            writer.key(fixed: "content-state")
            // validate() rejected non-finite numbers, so this cannot throw in practice.
            do { try writer.value(contentState) } catch { throw .nonFiniteNumber(key: "content-state") }
        }
        if let staleDate = activity.staleDate {
            writer.key(fixed: "stale-date")
            writer.int(Int64(staleDate))
        }
        if let dismissalDate = activity.dismissalDate {
            writer.key(fixed: "dismissal-date")
            writer.int(Int64(dismissalDate))
        }
        if let attributesType = activity.attributesType {
            writer.key(fixed: "attributes-type")
            writer.string(attributesType)
        }
        if let attributes = activity.attributes {
            writer.key(fixed: "attributes")
            do { try writer.value(attributes) } catch { throw .nonFiniteNumber(key: "attributes") }
        }
        if activity.inputPushToken {
            writer.key(fixed: "input-push-token")
            writer.int(1)
        }
        if let inputPushChannel = activity.inputPushChannel {
            writer.key(fixed: "input-push-channel")
            writer.string(inputPushChannel)
        }
    }

    /// A localized string's key and its arguments, each under its name when given.
    private static func writeLocalized(_ key: String?, _ keyName: StaticString, _ arguments: [String],
                                       _ argumentsName: StaticString, into writer: inout JSONWriter) {
        if let key {
            writer.key(fixed: keyName)
            writer.string(key)
        }
        if !arguments.isEmpty {
            writer.key(fixed: argumentsName)
            writeStrings(arguments, into: &writer)
        }
    }

    static func writeStrings(_ strings: [String], into writer: inout JSONWriter) {
        writer.beginArray()
        for string in strings { writer.string(string) }
        writer.endArray()
    }
}
