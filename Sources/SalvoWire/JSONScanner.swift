/// What kind of JSON value the scanner found.
public enum JSONKind: Sendable, Equatable {
    /// `{...}`
    case object
    /// `[...]`
    case array
    /// A quoted string.
    case string
    /// A number, integer or not.
    case number
    /// The literal `true`.
    case `true`
    /// The literal `false`.
    case `false`
    /// The literal `null`.
    case null

    /// The kind as an error message names it: `an object`, `a string`, `null`.
    public var phrase: String {
        switch self {
        case .object: "an object"
        case .array: "an array"
        case .string: "a string"
        case .number: "a number"
        case .true: "true"
        case .false: "false"
        case .null: "null"
        }
    }
}

/// One member of a scanned JSON object: where its key and value lie in the scanned bytes.
///
/// Holds offsets, not pointers, so it can outlive the closure that produced it; read the
/// bytes back with the same buffer.
public struct JSONMember: Sendable, Equatable {
    /// Offsets of the key's text between its quotes, still escaped.
    public let keyRange: Range<Int>
    /// Whether the key text contains backslash escapes (its raw bytes are then not its name).
    public let keyHasEscapes: Bool
    /// Offsets of the value, exactly as written (strings include their quotes).
    public let valueRange: Range<Int>
    /// What the value is.
    public let kind: JSONKind

    /// The key's raw (escaped) bytes inside `json`, the buffer that was scanned.
    public func key(in json: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: json[keyRange])
    }

    /// The value's bytes inside `json`, the buffer that was scanned.
    public func value(in json: UnsafeRawBufferPointer) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: json[valueRange])
    }

    /// Whether the key is `name`. Compares raw bytes without allocating unless the key is
    /// escaped (rare: `"to\u006Ben"`), in which case it is decoded first.
    public func keyEquals(_ name: StaticString, in json: UnsafeRawBufferPointer) -> Bool {
        let expected = UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount)
        if !keyHasEscapes {
            return keyRange.count == expected.count
                && (expected.isEmpty || memoryEquals(json.baseAddress! + keyRange.lowerBound, expected.baseAddress!, expected.count))
        }
        let quoted = (keyRange.lowerBound - 1)..<(keyRange.upperBound + 1)
        guard let decoded = try? JSONScanner.string(json, range: quoted) else { return false }
        return decoded.utf8.elementsEqual(expected)
    }
}

@inline(__always)
private func memoryEquals(_ a: UnsafeRawPointer, _ b: UnsafeRawPointer, _ count: Int) -> Bool {
    for i in 0..<count where a.load(fromByteOffset: i, as: UInt8.self) != b.load(fromByteOffset: i, as: UInt8.self) {
        return false
    }
    return true
}

/// Why JSON text was rejected, and where.
public struct JSONScanError: Error, Equatable, Sendable, CustomStringConvertible {
    /// What was wrong.
    public enum Reason: Equatable, Sendable {
        /// Something else was found (or the input ended) where this was required, e.g. "':'".
        case expected(String)
        /// A string with no closing quote; the offset is its opening quote.
        case unterminatedString
        /// A backslash followed by a character JSON does not allow there.
        case invalidEscape
        /// `\u` not followed by four hex digits.
        case invalidUnicodeEscape
        /// A `\uD800`–`\uDFFF` escape that is not half of a surrogate pair.
        case unpairedSurrogate
        /// A raw control character (below U+0020) inside a string; it must be escaped.
        case controlCharacterInString
        /// Bytes that are not valid UTF-8 inside a string.
        case invalidUTF8
        /// A malformed number (`-`, `1.`, `1e`, `01`).
        case invalidNumber
        /// A word that is not `true`, `false` or `null`.
        case invalidLiteral
        /// Arrays and objects nested deeper than the limit.
        case nestingTooDeep(limit: Int)
        /// Non-whitespace after the end of the JSON value.
        case trailingCharacters
        /// A number with a fraction or exponent where an integer was required.
        case notAnInteger
        /// An integer outside the range of `Int64`.
        case integerOutOfRange
    }

