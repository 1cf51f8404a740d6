import SalvoWire

extension JSONValue {
    /// Parses JSON text given on the command line (`--custom key=JSON`) into a value.
    ///
    /// The scanner validates each level first, so the walk below only has to find where
    /// values are, never to judge them.
    init(parsingCommandLine text: String) throws(JSONScanError) {
        var copy = text
        let result = copy.withUTF8 { utf8 -> Result<JSONValue, JSONScanError> in
            do throws(JSONScanError) {
                return .success(try Self.parse(UnsafeRawBufferPointer(utf8)))
            } catch {
                return .failure(error)
            }
        }
        self = try result.get()
    }

    private static func parse(_ json: UnsafeRawBufferPointer) throws(JSONScanError) -> JSONValue {
        let (kind, range) = try JSONScanner.validate(json)
        switch kind {
        case .null: return .null
        case .true: return .bool(true)
        case .false: return .bool(false)
        case .string: return .string(try JSONScanner.string(json, range: range))
        case .number:
            if let integer = try? JSONScanner.int64(json, range: range) { return .int(integer) }
            // Fractions, exponents, and integers beyond Int64.
            return .double(Double(String(decoding: json[range], as: UTF8.self)) ?? .nan)
        case .object:
            var members = JSONObjectMembers(json)
            var result: [(key: String, value: JSONValue)] = []
            while let member = try members.next() {
                let quotedKey = (member.keyRange.lowerBound - 1)..<(member.keyRange.upperBound + 1)
                let value = try parse(UnsafeRawBufferPointer(rebasing: json[member.valueRange]))
                result.append((key: try JSONScanner.string(json, range: quotedKey), value: value))
            }
            return .object(result)
        case .array:
            var elements: [JSONValue] = []
            for element in elementRanges(json, inside: range) {
                elements.append(try parse(UnsafeRawBufferPointer(rebasing: json[element])))
            }
            return .array(elements)
        }
    }

    /// The ranges of a valid array's elements: split at commas outside strings and nesting.
    private static func elementRanges(_ json: UnsafeRawBufferPointer, inside array: Range<Int>) -> [Range<Int>] {
        var ranges: [Range<Int>] = []
        var depth = 0
        var inString = false
        var start = array.lowerBound + 1
        var index = start
        let end = array.upperBound - 1  // the closing ']'
        while index < end {
            let byte = json[index]
            if inString {
                if byte == UInt8(ascii: "\\") { index += 1 } else if byte == UInt8(ascii: "\"") { inString = false }
            } else {
                switch byte {
                case UInt8(ascii: "\""): inString = true
                case UInt8(ascii: "["), UInt8(ascii: "{"): depth += 1
                case UInt8(ascii: "]"), UInt8(ascii: "}"): depth -= 1
                case UInt8(ascii: ",") where depth == 0:
                    ranges.append(start..<index)
                    start = index + 1
                default: break
                }
            }
            index += 1
        }
        // `[]` and `[ ]` have no elements; anything else has one after the last comma.
        if json[start..<end].contains(where: { ![0x20, 0x09, 0x0A, 0x0D].contains($0) }) {
            ranges.append(start..<end)
        }
        return ranges
    }
}
