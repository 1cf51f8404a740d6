import Synchronization

/// What producers and a connection share: the staging ring new records are encoded into,
/// and the store of notifications sent one at a time.
final class Lane: Sendable {
    let staging: StagingRing
    let retained: RetainedStore
    /// The sequence of the oldest notification in the connection's window (`.max`: none),
    /// published by the loop before the staging ring lets go of what it moves there, so
    /// that a checkpoint reading the ring first and then this misses nothing.
    let oldestSequenceInWindow = Atomic<UInt64>(.max)
    /// HTTP/2: the connection's open streams, stored by its loop once per turn (not per
    /// stream) for the `salvo_sender_open_streams` gauge.
    let openStreams = Atomic<Int>(0)
    /// Whether the connection has an active link now (not counting a standby), for the
    /// `salvo_sender_open_connections` gauge; set on activation and on its close.
    let isConnected = Atomic<Bool>(false)

    init(staging: StagingRing, retained: RetainedStore) {
        self.staging = staging
        self.retained = retained
    }
}

/// What a shard asks of each connection it runs, whatever the protocol. On the
/// shard's thread.
protocol LaneConnection: AnyObject {
    var lane: Lane { get }
    /// Whether anything waits to be written.
    var hasWork: Bool { get }
    /// New records were published, or something waits to be written again: connect if
    /// needed, then write (`flush`: do not wait for a fuller TLS record).
    func pump(flush: Bool)
    /// When the window next needs the loop has changed (the error wait, urgency, the end
    /// of the input): look again.
    func armSettleTimer(again: Bool)
    /// Nothing more will be published: finish what can be finished now.
    func finishWritingIfDone()
    /// Fails everything not final (the sender gave up waiting).
    func cancel()
    /// Whether the connection gave up on the gateway.
    var hasGivenUp: Bool { get }
    /// Fails what waits in `ring` and refuses more (see `Connection.failUnwritten`).
    func failUnwritten(_ reason: FailureReason, in ring: StagingRing?)
}

extension LaneConnection {
    func pump() { pump(flush: false) }
    func armSettleTimer() { armSettleTimer(again: false) }
}
