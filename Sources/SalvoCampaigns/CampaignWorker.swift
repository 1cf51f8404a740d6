import Foundation
import SalvoEngine
import SalvoIO
import SalvoWire
import Synchronization

/// One worker of a shared campaign: leases a chunk, sends it through its own `Sender`,
/// writes its outcome back, and takes the next, until no chunk is left.
///
/// Each of its senders sends one chunk at a time, so a sender's counts before and after a
/// chunk are exactly that chunk's outcome, and `Sender.send(contentsOf:)` returning means
/// every notification of it is final; a worker runs `Settings.lanes` of them side by side. A chunk is written back in one transaction, only while the
/// lease is still this worker's. While it sends, a second connection renews the lease;
/// when the renewal finds the lease gone (another worker took the chunk over), the
/// campaign cancelled, or the database unreachable, the chunk's reading stops: what was
/// read is final before the worker goes on, and it writes nothing over another holder.
public final class CampaignWorker: Sendable {
    /// How the worker leases.
    public struct Settings: Sendable {
        /// The name it leases and reports under; unique among the campaign's workers.
        public var name: String
        /// How long a lease lasts unless renewed: how soon another worker takes over the
        /// chunks of one that died.
        public var leaseDuration: Duration
        /// How long to wait before asking again when every unfinished chunk is leased by
        /// someone else (one of them may expire).
        public var pollInterval: Duration
        /// Added to the database's clock in lease decisions (see `CampaignStore`); zero
        /// outside tests.
        public var clockOffset: Duration
        /// Chunks sent at once, each by a sender of its own (with its own connections to the
        /// gateway), so that one chunk's last answers overlap the next one's sending. What a
        /// worker that dies may have sent twice is at most this many chunks.
        public var lanes: Int

        /// Settings for worker `name`.
        public init(name: String, leaseDuration: Duration = .seconds(10), pollInterval: Duration = .milliseconds(250),
                    clockOffset: Duration = .zero, lanes: Int = 2) {
            self.name = name
            self.leaseDuration = leaseDuration
            self.pollInterval = pollInterval
            self.clockOffset = clockOffset
            self.lanes = max(1, lanes)
        }
    }

    /// What one worker did.
    public struct Summary: Sendable, Equatable {
        /// Chunks it finished.
        public var chunks = 0
        /// Chunks it had taken over from a worker whose lease expired.
        public var takeovers = 0
        /// Chunks it lost to another worker before writing them back.
        public var lostLeases = 0
        /// The counts of what it sent (and wrote back).
        public var accepted = 0, rejected = 0, failed = 0, possibleDuplicates = 0
        /// Whether it stopped because the campaign was cancelled.
        public var cancelled = false

        mutating func add(_ other: Summary) {
            chunks += other.chunks
            takeovers += other.takeovers
            lostLeases += other.lostLeases
            accepted += other.accepted
            rejected += other.rejected
            failed += other.failed
            possibleDuplicates += other.possibleDuplicates
            cancelled = cancelled || other.cancelled
        }
    }

    /// Why a chunk's reading stopped early.
    enum Interruption: Error, Equatable {
        case leaseLost
        case cancelled
        case databaseLost(String)
    }

    private let heartbeat: CampaignStore
    private let lanes: [Lane]
    private let settings: Settings
    private let campaign: CampaignStore.Campaign

    /// One chunk at a time through its own sender, leased and written back on its own
    /// connection (a transaction per write-back). Several lanes overlap one chunk's last
    /// answers (over the binary protocol, the error wait) with the next chunk's sending,
    /// while each sender's counts stay exactly its chunk's.
    final class Lane: Sendable {
        let store: CampaignStore
        let sender: Sender
        let rejections: RejectionLog

        init(store: CampaignStore, sender: Sender, rejections: RejectionLog) {
            self.store = store
            self.sender = sender
            self.rejections = rejections
        }
    }

