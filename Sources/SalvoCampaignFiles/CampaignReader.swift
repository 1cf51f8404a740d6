import SalvoEngine
import SalvoIO
import SalvoWire

/// Where a campaign's notifications come from: a file read line by line.
///
/// - `jsonl`: one JSON object per line,
///   `{"token": "<64 hex>", "payload": {...}, "expiry": 1735689600, "priority": 10, "id": ...}`.
///   `token` and `payload` (a JSON object) are required; `expiry` (UNIX seconds, a u32;
///   `expiration`, its HTTP/2 name, is the same field), `priority` and `id` (any JSON
///   value, carried through for reports) are optional, and `null` counts as absent. Read
///   for HTTP/2 (`CampaignProtocol.http2`), a line may also set its request's headers:
///   `push_type` (an `APNsPushType` name), `topic` (the whole apns-topic), `collapse_id`
///   (at most 64 bytes) and `apns_id` (a UUID); read for the binary protocol, these are
///   ignored. A line with `channel_id` instead of `token` is a broadcast to that channel
///   (HTTP/2 only): a Live Activity update or end, its `topic`, if any, the bare bundle
///   id, no `collapse_id`, at most 5120 bytes of payload. Other keys are ignored, so files
///   made for other tools work; a key given
///   twice is an error, since which one wins would be a guess, and so are `expiry` and
///   `expiration` together. Blank lines are skipped.
/// - `tokens`: one hex device token per line, all sent the same payload. Surrounding
///   whitespace is ignored; blank lines and lines whose first non-blank character is `#`
///   (comments) are skipped.
///
/// Both accept LF or CRLF line endings, a last line without a line ending, and a UTF-8 byte
/// order mark at the start. Line numbers count every line, skipped ones included, so they
/// match what an editor shows.
public enum CampaignSource: Sendable, Hashable {
    /// A JSONL file at this path.
    case jsonl(_ path: String)
    /// A file of hex tokens at this path, and the payload for all of them: the raw bytes
    /// of a JSON object (e.g. a file's contents), which the reader validates and minifies.
    case tokens(_ path: String, payload: [UInt8])

    /// The file the notifications are read from.
    public var path: String {
        switch self {
        case .jsonl(let path), .tokens(let path, _): path
        }
    }
}

/// The protocol a campaign is read for: it sets the payload limit, the priorities a line
/// may ask for, and whether a JSONL line's HTTP/2 request fields are read.
public enum CampaignProtocol: Sendable, Hashable {
    /// The binary protocol: payloads up to `maximumPayloadLength` (2048 for Apple's
    /// gateways; 1...65535), priority 5 or 10. A JSONL line's HTTP/2 keys are ignored like
    /// any other key the reader does not know.
    case binary(maximumPayloadLength: Int)
    /// The HTTP/2 provider API: payloads up to the push type's limit (4096; 5120 for voip),
    /// priority 10, 5 or 1 (a background push must have 5), and a JSONL line's request
    /// fields. A line that names no push type, and every line of a token list, is read as a
    /// `defaultPushType` push: make it the sender's default push type.
    case http2(defaultPushType: APNsPushType)

    /// The largest payload a campaign read for this protocol can yield, in bytes: the
    /// binary limit, or 5120 (voip's limit) for HTTP/2, since any JSONL line may be a voip
    /// push. `CampaignReader.maximumPayloadLength` is the figure for one source.
    public var largestPayloadLength: Int {
        switch self {
        case .binary(let maximumPayloadLength): maximumPayloadLength
        case .http2: Self.largestHTTP2PayloadLength
        }
    }

    /// The largest payload any push type takes.
    private static let largestHTTP2PayloadLength = APNsPushType.allCases.map(\.payloadLimit).max()!

    /// The largest payload read from `source`: for a token list read for HTTP/2, the
    /// default push type's limit, since every line is one.
    func largestPayloadLength(for source: CampaignSource) -> Int {
        switch (self, source) {
        case (.http2(let defaultPushType), .tokens): defaultPushType.payloadLimit
        default: largestPayloadLength
        }
    }
}

/// One notification read from a campaign file.
///
/// `payload`, `id` and the request's `topic` and `collapseID` point into the reader's
/// buffers: they are valid only until the next call to `nextItem()` or
/// `skip(throughLine:)`, and the reader must stay alive meanwhile. Copy them (the send
/// path copies them into a frame or a staged request) before reading on.
public struct CampaignItem {
    /// What the sender reads from the line: the notification and where it is.
    public var notification: SourceNotification
    /// The JSONL line's `id` value exactly as written (a string keeps its quotes), when given.
    public var id: UnsafeRawBufferPointer?

