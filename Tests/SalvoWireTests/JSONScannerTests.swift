import Foundation
import Testing
@testable import SalvoWire

/// Runs `body` over the UTF-8 of `text` (or raw bytes).
@discardableResult
private func withJSON<R>(_ text: String, _ body: (UnsafeRawBufferPointer) throws -> R) rethrows -> R {
    try Array(text.utf8).withUnsafeBytes { try body($0) }
}

private func collectMembers(_ text: String) throws(JSONScanError) -> [(key: String, value: String, kind: JSONKind)] {
    let bytes = Array(text.utf8)
    var result: [(key: String, value: String, kind: JSONKind)] = []
    let failure: JSONScanError? = bytes.withUnsafeBytes { json in
        do throws(JSONScanError) {
            try JSONScanner.members(ofObject: json) { key, member in
                result.append((String(decoding: key, as: UTF8.self), String(decoding: member.value(in: json), as: UTF8.self), member.kind))
            }
            return nil
        } catch {
            return error
        }
    }
    if let failure { throw failure }
    return result
}

/// Returns the error scanning `bytes` as an object throws, or nil.
private func scanError(_ bytes: [UInt8]) -> JSONScanError? {
    bytes.withUnsafeBytes { json in
        do throws(JSONScanError) {
            try JSONScanner.members(ofObject: json) { _, _ in }
            return nil
        } catch {
            return error
        }
    }
}

@Suite("JSONScanner")
struct JSONScannerTests {
    static let token = "00112233445566778899aabbccddeeff0123456789abcdeffedcba9876543210"

    @Test func campaignLineMembers() throws {
        let line = #"{"token":"\#(Self.token)","payload":{"aps":{"alert":"hi"}},"expiry":123,"priority":10,"id":"x"}"#
        let members = try collectMembers(line)
        #expect(members.map(\.key) == ["token", "payload", "expiry", "priority", "id"])
        #expect(members.map(\.value) == ["\"\(Self.token)\"", #"{"aps":{"alert":"hi"}}"#, "123", "10", "\"x\""])
        #expect(members.map(\.kind) == [.string, .object, .number, .number, .string])

        try withJSON(line) { json throws in
            var iterator = JSONObjectMembers(json)
            let token = try #require(try iterator.next())
            #expect(token.keyEquals("token", in: json))
            #expect(!token.keyEquals("toke", in: json))
            let raw = try #require(JSONScanner.plainString(json, range: token.valueRange))
            #expect(try DeviceToken(hex: raw).hex == Self.token)
            let payload = try #require(try iterator.next())
            #expect(payload.keyEquals("payload", in: json))
            let expiry = try #require(try iterator.next())
            #expect(try JSONScanner.int64(json, range: expiry.valueRange) == 123)
            _ = try iterator.next()
            let id = try #require(try iterator.next())
            #expect(try JSONScanner.string(json, range: id.valueRange) == "x")
            #expect(try iterator.next() == nil)
            #expect(try iterator.next() == nil)
        }
    }

    @Test func whitespaceEverywhereAndAllValueKinds() throws {
        let line = " \t{ \"a\" : [1, -2.5e-3, 0, -0, 1E+2, true, false, null, {\"b\": \"\\u00e9\\n\"}, []] ,\"c\":{} , \"d\" : \"\" }\r\n"
        let members = try collectMembers(line)
        #expect(members.map(\.key) == ["a", "c", "d"])
        #expect(members[0].value == "[1, -2.5e-3, 0, -0, 1E+2, true, false, null, {\"b\": \"\\u00e9\\n\"}, []]")
        #expect(members.map(\.kind) == [.array, .object, .string])
        #expect(try collectMembers("{}").isEmpty)
        #expect(try collectMembers(" { } \n").isEmpty)
        #expect(try collectMembers(#"{"t":true,"f":false,"n":null}"#).map(\.kind) == [.true, .false, .null])
    }

