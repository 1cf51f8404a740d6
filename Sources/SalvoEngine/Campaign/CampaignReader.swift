import SalvoIO
import SalvoWire

/// Where a campaign's notifications come from: a file read line by line.
///
/// - `jsonl`: one JSON object per line,
///   `{"token": "<64 hex>", "payload": {...}, "expiry": 1735689600, "priority": 10, "id": ...}`.
///   `token` and `payload` (a JSON object) are required; `expiry` (UNIX seconds, a u32),
///   `priority` (5 or 10) and `id` (any JSON value, carried through for reports) are
///   optional, and `null` counts as absent. Other keys are ignored, so files made for
///   other tools work; a key given twice is an error, since which one wins would be a guess.
///   Blank lines are skipped.
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

/// One notification read from a campaign file.
///
/// `payload` and `id` point into the reader's buffers: they are valid only until the next
/// call to `nextItem()` or `skip(throughLine:)`, and the reader must stay alive meanwhile. Copy
/// them (the send path copies them into a frame) before reading on.
public struct CampaignItem {
    /// The line this notification came from (1-based).
    public var line: Int
    /// Where the line starts in the file, in bytes.
    public var offset: UInt64
    /// The device token.
    public var token: DeviceToken
    /// The payload, minified JSON, at most the reader's `maximumPayloadLength` bytes.
    public var payload: UnsafeRawBufferPointer
    /// UNIX seconds after which APNs may discard the notification, when given.
    public var expiry: UInt32?
    /// 10 (immediate) or 5 (power-saving), when given.
    public var priority: UInt8?
    /// The JSONL line's `id` value exactly as written (a string keeps its quotes), when given.
    public var id: UnsafeRawBufferPointer?

