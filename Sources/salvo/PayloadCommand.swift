import ArgumentParser
import SalvoWire

/// `salvo payload`: builds a payload and shows what goes on the wire: the binary frame,
/// byte by byte, or the HTTP/2 request's header fields and body.
struct PayloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Build a payload and show its binary frame as an annotated hex dump, or its HTTP/2 request.",
        discussion: """
            With no payload options it shows an example. A body that makes the payload \
            longer than --max-length is shortened, ending in "…", as the sender does. \
            --protocol h2 shows the request to Apple's HTTP/2 provider API instead of the frame; \
            Live Activity pushes (--push-type liveactivity) take --event, --timestamp and the \
            flags after them.
            """)

    enum Format: String, ExpressibleByArgument, CaseIterable {
        case frame, enhanced, simple

        var frameFormat: FrameFormat {
            switch self {
            case .frame: .frame
            case .enhanced: .enhanced
            case .simple: .simple
            }
        }
    }

    /// A token for the example: any 32 bytes do; these are easy to spot in the dump.
    static let exampleToken = "00112233445566778899aabbccddeeff00112233445566778899aabbccddeeff"

    @Option(help: "The alert text.") var body: String?
    @Option(help: "The alert title.") var title: String?
    @Option(help: "The app icon badge number (0 removes it).") var badge: Int?
    @Option(help: "A sound file in the app bundle, or \"default\".") var sound: String?
    @Option(help: ArgumentHelp("A property next to aps, as key=JSON (repeatable), e.g. --custom 'offer={\"id\":7}'.",
                               valueName: "key=json"))
    var custom: [String] = []
    @Option(name: .customLong("max-length"),
            help: "The payload limit in bytes (default 2048; with --protocol h2, the push type's: 4096, 5120 for voip).")
    var maxLength: Int?
    @Option(help: ArgumentHelp("The device token, 64 hex characters.", valueName: "hex")) var token: String?
    @Option(help: "The notification format: frame (command 2, the default), enhanced (1) or simple (0); binary only.")
    var format: Format?
    @Option(help: "The notification identifier (frame and enhanced; default 1); binary only.") var identifier: UInt32?
    @Option(help: ArgumentHelp("apns-expiration, or the frame's expiry (frame, enhanced): UNIX seconds; 0 = do not store.",
                               valueName: "seconds"))
    var expiration: UInt32?
    // The old name, kept working for scripts; `salvo send` calls it --expiration.
    @Option(name: .customLong("expiry"), help: .hidden) var expiryAlias: UInt32?
    @Option(help: "Priority: 10 (immediate) or 5 (power-saving), frame only; with --protocol h2 also 1 (background: 5).")
    var priority: UInt8?

    @Option(name: .customLong("protocol"), help: "binary (show the frame) or h2 (show the HTTP/2 request).")
    var wireProtocol: WireProtocol = .binary

    @OptionGroup(title: "HTTP/2 (--protocol h2)") var http2: HTTP2Flags
    @OptionGroup(title: "Live Activity (--push-type liveactivity)") var liveActivity: LiveActivityFlags

    /// The flags that only the HTTP/2 request has.
    struct HTTP2Flags: ParsableArguments {
        @Option(name: .customLong("push-type"), help: "apns-push-type (default alert); sets the payload limit.")
        var pushType: APNsPushType?
        @Option(help: ArgumentHelp("The app's bundle id; apns-topic adds the push type's suffix (.voip, ...).",
                                   valueName: "bundle-id"))
        var topic: String?
        @Option(name: .customLong("collapse-id"), help: ArgumentHelp("apns-collapse-id, at most 64 bytes.", valueName: "id"))
        var collapseID: String?
        @Option(name: .customLong("apns-id"), help: ArgumentHelp("apns-id, a UUID (apns-request-id for --broadcast).", valueName: "uuid"))
        var apnsID: String?
        @Flag(help: "Show the broadcast of a Live Activity update or end to --channel's subscribers (iOS 18).")
        var broadcast = false
        @Option(help: ArgumentHelp("The broadcast channel's id (--broadcast).", valueName: "id"))
        var channel: String?

        var givenFlag: String? {
            firstGivenFlag([("--push-type", pushType != nil), ("--topic", topic != nil), ("--collapse-id", collapseID != nil),
                            ("--apns-id", apnsID != nil), ("--broadcast", broadcast), ("--channel", channel != nil)])
        }
    }

    /// The `aps` keys of a Live Activity push. Each flag is named after its key, which is
    /// what lets `flagMessage` name the flag of a `PayloadError`.
    struct LiveActivityFlags: ParsableArguments {
        @Option(help: "What the push does to the activity.") var event: PayloadBuilder.LiveActivity.Event?
        @Option(help: ArgumentHelp("UNIX seconds; required.", valueName: "seconds")) var timestamp: Int?
        @Option(name: .customLong("content-state"),
                help: ArgumentHelp("The activity's ContentState, a JSON object (start, update, end).", valueName: "json"))
        var contentState: String?
        @Option(name: .customLong("stale-date"), help: ArgumentHelp("When it goes stale, UNIX seconds.", valueName: "seconds"))
        var staleDate: Int?
        @Option(name: .customLong("dismissal-date"),
                help: ArgumentHelp("When an ended activity leaves the Lock Screen, UNIX seconds (end).", valueName: "seconds"))
        var dismissalDate: Int?
        @Option(name: .customLong("relevance-score"), help: "Which of the app's activities shows first (higher wins).")
        var relevanceScore: Double?
        @Option(name: .customLong("attributes-type"), help: ArgumentHelp("The ActivityAttributes type (start).", valueName: "name"))
        var attributesType: String?
        @Option(help: ArgumentHelp("The ActivityAttributes, a JSON object (start).", valueName: "json"))
        var attributes: String?
        @Flag(name: .customLong("input-push-token"), help: "Ask the started activity for an update token (start).")
        var inputPushToken = false
        @Option(name: .customLong("input-push-channel"), help: ArgumentHelp("The broadcast channel to listen on (start).", valueName: "id"))
        var inputPushChannel: String?

        var givenFlag: String? {
            firstGivenFlag([("--event", event != nil), ("--timestamp", timestamp != nil), ("--content-state", contentState != nil),
                            ("--stale-date", staleDate != nil), ("--dismissal-date", dismissalDate != nil),
                            ("--relevance-score", relevanceScore != nil), ("--attributes-type", attributesType != nil),
                            ("--attributes", attributes != nil), ("--input-push-token", inputPushToken),
                            ("--input-push-channel", inputPushChannel != nil)])
        }
    }

    var pushType: APNsPushType { http2.broadcast ? .liveactivity : http2.pushType ?? .alert }

    /// `--expiration`, or its old spelling `--expiry`.
    var expiry: UInt32? { expiration ?? expiryAlias }

    /// The payload limit: `--max-length`, else the protocol's (the push type's for HTTP/2).
    var limit: Int {
        maxLength ?? (http2.broadcast ? BroadcastRules.payloadLimit
            : wireProtocol == .h2 ? pushType.payloadLimit : PayloadBuilder.binaryMaximumLength)
    }

    /// Whether any option that shapes the payload was given; without one, the example is shown.
    var describesPayload: Bool {
        body != nil || title != nil || badge != nil || sound != nil || !custom.isEmpty || liveActivity.givenFlag != nil
    }

    func validate() throws {
        if expiration != nil, expiryAlias != nil {
            throw ValidationError("--expiry is the old name of --expiration: give one of them")
        }
        if let maxLength, !(1...Int(UInt16.max)).contains(maxLength) {
            throw ValidationError("--max-length must be 1...65535 (the binary interface allows 2048)")
        }
        switch wireProtocol {
        case .binary:
            if let flag = http2.givenFlag { throw ValidationError("\(flag) is for the HTTP/2 provider API (--protocol h2)") }
            if let priority, priority != 5, priority != 10 {
                throw ValidationError("--priority must be 5 or 10")
            }
            if priority != nil, let format, format != .frame {
                throw ValidationError("only --format frame carries a priority; \(format.rawValue) notifications are always sent at 10")
            }
        case .h2:
            if format != nil || identifier != nil {
                throw ValidationError("--format and --identifier describe binary frames; leave them out with --protocol h2")
            }
            if let priority, ![10, 5, 1].contains(priority) {
                throw ValidationError("--priority must be 10, 5 or 1")
            }
            if let priority, pushType == .background, priority != 5 {
                throw ValidationError("--priority must be 5 for --push-type background (APNs refuses it at \(priority))")
            }
            if let maxLength, maxLength > pushType.payloadLimit {
                throw ValidationError("--max-length \(maxLength) is over the \(pushType.payloadLimit) bytes APNs takes for --push-type \(pushType)")
            }
            if let collapseID = http2.collapseID, collapseID.utf8.count > APNsRequestHeader.collapseIdLimit {
                throw ValidationError("--collapse-id is \(collapseID.utf8.count) bytes; APNs takes at most \(APNsRequestHeader.collapseIdLimit)")
            }
            if let apnsID = http2.apnsID, APNsID(apnsID) == nil {
                throw ValidationError("--apns-id '\(apnsID)' is not a UUID (8-4-4-4-12 hex digits)")
            }
            try validateBroadcast()
        }
        if pushType == .liveactivity {
            if liveActivity.event == nil { throw ValidationError("--push-type liveactivity needs --event start|update|end") }
            if liveActivity.timestamp == nil { throw ValidationError("--push-type liveactivity needs --timestamp (UNIX seconds)") }
        } else if let flag = liveActivity.givenFlag {
            let needs = wireProtocol == .h2 ? "--push-type liveactivity" : "--protocol h2 --push-type liveactivity"
            throw ValidationError("\(flag) is for Live Activities: it needs \(needs)")
        }
        if let token {
            do { _ = try DeviceToken(hex: token) } catch { throw ValidationError("--token: \(error)") }
        }
        do { try makeBuilder().validate() } catch { throw ValidationError(Self.flagMessage(error)) }
    }

    /// A broadcast updates or ends a Live Activity on a channel; it cannot start one.
    private func validateBroadcast() throws {
        guard http2.broadcast else {
            if http2.channel != nil { throw ValidationError("--channel goes with --broadcast") }
            return
        }
        if let given = http2.pushType, given != .liveactivity {
            throw ValidationError("--broadcast sends liveactivity pushes; leave out --push-type \(given)")
        }
        if http2.collapseID != nil || token != nil {
            throw ValidationError("a broadcast goes to a channel: leave out --\(token != nil ? "token" : "collapse-id")")
        }
        guard let channel = http2.channel, BroadcastRules.isChannelID(channel) else {
            throw ValidationError("--broadcast needs --channel ID (base64, as `salvo channel create` printed it)")
        }
        if let event = liveActivity.event, event == .start {
            throw ValidationError("a broadcast cannot start a Live Activity: --event update or end (start one with "
                                  + "--input-push-channel in a push to a device)")
        }
        if let maxLength, maxLength > BroadcastRules.payloadLimit {
            throw ValidationError("--max-length \(maxLength) is over the \(BroadcastRules.payloadLimit) bytes APNs takes for a broadcast")
        }
    }

    func run() async throws {
        // validate() has checked the builder; what can still go wrong is a payload too long to shorten.
        let payload = try makeBuilder().build(maximumLength: limit)
        let deviceToken = try DeviceToken(hex: token ?? Self.exampleToken)
        if !describesPayload { print("Example (see `salvo payload --help` to build your own):\n") }
        switch wireProtocol {
        case .binary: try printFrame(payload: payload, token: deviceToken)
        case .h2: printRequest(payload: payload, token: deviceToken)
        }
    }

    func printFrame(payload: [UInt8], token: DeviceToken) throws {
        let format = self.format ?? .frame
        let priority = self.priority ?? (!describesPayload && format == .frame ? 10 : nil)
        let encoder = FrameEncoder(format: format.frameFormat, maximumPayloadLength: limit)
        var frame = [UInt8](repeating: 0, count: encoder.encodedLength(
            payloadLength: payload.count, hasExpiry: expiry != nil, hasPriority: priority != nil))
        _ = try payload.withUnsafeBytes { payloadBytes in
            try frame.withUnsafeMutableBytes { buffer in
                try encoder.encode(token: token, payload: payloadBytes, identifier: identifier ?? 1,
                                   expiry: expiry, priority: priority, into: buffer)
            }
        }

        print("Payload, \(payload.count) bytes (limit \(limit)):")
        print(String(decoding: payload, as: UTF8.self))
        print("\nFrame, \(frame.count) bytes:")
        for row in HexDump.rows(frame, fields: FrameAnnotation.fields(of: frame, format: format.frameFormat)) {
            print(row)
        }
    }

    func printRequest(payload: [UInt8], token: DeviceToken) {
        print("Request header fields, HTTP/2:")
        for (name, value) in requestHeaders(token: token, contentLength: payload.count) { print("\(name): \(value)") }
        let shortened = maxLength.map { ", shortened to --max-length \($0)" } ?? ""
        let kind = http2.broadcast ? "broadcast limit \(BroadcastRules.payloadLimit)" : "\(pushType) limit \(pushType.payloadLimit)"
        print("\nBody, \(payload.count) bytes (\(kind)\(shortened)):")
        print(String(decoding: payload, as: UTF8.self))
    }

    /// The request's header fields, named and valued as the sender writes them. Left out:
    /// `:authority` and `authorization` (the connection's), and the `apns-id` the sender
    /// makes up when none is given. The sender leaves the length to the DATA frames;
    /// `content-length` is shown for the byte count.
    func requestHeaders(token: DeviceToken, contentLength: Int) -> [(name: String, value: String)] {
        if http2.broadcast { return broadcastHeaders(contentLength: contentLength) }
        var fields: [(name: String, value: String)] = [
            (":method", "POST"), (":scheme", "https"), (":path", "\(APNsRequestHeader.devicePathPrefix)\(token.hex)"),
            ("apns-push-type", pushType.name),
        ]
        if let topic = http2.topic { fields.append(("apns-topic", topic + (pushType.topicSuffix ?? ""))) }
        // As the sender does: APNs's default priority, 10, is refused for a background push.
        if let priority = priority ?? (pushType == .background ? 5 : nil) { fields.append(("apns-priority", "\(priority)")) }
        if let expiry { fields.append(("apns-expiration", "\(expiry)")) }
        if let collapseID = http2.collapseID { fields.append(("apns-collapse-id", collapseID)) }
        if let apnsID = http2.apnsID.flatMap(APNsID.init) { fields.append(("apns-id", apnsID.description)) }
        fields.append(("content-length", "\(contentLength)"))
        return fields
    }

    /// A broadcast's fields as the sender writes them: the bundle id in the path, no topic,
    /// always a priority and an expiration (0: store nothing, what a no-storage channel needs).
    func broadcastHeaders(contentLength: Int) -> [(name: String, value: String)] {
        var fields: [(name: String, value: String)] = [
            (":method", "POST"), (":scheme", "https"),
            (":path", "\(APNsRequestHeader.broadcastPathPrefix)\(http2.topic ?? "<bundle-id>")"),
            ("apns-channel-id", http2.channel ?? ""), ("apns-push-type", "liveactivity"),
        ]
        if let apnsID = http2.apnsID.flatMap(APNsID.init) { fields.append(("apns-request-id", apnsID.description)) }
        fields.append(("apns-expiration", "\(expiry ?? 0)"))
        fields.append(("apns-priority", "\(priority ?? 10)"))
        fields.append(("content-length", "\(contentLength)"))
        return fields
    }

    /// The payload the flags describe (the example without any).
    func makeBuilder() throws -> PayloadBuilder {
        var builder = PayloadBuilder()
        if describesPayload {
            builder.alertBody = body
            builder.alertTitle = title
            builder.badge = badge
            builder.sound = sound.map(PayloadBuilder.Sound.named)
        } else {
            builder.alertBody = "Hello from Salvo"
            builder.badge = 1
            builder.sound = .default
        }
        for (key, value) in try customProperties() {
            do { try builder.setCustomProperty(key, value) } catch { throw ValidationError("--custom \(key): \(error)") }
        }
        builder.relevanceScore = liveActivity.relevanceScore
        if let event = liveActivity.event, let timestamp = liveActivity.timestamp {
            var activity = PayloadBuilder.LiveActivity(event: event, timestamp: timestamp)
            activity.contentState = try liveActivity.contentState.map { try Self.json($0, flag: "--content-state") }
            activity.staleDate = liveActivity.staleDate
            activity.dismissalDate = liveActivity.dismissalDate
            activity.attributesType = liveActivity.attributesType
            activity.attributes = try liveActivity.attributes.map { try Self.json($0, flag: "--attributes") }
            activity.inputPushToken = liveActivity.inputPushToken
            activity.inputPushChannel = liveActivity.inputPushChannel
            builder.liveActivity = activity
        }
        return builder
    }

    /// The message for a payload the builder refused, naming the flag to change: the Live
    /// Activity flags have their keys' names.
    static func flagMessage(_ error: some Error) -> String {
        switch error as? PayloadError {
        case .liveActivityFieldMissing(let key, let event)?:
            "--event \(event) needs --\(key)"
        case .liveActivityFieldNotAllowed(let key, let event, let allowedWith)?:
            "--\(key) goes only with --event \(allowedWith), not \(event)"
        case .notAnObject(let key)?:
            "--\(key) must be a JSON object, e.g. --\(key) '{\"score\":2}'"
        case .nonFiniteNumber(let key)?:
            "--\(key.prefix { $0 != "." && $0 != "[" }): \(error)"
        default:
            "\(error)"
        }
    }

    static func json(_ text: String, flag: String) throws -> JSONValue {
        do { return try JSONValue(parsingCommandLine: text) } catch { throw ValidationError("\(flag): the value is not JSON (\(error))") }
    }

    /// The `--custom` options as key and value.
    func customProperties() throws -> [(String, JSONValue)] {
        try custom.map { option in
            guard let equals = option.firstIndex(of: "="), equals != option.startIndex else {
                throw ValidationError("--custom '\(option)' must be key=JSON, e.g. offer='{\"id\":7}' or campaign='\"spring\"'")
            }
            let key = String(option[..<equals])
            let text = String(option[option.index(after: equals)...])
            do {
                return (key, try JSONValue(parsingCommandLine: text))
            } catch {
                throw ValidationError("--custom \(key): the value is not JSON (\(error)); quote strings: \(key)='\"\(text)\"'")
            }
        }
    }
}

