import Foundation
import Testing
@testable import SalvoWire

/// Escaped JSON width of one scalar, written independently of the code under test.
private func escapedWidth(_ scalar: Unicode.Scalar) -> Int {
    switch scalar.value {
    case 0x22, 0x5C, 0x08, 0x09, 0x0A, 0x0C, 0x0D: return 2
    case 0..<0x20: return 6
    default: return String(scalar).utf8.count
    }
}

private let ellipsis = "\u{2026}"

@Suite("Payload truncation")
struct PayloadTruncationTests {
    static let bodies: [(name: String, unit: String)] = [
        ("ascii", "The quick brown fox jumps over the lazy dog. "),
        ("latin", "café é à ü "),
        ("cjk", "日本語の本文 "),
        ("emoji", "👍🏽👨‍👩‍👧 🇯🇵"),
        ("escapes", "quote\" back\\slash\n tab\t ctl\u{1}\u{1F} "),
        ("mixed", "a\"é日👍🏽\u{0}\\z "),
    ]

    static let maximumLengths = Array(30...110) + [127, 128, 129, 200, 255, 256, 257, 1000, 2047, 2048]

    /// A builder with some fixed content around the body, so truncation has company.
    static func builder(body: String, dictionary: Bool) throws -> PayloadBuilder {
        var builder = PayloadBuilder()
        builder.alertBody = body
        builder.badge = 5
        if dictionary { builder.alertTitle = "Title" }
        try builder.setCustomProperty("id", "abc")
        return builder
    }

    /// Length of the payload with an empty body: everything but the body's text.
    static func fixedLength(dictionary: Bool) throws -> Int {
        try builder(body: "", dictionary: dictionary).json().utf8.count
    }

    @Test(arguments: bodies.map(\.name), [false, true])
    func truncatedPayloadsAreValidExactAndEndInEllipsis(_ name: String, dictionary: Bool) throws {
        let unit = Self.bodies.first { $0.name == name }!.unit
        let body = String(repeating: unit, count: 300)
        let builder = try Self.builder(body: body, dictionary: dictionary)
        let fixed = try Self.fixedLength(dictionary: dictionary)
        let bodyScalars = Array(body.unicodeScalars)
        let buffer = PayloadBuffer(capacity: 4096)

        for maximum in Self.maximumLengths {
            let budget = maximum - fixed - 3
            if budget < 0 {
                #expect(throws: PayloadError.tooLong(bytesOver: -budget, maximumLength: maximum)) {
                    try builder.build(into: buffer, maximumLength: maximum)
                }
                continue
            }
            let length = try builder.build(into: buffer, maximumLength: maximum)
            let bytes = buffer.bytes
            try #require(length < fixed + body.utf8.count, "body \(name) too short to need truncation")
            #expect(bytes.count == length)
            #expect(length <= maximum, "\(name) max \(maximum)")

            let text = try #require(String(validating: bytes, as: UTF8.self), "invalid UTF-8 at max \(maximum)")
            let object = try #require(try parseWithFoundation(text) as? [String: Any])
            let aps = try #require(object["aps"] as? [String: Any])
            let alertBody = try #require(
                dictionary ? (aps["alert"] as? [String: Any])?["body"] as? String : aps["alert"] as? String)
            #expect(alertBody.hasSuffix(ellipsis))
            #expect(aps["badge"] as? Int == 5)
            #expect(object["id"] as? String == "abc")

            // The kept text is a prefix of the body, cut at a scalar boundary.
            let kept = Array(alertBody.unicodeScalars.dropLast())
            #expect(Array(bodyScalars.prefix(kept.count)) == kept)

