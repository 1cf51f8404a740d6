import SalvoCampaignFiles
import SalvoEngine
import SalvoIO
import SalvoWire

/// How one Push Channel notification (or token check) ended.
public enum PushChannelOutcome: Sendable, Hashable {
    /// Code 100.
    case accepted
    /// Code 402: the token is dead.
    case rejected(GNPCode)
    /// Salvo gave up: the reason names the code, the HTTP status or the path's failure.
    case failed(reason: String)
}

/// The accounting of a Push Channel run: every notification taken from the campaign ends in
/// exactly one of accepted, rejected and failed, and the report has the APNs report's shape
/// (`SenderReport`), so the CLI, the checkpoint and whoever reads the JSON treat both alike.
///
/// It also knows how far the campaign is done, for checkpoints: the highest line N such
/// that every line up to N was read and settled (`finalThroughLine`), and which of them
/// failed (`failedLines`, for the checkpoint to list, so that a resume sends those again
/// and nothing else); or, without the list, the highest line before the first failure
/// (`completedThroughLine`).
public final class PushChannelLedger: Sendable {
    private struct State {
        var submitted = 0
        var accepted = 0
        var rejected = 0
        var failed = 0
        var resent = 0
        var possibleDuplicates = 0
        var rejectedByReason: [String: Int] = [:]
        var failedByReason: [String: Int] = [:]
        /// Lines taken and not settled.
        var inFlight: Set<Int> = []
        /// The first line that failed.
        var firstFailedLine: Int?
        /// The lines that failed, while there are at most `failedLinesKept`.
        var failedLines: Set<Int> = []
        /// More lines failed than are kept.
        var failedLinesOverflowed = false
        /// Lines read from the campaign so far (bad and blank ones included).
        var linesRead = 0
        var lastSubmission: ContinuousClock.Instant?
    }

    private let state: Locked<State>
    private let started = ContinuousClock.now

    /// An empty ledger for a run that starts after line `resumedAfter` (0: from the start).
    public init(resumedAfter: Int = 0) {
        var state = State()
        state.linesRead = resumedAfter
        self.state = Locked(state)
    }

    /// The reason name a rejection is counted under (`InvalidToken` for 402).
    public static func reasonName(_ code: GNPCode) -> String {
        code == .invalidToken ? "InvalidToken" : "gnp_\(code.number)"
    }

    /// Notes that `line` was taken for sending, after `linesRead` lines of the campaign.
    public func submitted(line: Int, linesRead: Int) {
        state.withLock { state in
            state.submitted += 1
            state.inFlight.insert(line)
            state.linesRead = max(state.linesRead, linesRead)
            state.lastSubmission = .now
        }
    }

    /// Notes lines read that carried nothing to send (skipped bad lines, blank lines).
    public func read(through linesRead: Int) {
        state.withLock { $0.linesRead = max($0.linesRead, linesRead) }
    }

    /// Settles `line` with `outcome`, after `resent` extra attempts of which
    /// `possibleDuplicates` followed a drop after the request was written.
    public func settle(line: Int, _ outcome: PushChannelOutcome, resent: Int = 0, possibleDuplicates: Int = 0) {
        state.withLock { state in
            precondition(state.inFlight.remove(line) != nil, "line \(line) settled twice or never submitted")
            state.resent += resent
            state.possibleDuplicates += possibleDuplicates
            switch outcome {
            case .accepted: state.accepted += 1
            case .rejected(let code):
                state.rejected += 1
                state.rejectedByReason[Self.reasonName(code), default: 0] += 1
            case .failed(let reason):
                state.failed += 1
                state.failedByReason[reason, default: 0] += 1
                state.firstFailedLine = min(state.firstFailedLine ?? line, line)
                if !state.failedLinesOverflowed {
                    state.failedLines.insert(line)
                    if state.failedLines.count > Self.failedLinesKept {
                        state.failedLines = []
                        state.failedLinesOverflowed = true
                    }
                }
            }
        }
    }

    /// How many failed lines `failedLines` lists at most: a checkpoint lists at most
    /// `ResumePoint.maximumRetryRanges` runs of them anyway.
    public static let failedLinesKept = 100_000

    /// Every line up to this one is read and settled as accepted or rejected.
    public var completedThroughLine: Int {
        state.withLock { state in
            var done = state.linesRead
            if let first = state.inFlight.min() { done = min(done, first - 1) }
            if let failed = state.firstFailedLine { done = min(done, failed - 1) }
            return done
        }
    }

    /// Every line up to this one is read and settled: accepted, rejected or failed.
    public var finalThroughLine: Int {
        state.withLock { state in
            guard let first = state.inFlight.min() else { return state.linesRead }
            return min(state.linesRead, first - 1)
        }
    }

    /// The lines that failed, ascending; nil when more failed than are kept.
    public var failedLines: [Int]? {
        state.withLock { $0.failedLinesOverflowed ? nil : $0.failedLines.sorted() }
    }

    /// The checkpoint of a run that read with `plan`: the lines final so far, with the
    /// failed ones listed for a resume to send again.
    public func checkpointPlan(after plan: ResumePlan) -> ResumePlan {
        // One lock for the three, so that they describe the same moment.
        let (final, failed, clean) = state.withLock { state -> (Int, [Int]?, Int) in
            var final = state.linesRead
            if let first = state.inFlight.min() { final = min(final, first - 1) }
            var clean = final
            if let failed = state.firstFailedLine { clean = min(clean, failed - 1) }
            return (final, state.failedLinesOverflowed ? nil : state.failedLines.filter { $0 <= final }.sorted(), clean)
        }
        return plan.advanced(finalThrough: final, failedLines: failed, cleanThrough: clean)
    }

    /// The counts so far, as a `SenderReport` with `connections` connections.
    public func report(connections: Int) -> SenderReport {
        state.withLock { state in
            let now = ContinuousClock.now
            return SenderReport(
                submitted: state.submitted, accepted: state.accepted, rejected: state.rejected, failed: state.failed,
                resent: state.resent, connections: connections,
                connectionsReason: "\(connections) configured (HTTP/1.1: one request at a time on each)",
                possibleDuplicates: state.possibleDuplicates,
                seconds: (now - started).secondsDouble,
                sendingSeconds: ((state.lastSubmission ?? now) - started).secondsDouble,
                errorWait: .zero, rejectedByReason: state.rejectedByReason, failedByReason: state.failedByReason)
        }
    }
}