    /// Connects (a connection per lane, and one that renews leases while chunks are sent,
    /// so that a renewal never lands inside a write-back transaction), finds the campaign,
    /// and starts a sender per lane.
    ///
    /// - Throws: `CampaignStoreError` (database, campaign), `SenderError` (configuration).
    public init(database url: DatabaseURL, campaign name: String, configuration: SenderConfiguration,
                settings: Settings) async throws {
        var opened: [CampaignDatabase] = []
        do {
            for _ in 0...settings.lanes {
                opened.append(try await CampaignDatabase.connect(url, applicationName: "salvo worker \(settings.name)"))
            }
            heartbeat = CampaignStore(opened[0], clockOffset: settings.clockOffset)
            campaign = try await heartbeat.campaign(named: name)
            lanes = try opened.dropFirst().map { database in
                let rejections = RejectionLog()
                // One chunk at a time per sender: the sequence it reports is the index in the chunk.
                let sender = try Sender(configuration) { token, rejection, index in
                    rejections.append(index: Int(index), token: token, rejection: rejection)
                }
                return Lane(store: CampaignStore(database, clockOffset: settings.clockOffset), sender: sender, rejections: rejections)
            }
        } catch {
            for database in opened { await database.close() }
            throw error
        }
        self.settings = settings
    }

    /// Sends chunks until none is left (or the campaign is cancelled), then stops the
    /// senders and closes the connections.
    ///
    /// - Throws: `CampaignStoreError` when the database is lost (after what was sent is
    ///   final; its chunk is left to expire and be taken over); `SendError` when the
    ///   gateway is out of reach or refuses the credentials (the chunk's checkpoint is
    ///   written back first).
    public func run() async throws -> Summary {
        var summary = Summary()
        do {
            try await withThrowingTaskGroup(of: Summary.self) { group in
                for lane in lanes { group.addTask { try await self.run(lane) } }
                for try await part in group { summary.add(part) }
            }
        } catch {
            for lane in lanes { _ = await lane.sender.finish(timeout: .seconds(30)) }
            await close()
            throw error
        }
        for lane in lanes { _ = await lane.sender.finish() }
        await close()
        return summary
    }

    private func run(_ lane: Lane) async throws -> Summary {
        var summary = Summary()
        while true {
            // Another lane failed (the gateway out of reach, the database lost): stop too.
            try Task.checkCancellation()
            guard let lease = try await lane.store.lease(campaign.id, worker: settings.name, for: settings.leaseDuration) else {
                guard try await lane.store.hasUnfinishedChunks(campaign.id) else { break }
                try await Task.sleep(for: settings.pollInterval)
                continue
            }
            if lease.isTakeover { summary.takeovers += 1 }
            if try await send(lease, on: lane, summary: &summary) == .cancelled {
                summary.cancelled = true
                break
            }
        }
        return summary
    }

    private func close() async {
        await heartbeat.database.close()
        for lane in lanes { await lane.store.database.close() }
    }

    private enum Turn { case continuing, cancelled }

