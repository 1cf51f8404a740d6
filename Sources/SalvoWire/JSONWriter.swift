/// A JSON value, for custom payload properties and other JSON built at run time.
///
/// Objects keep their members in the order given (`[(key, value)]`, not a dictionary), so
/// the bytes written are deterministic. Literals work: `["a": 1, "b": [true, nil]]`.
public enum JSONValue: Sendable, Equatable {
    /// A string, escaped when written.
    case string(String)
    /// An integer, written in decimal.
    case int(Int64)
    /// A number written in its shortest form; NaN and infinities cannot be written.
    case double(Double)
    /// `true` or `false`.
    case bool(Bool)
    /// `null`.
    case null
    /// Elements in writing order.
    case array([JSONValue])
    /// Members in writing order. Duplicate keys are written as given.
    case object([(key: String, value: JSONValue)])

    /// Whether the two are the same value: same kind, and objects with the same members in
    /// the same order (the order is part of what is written).
    public static func == (lhs: JSONValue, rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case (.string(let a), .string(let b)): return a == b
        case (.int(let a), .int(let b)): return a == b
        case (.double(let a), .double(let b)): return a == b
        case (.bool(let a), .bool(let b)): return a == b
        case (.null, .null): return true
        case (.array(let a), .array(let b)): return a == b
        case (.object(let a), .object(let b)):
            return a.count == b.count && zip(a, b).allSatisfy { $0.key == $1.key && $0.value == $1.value }
        default: return false
        }
    }

    /// The key path of the first NaN or infinite double inside this value, or nil when
    /// every number can be written. `path` names this value (for error messages).
    func firstNonFiniteNumber(path: String) -> String? {
        switch self {
        case .double(let value): return value.isFinite ? nil : path
        case .string, .int, .bool, .null: return nil
        case .array(let elements):
            for (index, element) in elements.enumerated() {
                if let found = element.firstNonFiniteNumber(path: "\(path)[\(index)]") { return found }
            }
            return nil
        case .object(let members):
            for member in members {
                if let found = member.value.firstNonFiniteNumber(path: "\(path).\(member.key)") { return found }
            }
            return nil
        }
    }
}

extension JSONValue: ExpressibleByStringLiteral, ExpressibleByIntegerLiteral, ExpressibleByFloatLiteral,
    ExpressibleByBooleanLiteral, ExpressibleByNilLiteral, ExpressibleByArrayLiteral,
    ExpressibleByDictionaryLiteral
{
    /// `"text"`: a `.string`.
    public init(stringLiteral value: String) { self = .string(value) }
    /// `42`: an `.int`.
    public init(integerLiteral value: Int64) { self = .int(value) }
    /// `0.5`: a `.double`.
    public init(floatLiteral value: Double) { self = .double(value) }
    /// `true`, `false`: a `.bool`.
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    /// `nil`: `.null`.
    public init(nilLiteral: ()) { self = .null }
    /// `[1, "a"]`: an `.array`.
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    /// Keeps the literal's order.
    public init(dictionaryLiteral elements: (String, JSONValue)...) {
        self = .object(elements.map { (key: $0.0, value: $0.1) })
    }
}

/// Why a JSON value could not be written.
public enum JSONWriterError: Error, Equatable, Sendable, CustomStringConvertible {
    /// NaN or an infinity: JSON has no representation for them.
    case nonFiniteNumber

    /// The problem in a sentence, for error messages.
    public var description: String {
        switch self {
        case .nonFiniteNumber: return "NaN and infinity cannot be written as JSON numbers"
        }
    }
}

/// Writes compact JSON into a caller-owned byte region, allocating nothing.
///
/// Commas and colons are placed automatically: call `beginObject()`, then `key(_:)` and a
/// value for each member, then `endObject()`; arrays alike. The writer does not check that
/// the calls form valid JSON (a key inside an array, say); the callers are few and tested.
///
/// When the region is too small the writer keeps counting without storing, so `count` is
/// always the length the full JSON needs and `fits` says whether the bytes are all there.
/// That lets one pass both write and measure.
///
/// Strings are escaped as RFC 8259 requires and no more: `"` and `\` get a backslash; the
/// control characters U+0000...U+001F are written as `\b`, `\t`, `\n`, `\f`, `\r` where
/// JSON has a short form and as `\u00XX` (lowercase hex) otherwise. DEL, `/` and all
/// non-ASCII characters are written as raw UTF-8.
public struct JSONWriter {
    @usableFromInline let base: UnsafeMutableRawPointer?
    /// The size of the region written into.
    public let capacity: Int
    /// Bytes the JSON written so far needs (may exceed `capacity`, see `fits`).
    public private(set) var count: Int = 0
    // Whether the next key or array element needs a comma first. Needs no stack: opening a
    // container clears it, closing one or writing a value sets it.
    @usableFromInline var needsComma = false

    /// A writer that fills `region` from its start.
    public init(into region: UnsafeMutableRawBufferPointer) {
        base = region.baseAddress
        capacity = region.count
    }