            // As long as possible: the payload is the limit exactly, or the next scalar
            // would not have fit.
            let keptWidth = kept.reduce(0) { $0 + escapedWidth($1) }
            #expect(fixed + keptWidth + 3 == length)
            if length < maximum {
                let next = bodyScalars[kept.count]
                #expect(length + escapedWidth(next) > maximum, "\(name): max \(maximum) length \(length)")
            }
            if name == "ascii" {
                #expect(length == maximum)
            }
        }
    }

    @Test func escapeWidthForcesAShortfallOnlyWhenUnavoidable() throws {
        // Body of \u0001 characters (6 bytes each once escaped): only every sixth limit
        // can be hit exactly.
        var builder = PayloadBuilder()
        builder.alertBody = String(repeating: "\u{1}", count: 100)
        let fixed = #"{"aps":{"alert":""}}"#.utf8.count
        for maximum in 40...80 {
            let length = try builder.json(maximumLength: maximum).utf8.count
            let expected = fixed + 3 + (maximum - fixed - 3) / 6 * 6
            #expect(length == expected, "max \(maximum)")
            #expect(maximum - length < 6)
        }
    }

    @Test func payloadAtTheLimitIsNotTruncated() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "exactly fits"
        let full = try builder.json()
        let exact = try builder.json(maximumLength: full.utf8.count)
        #expect(exact == full)
        #expect(!exact.contains(ellipsis))

        let oneShort = try builder.json(maximumLength: full.utf8.count - 1)
        #expect(oneShort.utf8.count == full.utf8.count - 1)
        // One byte too many costs four characters: "fits" gives way to the 3-byte "…".
        #expect(oneShort == #"{"aps":{"alert":"exactly …"}}"#)
    }

    @Test func bodyCanShrinkToJustTheEllipsis() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "abcdef"
        let minimal = #"{"aps":{"alert":"…"}}"#
        #expect(try builder.json(maximumLength: minimal.utf8.count) == minimal)
        #expect(throws: PayloadError.tooLong(bytesOver: 1, maximumLength: minimal.utf8.count - 1)) {
            try builder.json(maximumLength: minimal.utf8.count - 1)
        }
    }

    @Test func tooLongReportsBytesOverWithAndWithoutBody() throws {
        var builder = PayloadBuilder()
        builder.category = String(repeating: "x", count: 300)
        let length = try builder.json().utf8.count
        #expect(throws: PayloadError.tooLong(bytesOver: length - 256, maximumLength: 256)) {
            try builder.json(maximumLength: 256)
        }
        builder.alertBody = "some body text"
        builder.alwaysUseAlertDictionary = true
        builder.alertBody = ""
        let fixed = try builder.json().utf8.count
        builder.alertBody = "some body text"
        // Even "…" alone leaves it too long by fixed + 3 - 256.
        #expect(throws: PayloadError.tooLong(bytesOver: fixed + 3 - 256, maximumLength: 256)) {
            try builder.json(maximumLength: 256)
        }
    }

    @Test func bodiesShorterThanTheEllipsisAreKeptWhenReportingBytesOver() throws {
        var builder = PayloadBuilder()
        builder.category = String(repeating: "x", count: 300)
        for body in ["", "a", "ab", "\""] {
            builder.alertBody = body
            let length = try builder.json().utf8.count
            // Replacing these bodies by "…" would not help: the report is about the payload as is.
            #expect(throws: PayloadError.tooLong(bytesOver: length - 256, maximumLength: 256), "body \(body)") {
                try builder.json(maximumLength: 256)
            }
        }
        builder.alertBody = "abcd"
        let fixed = try builder.json().utf8.count - 4
        #expect(throws: PayloadError.tooLong(bytesOver: fixed + 3 - 256, maximumLength: 256)) {
            try builder.json(maximumLength: 256)
        }
    }

    @Test func tooLongDescriptionSaysByHowMuch() {
        let error = PayloadError.tooLong(bytesOver: 37, maximumLength: 2048)
        #expect(error.description.contains("37 bytes over the 2048-byte limit"))
        #expect(PayloadError.tooLong(bytesOver: 1, maximumLength: 256).description.contains("1 byte over"))
    }

    @Test func otherFieldsAreNeverShortened() throws {
        var builder = PayloadBuilder()
        builder.alertTitle = String(repeating: "T", count: 50)
        builder.alertBody = String(repeating: "B", count: 500)
        try builder.setCustomProperty("note", .string(String(repeating: "N", count: 50)))
        let text = try builder.json(maximumLength: 256)
        #expect(text.utf8.count == 256)
        #expect(text.contains(String(repeating: "T", count: 50)))
        #expect(text.contains(String(repeating: "N", count: 50)))
        #expect(text.contains("B…\""))
    }

    @Test func truncationPointCutsOnlyAtScalarBoundaries() {
        // "é" is 2 bytes: budgets between boundaries round down.
        #expect(PayloadBuilder.truncationPoint(of: "éé", escapedBudget: 0) == 0)
        #expect(PayloadBuilder.truncationPoint(of: "éé", escapedBudget: 1) == 0)
        #expect(PayloadBuilder.truncationPoint(of: "éé", escapedBudget: 2) == 2)
        #expect(PayloadBuilder.truncationPoint(of: "éé", escapedBudget: 3) == 2)
        #expect(PayloadBuilder.truncationPoint(of: "éé", escapedBudget: 4) == 4)
        // "\"" costs 2 escaped, "a" 1.
        #expect(PayloadBuilder.truncationPoint(of: "a\"a", escapedBudget: 2) == 1)
        #expect(PayloadBuilder.truncationPoint(of: "a\"a", escapedBudget: 3) == 2)
        // 👍🏽 is two 4-byte scalars: a cut may fall between them.
        #expect(PayloadBuilder.truncationPoint(of: "👍🏽", escapedBudget: 5) == 4)
        #expect(PayloadBuilder.truncationPoint(of: "👍🏽", escapedBudget: 7) == 4)
    }
}
