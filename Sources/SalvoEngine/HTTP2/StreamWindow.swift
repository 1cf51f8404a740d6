import DequeModule
import SalvoWire

/// What a notification went through before this attempt, per kind: each kind has its own
/// limit (`StreamWindow.Limits`).
struct Attempts: Equatable {
    /// Silent drops it was in flight for.
    var drops: UInt8 = 0
    /// 429 TooManyRequests answers.
    var throttled: UInt8 = 0
    /// 500 and 503 answers.
    var serverErrors: UInt8 = 0
    /// Streams the gateway refused (REFUSED_STREAM, or above a GOAWAY's last stream).
    var refusals: UInt8 = 0
    /// 403 ExpiredProviderToken answers.
    var expiredTokens: UInt8 = 0
}

/// Why a stream's notification is to be sent again.
enum RetryCause: Equatable {
    /// The gateway never processed it: REFUSED_STREAM, a stream above a GOAWAY's last
    /// stream id, or a request the session could not send. Not a possible duplicate.
    case refused
    /// The connection dropped while it was open: it may have been delivered; `drops` decides.
    case dropped(DropHandling)
    /// 429 TooManyRequests: again after `after` nanoseconds.
    case throttled(after: UInt64)
    /// 500 InternalServerError: again at once, on any connection (the error is the request's).
    case serverError
    /// 503 ServiceUnavailable or Shutdown: again on another connection (that one retires).
    case unavailable
    /// 403 ExpiredProviderToken: again with a newer provider token, after `after`
    /// nanoseconds (the time a token store takes to give one; 0 when it is signed here).
    case expiredToken(after: UInt64)
}

/// A notification waiting to be sent again, one at a time: read again from `position`.
struct Retry: Equatable {
    var index: UInt64
    var source: SourceID
    var position: SourcePosition
    var attempts: Attempts
    /// Not before this time (ns): a throttled notification waits out its backoff.
    var notBefore: UInt64 = 0
    /// Not on this connection (its number): one that answered 503.
    var avoiding: UInt32?

    /// The one-notification run the `Replayer` reads it from.
    var run: SourceRun { SourceRun(single: index, source: source, position: position) }
}

/// One open request stream: which notification it carries (its source and position are
/// in the window's record of it) and what it went through. One per stream a connection
/// may have open, so its fields are ordered for the small ones to share padding.
struct OpenStream {
    var index: UInt64
    var token: DeviceToken
    /// The provider token it was sent with (`ProviderTokenSigner.generation`), 0 for none.
    var tokenGeneration: UInt32
    /// The connection it is open on (the window's number for it); `open` sets it.
    var connection: UInt32 = 0
    var attempts: Attempts
    /// A broadcast: `token` is not its target (a rejection reads its channel again).
    var isBroadcast = false

    init(index: UInt64, token: DeviceToken, isBroadcast: Bool = false, attempts: Attempts, tokenGeneration: UInt32) {
        self.index = index
        self.token = token
        self.isBroadcast = isBroadcast
        self.attempts = attempts
        self.tokenGeneration = tokenGeneration
    }
}

/// The HTTP/2 settling of a connection's window. Every stream gets its own answer,
/// in any order, so a notification is final the moment its answer arrives, and one that
/// must be tried again (refused, throttled, a server error, a drop) is sent again alone.
/// Loop thread only; pure (time is passed in), tested without sockets.
///
/// Two structures, both bounded:
/// - `streams`: one entry per open stream, found through the entry number the session keeps as
///   the stream's user data; never more than the connection's stream limit.
/// - `records`: one per notification from the oldest not final to the newest, in the order
///   the connection took them, each with its exact source position. Released from the
///   front as soon as the front is final, so the checkpoint stops right before the lowest
///   unanswered notification, and the retained store gets space back in order. It spans
///   the streams in flight plus the answered ones behind the oldest unanswered; a full
///   window stops taking new notifications (backpressure).
///
/// The binary protocol keeps runs instead (`RunLog`): there an error rewinds everything
/// after it, and a run is what is read again. Here nothing is read again but single
/// notifications, and a record per notification makes every answer O(1) and the
/// checkpoint exact. Both share the settlement, the drop handling and the `Replayer`.
final class StreamWindow: ConnectionWindow {
    /// How often a notification may be sent again for what is no answer of the gateway's
    /// before it fails (`AnswerPolicy` limits the retries answers ask for).
    struct Limits {
        /// A gateway that refuses the same notification this often is broken.
        var refusals = 16
        /// A token refreshed this often and still called expired: the clock is wrong.
        var expiredTokens = 2
    }

