// JSONScanner against Foundation's JSONSerialization, on arbitrary bytes.
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - JSONScanner.validate accepts exactly what JSONSerialization (with .fragmentsAllowed)
//   accepts, in both directions, except where they differ by design (below);
// - on text both accept: the value's kind agrees; minify's output means the same value
//   and is its own minified form; minifiedCount is minify's length; a top-level string
//   decodes (JSONScanner.string) to Foundation's string; a top-level object's members, as
//   JSONObjectMembers iterates them, have Foundation's keys; a top-level integer reads
//   (JSONScanner.int64) as Swift's Int64 parser reads it.
//
// Where they differ by design, and how the check handles it (results/fuzz.md lists these):
// 1. Encodings. Foundation reads a text that starts with a byte order mark, or has a NUL
//    among its first four bytes, as UTF-16 or UTF-32 (its guess, after RFC 4627); JSON
//    exchanged between systems is UTF-8 without a BOM (RFC 8259 §8.1), and APNs payloads
//    are UTF-8, so the scanner reads UTF-8 only. Such input must be invalid for the
//    scanner; Foundation's verdict is not compared.
// 2. Trailing commas. Foundation accepts `[1,]` and `{"a":1,}`, which RFC 8259 does not.
//    Where the scanner stops at a `]` or `}` right after a comma, the comma is removed and
//    both are asked again, so the rest of the text is still compared.
// 3. Numbers out of Double's range. Foundation refuses `1e400` ("not representable"); the
//    grammar allows any number and the scanner checks only the grammar (RFC 8259 §6 leaves
//    range to implementations; the sender forwards payload numbers as written). Every number
//    whose Double is infinite is replaced by 0 and both are asked again.
// 4. Depth. The scanner refuses nesting deeper than JSONScanner.maximumDepth (64),
//    Foundation deeper than 512. Where the scanner reports .nestingTooDeep, Foundation's
//    verdict is not compared.
// 5. U+FEFF in strings. Foundation drops a U+FEFF (a byte order mark) that starts a string
//    or follows an escape: it reads "\u{FEFF}b" as "b". A bug of Foundation's, not a
//    difference in validity; decoded strings and keys are compared without U+FEFF.

import Foundation
import FuzzSupport
import SalvoWire

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    compare(Array(input))
}

func compare(_ text: [UInt8]) {
    let scanned = text.withUnsafeBytes { json in Result { () throws(JSONScanError) in try JSONScanner.validate(json) } }
    if foundationReadsAsAnotherEncoding(text) {
        require(scanned.failed, "the scanner accepted text that does not start as UTF-8 JSON: \(show(text))")
        return
    }
    if case .failure(let error) = scanned, case .nestingTooDeep = error.reason { return }
    let foundation = foundationJSON(text)

    switch (scanned, foundation) {
    case (.success(let value), let object?):
        checkAgreement(text, kind: value.kind, range: value.range, object)
    case (.failure(let error), _?):
        guard let fixed = withoutTrailingComma(text, at: error) else {
            require(false, "Foundation accepts, the scanner refuses (\(error)): \(show(text))")
            return
        }
        compare(fixed)
    case (.success, nil):
        guard let fixed = withOverflowingNumbersZeroed(text) else {
            require(false, "the scanner accepts, Foundation refuses: \(show(text))")
            return
        }
        compare(fixed)
    case (.failure, nil):
        break
    }
}

/// Carve-out 2: the text without the comma the scanner's error points past, if it is one.
func withoutTrailingComma(_ text: [UInt8], at error: JSONScanError) -> [UInt8]? {
    guard error.offset < text.count else { return nil }
    let closer = text[error.offset]
    switch (error.reason, closer) {
    case (.expected("a value"), UInt8(ascii: "]")), (.expected("a string key"), UInt8(ascii: "}")): break
    default: return nil
    }
    guard let comma = text[..<error.offset].lastIndex(where: { !isWhitespace($0) }),
          text[comma] == UInt8(ascii: ",")
    else { return nil }
    var fixed = text
    fixed.remove(at: comma)
    return fixed
}

func checkAgreement(_ text: [UInt8], kind: JSONKind, range: Range<Int>, _ object: Any) {
    switch kind {
    case .object: require(object is [String: Any], "the scanner says object, Foundation read \(object): \(show(text))")
    case .array: require(object is [Any], "the scanner says array, Foundation read \(object): \(show(text))")
    case .string: require(object is String, "the scanner says string, Foundation read \(object): \(show(text))")
    case .null: require(object is NSNull, "the scanner says null, Foundation read \(object): \(show(text))")
    case .number, .true, .false: require(object is NSNumber, "the scanner says \(kind), Foundation read \(object): \(show(text))")
    }

    text.withUnsafeBytes { json in
        let count = JSONScanner.minifiedCount(json, range: range)
        let output = UnsafeMutableRawBufferPointer.allocate(byteCount: count, alignment: 1)
        defer { output.deallocate() }
        require(JSONScanner.minify(json, range: range, into: output) == count,
                "minify did not write minifiedCount (\(count)) bytes: \(show(text))")
        let minified = Array(output)
        let again = foundationJSON(minified)
        require(again.map { canonicalJSON($0) == canonicalJSON(object) } ?? false,
                "minified, \(show(text)) became \(show(minified)), which means something else")
        require(minified.withUnsafeBytes { JSONScanner.minifiedCount($0) } == count,
                "minifying \(show(minified)) again changes it")

        switch kind {
        case .string:
            let decoded = try? JSONScanner.string(json, range: range)
            require(decoded.map(withoutBOMs) == withoutBOMs(object as! String),
                    "JSONScanner.string read \(decoded.debugDescription), Foundation \((object as! String).debugDescription)")
        case .object:
            var keys: [String] = []
            do {
                try JSONScanner.members(ofObject: json) { _, member in
                    let quoted = (member.keyRange.lowerBound - 1)..<(member.keyRange.upperBound + 1)
                    keys.append((try? JSONScanner.string(json, range: quoted)) ?? "\u{FFFD}undecodable")
                }
            } catch {
                require(false, "JSONObjectMembers refused an object validate accepted (\(error)): \(show(text))")
            }
            require(Set(keys.map(withoutBOMs)) == Set((object as! [String: Any]).keys.map(withoutBOMs)),
                    "the members' keys \(keys) are not Foundation's \((object as! [String: Any]).keys.sorted())")
        case .number:
            let digits = String(decoding: text[range], as: UTF8.self)
            let integer = try? JSONScanner.int64(json, range: range)
            require(integer == Int64(digits), "JSONScanner.int64 read \(String(describing: integer)) from \(digits)")
        default:
            break
        }
    }
}

/// Carve-out 5: a string's scalars without U+FEFF, which Foundation drops where it starts
/// a string or follows an escape.
func withoutBOMs(_ string: String) -> String {
    String(String.UnicodeScalarView(string.unicodeScalars.filter { $0 != "\u{FEFF}" }))
}

func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x0A || byte == 0x0D || byte == 0x09 }

extension Result {
    var failed: Bool {
        if case .failure = self { return true }
        return false
    }
}
