import DequeModule

/// The binary window's notifications written and not yet released, as runs in lane
/// order, from which any of them can be read again from its source (`Replayer`).
///
/// A run is a stretch of consecutive lane indices read one after the other from one
/// source, so a record of a few words stands for up to `maximumRunLength` notifications.
/// Runs may leave holes (a run failed in the middle); indices in a hole belong to no one.
struct RunLog {
    /// At most this many notifications per run: bounds the reading needed to find one.
    static let maximumRunLength = 256

    /// Oldest first.
    var runs: Deque<Run> = []

    var isEmpty: Bool { runs.isEmpty }
    var first: Run? { runs.first }
    var last: Run? { runs.last }

    /// Notifications in the runs.
    var notificationCount: Int { runs.reduce(0) { $0 + $1.count } }

    /// Records the notification at lane index `index` (from `origin`), written at `now`
    /// up to stream byte `streamEnd`: it extends the newest run when it continues it.
    @inline(__always)
    mutating func append(index: UInt64, origin: Origin, now: UInt64, maximumSpan: UInt64, streamEnd: UInt64 = 0) {
        // One read and one modify of the newest run: this runs for every notification written.
        if origin.continuesRun, let last = runs.indices.last,
           runs[last].canTake(index: index, source: origin.source, now: now, maximumSpan: maximumSpan) {
            runs[last].take(writtenAt: now, streamEnd: streamEnd)
        } else {
            runs.append(Run(first: index, count: 1, source: origin.source, drops: 0, skip: 0, position: origin.position,
                            openedAt: now, writtenAt: now, waitFrom: now, streamEnd: streamEnd))
        }
    }

    /// Splits the run that holds `index` so that a run starts there.
    mutating func split(at index: UInt64) {
        guard let at = runIndex(containing: index), runs[at].first < index else { return }
        var tail = runs[at]
        let head = Int(index - tail.first)
        runs[at].count = head
        tail.first = index
        tail.count -= head
        tail.skip += head
        runs.insert(tail, at: at + 1)
    }

    /// The position in `runs` of the run holding `index`.
    func runIndex(containing index: UInt64) -> Int? {
        guard let at = runIndex(atOrAfter: index), runs[at].first <= index else { return nil }
        return at
    }

    /// The position in `runs` of the first run that ends after `index` (binary search).
    func runIndex(atOrAfter index: UInt64) -> Int? {
        var low = 0, high = runs.count
        while low < high {
            let middle = (low + high) / 2
            if runs[middle].end <= index { low = middle + 1 } else { high = middle }
        }
        return low < runs.count ? low : nil
    }
}

/// A run as the binary window keeps it: a `SourceRun` and when its frames were written,
/// for the error wait.
struct Run: Equatable {
    /// The lane index of its first notification (identifier = index + 1).
    var first: UInt64
    var count: Int
    var source: SourceID
    /// Silent drops it was in flight for.
    var drops: UInt8
    /// Notifications at `position` that precede this run (it was split there).
    var skip: Int
    var position: SourcePosition
    /// When its first notification was written: runs close after a short span so that one
    /// run's notifications share one write time closely enough.
    var openedAt: UInt64
    /// When its newest frame was last written (ns): error latencies are measured from here.
    var writtenAt: UInt64
    /// When its error wait started: `writtenAt`, or later while its bytes sat unacknowledged.
    var waitFrom: UInt64
    /// The connection's stream bytes up to the end of its newest written frame.
    var streamEnd: UInt64

    var end: UInt64 { first + UInt64(count) }

    /// The notifications it holds, to name or read again.
    var sourceRun: SourceRun { SourceRun(first: first, count: count, source: source, skip: skip, position: position) }

    init(first: UInt64, count: Int, source: SourceID, drops: UInt8, skip: Int, position: SourcePosition,
         openedAt: UInt64, writtenAt: UInt64, waitFrom: UInt64, streamEnd: UInt64) {
        self.first = first
        self.count = count
        self.source = source
        self.drops = drops
        self.skip = skip
        self.position = position
        self.openedAt = openedAt
        self.writtenAt = writtenAt
        self.waitFrom = waitFrom
        self.streamEnd = streamEnd
    }

    /// Whether the notification at lane index `index`, read from `source` right after this
    /// run's last one, may join it at `now`.
    @inline(__always)
    func canTake(index: UInt64, source: SourceID, now: UInt64, maximumSpan: UInt64) -> Bool {
        self.source == source && end == index && count < RunLog.maximumRunLength && now &- openedAt < maximumSpan
    }

    /// Adds the next notification, written at `writtenAt` up to stream byte `streamEnd`.
    @inline(__always)
    mutating func take(writtenAt: UInt64, streamEnd: UInt64) {
        count += 1
        self.writtenAt = writtenAt
        waitFrom = writtenAt
        self.streamEnd = streamEnd
    }
}
