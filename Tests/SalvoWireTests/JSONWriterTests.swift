import Foundation
import Testing
@testable import SalvoWire

/// Runs `body` with a writer over a fresh region and returns the bytes written as text.
func writeJSON(
    capacity: Int = 4096, _ body: (inout JSONWriter) throws -> Void
) rethrows -> String {
    let region = UnsafeMutableRawBufferPointer.allocate(byteCount: capacity, alignment: 1)
    defer { region.deallocate() }
    var writer = JSONWriter(into: region)
    try body(&writer)
    precondition(writer.fits, "test region too small")
    return String(decoding: UnsafeRawBufferPointer(rebasing: region[..<writer.count]), as: UTF8.self)
}

/// Parses `text` with Foundation, which is independent of the code under test.
func parseWithFoundation(_ text: String) throws -> Any {
    try JSONSerialization.jsonObject(with: Data(text.utf8), options: [.fragmentsAllowed])
}

@Suite("JSONWriter")
struct JSONWriterTests {
    static let hostileStrings: [String] = [
        "",
        "plain",
        "\"",
        "\\",
        "\\\"",
        "\"\\\"\\\\\"",
        "quote \" backslash \\ slash / done",
        "\u{7F} DEL passes",
        "line\nbreak\rreturn\ttab\u{8}backspace\u{C}formfeed",
        String((0..<0x20).map { Character(Unicode.Scalar(UInt8($0))) }),
        "emoji 👍🏽 family 👨‍👩‍👧‍👦 flag 🇫🇷",
        "RTL: שלום עולם مرحبا بالعالم \u{200F}mark",
        "combining: e\u{301} a\u{30A}\u{323} Z\u{35C}\u{36B}",
        "\u{2028}\u{2029} separators",
        "nul\u{0}inside",
        "日本語のテキスト",
    ]

    @Test(arguments: hostileStrings)
    func hostileStringRoundTripsThroughFoundation(_ input: String) throws {
        let json = writeJSON { writer in
            writer.beginObject()
            writer.key(input)
            writer.string(input)
            writer.key(fixed: "array")
            writer.beginArray()
            writer.string(input)
            input.utf8CString.withUnsafeBytes { raw in
                writer.string(utf8: UnsafeRawBufferPointer(rebasing: raw.dropLast()))
            }
            writer.endArray()
            writer.endObject()
        }
        let parsed = try #require(try parseWithFoundation(json) as? [String: Any])
        // Foundation may normalise keys on some platforms; compare the values by scalars.
        let value = try #require(parsed[input] as? String)
        #expect(Array(value.unicodeScalars) == Array(input.unicodeScalars))
        let array = try #require(parsed["array"] as? [String])
        #expect(array.count == 2)
        #expect(array.allSatisfy { Array($0.unicodeScalars) == Array(input.unicodeScalars) })
    }

    @Test func everyControlCharacterIsEscapedAsDocumented() throws {
        for byte in UInt8(0)..<0x20 {
            let input = String(Character(Unicode.Scalar(byte)))
            let json = writeJSON { $0.string(input) }
            let expected: String
            switch byte {
            case 0x08: expected = #""\b""#
            case 0x09: expected = #""\t""#
            case 0x0A: expected = #""\n""#
            case 0x0C: expected = #""\f""#
            case 0x0D: expected = #""\r""#
            default:
                let hex = String(byte, radix: 16)
                expected = "\"\\u00" + (hex.count == 1 ? "0" + hex : hex) + "\""
            }
            #expect(json == expected, "byte \(byte)")
            #expect(try parseWithFoundation(json) as? String == input)
            #expect(JSONWriter.escapedWidth(byte) == expected.utf8.count - 2)
        }
    }

    @Test func quotesBackslashesAndNonASCIIAreWrittenExactly() {
        #expect(writeJSON { $0.string(#"a"b\c/d"#) } == #""a\"b\\c/d""#)
        #expect(writeJSON { $0.string("é👍\u{7F}") } == "\"é👍\u{7F}\"")
        // U+FEFF passes raw too (not in the Foundation round trip: Linux Foundation drops it).
        #expect(Array(writeJSON { $0.string("\u{FEFF}x") }.utf8) == [0x22, 0xEF, 0xBB, 0xBF, 0x78, 0x22])
        #expect(JSONWriter.escapedWidth(UInt8(ascii: "\"")) == 2)
        #expect(JSONWriter.escapedWidth(UInt8(ascii: "\\")) == 2)
        #expect(JSONWriter.escapedWidth(0x7F) == 1)
        #expect(JSONWriter.escapedWidth(0xE2) == 1)
    }

