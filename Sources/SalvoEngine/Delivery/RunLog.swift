import DequeModule

/// The protocol-neutral core of a connection slot's window: the notifications written and
/// not yet released, as runs in lane order, from which any of them can be read again from
/// its source (`Replayer`). Both settlings build on it: the binary one (`InFlightWindow`:
/// error wait, retention, drain) and the HTTP/2 one (`StreamWindow`: an answer per stream).
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