    public init(
        line: Int, offset: UInt64 = 0, token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32? = nil,
        priority: UInt8? = nil, id: UnsafeRawBufferPointer? = nil
    ) {
        self.line = line
        self.offset = offset
        self.token = token
        self.payload = payload
        self.expiry = expiry
        self.priority = priority
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
/// The file goes through one fixed read buffer (`maximumLineLength` plus two bytes), and
/// each payload is minified into one fixed payload buffer: memory does not depend on the
/// file's size, and in steady state `nextItem()` allocates nothing (no `String`s are made
/// for good lines). Not thread-safe: use a reader from one thread at a time.
///
/// ```swift
/// let reader = try CampaignReader(.jsonl("campaign.jsonl"), onBadLine: .skip)
/// while let item = try reader.nextItem() { /* encode item.token, item.payload ... */ }
/// print(reader.skippedLineCount, "lines skipped")
/// ```
public final class CampaignReader {
    /// The default longest line: 1 MiB, far beyond any notification (payloads are ≤ 4 KiB).
    public static let defaultMaximumLineLength = 1 << 20
    /// How many bad lines `skippedLines` keeps; `skippedLineCount` counts them all.
    public static let skippedLinesKept = 10_000

    /// The file being read.
    public let source: CampaignSource
    /// The longest payload accepted (after minifying), in bytes.
    public let maximumPayloadLength: Int
    /// What happens to unusable lines.
    public let badLinePolicy: BadLinePolicy
    /// The first `skippedLinesKept` lines skipped under `.skip`, in file order.
    public private(set) var skippedLines: [BadLine] = []
    /// How many lines were skipped under `.skip`.
    public private(set) var skippedLineCount = 0

    private var lines: LineReader
    private let format: Format
    /// Holds the payload `nextItem()` hands out: rewritten per line for JSONL, written once
    /// (the shared payload) for a token list.
    private let payloadStorage: UnsafeMutableRawBufferPointer

    private enum Format {
        case jsonl
        case tokens(payloadLength: Int)
    }

    /// Opens a campaign.
    ///
    /// - Parameters:
    ///   - source: the file and its format.
    ///   - maximumPayloadLength: the largest payload accepted, after minifying; 2048 for
    ///     the binary interface. 1...65535.
    ///   - onBadLine: stop at the first unusable line (default), or skip and record it.
    ///   - maximumLineLength: the longest line, in bytes; the read buffer is this size.
    /// - Throws: `CampaignError.io` when the file cannot be opened; `.invalidPayload` when
    ///   a token list's payload is not a JSON object or is too long.
    public init(
        _ source: CampaignSource, maximumPayloadLength: Int = 2048, onBadLine: BadLinePolicy = .abort,
        maximumLineLength: Int = CampaignReader.defaultMaximumLineLength
    ) throws(CampaignError) {
        precondition(
            (1...Int(UInt16.max)).contains(maximumPayloadLength),
            "maximumPayloadLength must be 1...65535, got \(maximumPayloadLength)")
        self.source = source
        self.maximumPayloadLength = maximumPayloadLength
        self.badLinePolicy = onBadLine
        let storage = UnsafeMutableRawBufferPointer.allocate(byteCount: maximumPayloadLength, alignment: 16)
        switch source {
        case .jsonl:
            format = .jsonl
        case .tokens(_, let payload):
            do throws(CampaignError) {
                format = .tokens(payloadLength: try Self.prepareSharedPayload(payload, into: storage))
            } catch {
                storage.deallocate()
                throw error
            }
        }
        payloadStorage = storage
        do throws(CampaignError) {
            lines = try LineReader(path: source.path, maximumLineLength: maximumLineLength)
        } catch {
            storage.deallocate()
            throw error
        }
    }

    deinit { payloadStorage.deallocate() }

    /// The number of lines read so far (the last line returned or skipped).
    public var linesRead: Int { lines.lineNumber }

    /// The read buffer's size; constant for the reader's life.
    var readBufferCapacity: Int { lines.bufferCapacity }

    /// The next notification, or nil at the end of the file.
    ///
    /// - Throws: `CampaignError.badLine` for an unusable line under `.abort` (under
    ///   `.skip` it is recorded and reading goes on); `.lineTooLong`; `.io`.
    public func nextItem() throws(CampaignError) -> CampaignItem? {
        while let line = try lines.nextLine() {
            do throws(LineProblem) {
                if let item = try parse(line) { return item }
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

    /// An item for `line`, nil for a line to pass over (blank, comment).
    private func parse(_ line: UnsafeRawBufferPointer) throws(LineProblem) -> CampaignItem? {
        switch format {
        case .jsonl:
            return try parseJSONLine(line)
        case .tokens(let payloadLength):
            return try parseTokenLine(line, payload: UnsafeRawBufferPointer(rebasing: payloadStorage[..<payloadLength]))
        }
    }

    private func parseTokenLine(_ line: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) throws(LineProblem) -> CampaignItem? {
        guard let first = Self.firstNonBlank(line), first != UInt8(ascii: "#") else { return nil }
        do throws(DeviceTokenError) {
            return CampaignItem(line: lines.lineNumber, offset: lines.lineOffset, token: try DeviceToken(hex: line), payload: payload)
        } catch {
            throw LineProblem(reason: error.description)
        }
    }

    private func parseJSONLine(_ line: UnsafeRawBufferPointer) throws(LineProblem) -> CampaignItem? {
        guard Self.firstNonBlank(line) != nil else { return nil }
        let fields: JSONLineFields
        do throws(JSONScanError) {
            fields = try JSONLineFields(scanning: line)
        } catch {
            throw LineProblem(reason: error.description)
        }
        if let duplicate = fields.duplicateKey { throw LineProblem(reason: "\"\(duplicate)\" is given more than once") }

        guard let tokenMember = fields.token else { throw LineProblem(reason: "missing \"token\"") }
        let token = try Self.token(tokenMember, in: line)

        guard let payloadMember = fields.payload, payloadMember.kind != .null else {
            throw LineProblem(reason: "missing \"payload\"")
        }
        guard payloadMember.kind == .object else {
            throw LineProblem(reason: "\"payload\" must be a JSON object, not \(Self.describe(payloadMember.kind))")
        }
        guard let payloadLength = JSONScanner.minify(line, range: payloadMember.valueRange, into: payloadStorage) else {
            let length = JSONScanner.minifiedCount(line, range: payloadMember.valueRange)
            throw LineProblem(reason: "payload is \(length) bytes; the limit is \(maximumPayloadLength)")
        }

        var expiry: UInt32?
        if let member = fields.expiry, member.kind != .null {
            guard let value = Self.integer(member, in: line), let fitting = UInt32(exactly: value) else {
                throw LineProblem(reason:
                    "\"expiry\" must be an integer from 0 to \(UInt32.max) (UNIX seconds), not \(Self.excerpt(member, in: line))")
            }
            expiry = fitting
        }
        var priority: UInt8?
        if let member = fields.priority, member.kind != .null {
            guard let value = Self.integer(member, in: line), value == 5 || value == 10 else {
                throw LineProblem(reason: "\"priority\" must be 5 or 10, not \(Self.excerpt(member, in: line))")
            }
            priority = UInt8(value)
        }
        let id = fields.id.flatMap { $0.kind == .null ? nil : $0.value(in: line) }

        return CampaignItem(
            line: lines.lineNumber, offset: lines.lineOffset, token: token,
            payload: UnsafeRawBufferPointer(rebasing: payloadStorage[..<payloadLength]),
            expiry: expiry, priority: priority, id: id)
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

    /// Validates a token list's payload and minifies it into `storage`; returns its length.
    private static func prepareSharedPayload(
        _ payload: [UInt8], into storage: UnsafeMutableRawBufferPointer
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
                return .failure(.invalidPayload(
                    reason: "is \(length) bytes after minifying; the limit is \(storage.count)"))
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
    var priority: JSONMember?
    var id: JSONMember?
    /// The first known key that appeared twice.
    var duplicateKey: StaticString?

    init(scanning line: UnsafeRawBufferPointer) throws(JSONScanError) {
        var members = JSONObjectMembers(line)
        while let member = try members.next() {
            if member.keyEquals("token", in: line) {
                if token != nil { noteDuplicate("token") }
                token = member
            } else if member.keyEquals("payload", in: line) {
                if payload != nil { noteDuplicate("payload") }
                payload = member
            } else if member.keyEquals("expiry", in: line) {
                if expiry != nil { noteDuplicate("expiry") }
                expiry = member
            } else if member.keyEquals("priority", in: line) {
                if priority != nil { noteDuplicate("priority") }
                priority = member
            } else if member.keyEquals("id", in: line) {
                if id != nil { noteDuplicate("id") }
                id = member
            }
        }
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
    public let source: CampaignSource
    public let maximumPayloadLength: Int
    public let badLinePolicy: BadLinePolicy

    /// - Parameters: as for `CampaignReader.init`.
    public init(_ source: CampaignSource, maximumPayloadLength: Int = 2048, onBadLine: BadLinePolicy = .abort) {
        self.source = source
        self.maximumPayloadLength = maximumPayloadLength
        badLinePolicy = onBadLine
    }

    public func makeReader() throws(CampaignError) -> CampaignReader {
        try CampaignReader(source, maximumPayloadLength: maximumPayloadLength, onBadLine: badLinePolicy)
    }
}

extension CampaignReader: NotificationReader {
    public func next() throws(CampaignError) -> SourceNotification? {
        guard let item = try nextItem() else { return nil }
        return SourceNotification(token: item.token, payload: item.payload, expiry: item.expiry, priority: item.priority,
                                  position: SourcePosition(offset: item.offset, sequence: UInt64(item.line)))
    }

    /// Moves to the line that starts at `position.offset`, numbered `position.sequence`.
    public func seek(to position: SourcePosition) throws(CampaignError) {
        try lines.seek(toOffset: position.offset, line: Int(position.sequence))
    }
}
