/// One HTTP/1.1 request, as `HTTP1RequestParser` hands it out.
public struct HTTP1Request: Sendable, Hashable {
    /// The method, as sent (`GET`, `POST`).
    public var method: String
    /// The request target (`/GNP1.0?method=notify`).
    public var target: String
    /// The header fields in order, names as sent.
    public var headers: [(name: String, value: String)]
    /// The body: exactly `Content-Length` bytes (none without that header).
    public var body: [UInt8]
    /// Whether the client asked to close after this request (`Connection: close`).
    public var closeAfter: Bool

    /// The first value of the header `name` (case-insensitive), or nil.
    public func header(_ name: String) -> String? {
        headers.first { $0.name.lowercased() == name.lowercased() }?.value
    }

    /// A request with these parts.
    public init(method: String, target: String, headers: [(name: String, value: String)], body: [UInt8],
                closeAfter: Bool) {
        self.method = method
        self.target = target
        self.headers = headers
        self.body = body
        self.closeAfter = closeAfter
    }

    public static func == (a: HTTP1Request, b: HTTP1Request) -> Bool {
        a.method == b.method && a.target == b.target && a.body == b.body && a.closeAfter == b.closeAfter
            && a.headers.map(\.name) == b.headers.map(\.name) && a.headers.map(\.value) == b.headers.map(\.value)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(method)
        hasher.combine(target)
        hasher.combine(body)
    }
}

/// Why the bytes on a connection are not an HTTP/1.1 request this parser takes. The
/// connection cannot be trusted after one: answer 400 (or 413, 501) and close.
public enum HTTP1ParseError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The request line or a header line is not well-formed.
    case malformed(String)
    /// The head is longer than the parser's limit.
    case headTooLarge(limit: Int)
    /// `Content-Length` is over the parser's body limit.
    case bodyTooLarge(length: Int, limit: Int)
    /// Something this parser does not do (chunked bodies, another HTTP version).
    case unsupported(String)

    /// The problem, for logs and the 4xx body.
    public var description: String {
        switch self {
        case .malformed(let what): "malformed request: \(what)"
        case .headTooLarge(let limit): "request head longer than \(limit) bytes"
        case .bodyTooLarge(let length, let limit): "body of \(length) bytes, over the limit of \(limit)"
        case .unsupported(let what): "unsupported: \(what)"
        }
    }

    /// The HTTP status that answers it.
    public var status: Int {
        switch self {
        case .malformed: 400
        case .headTooLarge: 431
        case .bodyTooLarge: 413
        case .unsupported: 501
        }
    }
}

/// A small, strict, incremental HTTP/1.1 request parser: bytes in as they arrive, whole
/// requests out, keep-alive and pipelining, bodies by `Content-Length` only.
///
/// Strict because the mock NOC must count exactly: anything ambiguous (a bare LF, folded
/// headers, two `Content-Length`s, `Transfer-Encoding`, HTTP/1.0) is an error rather than a
/// guess. Pure: no I/O, testable and fuzzable without sockets.
///
/// ```swift
/// var parser = HTTP1RequestParser()
/// parser.append(bytes)
/// while let request = try parser.next() { answer(request) }
/// ```
public struct HTTP1RequestParser: Sendable {
    /// The longest request line plus headers accepted, in bytes.
    public let maximumHeadLength: Int
    /// The largest `Content-Length` accepted.
    public let maximumBodyLength: Int
    private var buffer: [UInt8] = []
    /// Bytes of `buffer` already handed out (removed in batches, not per request).
    private var consumed = 0
    /// After an error the parser takes nothing more.
    private var failed = false

    /// A parser with these limits (8 KiB of head, 64 KiB of body by default).
    public init(maximumHeadLength: Int = 8192, maximumBodyLength: Int = 65536) {
        self.maximumHeadLength = maximumHeadLength
        self.maximumBodyLength = maximumBodyLength
    }

    /// Bytes received and not yet part of a request handed out.
    public var bufferedByteCount: Int { buffer.count - consumed }

    /// Adds bytes as they arrive from the connection.
    public mutating func append(_ bytes: some Sequence<UInt8>) {
        if consumed > 0, consumed >= buffer.count / 2 {
            buffer.removeFirst(consumed)
            consumed = 0
        }
        buffer.append(contentsOf: bytes)
    }

    /// The next whole request, or nil when more bytes are needed.
    ///
    /// - Throws: `HTTP1ParseError`; every later call throws again.
    public mutating func next() throws(HTTP1ParseError) -> HTTP1Request? {
        if failed { throw .malformed("the connection already sent a bad request") }
        do {
            return try parseNext()
        } catch {
            failed = true
            throw error
        }
    }

