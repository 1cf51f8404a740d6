import SalvoWire

/// The JSON bodies of the API's answers, written straight into bytes: a batch's answer
/// has an entry per notification, and ids, states and numbers need no escaping, so
/// writing them is a few appends where an encoder would build and walk a tree.
struct AnswerJSON {
    private(set) var bytes: [UInt8] = []

    init(capacity: Int = 256) { bytes.reserveCapacity(capacity) }

    mutating func raw(_ text: StaticString) {
        text.withUTF8Buffer { bytes.append(contentsOf: $0) }
    }

    mutating func int(_ value: Int) { bytes.append(contentsOf: String(value).utf8) }

    mutating func id(_ id: APNsID) {
        bytes.append(UInt8(ascii: "\""))
        let start = bytes.count
        bytes.append(contentsOf: repeatElement(0, count: APNsID.textLength))
        bytes.withUnsafeMutableBytes { id.write(into: UnsafeMutableRawBufferPointer(rebasing: $0[start...])) }
        bytes.append(UInt8(ascii: "\""))
    }

    /// A JSON string of any text, escaped.
    mutating func string(_ text: String) {
        bytes.append(UInt8(ascii: "\""))
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "\""): raw("\\\"")
            case UInt8(ascii: "\\"): raw("\\\\")
            case 0x0A: raw("\\n")
            case 0x0D: raw("\\r")
            case 0x09: raw("\\t")
            case 0..<0x20:
                raw("\\u00")
                bytes.append(Self.hex[Int(byte >> 4)])
                bytes.append(Self.hex[Int(byte & 15)])
            default: bytes.append(byte)
            }
        }
        bytes.append(UInt8(ascii: "\""))
    }

    private static let hex = Array("0123456789abcdef".utf8)

    /// A status's members after its id, each with a leading comma: `,"state":"rejected",...`.
    mutating func statusMembers(_ status: NotificationStatus) {
        raw(",\"state\":\"")
        bytes.append(contentsOf: status.state.rawValue.utf8)
        raw("\"")
        if let code = status.statusCode {
            raw(",\"status_code\":")
            int(code)
        }
        if let reason = status.reason {
            raw(",\"reason\":")
            string(reason)
        }
        if let timestamp = status.timestamp {
            raw(",\"timestamp\":")
            int(Int(timestamp))
        }
        if let tokenProblem = status.tokenProblem { tokenProblem ? raw(",\"token_problem\":true") : raw(",\"token_problem\":false") }
    }

    /// `{"error":"..."}`
    static func error(_ message: String) -> [UInt8] {
        var json = AnswerJSON()
        json.raw("{\"error\":")
        json.string(message)
        json.raw("}")
        return json.bytes
    }
}
