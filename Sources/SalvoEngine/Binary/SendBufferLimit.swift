/// How many bytes a connection may queue in its kernel send buffer, adapted to error
/// responses: halved on each (down to `floor`), doubled back once four times the limit
/// has been written without one (up to `ceiling`).
///
/// Everything queued after a rejected notification is discarded by the gateway and must
/// be written again; the bytes in the kernel's buffer are the larger part of that, and
/// they also delay the error response itself. A small buffer makes every error cheap but
/// costs throughput when errors are rare, or on a long path, where the buffer must hold a
/// round trip's worth of bytes. So it is small only while errors come often.
struct SendBufferLimit: Equatable {
    /// The configured buffer, or nil for the kernel's autotuning (then `ceiling` is
    /// where adapting starts and stops).
    let configured: Int?
    let floor: Int
    let ceiling: Int
    /// The limit now; nil while it is the configured buffer (nothing to apply).
    private(set) var current: Int?
    private var bytesSinceError = 0

    static let defaultFloor = 16 << 10
    static let autotunedCeiling = 4 << 20

    init(configured: Int?, floor: Int = SendBufferLimit.defaultFloor) {
        self.configured = configured
        ceiling = max(configured ?? Self.autotunedCeiling, floor)
        self.floor = floor
    }

    /// An error response arrived: halve. Returns the new limit.
    mutating func errorResponse() -> Int {
        let halved = max(floor, (current ?? ceiling) / 2)
        current = halved
        bytesSinceError = 0
        return halved
    }

    /// `count` bytes were written: returns a new, larger limit to apply when one is due.
    mutating func wrote(_ count: Int) -> Int? {
        guard let limit = current else { return nil }
        bytesSinceError += count
        guard bytesSinceError >= 4 * limit else { return nil }
        bytesSinceError = 0
        let doubled = min(ceiling, 2 * limit)
        // Back at the ceiling: the configured buffer (or the kernel's autotuning) again.
        current = doubled == ceiling && configured == nil ? nil : doubled
        return doubled
    }
}