    /// What was wrong.
    public let reason: Reason
    /// Zero-based byte offset of the problem in the scanned buffer.
    public let offset: Int

    /// The error `reason`, found at byte `offset` of the scanned buffer.
    public init(_ reason: Reason, at offset: Int) {
        self.reason = reason
        self.offset = offset
    }

    /// One-based byte column of the problem (for a JSONL line, the column in that line).
    public var column: Int { offset + 1 }

    /// The problem and its column, as a bad line's reason reads: `expected ':' at column 12`.
    public var description: String {
        let what: String
        switch reason {
        case .expected(let thing): what = "expected \(thing)"
        case .unterminatedString: what = "unterminated string"
        case .invalidEscape: what = "invalid escape sequence in string"
        case .invalidUnicodeEscape: what = "\\u must be followed by four hex digits"
        case .unpairedSurrogate: what = "unpaired UTF-16 surrogate escape"
        case .controlCharacterInString: what = "control character in string (must be escaped)"
        case .invalidUTF8: what = "invalid UTF-8"
        case .invalidNumber: what = "invalid number"
        case .invalidLiteral: what = "invalid literal (expected true, false or null)"
        case .nestingTooDeep(let limit): what = "arrays and objects nested deeper than \(limit) levels"
        case .trailingCharacters: what = "unexpected characters after the JSON value"
        case .notAnInteger: what = "expected an integer"
        case .integerOutOfRange: what = "integer out of range"
        }
        return "\(what) at column \(column)"
    }
}

/// A validating JSON scanner over raw bytes that allocates nothing.
///
/// It does not build values: it checks the full JSON grammar (RFC 8259, plus UTF-8
/// validity inside strings and paired surrogate escapes) and reports where things are, so
/// a caller can copy a payload straight from an input line into a frame.
public enum JSONScanner {
    /// How deeply arrays and objects may nest (the top-level value counts as 1).
    public static let maximumDepth = 64

    /// Validates `json` as one JSON object and calls `visit` with each top-level member's
    /// raw key bytes and its location, in order. Nested values are validated, not visited.
    ///
    /// `visit` may run for some members before an error later in the text is thrown.
    public static func members(
        ofObject json: UnsafeRawBufferPointer, _ visit: (_ key: UnsafeRawBufferPointer, _ member: JSONMember) -> Void
    ) throws(JSONScanError) {
        var iterator = JSONObjectMembers(json)
        while let member = try iterator.next() {
            visit(member.key(in: json), member)
        }
    }

    /// Validates that `json` is exactly one JSON value (surrounded by optional whitespace)
    /// and returns its kind and where it is.
    @discardableResult
    public static func validate(_ json: UnsafeRawBufferPointer) throws(JSONScanError) -> (kind: JSONKind, range: Range<Int>) {
        var cursor = Cursor(json, range: 0..<json.count)
        cursor.skipWhitespace()
        let start = cursor.position
        let kind = try cursor.value(depth: 1)
        let end = cursor.position
        cursor.skipWhitespace()
        guard cursor.atEnd else { throw JSONScanError(.trailingCharacters, at: cursor.position) }
        return (kind, start..<end)
    }

    /// Copies the JSON in `range` of `json` (all of it by default) to `destination`, dropping
    /// whitespace outside strings. Returns the bytes written, or nil when they do not fit
    /// (then `destination`'s contents are unspecified).
    ///
    /// The input must be valid JSON (validate it first, e.g. with `members(ofObject:)`);
    /// on other input the output is meaningless, though memory stays safe.
    public static func minify(
        _ json: UnsafeRawBufferPointer, range: Range<Int>? = nil, into destination: UnsafeMutableRawBufferPointer
    ) -> Int? {
        let count = compact(json, range: range ?? 0..<json.count, into: destination)
        return count <= destination.count ? count : nil
    }

    /// The length `minify` would produce, without writing anything.
    public static func minifiedCount(_ json: UnsafeRawBufferPointer, range: Range<Int>? = nil) -> Int {
        compact(json, range: range ?? 0..<json.count, into: UnsafeMutableRawBufferPointer(start: nil, count: 0))
    }

