/// How long a connection of a shard keeps writing before it hands the loop back: the rule
/// that keeps what an error response makes the sender write again small.
///
/// Everything a connection writes after a rejected notification is discarded by the
/// gateway and written again on the next connection, so every record written between the
/// gateway's answer and the sender reading it costs twice. Hence:
///
/// - a connection looks at its socket after every record (one `poll` that does not wait)
///   and stops as soon as the gateway said something;
/// - while error responses are arriving, the shard's connections take turns record by
///   record: each connection's records are spaced out by the others', and the gateway has
///   time to answer before that connection writes its next one;
/// - otherwise a connection writes up to `recordsPerTurn` records in a row, because turns
///   cost loop passes and wake-ups that error-free sending has no use for.
///
/// Pure: the shard feeds it what happened; tests drive it without sockets.
struct WriteTurns {
    /// The most records one turn writes, so that timers and the other connections of the
    /// shard have their turn.
    static let recordsPerTurn = 8
    /// For how many records written after an error response the connections take turns
    /// record by record.
    static let errorResponseMemory = 128

    /// Records written since the last error response, counted up to `errorResponseMemory`
    /// (nil: none arrived yet).
    private(set) var recordsSinceErrorResponse: Int?

    /// One more record was written on one of the shard's connections.
    mutating func recordWritten() {
        if let count = recordsSinceErrorResponse, count < Self.errorResponseMemory {
            recordsSinceErrorResponse = count + 1
        }
    }

    /// An error response arrived on one of the shard's connections.
    mutating func errorResponseArrived() { recordsSinceErrorResponse = 0 }

    /// Whether error responses arrived lately.
    var errorsAreRecent: Bool { (recordsSinceErrorResponse ?? .max) < Self.errorResponseMemory }

    /// Whether a connection that wrote `records` records this turn should stop now: the
    /// turn is full, the gateway said something (`gatewaySpoke`, looked at only when the
    /// turn is not full), or errors are recent and another connection waits to write.
    func turnEnds(after records: Int, gatewaySpoke: () -> Bool, othersWaiting: () -> Bool) -> Bool {
        records >= Self.recordsPerTurn || gatewaySpoke() || (errorsAreRecent && othersWaiting())
    }
}