    /// In this order, the flag fills the source's padding instead of a word of its own.
    private struct Record {
        var position: SourcePosition
        var source: SourceID
        var isFinal: Bool
    }

    let limits: Limits
    /// The most records; a full window takes no new notifications.
    let capacity: Int
    // Per-request state (the fields marked below) skips exclusivity checks, which cost the hot
    // path (see the Performance notes article): loop thread only, and no access to these
    // fields spans a call that could come back to them.
    /// `records[i]` is index `base + i`.
    @exclusivity(unchecked) private var records: Deque<Record> = []
    @exclusivity(unchecked) private var base: UInt64 = 0
    /// The index the next new notification gets: the window numbers them in the order its
    /// connection takes them, from its lane's ring or its shard's.
    @exclusivity(unchecked) private(set) var end: UInt64 = 0
    @exclusivity(unchecked) private var streams: [OpenStream?] = []
    @exclusivity(unchecked) private var freeEntries: [Int32] = []
    /// Streams open now on the current connection: what its stream limit counts.
    @exclusivity(unchecked) private(set) var openCount = 0
    /// Retired connections (they open no new streams) and how many of their streams are
    /// still open: each closes once its count is 0. Rarely more than one. Read at every
    /// answer: unchecked exclusivity, as the fields above.
    @exclusivity(unchecked) private var retired: [(connection: UInt32, open: Int)] = []
    /// Retries due now, oldest first.
    private var ready: Deque<Retry> = []
    /// Throttled retries, each due at its `notBefore`.
    private var delayed: [Retry] = []
    /// The earliest `notBefore` in `delayed` (`.max` when empty): most calls look no further.
    private var earliestDelayed: UInt64 = .max
    /// Connections opened so far; the current one's number.
    private(set) var connection: UInt32 = 0

    init(limits: Limits = Limits(), capacity: Int = 1 << 16) {
        self.limits = limits
        self.capacity = capacity
    }

    /// Makes room for `streamLimit` open streams at once, its connection's most. Grown by
    /// doubling, the stream table would hold up to twice as many, and a sender keeps a
    /// window per connection.
    func reserveStreams(_ streamLimit: Int) {
        streams.reserveCapacity(streamLimit)
        freeEntries.reserveCapacity(streamLimit)
    }

    // MARK: ConnectionWindow

    var isEmpty: Bool { records.isEmpty }
    var oldestSequence: UInt64? { records.first?.position.sequence }
    func connectionOpened() { connection &+= 1 }

    /// Nothing to skip: a notification gets its index here when it leaves its staging ring
    /// (`recordNew`), not from the ring, so those that fail while staged take none.
    func skipNew(to index: UInt64) {}

    /// Whether the window takes no new notifications.
    var isFull: Bool { records.count >= capacity }

    /// Whether notifications wait to be sent again (due now or later).
    var hasRetries: Bool { !ready.isEmpty || !delayed.isEmpty }

    /// Notifications waiting to be sent again (due now or later). They hold their place
    /// under the stream limit: a connection whose answers are all "later" (429) takes no
    /// new notifications meanwhile, so what waits stays bounded by the limit.
    var waitingRetryCount: Int { ready.count + delayed.count }

    // MARK: Streams

    /// A new notification from a staging ring is being sent: returns the index it gets.
    func recordNew(_ origin: Origin) -> UInt64 {
        if records.isEmpty { base = end }
        records.append(Record(position: origin.position, source: origin.source, isFinal: false))
        end += 1
        return end - 1
    }