    /// The bytes of a string value in `range` (quotes included) when it has no escapes:
    /// exactly its UTF-8 text, with no copy. Nil for escaped strings and other kinds.
    public static func plainString(_ json: UnsafeRawBufferPointer, range: Range<Int>) -> UnsafeRawBufferPointer? {
        guard range.count >= 2, json[range.lowerBound] == UInt8(ascii: "\""),
            json[range.upperBound - 1] == UInt8(ascii: "\"")
        else { return nil }
        let inner = UnsafeRawBufferPointer(rebasing: json[(range.lowerBound + 1)..<(range.upperBound - 1)])
        return inner.contains(UInt8(ascii: "\\")) ? nil : inner
    }

    /// Decodes the string value in `range` (quotes included), resolving escapes.
    /// Allocates the `String`; for hot paths prefer `plainString`, or `decodeString(_:range:into:)`.
    ///
    /// - Throws: `.expected("a string")` when the value is not a string; escape errors.
    public static func string(_ json: UnsafeRawBufferPointer, range: Range<Int>) throws(JSONScanError) -> String {
        var failure: JSONScanError?
        // Decoding never lengthens text (an escape is always longer than what it makes),
        // so the raw length is enough room.
        let result = String(unsafeUninitializedCapacity: range.count) { output in
            do throws(JSONScanError) {
                return try decodeString(json, range: range, into: UnsafeMutableRawBufferPointer(output))
            } catch {
                failure = error
                return 0
            }
        }
        if let failure { throw failure }
        return result
    }

    /// Decodes the string value in `range` (quotes included), resolving escapes, into
    /// `destination`, and returns the decoded length in bytes. Allocates nothing.
    ///
    /// Writes what fits: a length above `destination.count` means the text was cut (pass
    /// an empty buffer to learn the length alone). Decoding never lengthens text, so
    /// `range.count - 2` bytes are always enough.
    ///
    /// - Throws: `.expected("a string")` when the value is not a string; escape errors.
    public static func decodeString(
        _ json: UnsafeRawBufferPointer, range: Range<Int>, into destination: UnsafeMutableRawBufferPointer
    ) throws(JSONScanError) -> Int {
        guard range.count >= 2, json[range.lowerBound] == UInt8(ascii: "\""),
            json[range.upperBound - 1] == UInt8(ascii: "\"")
        else { throw JSONScanError(.expected("a string"), at: range.lowerBound) }
        let capacity = destination.count
        var written = 0
        var index = range.lowerBound + 1
        let end = range.upperBound - 1
        while index < end {
            let byte = json[index]
            if byte != UInt8(ascii: "\\") {
                if written < capacity { destination[written] = byte }
                written += 1
                index += 1
                continue
            }
            guard index + 1 < end else { throw JSONScanError(.invalidEscape, at: index) }
            let escaped = json[index + 1]
            var simple: UInt8?
            switch escaped {
            case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"): simple = escaped
            case UInt8(ascii: "b"): simple = 0x08
            case UInt8(ascii: "f"): simple = 0x0C
            case UInt8(ascii: "n"): simple = 0x0A
            case UInt8(ascii: "r"): simple = 0x0D
            case UInt8(ascii: "t"): simple = 0x09
            case UInt8(ascii: "u"): simple = nil
            default: throw JSONScanError(.invalidEscape, at: index)
            }
            if let simple {
                if written < capacity { destination[written] = simple }
                written += 1
                index += 2
                continue
            }
            var cursor = Cursor(json, range: index..<end)
            let scalar = try cursor.unicodeEscape()
            for unit in UTF8.encode(scalar)! {
                if written < capacity { destination[written] = unit }
                written += 1
            }
            index = cursor.position
        }
        return written
    }

