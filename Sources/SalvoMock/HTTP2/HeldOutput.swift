import DequeModule
import SalvoIO
import SalvoWire

/// Answers held back as the bytes nghttp2 made of them, until they are due: the fast way
/// to hold answers that fall due in the order they came (a fixed delay).
///
/// A held stream stays open in nghttp2 until its answer is sent, and its state (the
/// stream, its entry in the session's stream map, our slot) goes cold in the meantime:
/// with a thousand streams held per connection and a hundred connections, answering one
/// touched several cache lines from memory. So the answer is submitted while the request is
/// still warm, nghttp2 makes its frames at once and closes the stream, and only its bytes
/// (about 60 of them) wait here, in arrival order, with what it counts. Measured: the
/// Performance notes article (SalvoEngine.docc/PerformanceNotes.md).
///
/// The stream is closed in nghttp2 while the client still counts it open, so the
/// connection counts held answers against the stream limit itself, and finds here the
/// answer to a stream the client resets (`reset(streamID:)`): it counts as unsent, not for
/// what it says, and stops counting against the limit; its bytes still go out when due
/// (they keep the HPACK state in step), and the client ignores them.
///
/// An answer is counted when it falls due, before its bytes are written; its frames come
/// out of nghttp2 after it is held, and are held until the latest due time held so far,
/// so none leaves early. Not a value type to copy: it owns a buffer.
struct HeldOutput: ~Copyable {
    /// What an answer counts for, once due: accepted (with its digest) or rejected.
    struct Answer {
        var due: Instant
        var digest: UInt64
        var streamID: Int32
        var reason: APNsReason?
        /// A broadcast's channel by the registry's number (-1: none), counted by channel
        /// when its answer is.
        var channel: Int32 = -1
        /// The client reset the stream: the answer was counted as unsent then.
        var isReset = false
    }

    private var answers: Deque<Answer> = []
    /// Answers held whose streams the client reset.
    private var resetCount = 0
    private var bytes = OutputBuffer(capacity: 1 << 12)
    /// Runs of held bytes due at the same time: each ends `end` bytes into the bytes ever
    /// held (`heldBytes`).
    private var runs: Deque<(due: Instant, end: Int)> = []
    private var heldBytes = 0
    private var releasedBytes = 0
    /// The latest due time held.
    private var latest: Instant?

    /// Answers held and not yet due, but for those whose streams the client reset.
    var count: Int { answers.count - resetCount }

    /// Whether nothing, answer or byte, is held.
    var isEmpty: Bool { answers.isEmpty && runs.isEmpty }

    /// When the earliest answer or byte is due.
    var earliest: Instant? { earlier(answers.first?.due, runs.first?.due) }

    /// Whether an answer due at `due` keeps the order: due no earlier than any held.
    func keepsOrder(_ due: Instant) -> Bool { latest.map { due >= $0 } ?? true }

    /// Holds an answer (`keepsOrder(answer.due)` must hold); its frames follow (`holdFrame`).
    mutating func hold(_ answer: Answer) {
        precondition(keepsOrder(answer.due), "held answers keep their order")
        answers.append(answer)
        latest = answer.due
    }

    /// Holds a frame of a held answer until the latest due time held.
    mutating func holdFrame(_ frame: UnsafeRawBufferPointer) {
        guard let latest else { preconditionFailure("a held frame belongs to a held answer") }
        bytes.append(frame)
        heldBytes += frame.count
        if let last = runs.last, last.due == latest {
            runs[runs.count - 1].end = heldBytes
        } else {
            runs.append((latest, heldBytes))
        }
    }

    /// Removes and returns the earliest answer if it is due by `now` (one whose stream was
    /// reset too: it counts for nothing more).
    mutating func popDueAnswer(by now: Instant) -> Answer? {
        guard let first = answers.first, first.due <= now else { return nil }
        if first.isReset { resetCount -= 1 }
        return answers.removeFirst()
    }

    /// The client reset `streamID`: marks its answer reset if one is held (the last held
    /// for that stream; resets are rare, so a search from the newest). Returns whether
    /// one was, to be counted as unsent.
    mutating func reset(streamID: Int32) -> Bool {
        guard let index = answers.lastIndex(where: { $0.streamID == streamID }), !answers[index].isReset else { return false }
        answers[index].isReset = true
        resetCount += 1
        return true
    }

    /// Moves the bytes due by `now` into `output`.
    mutating func releaseBytes(by now: Instant, into output: inout OutputBuffer) {
        var end = releasedBytes
        while let run = runs.first, run.due <= now {
            end = run.end
            runs.removeFirst()
        }
        guard end > releasedBytes else { return }
        let count = end - releasedBytes
        output.append(UnsafeRawBufferPointer(rebasing: bytes.readable[..<count]))
        bytes.consume(count)
        releasedBytes = end
    }

    /// Forgets everything held (the connection is gone); returns how many answers were,
    /// but for those already counted as unsent when their streams were reset.
    mutating func discard() -> Int {
        let unsent = count
        answers.removeAll()
        resetCount = 0
        runs.removeAll()
        bytes.consume(bytes.count)
        releasedBytes = heldBytes
        return unsent
    }
}
