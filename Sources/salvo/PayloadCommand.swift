import ArgumentParser
import SalvoWire

/// `salvo payload`: builds a payload and shows the frame it becomes, byte by byte.
struct PayloadCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "payload",
        abstract: "Build a payload and show its encoded frame as an annotated hex dump.",
        discussion: """
            With no payload options it shows an example. A body that makes the payload \
            longer than --max-length is shortened, ending in "…", as the sender does.
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
    @Option(name: .customLong("max-length"), help: "The payload limit in bytes.") var maxLength = PayloadBuilder.binaryMaximumLength
    @Option(help: ArgumentHelp("The device token, 64 hex characters.", valueName: "hex")) var token: String?
    @Option(help: "The notification format: frame (command 2), enhanced (1) or simple (0).") var format: Format = .frame
    @Option(help: "The notification identifier (frame and enhanced).") var identifier: UInt32 = 1
    @Option(help: "Expiry, UNIX seconds (frame and enhanced); 0 = do not store.") var expiry: UInt32?
    @Option(help: "Priority, 10 (immediate) or 5 (power-saving); frame only.") var priority: UInt8?

    /// Whether any option that shapes the payload was given; without one, the example is shown.
    var describesPayload: Bool { body != nil || title != nil || badge != nil || sound != nil || !custom.isEmpty }

    func validate() throws {
        guard (1...Int(UInt16.max)).contains(maxLength) else {
            throw ValidationError("--max-length must be 1...65535 (the binary interface allows 2048)")
        }
        if let priority, priority != 5, priority != 10 {
            throw ValidationError("--priority must be 5 or 10")
        }
        if priority != nil, format != .frame {
            throw ValidationError("only --format frame carries a priority; \(format.rawValue) notifications are always sent at 10")
        }
        if let token {
            do { _ = try DeviceToken(hex: token) } catch { throw ValidationError("--token: \(error)") }
        }
        _ = try customProperties()
    }

    func run() async throws {
        let example = !describesPayload
        var builder = PayloadBuilder()
        if example {
            builder.alertBody = "Hello from Salvo"
            builder.badge = 1
            builder.sound = .default
        } else {
            builder.alertBody = body
            builder.alertTitle = title
            builder.badge = badge
            builder.sound = sound.map(PayloadBuilder.Sound.named)
        }
        for (key, value) in try customProperties() {
            do { try builder.setCustomProperty(key, value) } catch { throw ValidationError("--custom \(key): \(error)") }
        }
        let payload = try builder.build(maximumLength: maxLength)
        let deviceToken = try DeviceToken(hex: token ?? Self.exampleToken)
        let priority = self.priority ?? (example && format == .frame ? 10 : nil)

        let encoder = FrameEncoder(format: format.frameFormat, maximumPayloadLength: maxLength)
        var frame = [UInt8](repeating: 0, count: encoder.encodedLength(
            payloadLength: payload.count, hasExpiry: expiry != nil, hasPriority: priority != nil))
        _ = try payload.withUnsafeBytes { payloadBytes in
            try frame.withUnsafeMutableBytes { buffer in
                try encoder.encode(token: deviceToken, payload: payloadBytes, identifier: identifier,
                                   expiry: expiry, priority: priority, into: buffer)
            }
        }

        if example { print("Example (see `salvo payload --help` to build your own):\n") }
        print("Payload, \(payload.count) bytes (limit \(maxLength)):")
        print(String(decoding: payload, as: UTF8.self))
        print("\nFrame, \(frame.count) bytes:")
        for row in HexDump.rows(frame, fields: FrameAnnotation.fields(of: frame, format: format.frameFormat)) {
            print(row)
        }
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