    /// The line this notification came from (1-based).
    public var line: Int {
        get { Int(notification.position.sequence) }
        set { notification.position.sequence = UInt64(newValue) }
    }
    /// Where the line starts in the file, in bytes.
    public var offset: UInt64 {
        get { notification.position.offset }
        set { notification.position.offset = newValue }
    }
    /// The device token.
    public var token: DeviceToken {
        get { notification.token }
        set { notification.token = newValue }
    }
    /// The payload, minified JSON, at most the reader's `maximumPayloadLength` bytes (for
    /// HTTP/2, at most its push type's limit).
    public var payload: UnsafeRawBufferPointer {
        get { notification.payload }
        set { notification.payload = newValue }
    }
    /// UNIX seconds after which APNs may discard the notification (`expiry` or
    /// `expiration`), when given.
    public var expiry: UInt32? {
        get { notification.expiry }
        set { notification.expiry = newValue }
    }
    /// 10 (immediate) or 5 (power-saving), or 1 (lowest) for HTTP/2, when given.
    public var priority: UInt8? {
        get { notification.priority }
        set { notification.priority = newValue }
    }
    /// The HTTP/2 headers the line sets for itself; all nil when read for the binary protocol.
    public var request: RequestFields { notification.request?.pointee ?? RequestFields() }

    /// An item of `notification`, with the line's `id` bytes if it has one.
    public init(notification: SourceNotification, id: UnsafeRawBufferPointer? = nil) {
        self.notification = notification
        self.id = id
    }

    /// An item of line `line` (1-based), starting at byte `offset`; the payload and the `id`
    /// bytes must outlive it.
    public init(
        line: Int, offset: UInt64 = 0, token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32? = nil,
        priority: UInt8? = nil, id: UnsafeRawBufferPointer? = nil
    ) {
        notification = SourceNotification(token: token, payload: payload, expiry: expiry, priority: priority,
                                          position: SourcePosition(offset: offset, sequence: UInt64(line)))
        self.id = id
    }
}

/// What the reader does with a line it cannot use.
public enum BadLinePolicy: Sendable, Hashable {
    /// Stop: `nextItem()` throws `CampaignError.badLine`. The default, so that nothing is
    /// skipped unless asked for.
    case abort
    /// Record the line in `skippedLines` and go on with the next one.
    case skip
}

/// A line that could not be turned into a notification, and why.
public struct BadLine: Sendable, Hashable, CustomStringConvertible {
    /// The line number (1-based).
    public var line: Int
    /// What is wrong, e.g. `device token has 31 bytes; APNs tokens are 32 bytes (64 hex characters)`.
    public var reason: String

    /// Line `line` (1-based), unusable for `reason`.
    public init(line: Int, reason: String) {
        self.line = line
        self.reason = reason
    }

    /// `line 17: <reason>`.
    public var description: String { "line \(line): \(reason)" }
}

/// Why a campaign could not be read (further).
public enum CampaignError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The file could not be opened or read.
    case io(IOError)
    /// A line does not fit the reader's buffer. Not subject to the bad-line policy: a line
    /// that long is no notification, so the file is probably in the wrong format (a JSON
    /// array on one line, a binary file) and skipping would hide that.
    case lineTooLong(line: Int, limit: Int)
    /// A line is unusable and the policy is `.abort`.
    case badLine(BadLine)
    /// The payload given with a token list is not a JSON object of the allowed size.
    case invalidPayload(reason: String)

    /// The problem, with the line number when there is one, for error messages.
    public var description: String {
        switch self {
        case .io(let error):
            return "cannot read the campaign file: \(error)"
        case .lineTooLong(let line, let limit):
            return "line \(line) is longer than \(limit) bytes; each line must hold one notification (is the file JSONL?)"
        case .badLine(let bad):
            return bad.description
        case .invalidPayload(let reason):
            return "the payload for the token list \(reason)"
        }
    }
}