    /// Reads the integer value in `range`.
    ///
    /// - Throws: `.notAnInteger` for anything but an optional minus and digits (so `1.0`
    ///   and `1e3` are refused), `.integerOutOfRange` beyond `Int64`.
    public static func int64(_ json: UnsafeRawBufferPointer, range: Range<Int>) throws(JSONScanError) -> Int64 {
        var index = range.lowerBound
        let negative = index < range.upperBound && json[index] == UInt8(ascii: "-")
        if negative { index += 1 }
        guard index < range.upperBound else { throw JSONScanError(.notAnInteger, at: range.lowerBound) }
        // Accumulate negatively: Int64.min has no positive counterpart.
        var value: Int64 = 0
        while index < range.upperBound {
            let digit = json[index] &- UInt8(ascii: "0")
            guard digit < 10 else { throw JSONScanError(.notAnInteger, at: range.lowerBound) }
            let (shifted, overflow1) = value.multipliedReportingOverflow(by: 10)
            let (next, overflow2) = shifted.subtractingReportingOverflow(Int64(digit))
            if overflow1 || overflow2 { throw JSONScanError(.integerOutOfRange, at: range.lowerBound) }
            value = next
            index += 1
        }
        if negative { return value }
        guard value != .min else { throw JSONScanError(.integerOutOfRange, at: range.lowerBound) }
        return -value
    }

    /// Shared by `minify` and `minifiedCount`: copies what fits, counts everything.
    static func compact(_ json: UnsafeRawBufferPointer, range: Range<Int>, into destination: UnsafeMutableRawBufferPointer) -> Int {
        var count = 0
        var inString = false
        var index = range.lowerBound
        let capacity = destination.count
        while index < range.upperBound {
            let byte = json[index]
            index += 1
            if inString {
                if byte == UInt8(ascii: "\\"), index < range.upperBound {
                    // Copy the escaped character too, so an escaped quote does not end the string.
                    if count + 2 <= capacity {
                        destination[count] = byte
                        destination[count + 1] = json[index]
                    }
                    count += 2
                    index += 1
                    continue
                }
                if byte == UInt8(ascii: "\"") { inString = false }
            } else {
                if Cursor.isWhitespace(byte) { continue }
                if byte == UInt8(ascii: "\"") { inString = true }
            }
            if count < capacity { destination[count] = byte }
            count += 1
        }
        return count
    }
}

/// Iterates the top-level members of one JSON object, validating as it goes.
///
/// `next()` returns each member in order and nil after the closing brace (having checked
/// that only whitespace follows). The buffer must stay valid while iterating.
public struct JSONObjectMembers {
    private var cursor: Cursor
    private var state = State.start

    private enum State { case start, inObject, done }

    /// Iterates the members of the object that `json` must consist of.
    public init(_ json: UnsafeRawBufferPointer) {
        cursor = Cursor(json, range: 0..<json.count)
    }

    /// The next member, or nil when the object is finished.
    public mutating func next() throws(JSONScanError) -> JSONMember? {
        switch state {
        case .done:
            return nil
        case .start:
            cursor.skipWhitespace()
            guard cursor.peek() == UInt8(ascii: "{") else {
                state = .done
                throw JSONScanError(.expected("'{'"), at: cursor.position)
            }
            cursor.position += 1
            cursor.skipWhitespace()
            if cursor.peek() == UInt8(ascii: "}") {
                cursor.position += 1
                state = .done
                try finish()
                return nil
            }
            state = .inObject
        case .inObject:
            break
        }
        do {
            return try member()
        } catch {
            state = .done
            throw error
        }
    }

    /// Reads `"key": value` and the `,` or `}` after it.
    private mutating func member() throws(JSONScanError) -> JSONMember {
        guard cursor.peek() == UInt8(ascii: "\"") else {
            throw JSONScanError(.expected("a string key"), at: cursor.position)
        }
        let keyStart = cursor.position
        let keyHasEscapes = try cursor.string()
        let keyRange = (keyStart + 1)..<(cursor.position - 1)
        cursor.skipWhitespace()
        guard cursor.peek() == UInt8(ascii: ":") else {
            throw JSONScanError(.expected("':'"), at: cursor.position)
        }
        cursor.position += 1
        cursor.skipWhitespace()
        let valueStart = cursor.position
        let kind = try cursor.value(depth: 2)
        let member = JSONMember(
            keyRange: keyRange, keyHasEscapes: keyHasEscapes, valueRange: valueStart..<cursor.position, kind: kind)
        cursor.skipWhitespace()
        switch cursor.peek() {
        case UInt8(ascii: ","):
            cursor.position += 1
            cursor.skipWhitespace()
        case UInt8(ascii: "}"):
            cursor.position += 1
            state = .done
            try finish()
        default:
            throw JSONScanError(.expected("',' or '}'"), at: cursor.position)
        }
        return member
    }

