import SalvoWire

/// The body of an error answer (or GOAWAY's debug data), gathered as its DATA arrives:
/// `{"reason":"BadDeviceToken"}`, for 410 with a `"timestamp"`. Apple's are a few dozen
/// bytes; what goes beyond `capacity` is not needed to read the reason.
struct ErrorBody {
    private var bytes: (UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64,
                        UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64, UInt64) =
        (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
    private var count = 0
    static let capacity = 128

    init() {}

    /// A body that is `bytes` (GOAWAY's debug data).
    init(_ bytes: UnsafeRawBufferPointer) { append(bytes) }

    mutating func append(_ chunk: UnsafeRawBufferPointer) {
        let taken = min(chunk.count, Self.capacity - count)
        guard taken > 0 else { return }
        let start = count
        withUnsafeMutableBytes(of: &bytes) { storage in
            UnsafeMutableRawBufferPointer(rebasing: storage[start..<start + taken])
                .copyMemory(from: UnsafeRawBufferPointer(rebasing: chunk[..<taken]))
        }
        count += taken
    }

    /// The body's `reason`, empty when there is none.
    var reason: String { reasonAndTimestamp().reason }

    /// The body's `reason` (empty when there is none) and `timestamp`.
    func reasonAndTimestamp() -> (reason: String, timestamp: Int64?) {
        withUnsafeBytes(of: bytes) { storage in
            let json = UnsafeRawBufferPointer(rebasing: storage[..<count])
            var reason = ""
            var timestamp: Int64?
            var members = JSONObjectMembers(json)
            while let member = try? members.next() {
                if member.keyEquals("reason", in: json), member.kind == .string {
                    reason = (try? JSONScanner.string(json, range: member.valueRange)) ?? ""
                } else if member.keyEquals("timestamp", in: json), member.kind == .number {
                    timestamp = try? JSONScanner.int64(json, range: member.valueRange)
                }
            }
            return (reason, timestamp)
        }
    }
}
