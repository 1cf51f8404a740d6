// PayloadBuilder with truncation, on random alert bodies and limits.
//
// The input is a setting and a body: byte 0 holds flags (a dictionary alert, a title, a
// badge, a custom property, a critical sound, a relevance score), bytes 1–2 the limit
// (0...4096), bytes 3–10 the relevance score's bits, and the rest is the body as UTF-8
// (malformed sequences read as U+FFFD, so every scalar can appear).
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - a payload that fits is built unchanged; one that does not is built with its body cut
//   at a scalar boundary and ended with "…": exactly the payload of the same builder with
//   that body, at most the limit, and the next scalar would not have fit;
// - every payload is a JSON object (JSONScanner and Foundation agree), whose body and
//   relevance score Foundation reads back exactly;
// - tooLong is thrown exactly when even the body "…" does not fit, with the right excess;
//   nonFiniteNumber exactly for a relevance score that is NaN or infinite;
// - building twice gives the same bytes.

import Foundation
import FuzzSupport
import SalvoWire

// libFuzzer calls the target from one thread, so the buffers are never shared.
nonisolated(unsafe) let buffer = PayloadBuffer(capacity: PayloadBuilder.http2MaximumLength)
/// Room for any payload unshortened: a 4 KiB body of control characters escapes to 24 KiB.
nonisolated(unsafe) let roomy = PayloadBuffer(capacity: 1 << 16)

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    var setting = [UInt8](repeating: 0, count: 11)
    for (index, byte) in input.prefix(11).enumerated() { setting[index] = byte }
    let body = String(decoding: input.dropFirst(11), as: UTF8.self)
    let limit = (Int(setting[1]) << 8 | Int(setting[2])) % (PayloadBuilder.http2MaximumLength + 1)
    let builder = makeBuilder(setting, body: body)

    let built = build(builder, into: buffer, limit: limit)
    require(built == build(builder, into: buffer, limit: limit), "building twice gave different payloads")
    if let score = builder.relevanceScore, !score.isFinite {
        require(built == .failure(.nonFiniteNumber(key: "relevance-score")), "a relevance score of \(score) gave \(built)")
        return
    }
    guard case .success(let full) = build(builder, into: roomy, limit: roomy.capacity) else {
        require(false, "the payload does not build even without a limit")
        return
    }
    switch built {
    case .success(let payload) where full.count <= limit:
        require(payload == full, "a payload that fits was changed: \(show(payload)), not \(show(full))")
        checkJSON(payload, builder, body: builder.alertBody)
    case .success(let payload):
        checkShortened(payload, full: full, builder, limit: limit)
    case .failure(.tooLong(let over, let maximum)):
        // Cut to "…", the body costs 3 bytes; a body cheaper than that is kept whole.
        var cut = builder
        if builder.alertBody != nil { cut.alertBody = "…" }
        let smallest = Swift.min(full.count, (try? build(cut, into: roomy, limit: roomy.capacity).get().count) ?? .max)
        require(maximum == limit && smallest > limit && over == smallest - limit,
                "tooLong(\(over), \(maximum)) for a limit of \(limit) and a smallest payload of \(smallest) bytes")
    case .failure(let error):
        require(false, "building failed: \(error)")
    }
}

func makeBuilder(_ setting: [UInt8], body: String) -> PayloadBuilder {
    let flags = setting[0]
    var builder = PayloadBuilder()
    builder.alertBody = body
    builder.alwaysUseAlertDictionary = flags & 1 != 0
    if flags & 2 != 0 { builder.alertTitle = "Title \"quoted\"" }
    if flags & 4 != 0 { builder.badge = Int(setting[3]) - 128 }
    if flags & 8 != 0 { try! builder.setCustomProperty("campaign", .object([("id", .int(Int64(setting[4])))])) }
    if flags & 16 != 0 { builder.sound = .critical(name: "alarm.caf", volume: Double(setting[5]) / 255) }
    if flags & 32 != 0 {
        builder.relevanceScore = Double(bitPattern: setting[3...10].reduce(0) { $0 << 8 | UInt64($1) })
    }
    if flags & 64 != 0 { builder.alertBody = nil }
    return builder
}