/// Reads a campaign file one notification at a time, in constant memory.
///
/// The file goes through one fixed read buffer (`maximumLineLength` plus two bytes), each
/// payload is minified into one fixed payload buffer, and a JSONL line's escaped request
/// strings are decoded into fixed scratch buffers (255 bytes for the topic, 64 for the
/// collapse id); unescaped ones are handed out where they lie in the line. Memory does not
/// depend on the file's size, and in steady state `nextItem()` allocates nothing (no
/// `String`s are made for good lines). Not thread-safe: use a reader from one thread at a
/// time.
///
/// What a line may hold depends on the protocol it is read for (`CampaignProtocol`): for
/// HTTP/2, priority 1 and the request fields, and the payload limit of the line's push type.
///
/// ```swift
/// let reader = try CampaignReader(.jsonl("campaign.jsonl"), for: .http2(defaultPushType: .alert), onBadLine: .skip)
/// while let item = try reader.nextItem() { /* encode item.token, item.payload, item.request ... */ }
/// print(reader.skippedLineCount, "lines skipped")
/// ```
public final class CampaignReader {
    /// The default longest line: 1 MiB, far beyond any notification (payloads are ≤ 5 KiB).
    public static let defaultMaximumLineLength = 1 << 20
    /// How many bad lines `skippedLines` keeps; `skippedLineCount` counts them all.
    public static let skippedLinesKept = 10_000

    /// The file being read.
    public let source: CampaignSource
    /// The protocol the file is read for.
    public let campaignProtocol: CampaignProtocol
    /// The largest payload this reader yields (after minifying), in bytes: size payload
    /// buffers with it. The binary limit; for HTTP/2, the default push type's limit for a
    /// token list, and 5120 (voip's) for JSONL, whose lines may name their push type.
    public let maximumPayloadLength: Int
    /// What happens to unusable lines.
    public let badLinePolicy: BadLinePolicy
    /// The topics the run's credentials serve (several apps in one run): a line whose topic
    /// none of them is, is a bad line. Nil: any topic.
    public var topicRouting: TopicRouting?
    /// The first `skippedLinesKept` lines skipped under `.skip`, in file order.
    public private(set) var skippedLines: [BadLine] = []
    /// How many lines were skipped under `.skip`.
    public private(set) var skippedLineCount = 0
    /// Which lines are read (a resume: those after its checkpoint, and the failed ones
    /// before it); the others are passed over without being parsed. Nil: every line.
    public var resumePlan: ResumePlan?

    private var lines: LineReader
    /// The `id` of the last JSONL line parsed, for `nextItem()`.
    private var lastLineID: UnsafeRawBufferPointer?
    private let format: Format
    /// Holds the payload `nextItem()` hands out: rewritten per line for JSONL, written once
    /// (the shared payload) for a token list.
    private let payloadStorage: UnsafeMutableRawBufferPointer
    /// Where a JSONL line's escaped request strings are decoded (see `Scratch`); empty
    /// unless the file is JSONL read for HTTP/2.
    private let scratch: UnsafeMutableRawBufferPointer
    /// Holds the request fields `nextItem()` points a JSONL line's notification to (for
    /// HTTP/2, when the line sets any).
    private let requestFields: UnsafeMutablePointer<RequestFields>

    private enum Format {
        case jsonl
        case tokens(payloadLength: Int)
    }

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

    /// Opens a campaign for the binary protocol: `CampaignReader(source, for:
    /// .binary(maximumPayloadLength:), ...)`.
    ///
    /// - Parameters:
    ///   - source: the file and its format.
    ///   - maximumPayloadLength: the largest payload accepted, after minifying; 2048 for
    ///     the binary interface. 1...65535.
    ///   - onBadLine: stop at the first unusable line (default), or skip and record it.
    ///   - maximumLineLength: the longest line, in bytes; the read buffer is this size.
    public convenience init(
        _ source: CampaignSource, maximumPayloadLength: Int = 2048, onBadLine: BadLinePolicy = .abort,
        maximumLineLength: Int = CampaignReader.defaultMaximumLineLength
    ) throws(CampaignError) {
        try self.init(source, for: .binary(maximumPayloadLength: maximumPayloadLength), onBadLine: onBadLine,
                      maximumLineLength: maximumLineLength)
    }

