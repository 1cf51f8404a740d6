import SalvoWire

/// Consecutive notifications of one lane read one after the other from one source: read
/// again by seeking to `position`, passing over `skip` notifications, then reading
/// `count`. What a settlement names and the `Replayer` reads, whatever the protocol (HTTP/2
/// settles one notification at a time: `init(single:)`).
struct SourceRun: Equatable {
    /// The lane index of its first notification.
    var first: UInt64
    var count: Int
    var source: SourceID
    /// Notifications at `position` that precede this run (it was split there).
    var skip: Int
    var position: SourcePosition

    var end: UInt64 { first + UInt64(count) }

    init(first: UInt64, count: Int, source: SourceID, skip: Int, position: SourcePosition) {
        self.first = first
        self.count = count
        self.source = source
        self.skip = skip
        self.position = position
    }

    /// A run of one notification, read from exactly `position`.
    init(single index: UInt64, source: SourceID, position: SourcePosition) {
        self.init(first: index, count: 1, source: source, skip: 0, position: position)
    }
}

/// What a change to a window decided: everything the ledger, the events and the sources
/// need to hear, applied in one place by the connection.
struct Settlement {
    /// A notification the gateway refused.
    struct Refused {
        /// The run it was in, and its place in that run's reading (`skip` included).
        var run: SourceRun
        var item: Int
        var rejection: Rejection
        /// Its device token and sequence when the window knows them (HTTP/2 pushes to a
        /// device); otherwise (binary, broadcasts) they are read again from the run's source.
        var named: (token: DeviceToken, sequence: UInt64)?
    }

    /// Released as accepted.
    var accepted = 0
    var refused: [Refused] = []
    /// Runs released as failed, each whole.
    var failures: [(run: SourceRun, reason: FailureReason)] = []
    /// Notifications that reached a final state, per source (accepted, rejected and failed).
    var finals: [(source: SourceID, count: Int)] = []
    /// Rewound (binary) or queued (HTTP/2) to be written again.
    var resent = 0
    /// Of `resent`: those whose first copy may have been delivered (after a silent drop).
    var possibleDuplicates = 0
    /// The retained-notification entry index before which everything of source 0 is final.
    var retainedFinalEnd: UInt64?

    var isEmpty: Bool {
        accepted == 0 && refused.isEmpty && failures.isEmpty && resent == 0 && finals.isEmpty && retainedFinalEnd == nil
    }

    /// `count` notifications of `run`, from the start of what is left of it, are final and
    /// released: nothing before them is waiting (binary settling releases in order).
    mutating func noteFinal(_ run: SourceRun, count: Int) {
        noteFinal(source: run.source, position: run.position, count: count, skip: run.skip)
    }

    /// `count` notifications read from `position` on (after `skip`) are final and released.
    mutating func noteFinal(source: SourceID, position: SourcePosition, count: Int, skip: Int = 0) {
        countFinal(source: source, count: count)
        noteReleased(source: source, position: position, count: count, skip: skip)
    }

    /// `count` notifications of `source` reached a final state, in whatever order.
    mutating func countFinal(source: SourceID, count: Int) {
        if let last = finals.indices.last, finals[last].source == source {
            finals[last].count += count
        } else {
            finals.append((source, count))
        }
    }

    /// Everything of `source` up to `count` notifications read from `position` (after
    /// `skip`) is final: the retained store may hand their space back.
    mutating func noteReleased(source: SourceID, position: SourcePosition, count: Int, skip: Int = 0) {
        if source == RetainedStore.sourceID {
            retainedFinalEnd = max(retainedFinalEnd ?? 0, position.offset + UInt64(skip + count))
        }
    }

    /// Empties it, keeping the arrays' storage: a connection that settles notification by
    /// notification (HTTP/2) reuses one settlement and allocates nothing per answer.
    mutating func reset() {
        accepted = 0
        refused.removeAll(keepingCapacity: true)
        failures.removeAll(keepingCapacity: true)
        finals.removeAll(keepingCapacity: true)
        resent = 0
        possibleDuplicates = 0
        retainedFinalEnd = nil
    }
}

/// What the connection machine asks of a window, whatever the protocol.
protocol ConnectionWindow: AnyObject {
    /// Whether anything is not final.
    var isEmpty: Bool { get }
    /// A connection opened: it writes what is waiting to be written again first.
    func connectionOpened()
    /// The connection ended without a word from the gateway about what was in flight.
    func connectionLost(_ drops: DropHandling) -> Settlement
    /// Fails everything not final: the gateway is out of reach, or the sender is cancelling.
    func failAll(reason: FailureReason) -> Settlement
    /// Staged notifications that will never be written (they failed before): the next new
    /// one has lane index `index`.
    func skipNew(to index: UInt64)
    /// The sequence of the oldest notification not released: a checkpoint stops before it.
    var oldestSequence: UInt64? { get }
}

/// What a sender does with notifications whose fate a silent drop left unknown: at most
/// once, they fail as `deliveryUnknown`; at least once, they are written again (counted as
/// possible duplicates), until they were in flight on more than `retryBudget` drops.
struct DropHandling: Equatable {
    var atMostOnce: Bool
    var retryBudget: Int

    /// Why notifications in flight on their `drops`-th dropped connection fail, or nil
    /// when they are to be written again.
    func verdict(drops: Int) -> FailureReason? {
        atMostOnce ? .deliveryUnknown : drops > retryBudget ? .retryBudgetExhausted : nil
    }
}