func build(_ builder: PayloadBuilder, into buffer: PayloadBuffer, limit: Int) -> Result<[UInt8], PayloadError> {
    Result { () throws(PayloadError) in
        let count = try builder.build(into: buffer, maximumLength: limit)
        require(count == buffer.count && count <= limit, "build returned \(count), the buffer holds \(buffer.count)")
        return buffer.bytes
    }
}

/// A shortened payload is the builder's payload with a cut body, as long as it can be.
func checkShortened(_ payload: [UInt8], full: [UInt8], _ builder: PayloadBuilder, limit: Int) {
    require(payload.count <= limit, "a \(payload.count)-byte payload for a limit of \(limit)")
    // Scalars, not Characters: a cut can end before a scalar that joins the "…" into one
    // grapheme (U+06DD, a prepended mark, did), and `hasSuffix` would miss it.
    guard let body = builder.alertBody, let shortened = alertBody(payload), shortened.unicodeScalars.last == "…" else {
        require(false, "a payload over the limit was not shortened with \"…\": \(show(payload))")
        return
    }
    let kept = Array(shortened.unicodeScalars.dropLast())
    let scalars = Array(body.unicodeScalars)
    require(kept.count < scalars.count && scalars.starts(with: kept),
            "the shortened body \(shortened.debugDescription) is not a cut of \(body.debugDescription)")
    var same = builder
    same.alertBody = shortened
    require((try? build(same, into: roomy, limit: roomy.capacity).get()) == payload,
            "the shortened payload is not the payload with body \(shortened.debugDescription)")
    let next = escapedWidth(scalars[kept.count])
    require(payload.count + next > limit,
            "the cut left out \(scalars[kept.count].debugDescription) (\(next) bytes) with \(limit - payload.count) bytes to spare")
    checkJSON(payload, builder, body: shortened)
}

/// The payload is a JSON object that reads back as what was set, with `body` as its body.
func checkJSON(_ payload: [UInt8], _ builder: PayloadBuilder, body: String?) {
    let kind = payload.withUnsafeBytes { try? JSONScanner.validate($0).kind }
    require(kind == .object, "the scanner does not read \(show(payload)) as an object")
    guard let object = foundationJSON(payload) as? [String: Any], let aps = object["aps"] as? [String: Any] else {
        require(false, "Foundation does not read \(show(payload)) as an object with aps")
        return
    }
    let read = alertBody(payload)
    require(read?.unicodeScalars.elementsEqual(body?.unicodeScalars ?? "".unicodeScalars) ?? (body == nil),
            "the body \(body.debugDescription) read back as \(read.debugDescription)")
    if let score = builder.relevanceScore {
        require(aps["relevance-score"] is NSNumber, "no relevance score in \(show(payload))")
        // Read with Swift's parser: Foundation's on Linux reads some numbers a few units in
        // the last place off (it reads -2.088097429759528e-53 as ...292e-53), strtod does not.
        let read = number(after: #""relevance-score":"#, in: payload)
        require(read?.bitPattern == score.bitPattern,
                "the relevance score \(score) read back as \(String(describing: read)): \(show(payload))")
    }
}

/// The number written right after `key` in `payload`.
func number(after key: String, in payload: [UInt8]) -> Double? {
    let key = Array(key.utf8)
    guard let start = payload.indices.first(where: { payload[$0...].starts(with: key) }) else { return nil }
    let digits = payload[(start + key.count)...].prefix { "+-.eE0123456789".utf8.contains($0) }
    return Double(String(decoding: digits, as: UTF8.self))
}

/// The alert body Foundation reads in a payload, whether the alert is a string or a dictionary.
func alertBody(_ payload: [UInt8]) -> String? {
    guard let aps = (foundationJSON(payload) as? [String: Any])?["aps"] as? [String: Any] else { return nil }
    return aps["alert"] as? String ?? (aps["alert"] as? [String: Any])?["body"] as? String
}

/// What a scalar costs inside a JSON string as the writer escapes it: `\"`, `\\`, the
/// short escapes of five control characters, `\u00XX` for the others, else its UTF-8.
func escapedWidth(_ scalar: Unicode.Scalar) -> Int {
    switch scalar.value {
    case 0x22, 0x5C, 0x08, 0x09, 0x0A, 0x0C, 0x0D: 2
    case 0..<0x20: 6
    default: UTF8.width(scalar)
    }
}
