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

    private enum Format {
        /// Each line parsed by the rules every JSON notification is read by.
        case jsonl(NotificationLineParser)
        /// Every line gets this payload, minified once.
        case tokens(payload: UnsafeMutableRawBufferPointer)
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
        switch source {
        case .jsonl:
            format = .jsonl(NotificationLineParser(for: campaignProtocol))
        case .tokens(_, let payload):
            let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumPayloadLength, alignment: 16)
            do throws(CampaignError) {
                let length = try Self.prepareSharedPayload(payload, into: storage,
                                                           limit: Self.describeLimit(campaignProtocol, storage.count))
                format = .tokens(payload: UnsafeMutableRawBufferPointer(rebasing: storage[..<length]))
            } catch {
                storage.deallocate()
                throw error
            }
        }
        do throws(CampaignError) {
            lines = try LineReader(path: source.path, maximumLineLength: maximumLineLength)
        } catch {
            if case .tokens(let payload) = format { payload.deallocate() }
            throw error
        }
    }

    deinit {
        if case .tokens(let payload) = format { payload.deallocate() }
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
            do throws(NotificationLineError) {
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
    private func parse(_ line: UnsafeRawBufferPointer) throws(NotificationLineError) -> SourceNotification? {
        let notification: SourceNotification?
        switch format {
        case .jsonl(let parser):
            let parsed = try parser.parse(line, at: position)
            notification = parsed?.notification
            lastLineID = parsed?.id
        case .tokens(let payload):
            notification = try parseTokenLine(line, payload: UnsafeRawBufferPointer(payload))
            lastLineID = nil
        }
        if let topicRouting, let notification, topicRouting.topic(of: notification) == nil {
            throw NotificationLineError(reason: topicRouting.problem(with: notification))
        }
        return notification
    }

    private func parseTokenLine(_ line: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer)
        throws(NotificationLineError) -> SourceNotification?
    {
        guard let first = NotificationLineParser.firstNonBlank(line), first != UInt8(ascii: "#") else { return nil }
        do throws(DeviceTokenError) {
            return SourceNotification(token: try DeviceToken(hex: line), payload: payload, position: position)
        } catch {
            throw NotificationLineError(reason: error.description)
        }
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
                return .failure(.invalidPayload(reason: "must be a JSON object, not \(kind.phrase)"))
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
