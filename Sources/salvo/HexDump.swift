#if canImport(Glibc)
import Glibc
#endif

/// Formats bytes as an annotated hex dump: offset, up to 16 bytes, and a note per row.
///
///     0000  02                                               command 2 (frame)
///     0001  00 00 00 7b                                      frame length 123
///     002b  7b 22 61 70 73 22 3a 7b 7d 7d                    {"aps":{}}
///
/// Each field starts on its own row, so the note beside a row always describes it.
struct HexDump {
    /// A run of bytes and what it is.
    struct Field {
        var range: Range<Int>
        /// The note on the field's first row.
        var label: String
        /// Show the bytes as text (printable ASCII, others as '.') on every row instead of
        /// a label: for payloads.
        var showsText = false
    }

    static let bytesPerRow = 16

    /// The dump of `bytes`, one string per row. Bytes no field covers are dumped unlabelled.
    static func rows(_ bytes: [UInt8], fields: [Field]) -> [String] {
        var rows: [String] = []
        var covered = 0
        func dump(_ range: Range<Int>, label: String, showsText: Bool) {
            var start = range.lowerBound
            repeat {
                let end = min(start + bytesPerRow, range.upperBound)
                let row = bytes[start..<end]
                let note = showsText ? text(row) : (start == range.lowerBound ? label : "")
                rows.append(line(offset: start, row, note: note))
                start = end
            } while start < range.upperBound
        }
        for field in fields.sorted(by: { $0.range.lowerBound < $1.range.lowerBound }) {
            if field.range.lowerBound > covered { dump(covered..<field.range.lowerBound, label: "", showsText: false) }
            if field.range.isEmpty { continue }
            dump(field.range, label: field.label, showsText: field.showsText)
            covered = max(covered, field.range.upperBound)
        }
        if covered < bytes.count { dump(covered..<bytes.count, label: "", showsText: false) }
        return rows
    }

    /// `offset  hex bytes (padded)  note`.
    static func line(offset: Int, _ row: ArraySlice<UInt8>, note: String) -> String {
        let hex = row.map(byte).joined(separator: " ")
        let padded = hex + String(repeating: " ", count: max(0, bytesPerRow * 3 - 1 - hex.count))
        let line = "\(offsetText(offset))  \(padded)"
        return note.isEmpty ? String(line.reversed().drop(while: { $0 == " " }).reversed()) : "\(line)  \(note)"
    }

    /// Two lowercase hex digits.
    static func byte(_ value: UInt8) -> String {
        let digits = Array("0123456789abcdef")
        return String([digits[Int(value >> 4)], digits[Int(value & 0x0F)]])
    }

    /// At least four hex digits.
    static func offsetText(_ offset: Int) -> String {
        let hex = String(offset, radix: 16)
        return String(repeating: "0", count: max(0, 4 - hex.count)) + hex
    }

    /// The bytes as printable ASCII, '.' for everything else.
    static func text(_ row: ArraySlice<UInt8>) -> String {
        String(decoding: row.map { (0x20..<0x7F).contains($0) ? $0 : UInt8(ascii: ".") }, as: UTF8.self)
    }
}

/// UNIX seconds as ISO 8601 in UTC, e.g. `2023-11-14T22:13:20Z`.
func iso8601(unixSeconds: UInt32) -> String {
    var time = time_t(unixSeconds)
    var parts = tm()
    gmtime_r(&time, &parts)
    func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
    return "\(parts.tm_year + 1900)-\(two(parts.tm_mon + 1))-\(two(parts.tm_mday))T"
        + "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))Z"
}
