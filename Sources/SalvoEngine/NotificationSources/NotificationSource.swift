import SalvoWire

/// Notifications that can be read again from any point: a campaign file, an array, a
/// database query ordered by a key.
///
/// This is what lets a sender resend without keeping frame bytes. The binary protocol
/// never acknowledges success; when the gateway names a failed notification it has
/// discarded everything written after it on that connection. The sender keeps, per
/// connection, a small record per run of consecutive notifications (where the run starts
/// in its source, how long it is); to resend, it opens a reader of its own, seeks to the
/// run and reads it again. Memory then depends on the number of runs in flight, not on
/// rate × error wait × frame size.
///
/// The contract: a reader positioned with `seek(to:)` at a position an earlier
/// `next()` reported yields the same notifications, in the same order, as the first
/// reading did from that point. Readers are made on the sender's shard threads, one per
/// shard, and each is used by one thread at a time.
public protocol NotificationSource: Sendable {
    /// The source's reader: one per shard, each moved with `seek(to:)` to resend.
    associatedtype Reader: NotificationReader
    /// A reader at the first notification.
    func makeReader() throws -> Reader
}

/// Reads a `NotificationSource` in order, and moves to any position it has reported.
public protocol NotificationReader: AnyObject {
    /// The next notification, or nil at the end.
    func next() throws -> SourceNotification?
    /// Moves so that `next()` yields the notification that was reported at `position`.
    func seek(to position: SourcePosition) throws
}
