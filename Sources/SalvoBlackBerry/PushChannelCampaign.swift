import Foundation
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire

/// One Push Channel notification of a campaign: where it came from, the token, the payload
/// and, when the line names one, a regional NOC host.
public struct PushChannelItem: Sendable, Hashable {
    /// The campaign line (1-based).
    public var line: Int
    /// The Push Channel token, opaque text.
    public var token: String
    /// The payload: UTF-8 text, possibly empty.
    public var payload: [UInt8]
    /// `HOST` or `HOST:PORT` from the line's `host`, or nil.
    public var host: String?

    /// An item with these parts.
    public init(line: Int, token: String, payload: [UInt8], host: String? = nil) {
        self.line = line
        self.token = token
        self.payload = payload
        self.host = host
    }
}

/// A Push Channel campaign file: a JSONL file of `{"token", "payload", "host"?}` lines, or a
/// token list (one token a line) with one payload for all.
public enum PushChannelCampaignSource: Sendable, Hashable {
    /// JSONL: `token` a string, `payload` a string, `host` an optional string.
    case jsonl(String)
    /// One token a line; every token gets `payload` (UTF-8 bytes).
    case tokens(String, payload: [UInt8])

    /// The file read.
    public var path: String {
        switch self {
        case .jsonl(let path), .tokens(let path, _): path
        }
    }
}

/// Reads a Push Channel campaign one notification at a time, in constant memory, with the
/// line numbers, bad-line policy and errors of the APNs campaigns (`CampaignError`,
/// `BadLine`), so that checkpoints, reports and resumes work the same.
///
/// A line is bad when: it is not UTF-8; (JSONL) it is not a JSON object with a string
/// `token` and a string `payload`, or `host` is not a string; the token is empty, longer
/// than 4096 bytes or holds a control character (it goes into a header); the payload is
/// over `maximumPayloadBytes` UTF-8 bytes. Blank lines are skipped without a word, as in
/// APNs campaigns. Not thread-safe.
public final class PushChannelCampaignReader {
    /// What is read.
    public let source: PushChannelCampaignSource
    /// The largest payload accepted, in UTF-8 bytes.
    public let maximumPayloadBytes: Int
    /// Abort at the first bad line, or skip and list it.
    public let badLinePolicy: BadLinePolicy
    /// Bad lines skipped (the first `CampaignReader.skippedLinesKept`).
    public private(set) var skippedLines: [BadLine] = []
    /// All bad lines skipped.
    public private(set) var skippedLineCount = 0
    /// Which lines are read (a resume); the others are passed over unparsed. Nil: all.
    public var resumePlan: ResumePlan?
    private var lines: LineReader

    /// The longest token accepted, in bytes.
    public static let maximumTokenLength = 4096

    /// Opens the file.
    ///
    /// - Throws: `CampaignError.io`; `.invalidPayload` when the token list's payload is over
    ///   the limit.
    public init(_ source: PushChannelCampaignSource, maximumPayloadBytes: Int = GNP.defaultMaximumPayloadBytes,
                onBadLine: BadLinePolicy = .abort) throws(CampaignError) {
        if case .tokens(_, let payload) = source, payload.count > maximumPayloadBytes {
            throw .invalidPayload(reason: "is \(payload.count) bytes, over the limit of \(maximumPayloadBytes)")
        }
        self.source = source
        self.maximumPayloadBytes = maximumPayloadBytes
        badLinePolicy = onBadLine
        lines = try LineReader(path: source.path, maximumLineLength: CampaignReader.defaultMaximumLineLength)
    }

    /// Lines read (or skipped) so far.
    public var linesRead: Int { lines.lineNumber }

    /// The next notification, or nil at the end of the file.
    ///
    /// - Throws: `CampaignError.badLine` under `.abort`; `.io`, `.lineTooLong`.
    public func next() throws(CampaignError) -> PushChannelItem? {
        while let bytes = try lines.nextLine() {
            let line = lines.lineNumber
            if let resumePlan, !resumePlan.includes(line: line) { continue }
            if bytes.allSatisfy({ $0 == 0x20 || $0 == 0x09 }) { continue }
            switch parse(bytes, line: line) {
            case .success(let item): return item
            case .failure(let bad):
                guard badLinePolicy == .skip else { throw .badLine(bad) }
                skippedLineCount += 1
                if skippedLines.count < CampaignReader.skippedLinesKept { skippedLines.append(bad) }
            }
        }
        return nil
    }