extension PayloadBuilder.LiveActivity.Event: ExpressibleByArgument {}

/// Names the parts of an encoded notification, for `HexDump`.
enum FrameAnnotation {
    /// The fields of `frame`, found by reading it the way a gateway would.
    static func fields(of frame: [UInt8], format: FrameFormat) -> [HexDump.Field] {
        var fields: [HexDump.Field] = []
        func u16(_ at: Int) -> Int { Int(frame[at]) << 8 | Int(frame[at + 1]) }
        func u32(_ at: Int) -> UInt32 { frame[at..<(at + 4)].reduce(0) { $0 << 8 | UInt32($1) } }
        func add(_ start: Int, _ count: Int, _ label: String, text: Bool = false) {
            fields.append(HexDump.Field(range: start..<min(start + count, frame.count), label: label, showsText: text))
        }

        switch format {
        case .frame:
            add(0, 1, "command 2 (frame)")
            add(1, 4, "frame length \(u32(1))")
            var offset = 5
            while offset + 3 <= frame.count {
                let id = frame[offset]
                let length = u16(offset + 1)
                let data = offset + 3
                add(offset, 3, "item \(id) (\(itemName(id))), \(length) byte\(length == 1 ? "" : "s")")
                switch id {
                case 1: add(data, length, "token")
                case 2: add(data, length, "payload", text: true)
                case 3: add(data, length, "identifier \(u32(data))")
                case 4: add(data, length, expiryLabel(u32(data)))
                case 5: add(data, length, "priority \(frame[data])\(frame[data] == 10 ? " (immediate)" : " (power-saving)")")
                default: add(data, length, "unknown item")
                }
                offset = data + length
            }
        case .enhanced:
            add(0, 1, "command 1 (enhanced)")
            add(1, 4, "identifier \(u32(1))")
            add(5, 4, expiryLabel(u32(5)))
            add(9, 2, "token length \(u16(9))")
            add(11, 32, "token")
            add(43, 2, "payload length \(u16(43))")
            add(45, frame.count - 45, "payload", text: true)
        case .simple:
            add(0, 1, "command 0 (simple)")
            add(1, 2, "token length \(u16(1))")
            add(3, 32, "token")
            add(35, 2, "payload length \(u16(35))")
            add(37, frame.count - 37, "payload", text: true)
        }
        return fields
    }

    static func itemName(_ id: UInt8) -> String {
        switch id {
        case 1: "device token"
        case 2: "payload"
        case 3: "notification identifier"
        case 4: "expiration"
        case 5: "priority"
        default: "unknown"
        }
    }

    static func expiryLabel(_ seconds: UInt32) -> String {
        seconds == 0 ? "expiry 0 (do not store)" : "expiry \(seconds) (\(iso8601(unixSeconds: seconds)))"
    }
}