    /// Whether everything written so far is stored (`count <= capacity`).
    public var fits: Bool { count <= capacity }

    // MARK: structure

    /// Opens an object (`{`), after a comma if a value came before it.
    public mutating func beginObject() {
        separate()
        append(UInt8(ascii: "{"))
        needsComma = false
    }

    /// Closes the innermost object (`}`).
    public mutating func endObject() {
        append(UInt8(ascii: "}"))
        needsComma = true
    }

    /// Opens an array (`[`), after a comma if a value came before it.
    public mutating func beginArray() {
        separate()
        append(UInt8(ascii: "["))
        needsComma = false
    }

    /// Closes the innermost array (`]`).
    public mutating func endArray() {
        append(UInt8(ascii: "]"))
        needsComma = true
    }

    /// Writes a member key that needs no escaping (the fixed keys of the APNs dictionary).
    /// Such keys are copied as is, skipping the escaping scan.
    public mutating func key(fixed name: StaticString) {
        assert(Self.needsNoEscaping(name), "key \(name) needs escaping; use key(_:)")
        separate()
        append(UInt8(ascii: "\""))
        append(UnsafeRawPointer(name.utf8Start), count: name.utf8CodeUnitCount)
        append(UInt8(ascii: "\""))
        append(UInt8(ascii: ":"))
        needsComma = false
    }

    /// Writes a member key, escaped.
    public mutating func key(_ name: String) {
        separate()
        writeQuoted(name)
        append(UInt8(ascii: ":"))
        needsComma = false
    }

    // MARK: values

    /// Writes a string value, escaped.
    public mutating func string(_ value: String) {
        separate()
        writeQuoted(value)
        needsComma = true
    }

    /// Writes a string value from raw UTF-8 (which must be valid UTF-8), escaped.
    public mutating func string(utf8 value: UnsafeRawBufferPointer) {
        separate()
        append(UInt8(ascii: "\""))
        writeEscaped(value)
        append(UInt8(ascii: "\""))
        needsComma = true
    }

    /// Writes an integer value in decimal.
    public mutating func int(_ value: Int64) {
        separate()
        writeInteger(value)
        needsComma = true
    }

    /// Writes the shortest decimal that reads back as `value` (Swift's `description`, which
    /// is locale-independent and valid JSON for finite values: "0.1", "1e+20", "-0.0").
    ///
    /// - Throws: `JSONWriterError.nonFiniteNumber` for NaN and infinities; nothing is written.
    public mutating func double(_ value: Double) throws(JSONWriterError) {
        guard value.isFinite else { throw .nonFiniteNumber }
        separate()
        var digits = DoubleDigits()
        value.write(to: &digits)
        digits.withBytes { append($0.baseAddress!, count: $0.count) }
        needsComma = true
    }

    /// Writes `true` or `false`.
    public mutating func bool(_ value: Bool) {
        separate()
        if value {
            append(UnsafeRawPointer(("true" as StaticString).utf8Start), count: 4)
        } else {
            append(UnsafeRawPointer(("false" as StaticString).utf8Start), count: 5)
        }
        needsComma = true
    }

    /// Writes `null`.
    public mutating func null() {
        separate()
        append(UnsafeRawPointer(("null" as StaticString).utf8Start), count: 4)
        needsComma = true
    }

    /// Writes any `JSONValue`, recursively.
    ///
    /// - Throws: `JSONWriterError.nonFiniteNumber` if a double inside is NaN or infinite;
    ///   what was written before it stays written.
    public mutating func value(_ value: JSONValue) throws(JSONWriterError) {
        switch value {
        case .string(let string): self.string(string)
        case .int(let int): self.int(int)
        case .double(let double): try self.double(double)
        case .bool(let bool): self.bool(bool)
        case .null: self.null()
        case .array(let elements):
            beginArray()
            for element in elements { try self.value(element) }
            endArray()
        case .object(let members):
            beginObject()
            for member in members {
                key(member.key)
                try self.value(member.value)
            }
            endObject()
        }
    }

    // MARK: internals shared with PayloadBuilder

    /// Writes `value` as a string; when `prefixLength` is given, only its first
    /// `prefixLength` UTF-8 bytes followed by "…" (U+2026, raw). Returns the range of
    /// `count` values the escaped text of `value` took, excluding quotes and ellipsis.
    mutating func string(_ value: String, prefixLength: Int?) -> Range<Int> {
        separate()
        append(UInt8(ascii: "\""))
        let start = count
        Self.withUTF8(value) { utf8 in
            if let prefixLength {
                writeEscaped(UnsafeRawBufferPointer(rebasing: utf8[..<prefixLength]))
            } else {
                writeEscaped(utf8)
            }
        }
        let end = count
        if prefixLength != nil {
            append(0xE2)
            append(0x80)
            append(0xA6)
        }
        append(UInt8(ascii: "\""))
        needsComma = true
        return start..<end
    }

    /// Bytes `byte` takes once escaped.
    @inline(__always)
    static func escapedWidth(_ byte: UInt8) -> Int {
        if byte >= 0x20 { return byte == 0x22 || byte == 0x5C ? 2 : 1 }
        switch byte {
        case 0x08, 0x09, 0x0A, 0x0C, 0x0D: return 2
        default: return 6
        }
    }