    /// A stream opens for the notification at `index` (new, or a retry): returns its entry.
    func open(_ stream: OpenStream) -> Int32 {
        openCount += 1
        var stream = stream
        stream.connection = connection
        if let entry = freeEntries.popLast() {
            streams[Int(entry)] = stream
            return entry
        }
        streams.append(stream)
        return Int32(streams.count - 1)
    }

    /// Streams open on every connection, retired ones included.
    var openOnAllConnections: Int { retired.reduce(openCount) { $0 + $1.open } }

    /// The current connection opens no more streams: its open ones count apart from the
    /// next connection's until they are answered. Returns its number.
    func retireConnection() -> UInt32 {
        retired.append((connection, openCount))
        openCount = 0
        return connection
    }

    /// Streams still open on the retired connection `number`.
    func openCount(onRetired number: UInt32) -> Int {
        retired.first(where: { $0.connection == number })?.open ?? 0
    }

    /// The retired connection `number` closed: it is no longer counted.
    func retiredConnectionClosed(_ number: UInt32) {
        retired.removeAll { $0.connection == number }
    }

    func stream(_ entry: Int32) -> OpenStream? { streams[Int(entry)] }

    /// The entries of the streams open on connection `number`.
    func openEntries(on number: UInt32) -> [Int32] {
        streams.indices.filter { streams[$0]?.connection == number }.map { Int32($0) }
    }

    /// The gateway answered 200.
    func accepted(_ entry: Int32, into settlement: inout Settlement) {
        let stream = close(entry)
        settlement.accepted += 1
        final(stream.index, into: &settlement)
    }

    /// The gateway refused the notification for good.
    func rejected(_ entry: Int32, _ rejection: Rejection, into settlement: inout Settlement) {
        let stream = close(entry)
        let record = record(stream.index)
        settlement.refused.append(.init(run: SourceRun(single: stream.index, source: record.source, position: record.position),
                                        item: 0, rejection: rejection,
                                        named: stream.isBroadcast ? nil : (stream.token, record.position.sequence)))
        final(stream.index, into: &settlement)
    }

    /// Salvo gives up on the notification.
    func failed(_ entry: Int32, _ reason: FailureReason, into settlement: inout Settlement) {
        let stream = close(entry)
        let record = record(stream.index)
        fail(stream.index, source: record.source, position: record.position, reason, into: &settlement)
    }

    /// A notification waiting to be sent again cannot be (its source cannot be read again).
    func failed(_ retry: Retry, _ reason: FailureReason, into settlement: inout Settlement) {
        fail(retry.index, source: retry.source, position: retry.position, reason, into: &settlement)
    }

    /// The notification is to be sent again; for a refusal, a drop or an expired token it
    /// fails instead once the cause has reached its limit (an answer's retries are the
    /// `AnswerPolicy`'s to limit). `now` in nanoseconds.
    func retry(_ entry: Int32, _ cause: RetryCause, now: UInt64, into settlement: inout Settlement) {
        let stream = close(entry)
        let record = record(stream.index)
        var attempts = stream.attempts
        let failure: FailureReason?
        var retry = Retry(index: stream.index, source: record.source, position: record.position, attempts: attempts)
        switch cause {
        case .refused:
            attempts.refusals &+= 1
            failure = Int(attempts.refusals) > limits.refusals ? .retryBudgetExhausted : nil
        case .dropped(let drops):
            attempts.drops &+= 1
            failure = drops.verdict(drops: Int(attempts.drops))
        case .throttled(let delay):
            attempts.throttled &+= 1
            failure = nil
            retry.notBefore = now &+ delay
        case .serverError, .unavailable:
            attempts.serverErrors &+= 1
            failure = nil
            if cause == .unavailable { retry.avoiding = stream.connection }
        case .expiredToken(let delay):
            attempts.expiredTokens &+= 1
            failure = Int(attempts.expiredTokens) > limits.expiredTokens ? .authenticationFailed : nil
            retry.notBefore = now &+ delay
        }
        if let failure {
            fail(stream.index, source: record.source, position: record.position, failure, into: &settlement)
            return
        }
        retry.attempts = attempts
        settlement.resent += 1
        if case .dropped = cause { settlement.possibleDuplicates += 1 }
        if retry.notBefore > now {
            delayed.append(retry)
            earliestDelayed = min(earliestDelayed, retry.notBefore)
        } else {
            ready.append(retry)
        }
    }

