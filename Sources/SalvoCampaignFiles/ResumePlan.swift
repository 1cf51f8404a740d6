/// Which lines of a campaign a run reads, and how its checkpoint moves on.
///
/// A resumed run reads the lines after `doneThrough`, and before it only those in `retry`:
/// the lines that failed in an earlier run. A fresh run's plan is `ResumePlan.fresh`.
///
///     line:    1 2 3 4 5 6 7 8 9 10 11 ...
///     done:    ✓ ✓ ✗ ✓ ✓ ✓ ✗ ✗ ✓ ✓
///              doneThrough 10, retry [3...3, 7...8]: a resume reads 3, 7, 8, then 11 on
///
/// Readers (`CampaignReader`, the Push Channel reader) pass over the other lines without
/// parsing them, and so do the readers a sender makes to send again after a drop, so that
/// a run of notifications is the same run whichever reader reads it.
public struct ResumePlan: Sendable, Hashable {
    /// Every line up to this one is final from an earlier run: done, except `retry`.
    public var doneThrough: Int
    /// Lines up to `doneThrough` to send again: ascending, apart, within 1…`doneThrough`.
    public var retry: [ClosedRange<Int>]

    /// A run from the first line.
    public static let fresh = ResumePlan(doneThrough: 0, retry: [])

    /// Reads after `doneThrough`, and the lines of `retry` before it.
    public init(doneThrough: Int, retry: [ClosedRange<Int>]) {
        precondition(doneThrough >= 0, "doneThrough cannot be negative")
        precondition(Self.isWellFormed(retry, through: doneThrough), "retry ranges must be ascending, apart and within 1...doneThrough")
        self.doneThrough = doneThrough
        self.retry = retry
    }

    /// The plan a checkpoint's point makes.
    public init(_ point: ResumePoint) {
        self.init(doneThrough: point.line, retry: point.retry)
    }

    /// How many lines `retry` holds.
    public var retryLineCount: Int { retry.reduce(0) { $0 + $1.count } }

    /// Whether the run reads line `line` (1-based). No allocation: readers ask it per line.
    @inline(__always)
    public func includes(line: Int) -> Bool {
        if line > doneThrough { return true }
        guard !retry.isEmpty else { return false }
        var low = 0, high = retry.count
        while low < high {
            let middle = (low + high) / 2
            if retry[middle].upperBound < line { low = middle + 1 } else { high = middle }
        }
        return low < retry.count && retry[low].contains(line)
    }

    /// The plan after a run that read with this one, for its checkpoint.
    ///
    /// - Parameters:
    ///   - finalThrough: every line the run read up to it is final: accepted, rejected or
    ///     failed (it may be below `doneThrough`, while the run still sends lines of `retry`).
    ///   - failedLines: the lines of the run that failed, when known exactly; nil when not
    ///     (some failures could not be named): then `cleanThrough` is used.
    ///   - cleanThrough: every line the run read up to it was accepted or rejected (the
    ///     first failure holds it back).
    ///   - limit: the most runs of lines `retry` may hold; with more failures the plan stops
    ///     before the first that does not fit, and what follows it is read again.
    public func advanced(finalThrough: Int, failedLines: [Int]?, cleanThrough: Int,
                         limit: Int = ResumePoint.maximumRetryRanges) -> ResumePlan {
        guard let failedLines else {
            return ResumePlan(doneThrough: max(doneThrough, cleanThrough), retry: Self.clipped(retry, above: cleanThrough))
        }
        var merged = Self.clipped(retry, above: finalThrough)
        for line in failedLines.sorted() where line >= 1 && line <= max(doneThrough, finalThrough) {
            merged.append(line...line)
        }
        merged = Self.coalesced(merged)
        var through = max(doneThrough, finalThrough)
        if merged.count > limit {
            through = merged[limit].lowerBound - 1
            merged.removeLast(merged.count - limit)
        }
        // Failures that end the final lines are lines not done: a resume reads them after
        // the checkpoint's line as well (the checkpoint an unreachable gateway leaves says
        // so plainly).
        while let last = merged.last, last.upperBound == through {
            through = last.lowerBound - 1
            merged.removeLast()
        }
        return ResumePlan(doneThrough: through, retry: merged)
    }

    /// `ranges` with every line up to `line` removed.
    private static func clipped(_ ranges: [ClosedRange<Int>], above line: Int) -> [ClosedRange<Int>] {
        ranges.compactMap { range in
            range.upperBound <= line ? nil : max(range.lowerBound, line + 1)...range.upperBound
        }
    }

    /// Sorted, with overlapping and adjacent ranges joined.
    private static func coalesced(_ ranges: [ClosedRange<Int>]) -> [ClosedRange<Int>] {
        var joined: [ClosedRange<Int>] = []
        for range in ranges.sorted(by: { $0.lowerBound < $1.lowerBound }) {
            if let last = joined.last, range.lowerBound <= last.upperBound + 1 {
                joined[joined.count - 1] = last.lowerBound...max(last.upperBound, range.upperBound)
            } else {
                joined.append(range)
            }
        }
        return joined
    }

    /// Whether `ranges` are ascending, apart (not adjacent) and within 1…`last`.
    static func isWellFormed(_ ranges: [ClosedRange<Int>], through last: Int) -> Bool {
        var previous = -1
        for range in ranges {
            guard range.lowerBound >= 1, range.upperBound <= last, range.lowerBound > previous + 1 else { return false }
            previous = range.upperBound
        }
        return true
    }

    /// `ranges` for people and files: `17, 500–510` (or with other separators).
    public static func describe(_ ranges: [ClosedRange<Int>], separator: String = ", ", dash: String = "–") -> String {
        ranges.map { $0.count == 1 ? "\($0.lowerBound)" : "\($0.lowerBound)\(dash)\($0.upperBound)" }.joined(separator: separator)
    }
}