    private mutating func parseNext() throws(HTTP1ParseError) -> HTTP1Request? {
        let start = consumed
        guard let headEnd = findHeadEnd(from: start) else {
            if buffer.count - start > maximumHeadLength { throw .headTooLarge(limit: maximumHeadLength) }
            return nil
        }
        guard headEnd - start <= maximumHeadLength else { throw .headTooLarge(limit: maximumHeadLength) }
        var lines = try splitLines(start..<headEnd)
        guard !lines.isEmpty else { throw .malformed("empty request line") }
        let requestLine = lines.removeFirst()
        let (method, target) = try Self.parseRequestLine(requestLine)
        var headers: [(name: String, value: String)] = []
        var contentLength: Int?
        var closeAfter = false
        for line in lines {
            let (name, value) = try Self.parseHeader(line)
            switch name.lowercased() {
            case "content-length":
                guard contentLength == nil else { throw .malformed("more than one Content-Length") }
                guard !value.isEmpty, value.count <= 10, value.utf8.allSatisfy({ (0x30...0x39).contains($0) }),
                      let length = Int(value) else { throw .malformed("Content-Length '\(value)'") }
                guard length <= maximumBodyLength else { throw .bodyTooLarge(length: length, limit: maximumBodyLength) }
                contentLength = length
            case "transfer-encoding":
                throw .unsupported("Transfer-Encoding \(value)")
            case "connection":
                closeAfter = value.lowercased().split(separator: ",").contains { $0.trimmingSpaces == "close" }
            default:
                break
            }
            headers.append((name, value))
        }
        let bodyStart = headEnd + 4
        let length = contentLength ?? 0
        guard buffer.count - bodyStart >= length else { return nil }
        consumed = bodyStart + length
        return HTTP1Request(method: method, target: target, headers: headers,
                            body: Array(buffer[bodyStart..<bodyStart + length]), closeAfter: closeAfter)
    }

    /// The index of the `\r\n\r\n` that ends the head starting at `start`.
    private func findHeadEnd(from start: Int) -> Int? {
        var index = start
        while index + 3 < buffer.count {
            if buffer[index] == 0x0D, buffer[index + 1] == 0x0A, buffer[index + 2] == 0x0D, buffer[index + 3] == 0x0A {
                return index
            }
            index += 1
        }
        return nil
    }

    /// The head's lines, each ended by CRLF; a bare CR or LF, a control byte or a non-ASCII
    /// byte is an error.
    private func splitLines(_ range: Range<Int>) throws(HTTP1ParseError) -> [Substring] {
        var lines: [Substring] = []
        var lineStart = range.lowerBound
        var index = range.lowerBound
        while index < range.upperBound {
            let byte = buffer[index]
            if byte == 0x0D {
                guard index + 1 < range.upperBound, buffer[index + 1] == 0x0A else { throw .malformed("bare CR") }
                lines.append(Self.text(buffer[lineStart..<index]))
                index += 2
                lineStart = index
                continue
            }
            if byte == 0x0A { throw .malformed("bare LF") }
            if byte != 0x09 && (byte < 0x20 || byte >= 0x7F) { throw .malformed("byte 0x\(String(byte, radix: 16)) in the head") }
            index += 1
        }
        lines.append(Self.text(buffer[lineStart..<range.upperBound]))
        return lines
    }

    private static func text(_ bytes: ArraySlice<UInt8>) -> Substring {
        Substring(String(decoding: bytes, as: UTF8.self))
    }

    private static func parseRequestLine(_ line: Substring) throws(HTTP1ParseError) -> (String, String) {
        let parts = line.split(separator: " ", omittingEmptySubsequences: false)
        guard parts.count == 3, !parts[0].isEmpty, !parts[1].isEmpty else { throw .malformed("request line '\(line)'") }
        guard parts[0].allSatisfy({ $0.isASCII && $0.isUppercase }) else { throw .malformed("method '\(parts[0])'") }
        guard parts[2] == "HTTP/1.1" else { throw .unsupported("version '\(parts[2])'") }
        return (String(parts[0]), String(parts[1]))
    }

    private static func parseHeader(_ line: Substring) throws(HTTP1ParseError) -> (String, String) {
        guard let colon = line.firstIndex(of: ":") else { throw .malformed("header line without a colon") }
        let name = line[..<colon]
        guard !name.isEmpty, name.allSatisfy(isTokenCharacter) else {
            throw .malformed(name.first == " " || name.first == "\t" ? "folded header line" : "header name '\(name)'")
        }
        return (String(name), String(line[line.index(after: colon)...].trimmingSpaces))
    }

    private static func isTokenCharacter(_ character: Character) -> Bool {
        guard character.isASCII, let value = character.asciiValue else { return false }
        return (0x21...0x7E).contains(value) && !"\"(),/:;<=>?@[\\]{}".contains(character)
    }
}

extension Substring {
    /// Without leading and trailing spaces and tabs.
    fileprivate var trimmingSpaces: Substring {
        var text = self
        while text.first == " " || text.first == "\t" { text.removeFirst() }
        while text.last == " " || text.last == "\t" { text.removeLast() }
        return text
    }
}