    /// Sends one leased chunk and writes its outcome back.
    private func send(_ lease: CampaignStore.Lease, on lane: Lane, summary: inout Summary) async throws -> Turn {
        let (list, sequences) = try await lane.store.items(of: lease, in: campaign)
        let sender = lane.sender
        let interruption = InterruptionFlag()
        let renewing = Task { [heartbeat, settings] in
            while !Task.isCancelled {
                try? await Task.sleep(for: settings.leaseDuration / 3)
                if Task.isCancelled { return }
                do {
                    switch try await heartbeat.renew(lease, worker: settings.name, for: settings.leaseDuration) {
                    case .held: continue
                    case .lost: interruption.raise(.leaseLost)
                    case .cancelled: interruption.raise(.cancelled)
                    }
                } catch {
                    interruption.raise(.databaseLost("\(error)"))
                }
                return
            }
        }
        let source = InterruptibleList(list: list, interruption: interruption)
        let reader = source.makeReader()
        let before = sender.progress
        var stopped: (any Error)?
        do {
            try await sender.send(contentsOf: source, startingWith: reader)
        } catch {
            stopped = error
        }
        renewing.cancel()
        let after = sender.progress
        let rejected = lane.rejections.drain()
        // Everything read is final: the checkpoint moves to the last item read.
        let read = reader.readCount
        var outcome = CampaignStore.ChunkOutcome(
            completedThrough: read == sequences.count ? lease.lastSequence : (read == 0 ? lease.completedThrough : sequences[read - 1]),
            isDone: read == sequences.count)
        outcome.accepted = after.accepted - before.accepted
        outcome.rejected = after.rejected - before.rejected
        outcome.failed = after.failed - before.failed
        outcome.resent = after.resent - before.resent
        outcome.possibleDuplicates = after.possibleDuplicates - before.possibleDuplicates
        outcome.rejectedByReason = Self.difference(after.rejectedByReason, before.rejectedByReason)
        outcome.failedByReason = Self.difference(after.failedByReason, before.failedByReason)
        outcome.rejections = rejected.map { CampaignStore.RejectedItem(sequence: sequences[$0.index], token: $0.token, rejection: $0.rejection) }

        switch interruption.reason {
        case .leaseLost?:
            // Another worker holds the chunk now and resumes it from its checkpoint.
            summary.lostLeases += 1
            return .continuing
        case .databaseLost(let reason)?:
            throw CampaignStoreError("worker \(settings.name) lost the database while sending chunk \(lease.firstSequence): "
                                     + "\(reason); what it sent is final, and its chunk will be taken over when its lease expires",
                                     isUsageError: false)
        case .cancelled?, nil:
            break
        }
        guard try await lane.store.writeBack(outcome, for: lease, of: campaign, worker: settings.name) else {
            summary.lostLeases += 1
            return .continuing
        }
        if outcome.isDone { summary.chunks += 1 }
        summary.accepted += outcome.accepted
        summary.rejected += outcome.rejected
        summary.failed += outcome.failed
        summary.possibleDuplicates += outcome.possibleDuplicates
        if let stopped, !(stopped is Interruption) { throw stopped }
        return interruption.reason == .cancelled ? .cancelled : .continuing
    }

    private static func difference(_ after: [String: Int], _ before: [String: Int]) -> [String: Int] {
        after.reduce(into: [:]) { result, entry in
            let added = entry.value - (before[entry.key] ?? 0)
            if added > 0 { result[entry.key] = added }
        }
    }
}

/// A chunk's items as a source whose reading stops (throws) once the chunk's lease is lost,
/// the campaign cancelled or the database gone; and how many its first reader yielded.
struct InterruptibleList: NotificationSource {
    let list: NotificationList
    let interruption: InterruptionFlag

    func makeReader() -> Reader { Reader(list.makeReader(), interruption: interruption) }

    final class Reader: NotificationReader {
        private let base: NotificationList.Reader
        private let interruption: InterruptionFlag
        /// Notifications yielded by `next()`.
        private(set) var readCount = 0

        init(_ base: NotificationList.Reader, interruption: InterruptionFlag) {
            self.base = base
            self.interruption = interruption
        }

        func next() throws -> SourceNotification? {
            // Checked every 256: the lock is cheap, but not free at a million a second.
            if readCount & 255 == 0, let reason = interruption.reason { throw reason }
            guard let notification = base.next() else { return nil }
            readCount += 1
            return notification
        }

        func seek(to position: SourcePosition) { base.seek(to: position) }
    }
}

/// Why a chunk's reading must stop, set by the lease renewal, read by the chunk's reader.
final class InterruptionFlag: Sendable {
    private let state = Locked<CampaignWorker.Interruption?>(nil)

    var reason: CampaignWorker.Interruption? { state.withLock { $0 } }

    func raise(_ reason: CampaignWorker.Interruption) { state.withLock { $0 = reason } }
}

/// The rejections the sender reports (on its shard threads) during one chunk.
final class RejectionLog: Sendable {
    private let entries = Locked<[(index: Int, token: DeviceToken, rejection: Rejection)]>([])

    func append(index: Int, token: DeviceToken, rejection: Rejection) {
        entries.withLock { $0.append((index, token, rejection)) }
    }

    /// Everything recorded since the last drain.
    func drain() -> [(index: Int, token: DeviceToken, rejection: Rejection)] {
        entries.withLock { entries in
            defer { entries.removeAll() }
            return entries
        }
    }
}
