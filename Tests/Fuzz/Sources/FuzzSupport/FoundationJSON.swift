import Foundation

// Comparing Salvo's JSON with Foundation's reading of it, and the two ways in which they
// differ by design that more than one target meets (JSONScannerFuzzer describes them all).

/// Foundation's reading of `text`, fragments allowed; nil when it refuses the text.
public func foundationJSON(_ text: some Collection<UInt8>) -> Any? {
    try? JSONSerialization.jsonObject(with: Data(text), options: [.fragmentsAllowed])
}

/// A value written the one way Foundation writes it (keys sorted), for comparing readings.
public func canonicalJSON(_ object: Any) -> Data? {
    try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .fragmentsAllowed])
}

/// Whether Foundation decodes `text` as another encoding than UTF-8: it does so for a text
/// that starts with a byte order mark or has a NUL among its first four bytes.
public func foundationReadsAsAnotherEncoding(_ text: some Collection<UInt8>) -> Bool {
    let head = Array(text.prefix(4))
    return head.contains(0) || head.starts(with: [0xEF, 0xBB, 0xBF]) || head.starts(with: [0xFE, 0xFF])
        || head.starts(with: [0xFF, 0xFE])
}

/// `text` with every number whose Double is infinite (which Foundation refuses as "not
/// representable") replaced by 0, or nil when it has none. `text` must be valid JSON.
public func withOverflowingNumbersZeroed(_ text: some Collection<UInt8>) -> [UInt8]? {
    let text = Array(text)
    var fixed: [UInt8] = []
    var changed = false
    var index = 0
    var inString = false
    while index < text.count {
        let byte = text[index]
        if inString {
            fixed.append(byte)
            if byte == UInt8(ascii: "\\") {
                fixed.append(text[index + 1])
                index += 2
                continue
            }
            if byte == UInt8(ascii: "\"") { inString = false }
            index += 1
        } else if byte == UInt8(ascii: "-") || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) {
            var end = index
            while end < text.count, "+-.eE0123456789".utf8.contains(text[end]) { end += 1 }
            let number = Double(String(decoding: text[index..<end], as: UTF8.self))!
            if number.isInfinite {
                fixed.append(UInt8(ascii: "0"))
                changed = true
            } else {
                fixed.append(contentsOf: text[index..<end])
            }
            index = end
        } else {
            if byte == UInt8(ascii: "\"") { inString = true }
            fixed.append(byte)
            index += 1
        }
    }
    return changed ? fixed : nil
}

/// `text` with every U+FEFF written as is replaced by U+2060 (a word joiner, as long in
/// UTF-8): Foundation drops a U+FEFF that starts a string or follows an escape, reading the
/// key "\u{FEFF}id" as "id" (JSONScannerFuzzer, difference 5); the stand-in keeps its place.
public func withBOMsReplaced(_ text: some Collection<UInt8>) -> [UInt8] {
    var text = Array(text)
    var index = 0
    while index + 3 <= text.count {
        if text[index] == 0xEF, text[index + 1] == 0xBB, text[index + 2] == 0xBF {
            text.replaceSubrange(index..<index + 3, with: [0xE2, 0x81, 0xA0])
            index += 3
        } else {
            index += 1
        }
    }
    return text
}

/// Bytes for a failure message: the text (cut at 200 bytes) and its first bytes in numbers.
public func show(_ bytes: some Collection<UInt8>) -> String {
    String(decoding: bytes.prefix(200), as: UTF8.self).debugDescription
        + " (\(bytes.count) bytes, starting \(Array(bytes.prefix(16))))"
}