    @Test func escapedKeysAreComparedDecoded() throws {
        try withJSON(#"{"to\u006Ben":1}"#) { json throws in
            var iterator = JSONObjectMembers(json)
            let member = try #require(try iterator.next())
            #expect(member.keyHasEscapes)
            #expect(member.keyEquals("token", in: json))
            #expect(!member.keyEquals("tokens", in: json))
        }
    }

    // MARK: errors with exact columns

    @Test(arguments: [
        (#"{"a":1"#, JSONScanError.Reason.expected("',' or '}'"), 7),
        (#"{"a" 1}"#, .expected("':'"), 6),
        (#"{"token":"abc"#, .unterminatedString, 10),
        (#"{"unterminated"#, .unterminatedString, 2),
        ("", .expected("'{'"), 1),
        ("   ", .expected("'{'"), 4),
        ("[1]", .expected("'{'"), 1),
        (#"{"a":1,}"#, .expected("a string key"), 8),
        (#"{1:2}"#, .expected("a string key"), 2),
        (#"{"a":}"#, .expected("a value"), 6),
        (#"{"a":"#, .expected("a value"), 6),
        (#"{"a":é}"#, .expected("a value"), 6),
        (#"{"a":[1 2]}"#, .expected("',' or ']'"), 9),
        (#"{"a":[1,]}"#, .expected("a value"), 9),
        (#"{"a":{"b" "c"}}"#, .expected("':'"), 11),
        (#"{"a":01}"#, .invalidNumber, 7),
        (#"{"a":1.}"#, .invalidNumber, 8),
        (#"{"a":1e}"#, .invalidNumber, 8),
        (#"{"a":-}"#, .invalidNumber, 7),
        (#"{"a":+1}"#, .expected("a value"), 6),
        (#"{"a":.5}"#, .expected("a value"), 6),
        (#"{"a":tru}"#, .invalidLiteral, 6),
        (#"{"a":nul"#, .invalidLiteral, 6),
        (#"{"a":"x\qy"}"#, .invalidEscape, 8),
        (#"{"a":"\u12G4"}"#, .invalidUnicodeEscape, 7),
        (#"{"a":"\u12"}"#, .invalidUnicodeEscape, 7),
        (#"{"a":"\ud800"}"#, .unpairedSurrogate, 7),
        (#"{"a":"\ud800\u0041"}"#, .unpairedSurrogate, 7),
        (#"{"a":"\udc00"}"#, .unpairedSurrogate, 7),
        ("{\"a\":\"tab\there\"}", .controlCharacterInString, 10),
        ("{\"a\":\"nul\u{0}\"}", .controlCharacterInString, 10),
        (#"{"a":1} x"#, .trailingCharacters, 9),
        (#"{"a":1}}"#, .trailingCharacters, 8),
        (#"{} {}"#, .trailingCharacters, 4),
    ])
    func invalidLinesReportReasonAndColumn(_ line: String, _ reason: JSONScanError.Reason, _ column: Int) {
        let error = scanError(Array(line.utf8))
        #expect(error == JSONScanError(reason, at: column - 1), "\(line)")
        #expect(error?.column == column)
    }

    @Test(arguments: [
        ([0xC3, 0x28], 7),  // lead byte without continuation
        ([0xC0, 0x80], 7),  // overlong NUL
        ([0xE0, 0x80, 0x80], 7),  // overlong 3-byte
        ([0xED, 0xA0, 0x80], 7),  // encoded surrogate
        ([0xF4, 0x90, 0x80, 0x80], 7),  // above U+10FFFF
        ([0x61, 0xFF], 8),  // never valid
        ([0x61, 0x80], 8),  // stray continuation
        ([0xE6, 0x97], 7),  // truncated by the closing quote
    ] as [([UInt8], Int)])
    func invalidUTF8InStrings(_ inner: [UInt8], _ column: Int) {
        let line = Array(#"{"a":""#.utf8) + inner + Array(#""}"#.utf8)
        #expect(scanError(line) == JSONScanError(.invalidUTF8, at: column - 1))
    }

    @Test func validUTF8InStringsIsAccepted() throws {
        let members = try collectMembers("{\"é日👍🏽\":\"Ünïcödé 日本 👨‍👩‍👧 \u{10FFFF}\u{7F}\"}")
        #expect(members.first?.key == "é日👍🏽")
    }

    @Test func nestingLimit() {
        let inner = JSONScanner.maximumDepth - 1  // the object itself is level 1
        let ok = "{\"a\":" + String(repeating: "[", count: inner) + String(repeating: "]", count: inner) + "}"
        #expect(scanError(Array(ok.utf8)) == nil)
        let deep = "{\"a\":" + String(repeating: "[", count: inner + 1) + String(repeating: "]", count: inner + 1) + "}"
        #expect(scanError(Array(deep.utf8)) == JSONScanError(.nestingTooDeep(limit: 64), at: 5 + inner))
        let deepObjects = "{\"a\":" + String(repeating: "{\"b\":", count: inner + 1) + "1" + String(repeating: "}", count: inner + 2)
        #expect(scanError(Array(deepObjects.utf8))?.reason == .nestingTooDeep(limit: 64))
    }

    @Test func errorDescriptionsNameTheColumn() {
        #expect(JSONScanError(.unterminatedString, at: 40).description == "unterminated string at column 41")
        #expect(JSONScanError(.expected("':'"), at: 11).description == "expected ':' at column 12")
        #expect(scanError(Array(#"{"a" 1}"#.utf8))?.description == "expected ':' at column 6")
    }

    // MARK: validate

    @Test func validateSingleValues() throws {
        try withJSON("  42  ") { json throws in
            let result = try JSONScanner.validate(json)
            #expect(result.kind == .number && result.range == 2..<4)
        }
        try withJSON("[1,\"2\"]") { json throws in #expect(try JSONScanner.validate(json).kind == .array) }
        try withJSON("1 2") { json throws in
            #expect(throws: JSONScanError(.trailingCharacters, at: 2)) { try JSONScanner.validate(json) }
        }
    }

    // MARK: value helpers

    @Test(arguments: [
        ("0", Int64(0)), ("-0", 0), ("123", 123), ("-45", -45),
        ("9223372036854775807", .max), ("-9223372036854775808", .min),
    ])
    func int64Values(_ text: String, _ value: Int64) throws {
        try withJSON(text) { json throws in #expect(try JSONScanner.int64(json, range: 0..<json.count) == value) }
    }

    @Test func int64Errors() {
        withJSON("9223372036854775808") { json in
            #expect(throws: JSONScanError(.integerOutOfRange, at: 0)) { try JSONScanner.int64(json, range: 0..<json.count) }
        }
        withJSON("-9223372036854775809") { json in
            #expect(throws: JSONScanError(.integerOutOfRange, at: 0)) { try JSONScanner.int64(json, range: 0..<json.count) }
        }
        for text in ["1.0", "1e3", "\"5\"", "-", "true"] {
            withJSON(text) { json in
                #expect(throws: JSONScanError(.notAnInteger, at: 0)) { try JSONScanner.int64(json, range: 0..<json.count) }
            }
        }
    }

    @Test func stringDecoding() throws {
        let text = #""a\"\\\/\b\f\n\r\t\u00e9\u65E5\ud83d\udc4d z""#
        try withJSON(text) { json throws in
            try JSONScanner.validate(json)
            #expect(try JSONScanner.string(json, range: 0..<json.count) == "a\"\\/\u{8}\u{C}\n\r\té日👍 z")
            #expect(JSONScanner.plainString(json, range: 0..<json.count) == nil)
        }
        try withJSON(#""plain é""#) { json throws in
            let raw = try #require(JSONScanner.plainString(json, range: 0..<json.count))
            #expect(String(decoding: raw, as: UTF8.self) == "plain é")
            #expect(try JSONScanner.string(json, range: 0..<json.count) == "plain é")
        }
        withJSON("12") { json in
            #expect(JSONScanner.plainString(json, range: 0..<2) == nil)
            #expect(throws: JSONScanError(.expected("a string"), at: 0)) { try JSONScanner.string(json, range: 0..<2) }
        }
    }

    @Test func stringDecodingIntoABufferWritesWhatFitsAndCountsAll() throws {
        let text = #""a\n\u00e9\ud83d\udc4d""#  // a, LF, é (2 bytes), 👍 (4 bytes): 8 bytes
        let expected = Array("a\né👍".utf8)
        try withJSON(text) { json throws in
            var buffer = [UInt8](repeating: 0, count: 16)
            let whole = try buffer.withUnsafeMutableBytes { try JSONScanner.decodeString(json, range: 0..<json.count, into: $0) }
            #expect(whole == 8)
            #expect(Array(buffer[..<whole]) == expected)
            var short = [UInt8](repeating: 0, count: 3)
            let cut = try short.withUnsafeMutableBytes { try JSONScanner.decodeString(json, range: 0..<json.count, into: $0) }
            #expect(cut == 8)
            #expect(short == Array(expected[..<3]))
            #expect(try JSONScanner.decodeString(json, range: 0..<json.count, into: UnsafeMutableRawBufferPointer(start: nil, count: 0)) == 8)
        }
        withJSON("12") { json in
            let nowhere = UnsafeMutableRawBufferPointer(start: nil, count: 0)
            #expect(throws: JSONScanError(.expected("a string"), at: 0)) {
                try JSONScanner.decodeString(json, range: 0..<2, into: nowhere)
            }
        }
    }

    @Test(arguments: JSONWriterTests.hostileStrings)
    func writerOutputScansAndDecodesBack(_ input: String) throws {
        let json = writeJSON { $0.string(input) }
        try withJSON(json) { bytes throws in
            #expect(try JSONScanner.validate(bytes).kind == .string)
            #expect(try JSONScanner.string(bytes, range: 0..<bytes.count) == input)
        }
    }

    @Test func payloadBuilderOutputScans() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "x\"y\u{1}"
        builder.alertTitle = "t"
        builder.sound = .critical(name: "s", volume: 0.5)
        try builder.setCustomProperty("c", ["n": [1, 2.5, nil, true, ["d": "e"]]])
        let json = try builder.json()
        #expect(try collectMembers(json).map(\.key) == ["aps", "c"])
    }

    // MARK: minify

    static let minifyCases: [(input: String, minified: String)] = [
        (#"{ "a" : 1 }"#, #"{"a":1}"#),
        ("{\n  \"aps\" : {\n    \"alert\" : \"hello  world\",\r\n\t\"badge\" : 3\n  },\n  \"list\" : [ 1 , 2.5 , true , null ]\n}",
         #"{"aps":{"alert":"hello  world","badge":3},"list":[1,2.5,true,null]}"#),
        (#"{"q" : "a\" b \\" , "r" : "\\" }"#, #"{"q":"a\" b \\","r":"\\"}"#),
        (#"{"s":"  spaces { } [ ] : , inside  "}"#, #"{"s":"  spaces { } [ ] : , inside  "}"#),
        (#"[ ]"#, #"[]"#),
        (#"  "x y"  "#, #""x y""#),
    ]

    @Test(arguments: minifyCases.indices)
    func minifyDropsOnlyInsignificantWhitespace(_ index: Int) throws {
        let (input, expected) = Self.minifyCases[index]
        try withJSON(input) { json throws in
            let (_, range) = try JSONScanner.validate(json)
            let output = UnsafeMutableRawBufferPointer.allocate(byteCount: json.count, alignment: 1)
            defer { output.deallocate() }
            let count = try #require(JSONScanner.minify(json, range: range, into: output))
            let text = String(decoding: UnsafeRawBufferPointer(rebasing: output[..<count]), as: UTF8.self)
            #expect(text == expected)
            #expect(JSONScanner.minifiedCount(json, range: range) == count)
            // Re-parsed, the minified text equals the original.
            let original = try #require(try parseWithFoundation(input) as? NSObject)
            let reparsed = try #require(try parseWithFoundation(text) as? NSObject)
            #expect(original.isEqual(reparsed))
            // One byte short: refused.
            if count > 0 {
                #expect(JSONScanner.minify(json, range: range, into: UnsafeMutableRawBufferPointer(rebasing: output[..<(count - 1)])) == nil)
            }
        }
    }

    @Test func minifyMemberValueOfACampaignLine() throws {
        let line = #"{"token":"\#(Self.token)", "payload": { "aps" : { "alert" : "Hi \"there\"" } , "k":[1, 2] }, "priority": 5}"#
        try withJSON(line) { json throws in
            var payloadRange: Range<Int>?
            try JSONScanner.members(ofObject: json) { _, member in
                if member.keyEquals("payload", in: json) { payloadRange = member.valueRange }
            }
            let range = try #require(payloadRange)
            var output = [UInt8](repeating: 0, count: 256)
            let count = try #require(output.withUnsafeMutableBytes { JSONScanner.minify(json, range: range, into: $0) })
            #expect(String(decoding: output[..<count], as: UTF8.self) == #"{"aps":{"alert":"Hi \"there\""},"k":[1,2]}"#)
        }
    }

    // MARK: agreement with Foundation

    /// Where the fuzzer (Tests/Fuzz, JSONScannerFuzzer) found Foundation's JSONSerialization
    /// reading differently, the scanner keeps to RFC 8259: Foundation accepts trailing
    /// commas, refuses numbers beyond Double's range and drops a U+FEFF that starts a
    /// string; nesting is limited to 64 levels (Foundation: 512).
    @Test func whereFoundationDiffersTheScannerKeepsToTheRFC() throws {
        let cases: [(text: String, valid: Bool)] = [
            ("[1,]", false), (#"{"a":1,}"#, false), ("[1 , ]", false),
            ("1e400", true), ("-1e400", true), ("[1" + String(repeating: "0", count: 400) + "]", true),
            (String(repeating: "[", count: 64) + String(repeating: "]", count: 64), true),
            (String(repeating: "[", count: 65) + String(repeating: "]", count: 65), false),
        ]
        for (text, valid) in cases {
            let accepted = withJSON(text) { json in (try? JSONScanner.validate(json)) != nil }
            #expect(accepted == valid, "\(text.prefix(40))")
        }
        let decoded = try withJSON("\"\u{FEFF}b\\n\u{FEFF}c\"") { json in try JSONScanner.string(json, range: 0..<json.count) }
        #expect(decoded.unicodeScalars.elementsEqual("\u{FEFF}b\n\u{FEFF}c".unicodeScalars))
    }

    @Test func mutatedLinesWeAcceptFoundationAcceptsToo() throws {
        let seed = #"{"token":"abc","payload":{"aps":{"alert":"h\u00e9 \"q\"","badge":1},"x":[1.5,-2e3,true,null]},"n":0}"#
        let alphabet = Array(#"{}[]:,"\ 0123456789.eE+-tfnulrsa"#.utf8) + [0x09, 0x0A, 0xC3, 0xA9, 0x80]
        var generator = SplitMix64(seed: 0x5A17_0C0D_E5EE_D001)
        var accepted = 0
        for _ in 0..<3000 {
            var bytes = Array(seed.utf8)
            for _ in 0..<Int.random(in: 1...3, using: &generator) {
                let index = Int.random(in: 0..<bytes.count, using: &generator)
                switch Int.random(in: 0..<3, using: &generator) {
                case 0: bytes[index] = alphabet.randomElement(using: &generator)!
                case 1: bytes.remove(at: index)
                default: bytes.insert(alphabet.randomElement(using: &generator)!, at: index)
                }
            }
            guard scanError(bytes) == nil else { continue }
            accepted += 1
            let parsed = try? JSONSerialization.jsonObject(with: Data(bytes))
            #expect(parsed is [String: Any], "accepted but Foundation refused: \(String(decoding: bytes, as: UTF8.self))")
        }
        #expect(accepted > 100)
    }
}
