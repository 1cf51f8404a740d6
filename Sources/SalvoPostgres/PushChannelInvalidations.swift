import Foundation
import SalvoIO

/// The dead tokens of a Push Channel run on their way to the device registry: `note` takes
/// each token the NOC answers `402 Invalid Token` for, from any thread and without waiting
/// for the database; `flush` writes what was noted since the last flush
/// (`DeviceRegistry.invalidate(pushChannel:app:)`, one statement per batch).
///
/// Memory holds only what came since the last flush: `salvo send` flushes every half second
/// and before it saves a checkpoint, so a line the checkpoint records as done has its dead
/// token in the registry, and a resume loses none. Once a write fails the run goes on (the
/// rejected list has the tokens): later tokens are counted, no longer kept or written.
public final class PushChannelInvalidations: Sendable {
    /// What the writes came to.
    public struct Totals: Sendable, Equatable {
        /// Tokens added to the registry as dead, or invalidated there.
        public var invalidated = 0
        /// Dead tokens not written, because a write failed.
        public var unrecorded = 0
        /// The first write that failed, and why.
        public var failure: String?
    }

    private struct State {
        var pending: [DeviceRegistry.PushChannelRejection] = []
        var totals = Totals()
    }

    private let registry: DeviceRegistry
    private let appID: String
    private let state = Locked(State())

    /// Dead tokens of BlackBerry Dynamics app `appID`, for `registry`.
    public init(registry: DeviceRegistry, app appID: String) {
        self.registry = registry
        self.appID = appID
    }

    /// Notes that the NOC answered 402 for `token` at `time`.
    public func note(_ token: String, at time: Date = Date()) {
        state.withLock { state in
            if state.totals.failure == nil {
                state.pending.append(.init(token: token, answeredAt: time))
            } else {
                state.totals.unrecorded += 1
            }
        }
    }

    /// Writes the tokens noted since the last flush. The write goes on when the caller is
    /// cancelled (the end of a run cancels the task that flushes every half second): a write
    /// cut short would leave unknown whether the tokens are in the registry.
    public func flush() async {
        await Task { await write() }.value
    }

    private func write() async {
        let batch = state.withLock { state in
            defer { state.pending = [] }
            return state.pending
        }
        guard !batch.isEmpty else { return }
        do {
            let invalidated = try await registry.invalidate(pushChannel: batch, app: appID)
            state.withLock { $0.totals.invalidated += invalidated }
        } catch {
            state.withLock { state in
                state.totals.failure = state.totals.failure ?? error.description
                state.totals.unrecorded += batch.count + state.pending.count
                state.pending = []
            }
        }
    }

    /// The totals so far.
    public var totals: Totals { state.withLock { $0.totals } }
}