    @Test(arguments: [Int64.min, Int64.min + 1, -1_000_000, -10, -9, -1, 0, 1, 9, 10, 99, 100, 1_234_567_890, Int64.max])
    func integersAreExact(_ value: Int64) throws {
        let json = writeJSON { $0.int(value) }
        #expect(json == String(value))
        let number = try #require(try parseWithFoundation("[\(json)]") as? [NSNumber])
        #expect(number.first?.int64Value == value)
    }

    @Test(arguments: [
        0.1, 0.2, 1.0 / 3.0, 1e300, -1e300, 1e20, 1e-7, 123.0, -0.0, 0.0, .leastNonzeroMagnitude, 2.2250738585072014e-308,
        1.7976931348623157e308, -1.7976931348623157e308, 9007199254740993.0, 0.5, 3.14159,
    ])
    func doublesRoundTrip(_ value: Double) throws {
        let json = try writeJSON { try $0.double(value) }
        // Our own reading: the shortest representation reads back bit for bit.
        let reread = try #require(Double(json))
        #expect(reread.bitPattern == value.bitPattern, "\(json)")
        // Foundation's reading: it is valid JSON and the same number.
        let parsed = try #require(try parseWithFoundation("[\(json)]") as? [NSNumber])
        #expect(parsed.first?.doubleValue == value, "\(json)")
        #expect(!json.contains("inf") && !json.contains("nan"))
    }

    @Test func negativeZeroKeepsItsSign() throws {
        #expect(try writeJSON { try $0.double(-0.0) } == "-0.0")
    }

    @Test(arguments: [Double.nan, .infinity, -.infinity, .signalingNaN])
    func nonFiniteDoublesAreRejectedAndNothingIsWritten(_ value: Double) {
        let json = writeJSON { writer in
            writer.beginArray()
            writer.int(1)
            #expect(throws: JSONWriterError.nonFiniteNumber) { try writer.double(value) }
            writer.int(2)
            writer.endArray()
        }
        #expect(json == "[1,2]")
        #expect(throws: JSONWriterError.nonFiniteNumber) {
            _ = try writeJSON { try $0.value(["a": [1, .double(value)]]) }
        }
    }

    @Test func nestedValuesKeepOrderAndPunctuation() throws {
        let value: JSONValue = [
            "z": "last-first",
            "a": [1, -2, 2.5, true, false, nil, [], [:], ["x": [["y": nil]]]],
            "m": .object([(key: "dup", value: 1), (key: "dup", value: 2)]),
        ]
        let json = try writeJSON { try $0.value(value) }
        #expect(json == #"{"z":"last-first","a":[1,-2,2.5,true,false,null,[],{},{"x":[{"y":null}]}],"m":{"dup":1,"dup":2}}"#)
        _ = try parseWithFoundation(json)
    }

    @Test func countsPastCapacityWithoutWriting() throws {
        let region = UnsafeMutableRawBufferPointer.allocate(byteCount: 8, alignment: 1)
        defer { region.deallocate() }
        region.initializeMemory(as: UInt8.self, repeating: 0xAA)
        var writer = JSONWriter(into: UnsafeMutableRawBufferPointer(rebasing: region[..<4]))
        writer.beginArray()
        writer.string("hello")
        writer.int(-123456)
        try writer.double(0.25)
        writer.endArray()
        #expect(writer.count == #"["hello",-123456,0.25]"#.utf8.count)
        #expect(!writer.fits)
        #expect(Array(region[4...]) == [0xAA, 0xAA, 0xAA, 0xAA])
    }

    @Test func jsonValueEquality() {
        #expect(JSONValue.object([(key: "a", value: 1)]) == ["a": 1])
        #expect(JSONValue.object([(key: "a", value: 1)]) != ["b": 1])
        #expect(JSONValue.object([(key: "a", value: 1), (key: "b", value: 2)]) != ["b": 2, "a": 1])
        #expect(JSONValue.array([1, "x"]) == [1, "x"])
        #expect(JSONValue.int(1) != .double(1))
        #expect(JSONValue.null == nil)
    }
}