    private mutating func finish() throws(JSONScanError) {
        cursor.skipWhitespace()
        guard cursor.atEnd else { throw JSONScanError(.trailingCharacters, at: cursor.position) }
    }
}

/// Iterates the elements of one top-level JSON array, validating as it goes: how a batch
/// of notifications is read without building a tree of it.
///
/// `next()` returns each element's kind and range in order, and nil after the closing
/// bracket (having checked that only whitespace follows). The buffer must stay valid while
/// iterating.
public struct JSONArrayElements {
    private var cursor: Cursor
    private var state = State.start

    private enum State { case start, inArray, done }

    /// Iterates the elements of the array that `json` must consist of.
    public init(_ json: UnsafeRawBufferPointer) {
        cursor = Cursor(json, range: 0..<json.count)
    }

    /// The next element, or nil when the array is finished.
    public mutating func next() throws(JSONScanError) -> (kind: JSONKind, range: Range<Int>)? {
        do throws(JSONScanError) {
            switch state {
            case .done:
                return nil
            case .start:
                cursor.skipWhitespace()
                guard cursor.peek() == UInt8(ascii: "[") else { throw JSONScanError(.expected("'['"), at: cursor.position) }
                cursor.position += 1
                cursor.skipWhitespace()
                if cursor.peek() == UInt8(ascii: "]") {
                    cursor.position += 1
                    try finish()
                    return nil
                }
                state = .inArray
            case .inArray:
                break
            }
            let start = cursor.position
            let kind = try cursor.value(depth: 2)
            let element = (kind, start..<cursor.position)
            cursor.skipWhitespace()
            switch cursor.peek() {
            case UInt8(ascii: ","):
                cursor.position += 1
                cursor.skipWhitespace()
            case UInt8(ascii: "]"):
                cursor.position += 1
                try finish()
            default:
                throw JSONScanError(.expected("',' or ']'"), at: cursor.position)
            }
            return element
        } catch {
            state = .done
            throw error
        }
    }

    private mutating func finish() throws(JSONScanError) {
        state = .done
        cursor.skipWhitespace()
        guard cursor.atEnd else { throw JSONScanError(.trailingCharacters, at: cursor.position) }
    }
}

/// The grammar, over a window of a byte buffer. Offsets are absolute in the buffer.
struct Cursor {
    let bytes: UnsafeRawBufferPointer
    let end: Int
    var position: Int

    init(_ bytes: UnsafeRawBufferPointer, range: Range<Int>) {
        self.bytes = bytes
        self.end = range.upperBound
        self.position = range.lowerBound
    }

    var atEnd: Bool { position >= end }

    @inline(__always)
    func peek() -> UInt8? { position < end ? bytes[position] : nil }

    @inline(__always)
    static func isWhitespace(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09
    }

    mutating func skipWhitespace() {
        while position < end, Self.isWhitespace(bytes[position]) { position += 1 }
    }

    /// Parses any value starting exactly at `position`; `depth` is the nesting level a
    /// container here would have.
    mutating func value(depth: Int) throws(JSONScanError) -> JSONKind {
        guard let byte = peek() else { throw JSONScanError(.expected("a value"), at: position) }
        switch byte {
        case UInt8(ascii: "{"):
            try object(depth: depth)
            return .object
        case UInt8(ascii: "["):
            try array(depth: depth)
            return .array
        case UInt8(ascii: "\""):
            _ = try string()
            return .string
        case UInt8(ascii: "-"), UInt8(ascii: "0")...UInt8(ascii: "9"):
            try number()
            return .number
        case UInt8(ascii: "t"):
            try literal("true")
            return .true
        case UInt8(ascii: "f"):
            try literal("false")
            return .false
        case UInt8(ascii: "n"):
            try literal("null")
            return .null
        default:
            throw JSONScanError(.expected("a value"), at: position)
        }
    }