    /// Calls `body` with the UTF-8 of `string` without copying it when it is native
    /// (always, for strings made in Swift), copying it otherwise.
    @inline(__always)
    static func withUTF8<R>(_ string: String, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        if let result = string.utf8.withContiguousStorageIfAvailable({ body(UnsafeRawBufferPointer($0)) }) {
            return result
        }
        var copy = string
        return copy.withUTF8 { body(UnsafeRawBufferPointer($0)) }
    }

    // MARK: byte output

    @inline(__always)
    mutating func separate() {
        if needsComma { append(UInt8(ascii: ",")) }
    }

    @inline(__always)
    mutating func append(_ byte: UInt8) {
        if count < capacity { base.unsafelyUnwrapped.storeBytes(of: byte, toByteOffset: count, as: UInt8.self) }
        count += 1
    }

    /// Copies `length` bytes if they fit entirely; either way advances `count`. Once the
    /// region has overflowed its contents are not JSON anyway, so partial copies are moot.
    @inline(__always)
    mutating func append(_ source: UnsafeRawPointer, count length: Int) {
        if count + length <= capacity, length > 0 {
            (base.unsafelyUnwrapped + count).copyMemory(from: source, byteCount: length)
        }
        count += length
    }

    mutating func writeQuoted(_ value: String) {
        append(UInt8(ascii: "\""))
        Self.withUTF8(value) { writeEscaped($0) }
        append(UInt8(ascii: "\""))
    }

    /// Copies runs of bytes that need no escaping in one go; escapes the rest.
    mutating func writeEscaped(_ utf8: UnsafeRawBufferPointer) {
        guard let source = utf8.baseAddress else { return }
        var runStart = 0
        for index in 0..<utf8.count {
            let byte = source.load(fromByteOffset: index, as: UInt8.self)
            if byte >= 0x20 && byte != 0x22 && byte != 0x5C { continue }
            append(source + runStart, count: index - runStart)
            runStart = index + 1
            append(UInt8(ascii: "\\"))
            switch byte {
            case 0x22: append(UInt8(ascii: "\""))
            case 0x5C: append(UInt8(ascii: "\\"))
            case 0x08: append(UInt8(ascii: "b"))
            case 0x09: append(UInt8(ascii: "t"))
            case 0x0A: append(UInt8(ascii: "n"))
            case 0x0C: append(UInt8(ascii: "f"))
            case 0x0D: append(UInt8(ascii: "r"))
            default:
                let hex: StaticString = "0123456789abcdef"
                append(UInt8(ascii: "u"))
                append(UInt8(ascii: "0"))
                append(UInt8(ascii: "0"))
                append(hex.utf8Start[Int(byte >> 4)])
                append(hex.utf8Start[Int(byte & 0x0F)])
            }
        }
        append(source + runStart, count: utf8.count - runStart)
    }

    mutating func writeInteger(_ value: Int64) {
        if value < 0 { append(UInt8(ascii: "-")) }
        var magnitude = value.magnitude
        var digitCount = 1
        var probe = magnitude
        while probe >= 10 {
            probe /= 10
            digitCount += 1
        }
        if count + digitCount <= capacity {
            // Digits come out least significant first, so fill the slot from its end.
            var position = count + digitCount
            repeat {
                position -= 1
                base.unsafelyUnwrapped.storeBytes(
                    of: UInt8(truncatingIfNeeded: magnitude % 10) + 0x30, toByteOffset: position, as: UInt8.self)
                magnitude /= 10
            } while magnitude != 0
        }
        count += digitCount
    }

    static func needsNoEscaping(_ name: StaticString) -> Bool {
        UnsafeBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount).allSatisfy { escapedWidth($0) == 1 }
    }
}

/// Receives the digits `Double.write(to:)` produces, on the stack.
///
/// The standard library hands a float's digits to `_writeASCII` as one buffer; taking them
/// there (instead of through `description`, a `String` that needs the heap beyond 15 bytes)
/// keeps number writing allocation-free. The longest output is 24 bytes
/// ("-2.2250738585072014e-308"); 32 leaves room.
struct DoubleDigits: TextOutputStream {
    private var storage: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
    private var length = 0

    mutating func write(_ string: String) {
        for byte in string.utf8 { appendByte(byte) }
    }

    mutating func _writeASCII(_ buffer: UnsafeBufferPointer<UInt8>) {
        for byte in buffer { appendByte(byte) }
    }

    private mutating func appendByte(_ byte: UInt8) {
        precondition(length < 32, "a Double printed longer than 32 characters")
        let index = length
        Swift.withUnsafeMutableBytes(of: &storage) { $0[index] = byte }
        length += 1
    }

    func withBytes<R>(_ body: (UnsafeRawBufferPointer) -> R) -> R {
        Swift.withUnsafeBytes(of: storage) { body(UnsafeRawBufferPointer(rebasing: $0[..<length])) }
    }
}