    /// Opens a campaign.
    ///
    /// - Parameters:
    ///   - source: the file and its format.
    ///   - campaignProtocol: the protocol its notifications are sent with, which decides
    ///     what a line may hold: `.binary(maximumPayloadLength: 2048)`, or
    ///     `.http2(defaultPushType:)` with the sender's default push type.
    ///   - onBadLine: stop at the first unusable line (default), or skip and record it.
    ///   - maximumLineLength: the longest line, in bytes; the read buffer is this size.
    /// - Throws: `CampaignError.io` when the file cannot be opened; `.invalidPayload` when
    ///   a token list's payload is not a JSON object or is too long.
    public init(
        _ source: CampaignSource, for campaignProtocol: CampaignProtocol, onBadLine: BadLinePolicy = .abort,
        maximumLineLength: Int = CampaignReader.defaultMaximumLineLength
    ) throws(CampaignError) {
        if case .binary(let maximumPayloadLength) = campaignProtocol {
            precondition(
                (1...Int(UInt16.max)).contains(maximumPayloadLength),
                "maximumPayloadLength must be 1...65535, got \(maximumPayloadLength)")
        }
        self.source = source
        self.campaignProtocol = campaignProtocol
        maximumPayloadLength = campaignProtocol.largestPayloadLength(for: source)
        self.badLinePolicy = onBadLine
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumPayloadLength, alignment: 16)
        switch source {
        case .jsonl:
            format = .jsonl
        case .tokens(_, let payload):
            do throws(CampaignError) {
                format = .tokens(payloadLength: try Self.prepareSharedPayload(
                    payload, into: storage, limit: Self.describeLimit(campaignProtocol, storage.count)))
            } catch {
                storage.deallocate()
                throw error
            }
        }
        payloadStorage = storage
        let readsRequestFields = if case .http2 = campaignProtocol, case .jsonl = source { true } else { false }
        scratch = .allocate(byteCount: readsRequestFields ? Scratch.size : 0, alignment: 1)
        do throws(CampaignError) {
            lines = try LineReader(path: source.path, maximumLineLength: maximumLineLength)
        } catch {
            storage.deallocate()
            scratch.deallocate()
            throw error
        }
        requestFields = .allocate(capacity: 1)
        requestFields.initialize(to: RequestFields())
    }

    deinit {
        payloadStorage.deallocate()
        scratch.deallocate()
        requestFields.deallocate()
    }

    /// The line being parsed, as a position to read it again from.
    private var position: SourcePosition { SourcePosition(offset: lines.lineOffset, sequence: UInt64(lines.lineNumber)) }

    /// The number of lines read so far (the last line returned or skipped).
    public var linesRead: Int { lines.lineNumber }

    /// The read buffer's size; constant for the reader's life.
    var readBufferCapacity: Int { lines.bufferCapacity }

    /// The next notification, or nil at the end of the file.
    ///
    /// - Throws: `CampaignError.badLine` for an unusable line under `.abort` (under
    ///   `.skip` it is recorded and reading goes on); `.lineTooLong`; `.io`.
    public func nextItem() throws(CampaignError) -> CampaignItem? {
        guard let notification = try nextNotification() else { return nil }
        return CampaignItem(notification: notification, id: lastLineID)
    }

    /// `nextItem()` without the line's `id` (left in `lastLineID`): what the sender reads.
    /// A `SourceNotification` is small enough to be copied in registers; the item with its
    /// `id` is not, and the send path copies what it reads a few times.
    private func nextNotification() throws(CampaignError) -> SourceNotification? {
        while let line = try lines.nextLine() {
            if let resumePlan, !resumePlan.includes(line: lines.lineNumber) { continue }
            do throws(LineProblem) {
                if let notification = try parse(line) { return notification }
            } catch {
                try reject(error.reason)
            }
        }
        return nil
    }

    /// Moves past every line up to and including line `last` without parsing them: what
    /// `--resume` does with a checkpoint's line. Lines already read are not read again;
    /// a `last` beyond the end of the file leaves nothing to read.
    public func skip(throughLine last: Int) throws(CampaignError) {
        while lines.lineNumber < last {
            guard try lines.nextLine() != nil else { return }
        }
    }

    // MARK: - Lines

    /// Why a line was refused; only made on the bad path, so the good path stays free of
    /// allocations.
    private struct LineProblem: Error {
        var reason: String
    }

    private func reject(_ reason: String) throws(CampaignError) {
        let bad = BadLine(line: lines.lineNumber, reason: reason)
        switch badLinePolicy {
        case .abort:
            throw .badLine(bad)
        case .skip:
            skippedLineCount += 1
            if skippedLines.count < Self.skippedLinesKept { skippedLines.append(bad) }
        }
    }

    /// The notification on `line`, nil for a line to pass over (blank, comment).
    private func parse(_ line: UnsafeRawBufferPointer) throws(LineProblem) -> SourceNotification? {
        let notification = switch format {
        case .jsonl:
            try parseJSONLine(line)
        case .tokens(let payloadLength):
            try parseTokenLine(line, payload: UnsafeRawBufferPointer(rebasing: payloadStorage[..<payloadLength]))
        }
        if let topicRouting, let notification, topicRouting.topic(of: notification) == nil {
            throw LineProblem(reason: topicRouting.problem(with: notification))
        }
        return notification
    }

    private func parseTokenLine(_ line: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) throws(LineProblem) -> SourceNotification? {
        guard let first = Self.firstNonBlank(line), first != UInt8(ascii: "#") else { return nil }
        lastLineID = nil
        do throws(DeviceTokenError) {
            return SourceNotification(token: try DeviceToken(hex: line), payload: payload, position: position)
        } catch {
            throw LineProblem(reason: error.description)
        }
    }

    private func parseJSONLine(_ line: UnsafeRawBufferPointer) throws(LineProblem) -> SourceNotification? {
        guard Self.firstNonBlank(line) != nil else { return nil }
        // Read for HTTP/2: the push type the line is sent as, which sets its payload limit
        // and its priorities. Nil for the binary protocol.
        let defaultPushType: APNsPushType? = if case .http2(let type) = campaignProtocol { type } else { nil }
        let fields: JSONLineFields
        do throws(JSONScanError) {
            fields = try JSONLineFields(scanning: line, requestFields: defaultPushType != nil)
        } catch {
            throw LineProblem(reason: error.description)
        }
        if let duplicate = fields.duplicateKey { throw LineProblem(reason: "\"\(duplicate)\" is given more than once") }

        var request = RequestFields()
        let token: DeviceToken
        if let channelMember = fields.channelID, channelMember.kind != .null {
            guard defaultPushType != nil else {
                throw LineProblem(reason: "\"channel_id\" makes a broadcast, which only the HTTP/2 provider API has (--protocol h2)")
            }
            if fields.token.map({ $0.kind != .null }) ?? false {
                throw LineProblem(reason: "give \"token\" (a device) or \"channel_id\" (a broadcast), not both")
            }
            request.channelID = try channelIDField(channelMember, in: line)
            token = Self.broadcastToken
        } else {
            guard let tokenMember = fields.token else { throw LineProblem(reason: "missing \"token\" (or \"channel_id\" for a broadcast)") }
            token = try Self.token(tokenMember, in: line)
        }

        var pushType: APNsPushType?
        if let defaultPushType {
            request.pushType = try pushTypeField(fields.pushType, in: line)
            pushType = request.channelID != nil ? .liveactivity : request.pushType ?? defaultPushType
            if request.channelID != nil, let named = request.pushType, named != .liveactivity {
                throw LineProblem(reason: "a broadcast updates a Live Activity: \"push_type\" must be liveactivity (or absent), not \(named)")
            }
        }

        guard let payloadMember = fields.payload, payloadMember.kind != .null else {
            throw LineProblem(reason: "missing \"payload\"")
        }
        guard payloadMember.kind == .object else {
            throw LineProblem(reason: "\"payload\" must be a JSON object, not \(Self.describe(payloadMember.kind))")
        }
        let payloadLimit = request.channelID != nil ? BroadcastRules.payloadLimit
            : pushType?.payloadLimit ?? maximumPayloadLength
        let payloadRoom = UnsafeMutableRawBufferPointer(rebasing: payloadStorage[..<payloadLimit])
        guard let payloadLength = JSONScanner.minify(line, range: payloadMember.valueRange, into: payloadRoom) else {
            let length = JSONScanner.minifiedCount(line, range: payloadMember.valueRange)
            let limit = request.channelID != nil ? "the limit for a broadcast is \(payloadLimit)"
                : pushType.map { "the limit for \($0) is \(payloadLimit)" } ?? "the limit is \(payloadLimit)"
            throw LineProblem(reason: "payload is \(length) bytes; \(limit)")
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
        lastLineID = fields.id.flatMap { $0.kind == .null ? nil : $0.value(in: line) }

        requestFields.pointee = request
        return SourceNotification(
            token: token, payload: UnsafeRawBufferPointer(rebasing: payloadStorage[..<payloadLength]),
            expiry: expiry, priority: priority, position: position,
            request: request.isEmpty ? nil : UnsafePointer(requestFields))
    }

    private static func token(_ member: JSONMember, in line: UnsafeRawBufferPointer) throws(LineProblem) -> DeviceToken {
        guard member.kind == .string else {
            throw LineProblem(reason: "\"token\" must be a string of 64 hex characters, not \(describe(member.kind))")
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
            throw LineProblem(reason: error.description)
        }
    }

    /// `expiry`, or `expiration` (its HTTP/2 name), when one of them is given.
    private func expiryField(_ fields: JSONLineFields, in line: UnsafeRawBufferPointer) throws(LineProblem) -> UInt32? {
        let expiry = fields.expiry.flatMap { $0.kind == .null ? nil : $0 }
        let expiration = fields.expiration.flatMap { $0.kind == .null ? nil : $0 }
        if expiry != nil, expiration != nil {
            throw LineProblem(reason: "\"expiry\" and \"expiration\" are the same field; give one of them")
        }
        guard let member = expiry ?? expiration else { return nil }
        guard let value = Self.integer(member, in: line), let fitting = UInt32(exactly: value) else {
            let key = expiry != nil ? "expiry" : "expiration"
            throw LineProblem(reason:
                "\"\(key)\" must be an integer from 0 to \(UInt32.max) (UNIX seconds), not \(Self.excerpt(member, in: line))")
        }
        return fitting
    }

    /// `priority`: 5 or 10 for the binary protocol; 10, 5 or 1 for HTTP/2 (`pushType` set),
    /// and 5 for a background push, which APNs refuses at any other priority.
    private func priorityField(_ member: JSONMember?, pushType: APNsPushType?, in line: UnsafeRawBufferPointer)
        throws(LineProblem) -> UInt8?
    {
        guard let member, member.kind != .null else { return nil }
        let value = Self.integer(member, in: line)
        guard let pushType else {
            guard let value, value == 5 || value == 10 else {
                throw LineProblem(reason: "\"priority\" must be 5 or 10, not \(Self.excerpt(member, in: line))")
            }
            return UInt8(value)
        }
        guard let value, value == 10 || value == 5 || value == 1 else {
            throw LineProblem(reason: "\"priority\" must be 10, 5 or 1, not \(Self.excerpt(member, in: line))")
        }
        if pushType == .background, value != 5 {
            throw LineProblem(reason: "\"priority\" must be 5 for a background push, not \(value)")
        }
        return UInt8(value)
    }

    private func pushTypeField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(LineProblem) -> APNsPushType? {
        guard let member, member.kind != .null else { return nil }
        if let name = try text(member, in: line, scratch: Scratch.word), let type = Self.pushType(named: name) {
            return type
        }
        let names = APNsPushType.allCases.map(\.name).joined(separator: ", ")
        throw LineProblem(reason: "\"push_type\" must be one of \(names); not \(Self.excerpt(member, in: line))")
    }

    /// `topic`: the whole apns-topic, checked as APNs checks it (see `isTopic`).
    private func topicField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(LineProblem) -> UnsafeRawBufferPointer? {
        guard let member, member.kind != .null else { return nil }
        guard member.kind == .string else {
            throw LineProblem(reason: "\"topic\" must be a string, not \(Self.describe(member.kind))")
        }
        guard let topic = try text(member, in: line, scratch: Scratch.topic) else {
            throw LineProblem(reason: "\"topic\" is \(try Self.decodedLength(member, in: line)) bytes; the limit is \(Scratch.topicLimit)")
        }
        guard !topic.isEmpty else { throw LineProblem(reason: "\"topic\" is empty") }
        guard Self.isTopic(topic) else {
            throw LineProblem(reason:
                "\"topic\" must be a bundle id: dot-separated parts of letters, digits, '-' and '_'; not \(Self.excerpt(member, in: line))")
        }
        return topic
    }

    /// A line's own topic is the whole apns-topic, so it must carry its push type's suffix
    /// and no other type's, as APNs requires (it answers 400 InvalidPushType otherwise):
    /// refused here, before it is sent, saying which suffix. `named`: the line gives its
    /// push type (else it is the default).
    private static func checkSuffix(of topic: UnsafeRawBufferPointer, for pushType: APNsPushType, named: Bool)
        throws(LineProblem)
    {
        let owner = APNsPushType.owningSuffix(of: topic)
        if let suffix = pushType.topicSuffix {
            guard owner != pushType else { return }
            throw LineProblem(reason: "\"topic\" \(String(decoding: topic, as: UTF8.self)) does not end in \"\(suffix)\": a "
                              + "\(pushType) push goes to the app's bundle id followed by \"\(suffix)\"")
        }
        guard let owner else { return }
        let whose = named ? "the line's \"push_type\" is \(pushType)" : "the line names no \"push_type\" (the default is \(pushType))"
        throw LineProblem(reason: "\"topic\" \(String(decoding: topic, as: UTF8.self)) ends in \"\(owner.topicSuffix!)\", the suffix of "
                          + "\(owner) pushes, but \(whose): give \"push_type\": \"\(owner)\", or the bare bundle id")
    }

    /// The token of a broadcast's notification: none (its target is its channel).
    private static let broadcastToken = [UInt8](repeating: 0, count: 32).withUnsafeBytes { try! DeviceToken(bytes: $0) }

    /// `channel_id`: a broadcast channel's id as Apple made it, base64.
    private func channelIDField(_ member: JSONMember, in line: UnsafeRawBufferPointer) throws(LineProblem) -> UnsafeRawBufferPointer {
        guard member.kind == .string else {
            throw LineProblem(reason: "\"channel_id\" must be a string (the channel's base64 id), not \(Self.describe(member.kind))")
        }
        guard let id = try text(member, in: line, scratch: Scratch.channelID), !id.isEmpty,
              id.allSatisfy(BroadcastRules.isChannelIDCharacter) else {
            throw LineProblem(reason: "\"channel_id\" must be 1 to \(BroadcastRules.channelIDLimit) base64 characters, as "
                              + "Apple made the channel's id; not \(Self.excerpt(member, in: line))")
        }
        return id
    }

    /// A broadcast's path carries the bare bundle id, and it has no collapse id.
    private static func checkBroadcast(topic: UnsafeRawBufferPointer?, collapseID: JSONMember?) throws(LineProblem) {
        if let collapseID, collapseID.kind != .null {
            throw LineProblem(reason: "\"collapse_id\" does not apply to a broadcast (\"channel_id\")")
        }
        if let topic, let owner = APNsPushType.owningSuffix(of: topic) {
            throw LineProblem(reason: "a broadcast's \"topic\" is the bare bundle id, without \"\(owner.topicSuffix!)\"")
        }
    }

    /// `collapse_id`: at most 64 bytes, and a valid HTTP/2 header value.
    private func collapseIDField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(LineProblem) -> UnsafeRawBufferPointer? {
        guard let member, member.kind != .null else { return nil }
        guard member.kind == .string else {
            throw LineProblem(reason: "\"collapse_id\" must be a string, not \(Self.describe(member.kind))")
        }
        guard let id = try text(member, in: line, scratch: Scratch.collapseID) else {
            throw LineProblem(reason:
                "\"collapse_id\" is \(try Self.decodedLength(member, in: line)) bytes; the limit is \(APNsRequestHeader.collapseIdLimit)")
        }
        guard !id.isEmpty else { throw LineProblem(reason: "\"collapse_id\" is empty") }
        // Escapes can make what an HTTP/2 field value must not hold (RFC 9113, 8.2.1); the
        // gateway would reset the stream, so the line is refused here, saying why.
        for index in 0..<id.count {
            let byte = id[index]
            if byte == 0x00 || byte == 0x0A || byte == 0x0D {
                throw LineProblem(reason: "\"collapse_id\" must not contain NUL, CR or LF (an HTTP/2 header value cannot)")
            }
        }
        if Self.isSpaceOrTab(id[0]) || Self.isSpaceOrTab(id[id.count - 1]) {
            throw LineProblem(reason: "\"collapse_id\" must not start or end with a space or tab (an HTTP/2 header value cannot)")
        }
        return id
    }

    private func apnsIDField(_ member: JSONMember?, in line: UnsafeRawBufferPointer) throws(LineProblem) -> APNsID? {
        guard let member, member.kind != .null else { return nil }
        if let text = try text(member, in: line, scratch: Scratch.word), let id = APNsID(text: text) { return id }
        throw LineProblem(reason: "\"apns_id\" must be a UUID (8-4-4-4-12 hex digits); not \(Self.excerpt(member, in: line))")
    }

    /// A string member's text: where it lies in the line when it has no escapes, else
    /// decoded into `scratch[part]`. Nil when it does not fit that part (or is no string).
    private func text(_ member: JSONMember, in line: UnsafeRawBufferPointer, scratch part: Range<Int>)
        throws(LineProblem) -> UnsafeRawBufferPointer?
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
            throw LineProblem(reason: error.description)  // the scanner validated the line: not expected
        }
        return length <= room.count ? UnsafeRawBufferPointer(rebasing: room[..<length]) : nil
    }

    /// A string member's length after decoding, for an error message.
    private static func decodedLength(_ member: JSONMember, in line: UnsafeRawBufferPointer) throws(LineProblem) -> Int {
        do throws(JSONScanError) {
            return try JSONScanner.decodeString(line, range: member.valueRange, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
        } catch {
            throw LineProblem(reason: error.description)
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

    private static func describe(_ kind: JSONKind) -> String {
        switch kind {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .true: "true"
        case .false: "false"
        case .null: "null"
        }
    }

    /// The first byte that is not a space, tab or CR. A plain loop rather than
    /// `firstIndex(where:)`, which allocates per element in unoptimised builds.
    private static func firstNonBlank(_ line: UnsafeRawBufferPointer) -> UInt8? {
        for index in 0..<line.count {
            let byte = line[index]
            if byte != 0x20, byte != 0x09, byte != 0x0D { return byte }
        }
        return nil
    }

    // MARK: - The shared payload

    /// How a payload limit is told: `the limit is 2048`, `the limit for alert is 4096`.
    private static func describeLimit(_ campaignProtocol: CampaignProtocol, _ limit: Int) -> String {
        switch campaignProtocol {
        case .binary: "the limit is \(limit)"
        case .http2(let defaultPushType): "the limit for \(defaultPushType) is \(limit)"
        }
    }

    /// Validates a token list's payload and minifies it into `storage`, whose size is the
    /// limit (`limit` says it in words); returns its length.
    private static func prepareSharedPayload(
        _ payload: [UInt8], into storage: UnsafeMutableRawBufferPointer, limit: String
    ) throws(CampaignError) -> Int {
        let result: Result<Int, CampaignError> = payload.withUnsafeBytes { json in
            let kind: JSONKind
            let range: Range<Int>
            do throws(JSONScanError) {
                (kind, range) = try JSONScanner.validate(json)
            } catch {
                return .failure(.invalidPayload(reason: "is not valid JSON: \(describe(error, in: json))"))
            }
            guard kind == .object else {
                return .failure(.invalidPayload(reason: "must be a JSON object, not \(describe(kind))"))
            }
            guard let length = JSONScanner.minify(json, range: range, into: storage) else {
                let length = JSONScanner.minifiedCount(json, range: range)
                return .failure(.invalidPayload(reason: "is \(length) bytes after minifying; \(limit)"))
            }
            return .success(length)
        }
        return try result.get()
    }

    /// A scan error in a multi-line text (a payload file), located by line and column.
    private static func describe(_ error: JSONScanError, in json: UnsafeRawBufferPointer) -> String {
        let before = json.prefix(error.offset)
        guard let lastNewline = before.lastIndex(of: 0x0A) else { return error.description }
        let line = before.count(where: { $0 == 0x0A }) + 1
        let column = JSONScanError(error.reason, at: error.offset - lastNewline - 1)
        return "line \(line): \(column)"
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

// MARK: - As a notification source

/// A campaign file as a `NotificationSource`: what `Sender.send(contentsOf:)` takes, so
/// that notifications the gateway discarded are read again from the file instead of
/// being kept in memory. Positions are byte offsets of lines; sequences are line numbers.
public struct CampaignFile: NotificationSource {
    /// Where the campaign comes from: a JSONL file, or a token list with one payload.
    public let source: CampaignSource
    /// The protocol the file is read for.
    public let campaignProtocol: CampaignProtocol
    /// What its readers do with a line they cannot use.
    public let badLinePolicy: BadLinePolicy
    /// The lines its readers read (a resume); nil: all of them.
    public var resumePlan: ResumePlan?
    /// The topics its readers take (`CampaignReader.topicRouting`); nil: any.
    public var topicRouting: TopicRouting?

    /// The largest payload its readers yield: see `CampaignReader.maximumPayloadLength`.
    public var maximumPayloadLength: Int { campaignProtocol.largestPayloadLength(for: source) }

    /// A campaign read for the binary protocol. Parameters: as for `CampaignReader.init`.
    public init(_ source: CampaignSource, maximumPayloadLength: Int = 2048, onBadLine: BadLinePolicy = .abort) {
        self.init(source, for: .binary(maximumPayloadLength: maximumPayloadLength), onBadLine: onBadLine)
    }

    /// A campaign read for `campaignProtocol`. Parameters: as for `CampaignReader.init`.
    public init(_ source: CampaignSource, for campaignProtocol: CampaignProtocol, onBadLine: BadLinePolicy = .abort) {
        self.source = source
        self.campaignProtocol = campaignProtocol
        badLinePolicy = onBadLine
    }

    public func makeReader() throws(CampaignError) -> CampaignReader {
        let reader = try CampaignReader(source, for: campaignProtocol, onBadLine: badLinePolicy)
        reader.resumePlan = resumePlan
        reader.topicRouting = topicRouting
        return reader
    }
}

extension CampaignReader: NotificationReader {
    public func next() throws(CampaignError) -> SourceNotification? {
        try nextNotification()
    }

    /// Moves to the line that starts at `position.offset`, numbered `position.sequence`.
    public func seek(to position: SourcePosition) throws(CampaignError) {
        try lines.seek(toOffset: position.offset, line: Int(position.sequence))
    }
}