    mutating func object(depth: Int) throws(JSONScanError) {
        guard try enter(depth: depth, closedBy: UInt8(ascii: "}")) else { return }
        repeat {
            guard peek() == UInt8(ascii: "\"") else { throw JSONScanError(.expected("a string key"), at: position) }
            _ = try string()
            skipWhitespace()
            guard peek() == UInt8(ascii: ":") else { throw JSONScanError(.expected("':'"), at: position) }
            position += 1
            skipWhitespace()
            _ = try value(depth: depth + 1)
        } while try moreMembers(closedBy: UInt8(ascii: "}"))
    }

    mutating func array(depth: Int) throws(JSONScanError) {
        guard try enter(depth: depth, closedBy: UInt8(ascii: "]")) else { return }
        repeat {
            _ = try value(depth: depth + 1)
        } while try moreMembers(closedBy: UInt8(ascii: "]"))
    }

    /// Steps over an object's or array's opening bracket; false when `close` ends it at once.
    private mutating func enter(depth: Int, closedBy close: UInt8) throws(JSONScanError) -> Bool {
        guard depth <= JSONScanner.maximumDepth else {
            throw JSONScanError(.nestingTooDeep(limit: JSONScanner.maximumDepth), at: position)
        }
        position += 1
        skipWhitespace()
        guard peek() == close else { return true }
        position += 1
        return false
    }

    /// After a member: true past a comma (another member follows), false past `close`.
    private mutating func moreMembers(closedBy close: UInt8) throws(JSONScanError) -> Bool {
        skipWhitespace()
        switch peek() {
        case UInt8(ascii: ","):
            position += 1
            skipWhitespace()
            return true
        case close:
            position += 1
            return false
        default:
            throw JSONScanError(.expected("',' or '\(Character(UnicodeScalar(close)))'"), at: position)
        }
    }

    /// Parses a string starting at its opening quote; returns whether it has escapes.
    mutating func string() throws(JSONScanError) -> Bool {
        let start = position
        position += 1
        var hasEscapes = false
        while true {
            // Plain ASCII dominates; skip it without further checks.
            while position < end {
                let byte = bytes[position]
                guard byte >= 0x20, byte < 0x80, byte != UInt8(ascii: "\""), byte != UInt8(ascii: "\\") else { break }
                position += 1
            }
            guard position < end else { throw JSONScanError(.unterminatedString, at: start) }
            let byte = bytes[position]
            switch byte {
            case UInt8(ascii: "\""):
                position += 1
                return hasEscapes
            case UInt8(ascii: "\\"):
                hasEscapes = true
                guard position + 1 < end else { throw JSONScanError(.unterminatedString, at: start) }
                switch bytes[position + 1] {
                case UInt8(ascii: "\""), UInt8(ascii: "\\"), UInt8(ascii: "/"), UInt8(ascii: "b"),
                    UInt8(ascii: "f"), UInt8(ascii: "n"), UInt8(ascii: "r"), UInt8(ascii: "t"):
                    position += 2
                case UInt8(ascii: "u"):
                    _ = try unicodeEscape()
                default:
                    throw JSONScanError(.invalidEscape, at: position)
                }
            case 0..<0x20:
                throw JSONScanError(.controlCharacterInString, at: position)
            default:
                try utf8Sequence()
            }
        }
    }