    /// The next notification to send again on the current connection at `now`, if one is
    /// due: the oldest that does not avoid this connection.
    func nextRetry(now: UInt64) -> Retry? {
        promoteDueRetries(now: now)
        guard let next = ready.firstIndex(where: { $0.avoiding != connection }) else { return nil }
        return ready.remove(at: next)
    }

    /// When the earliest throttled retry that is not yet due will be (ns), if one waits.
    /// Those due by `now` join the retries due now, so a wake-up is never asked for a time
    /// already past (it would fire again and again while no stream is free to take them).
    func nextRetryTime(now: UInt64) -> UInt64? {
        promoteDueRetries(now: now)
        return earliestDelayed == .max ? nil : earliestDelayed
    }

    private func promoteDueRetries(now: UInt64) {
        guard earliestDelayed <= now else { return }
        ready.append(contentsOf: delayed.lazy.filter { $0.notBefore <= now })
        delayed.removeAll { $0.notBefore <= now }
        earliestDelayed = delayed.lazy.map(\.notBefore).min() ?? .max
    }

    // MARK: Connection ends

    /// The current connection ended without answering its open streams: each one's fate is
    /// unknown, and the drop handling decides (sent again, or failed as `deliveryUnknown`).
    func connectionLost(_ drops: DropHandling) -> Settlement {
        connectionLost(drops, number: connection)
    }

    /// The connection `number` (current or retired) ended without answering its open streams.
    func connectionLost(_ drops: DropHandling, number: UInt32) -> Settlement {
        var settlement = Settlement()
        for entry in streams.indices where streams[entry]?.connection == number {
            retry(Int32(entry), .dropped(drops), now: 0, into: &settlement)
        }
        return settlement
    }

    func failAll(reason: FailureReason) -> Settlement {
        var settlement = Settlement()
        for entry in streams.indices where streams[entry] != nil {
            failed(Int32(entry), reason, into: &settlement)
        }
        for retry in ready + delayed {
            fail(retry.index, source: retry.source, position: retry.position, reason, into: &settlement)
        }
        ready.removeAll()
        delayed.removeAll()
        earliestDelayed = .max
        retired.removeAll()
        return settlement
    }

    // MARK: Internals

    private func close(_ entry: Int32) -> OpenStream {
        guard let stream = streams[Int(entry)] else { preconditionFailure("stream entry \(entry) is not open") }
        streams[Int(entry)] = nil
        freeEntries.append(entry)
        if !retired.isEmpty, let place = retired.firstIndex(where: { $0.connection == stream.connection }) {
            retired[place].open -= 1
        } else {
            openCount -= 1
        }
        return stream
    }

    private func fail(_ index: UInt64, source: SourceID, position: SourcePosition, _ reason: FailureReason,
                      into settlement: inout Settlement) {
        settlement.failures.append((SourceRun(single: index, source: source, position: position), reason))
        final(index, into: &settlement)
    }

    /// The record of the notification at `index`, kept until it is final.
    private func record(_ index: UInt64) -> Record { records[Int(index - base)] }

    /// The notification at `index` is final: counted now, released once everything before
    /// it is final too.
    private func final(_ index: UInt64, into settlement: inout Settlement) {
        let place = Int(index - base)
        settlement.countFinal(source: records[place].source, count: 1)
        records[place].isFinal = true
        while let front = records.first, front.isFinal {
            records.removeFirst()
            base += 1
            settlement.noteReleased(source: front.source, position: front.position, count: 1)
        }
    }
}