    /// Skips every line up to and including `last` (a resume).
    public func skip(throughLine last: Int) throws(CampaignError) {
        while lines.lineNumber < last {
            guard try lines.nextLine() != nil else { return }
        }
    }

    private enum Parsed {
        case success(PushChannelItem)
        case failure(BadLine)
    }

    private func parse(_ bytes: UnsafeRawBufferPointer, line: Int) -> Parsed {
        guard let text = String(validating: bytes, as: UTF8.self) else {
            return .failure(BadLine(line: line, reason: "not UTF-8 text\(Self.invalidByteOffset(bytes).map { " (byte \($0 + 1))" } ?? "")"))
        }
        switch source {
        case .tokens(_, let payload):
            return item(token: text.trimmingCharacters(in: .whitespaces), payload: payload, host: nil, line: line)
        case .jsonl:
            guard let object = try? JSONSerialization.jsonObject(with: Data(bytes)) as? [String: Any] else {
                return .failure(BadLine(line: line, reason: "not a JSON object"))
            }
            guard let token = object["token"] as? String else {
                return .failure(BadLine(line: line, reason: object["token"] == nil ? "no \"token\"" : "\"token\" is not a string"))
            }
            guard let payload = object["payload"] as? String else {
                return .failure(BadLine(line: line, reason: object["payload"] == nil
                    ? "no \"payload\"" : "\"payload\" is not a string (a Push Channel payload is text)"))
            }
            let host = object["host"]
            if let host, !(host is String) { return .failure(BadLine(line: line, reason: "\"host\" is not a string")) }
            return item(token: token, payload: Array(payload.utf8), host: host as? String, line: line)
        }
    }

    private func item(token: String, payload: [UInt8], host: String?, line: Int) -> Parsed {
        if token.isEmpty { return .failure(BadLine(line: line, reason: "empty token")) }
        if token.utf8.count > Self.maximumTokenLength {
            return .failure(BadLine(line: line, reason: "token longer than \(Self.maximumTokenLength) bytes"))
        }
        if token.unicodeScalars.contains(where: { $0.value < 0x20 || $0.value == 0x7F }) {
            return .failure(BadLine(line: line, reason: "control character in the token"))
        }
        if payload.count > maximumPayloadBytes {
            return .failure(BadLine(line: line, reason: "payload is \(payload.count) bytes (UTF-8), over the limit of \(maximumPayloadBytes)"))
        }
        if let host, !Self.isHostAndOptionalPort(host) {
            return .failure(BadLine(line: line, reason: "\"host\" '\(host)' is not HOST, HOST:PORT or [IPV6]:PORT"))
        }
        return .success(PushChannelItem(line: line, token: token, payload: payload, host: host))
    }

    /// `HOST`, `HOST:PORT`, `[IPV6]`, `[IPV6]:PORT` or a bare IPv6 address; a port is 1...65535.
    static func isHostAndOptionalPort(_ text: String) -> Bool {
        func isPort(_ digits: Substring) -> Bool { digits.allSatisfy(\.isASCII) && Int(digits).map { (1...65535).contains($0) } == true }
        func isName(_ name: Substring) -> Bool {
            !name.isEmpty && name.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "." || $0 == "-" || $0 == "_") }
        }
        if text.hasPrefix("[") {
            guard let close = text.firstIndex(of: "]") else { return false }
            let address = text[text.index(after: text.startIndex)..<close]
            let rest = text[text.index(after: close)...]
            guard !address.isEmpty, address.allSatisfy({ $0.isHexDigit || $0 == ":" || $0 == "." }) else { return false }
            return rest.isEmpty || (rest.first == ":" && isPort(rest.dropFirst()))
        }
        let colons = text.filter { $0 == ":" }.count
        if colons == 0 { return isName(text[...]) }
        if colons == 1 {
            let parts = text.split(separator: ":", omittingEmptySubsequences: false)
            return isName(parts[0]) && isPort(parts[1])
        }
        return text.allSatisfy { $0.isHexDigit || $0 == ":" || $0 == "." }
    }

    /// Where the first byte that breaks UTF-8 is.
    static func invalidByteOffset(_ bytes: UnsafeRawBufferPointer) -> Int? {
        var offset = 0
        var iterator = bytes.makeIterator()
        var decoder = UTF8()
        while true {
            switch decoder.decode(&iterator) {
            case .scalarValue(let scalar): offset += UTF8.width(scalar)
            case .emptyInput: return nil
            case .error: return offset
            }
        }
    }
}