    /// Parses `\uXXXX` (and its low half when it is a high surrogate) at `position`.
    mutating func unicodeEscape() throws(JSONScanError) -> Unicode.Scalar {
        let start = position
        let first = try hex4(at: position + 2, escapeAt: start)
        position += 6
        switch first {
        case 0xD800...0xDBFF:
            guard position + 1 < end, bytes[position] == UInt8(ascii: "\\"), bytes[position + 1] == UInt8(ascii: "u")
            else { throw JSONScanError(.unpairedSurrogate, at: start) }
            let second = try hex4(at: position + 2, escapeAt: position)
            guard (0xDC00...0xDFFF).contains(second) else { throw JSONScanError(.unpairedSurrogate, at: start) }
            position += 6
            return Unicode.Scalar(0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00))!
        case 0xDC00...0xDFFF:
            throw JSONScanError(.unpairedSurrogate, at: start)
        default:
            return Unicode.Scalar(first)!
        }
    }

    private func hex4(at index: Int, escapeAt escape: Int) throws(JSONScanError) -> UInt32 {
        guard index + 4 <= end else { throw JSONScanError(.invalidUnicodeEscape, at: escape) }
        var value: UInt32 = 0
        for i in index..<(index + 4) {
            guard let nibble = DeviceToken.nibble(bytes[i]) else {
                throw JSONScanError(.invalidUnicodeEscape, at: escape)
            }
            value = value << 4 | UInt32(nibble)
        }
        return value
    }

    /// Validates one multi-byte UTF-8 sequence at `position` (Unicode table 3-7: no
    /// overlong forms, no surrogates, nothing above U+10FFFF).
    mutating func utf8Sequence() throws(JSONScanError) {
        let lead = bytes[position]
        let length: Int
        var low: UInt8 = 0x80
        var high: UInt8 = 0xBF
        switch lead {
        case 0xC2...0xDF: length = 2
        case 0xE0: length = 3; low = 0xA0
        case 0xE1...0xEC, 0xEE...0xEF: length = 3
        case 0xED: length = 3; high = 0x9F
        case 0xF0: length = 4; low = 0x90
        case 0xF1...0xF3: length = 4
        case 0xF4: length = 4; high = 0x8F
        default: throw JSONScanError(.invalidUTF8, at: position)
        }
        guard position + length <= end else { throw JSONScanError(.invalidUTF8, at: position) }
        let second = bytes[position + 1]
        guard second >= low, second <= high else { throw JSONScanError(.invalidUTF8, at: position) }
        for i in 2..<length where bytes[position + i] & 0xC0 != 0x80 {
            throw JSONScanError(.invalidUTF8, at: position)
        }
        position += length
    }

    /// Parses `-? (0 | [1-9][0-9]*) (. [0-9]+)? ([eE] [+-]? [0-9]+)?`.
    mutating func number() throws(JSONScanError) {
        if peek() == UInt8(ascii: "-") { position += 1 }
        guard let first = peek(), isDigit(first) else { throw JSONScanError(.invalidNumber, at: position) }
        position += 1
        if first == UInt8(ascii: "0") {
            // A leading zero is a number on its own; "01" is not JSON.
            if let next = peek(), isDigit(next) { throw JSONScanError(.invalidNumber, at: position) }
        } else {
            skipDigits()
        }
        if peek() == UInt8(ascii: ".") {
            position += 1
            guard let next = peek(), isDigit(next) else { throw JSONScanError(.invalidNumber, at: position) }
            skipDigits()
        }
        if peek() == UInt8(ascii: "e") || peek() == UInt8(ascii: "E") {
            position += 1
            if peek() == UInt8(ascii: "+") || peek() == UInt8(ascii: "-") { position += 1 }
            guard let next = peek(), isDigit(next) else { throw JSONScanError(.invalidNumber, at: position) }
            skipDigits()
        }
    }

    @inline(__always)
    private func isDigit(_ byte: UInt8) -> Bool { byte &- UInt8(ascii: "0") < 10 }

    private mutating func skipDigits() {
        while let byte = peek(), isDigit(byte) { position += 1 }
    }

    mutating func literal(_ word: StaticString) throws(JSONScanError) {
        let count = word.utf8CodeUnitCount
        guard position + count <= end, memoryEquals(bytes.baseAddress! + position, word.utf8Start, count) else {
            throw JSONScanError(.invalidLiteral, at: position)
        }
        position += count
    }
}
