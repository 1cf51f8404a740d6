import Foundation
import SalvoEngine
import SalvoIO
import SalvoWire
import Synchronization

/// One worker of a shared campaign: leases chunk after chunk and sends them through one
/// `Sender`, writing each back once every notification of it is final, until no chunk is
/// left.
///
/// Three tasks, with database connections of their own:
/// - the **producer** leases a chunk, reads its items and submits them to the sender
///   (`Sender.submit(contentsOf:)` returns once they are taken, not answered), and goes on
///   to the next chunks, which it leased and read while this one was being taken (two at a
///   time, `lookAhead`): the connections never wait for a chunk's last answers (over the
///   binary protocol, its error wait), and seldom for the database;
/// - the **writer** waits for each submitted chunk's outcome, in order, and writes it back
///   in one transaction, only while the lease is still this worker's: the counts (the
///   sender counts each chunk's apart), the rejected items, the checkpoint;
/// - the **heartbeat** renews the leases of the chunks not yet written back. When a renewal
///   finds a lease gone (another worker took the chunk over), that chunk's reading stops and
///   it is not written back; the campaign cancelled, or the database unreachable, stops
///   every chunk's reading and the producer. Whatever was read is final before the worker
///   goes on, and it writes nothing over another holder.
///
/// What a worker that dies may have sent twice is what it had read of the chunks it had not
/// written back: its in-flight window (the notifications the sender has taken and not yet
/// seen answered, with the error wait over the binary protocol), rounded out to whole
/// chunks. The chunks it had leased ahead and not begun are counted as possible duplicates
/// too, though nothing of them was sent.
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

        /// Settings for worker `name`.
        public init(name: String, leaseDuration: Duration = .seconds(10), pollInterval: Duration = .milliseconds(250),
                    clockOffset: Duration = .zero) {
            self.name = name
            self.leaseDuration = leaseDuration
            self.pollInterval = pollInterval
            self.clockOffset = clockOffset
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
        /// The counts of what it sent (and wrote back). `possibleDuplicates` counts, as
        /// `campaign status` does, both what its sender resent after silent drops and
        /// `takeoverDuplicates`.
        public var accepted = 0, rejected = 0, failed = 0, possibleDuplicates = 0
        /// What the workers before it may have sent of the chunks it took over: everything
        /// after their last write-back.
        public var takeoverDuplicates = 0
        /// Whether it stopped because the campaign was cancelled.
        public var cancelled = false
        /// With credentials per topic: what it sent of each topic, and how that ended.
        public var byTopic: [String: TopicCounts] = [:]
    }

    /// Why a chunk's reading stopped early.
    enum Interruption: Error, Equatable {
        case leaseLost
        case cancelled
        case databaseLost(String)
        /// The sender stopped taking notifications (the gateway out of reach, or refusing
        /// the credentials): the worker stops; the chunks it failed are left to expire.
        case senderStopped
    }

    /// A leased chunk, from its lease until it is written back.
    final class Chunk: Sendable {
        let lease: CampaignStore.Lease
        let list: NotificationList
        /// The campaign sequence of each item of `list`.
        let sequences: [Int64]
        let interruption = InterruptionFlag()

        init(lease: CampaignStore.Lease, list: NotificationList, sequences: [Int64]) {
            self.lease = lease
            self.list = list
            self.sequences = sequences
        }

        /// The checkpoint once its first `taken` items are final.
        func completedThrough(afterTaking taken: Int) -> Int64 {
            taken == sequences.count ? lease.lastSequence : taken == 0 ? lease.completedThrough : sequences[taken - 1]
        }
    }

    /// A chunk handed to the sender, on its way to the writer.
    struct Submitted: Sendable {
        let chunk: Chunk
        let submission: Submission
    }

    /// The producer's: each leases and reads a chunk ahead of the one being sent.
    private let leasing: [CampaignStore]
    private let writing: CampaignStore
    private let heartbeat: CampaignStore
    private let sender: RoutingSender
    private let rejections = RejectionLog()
    /// Chunks leased and not yet written back: what the heartbeat renews.
    private let held = HeldChunks()
    /// Set when the whole worker must stop taking chunks (cancelled, database lost, the
    /// gateway out of reach).
    private let stopping = InterruptionFlag()
    private let settings: Settings
    private let campaign: CampaignStore.Campaign

    /// Chunks leased and read ahead of the one being sent, each on a connection of its own.
    public static let lookAhead = 2

    /// Failures that say nothing of the notifications: the worker could not send them (the
    /// gateway out of reach, the credentials refused, the sender shut down).
    private static let unsent: Set<FailureReason> = [.gatewayUnreachable, .authenticationFailed, .cancelled]

    /// Connects (the producer's, the writer's and the heartbeat's connections), finds the
    /// campaign, and starts the sender.
    ///
    /// - Parameters:
    ///   - routes: several apps and teams: a sender per set of credentials, each item sent
    ///     by the one that serves its topic (`RoutingSender`); `configuration` is then
    ///     unused. Nil: one sender with `configuration`.
    ///   - defaultTopic: with `routes`, the topic of items that name none.
    /// - Throws: `CampaignStoreError` (database, campaign; with `routes`, items whose topic
    ///   no route serves: nothing is sent), `SenderError` (configuration).
    public init(database url: DatabaseURL, campaign name: String, configuration: SenderConfiguration,
                routes: [RoutingSender.Route]? = nil, defaultTopic: String? = nil,
                settings: Settings) async throws {
        var opened: [CampaignDatabase] = []
        do {
            for _ in 0..<(Self.lookAhead + 2) {
                opened.append(try await CampaignDatabase.connect(url, applicationName: "salvo worker \(settings.name)"))
            }
            let stores = opened.map { CampaignStore($0, clockOffset: settings.clockOffset) }
            (writing, heartbeat, leasing) = (stores[0], stores[1], Array(stores.dropFirst(2)))
            campaign = try await writing.campaign(named: name)
            // Each item reports its campaign sequence, unique across the chunks in flight.
            // Items are device tokens (a campaign in the database holds no broadcasts).
            let onRejected: @Sendable (PushTarget, Rejection, UInt64) -> Void = { [rejections] target, rejection, sequence in
                guard let token = target.token else { return }
                rejections.append(sequence: Int64(sequence), token: token, rejection: rejection)
            }
            if let routes {
                try await Self.checkTopics(of: campaign, in: writing, served: TopicRouting(topics: routes.flatMap(\.topics),
                                                                                           defaultTopic: defaultTopic))
                sender = try RoutingSender(routes: routes, defaultTopic: defaultTopic, onRejected: onRejected)
            } else {
                sender = try RoutingSender(configuration, onRejected: onRejected)
            }
        } catch {
            for database in opened { await database.close() }
            throw error
        }
        self.settings = settings
    }

    /// Sends chunks until none is left (or the campaign is cancelled), then stops the
    /// sender and closes the connections.
    ///
    /// - Throws: `CampaignStoreError` when the database is lost (after what was sent is
    ///   final; its chunks are left to expire and be taken over); `SendError` when the
    ///   gateway is out of reach or refuses the credentials (the chunks it could not send
    ///   are left to expire too; the others are written back first).
    public func run() async throws -> Summary {
        let (submitted, pipe) = AsyncStream.makeStream(of: Submitted.self)
        let renewing = Task { await renewLeases() }
        let writer = Task { try await writeBack(submitted) }
        var takeovers = (chunks: 0, duplicates: 0)
        var failure: (any Error)?
        do {
            try await produce(into: pipe, takeovers: &takeovers)
        } catch {
            stopping.raise(.databaseLost("\(error)"))
            failure = error
        }
        pipe.finish()
        var summary = Summary()
        do {
            summary = try await writer.value
            summary.takeovers = takeovers.chunks
            summary.takeoverDuplicates = takeovers.duplicates
            summary.possibleDuplicates += takeovers.duplicates
        } catch {
            failure = failure ?? error
        }
        renewing.cancel()
        summary.byTopic = await sender.finish(timeout: .seconds(30)).byTopic
        for store in leasing { await store.database.close() }
        await writing.database.close()
        await heartbeat.database.close()
        if let failure { throw failure }
        return summary
    }

    /// Refuses a campaign with items whose topic no route serves, before anything is sent.
    private static func checkTopics(of campaign: CampaignStore.Campaign, in store: CampaignStore,
                                    served routing: TopicRouting) async throws {
        for (topic, count, first) in try await store.itemTopics(of: campaign) {
            let served = topic.map { Array($0.utf8).withUnsafeBytes { routing.index(ofTopic: $0) != nil } } ?? (routing.defaultTopic != nil)
            guard !served else { continue }
            let what = topic.map { "name the topic \($0)" } ?? "name no topic, and no --topic is given"
            throw CampaignStoreError("campaign \(campaign.name): \(count) item\(count == 1 ? "" : "s") (the first, item \(first)) \(what), "
                                     + "which no entry of the credentials serves (they serve \(routing.topics.joined(separator: ", "))); "
                                     + "nothing was sent")
        }
    }

    // MARK: The producer

    /// Leases, reads and submits chunk after chunk. The next chunks are leased and read
    /// while the sender takes the current one, one on each leasing connection: reading a
    /// chunk from the database takes longer than the sender takes to send it.
    private func produce(into pipe: AsyncStream<Submitted>.Continuation,
                         takeovers: inout (chunks: Int, duplicates: Int)) async throws {
        var ahead: [(store: CampaignStore, chunk: Task<Chunk?, any Error>)] = []
        var idle = leasing
        // Set when a look-ahead found nothing free: the others are awaited before asking again.
        var dry = false
        defer { for look in ahead { look.chunk.cancel() } }
        while stopping.reason == nil {
            if !dry {
                while let store = idle.popLast() { ahead.append((store, Task { try await self.lease(on: store) })) }
            }
            guard !ahead.isEmpty else {
                // Nothing free. Chunks of this worker's still in flight hold the campaign
                // open until they are written back; then, if others' are left, one of them
                // may expire.
                dry = false
                if !held.isEmpty {
                    await held.untilEmpty()
                    continue
                }
                guard try await leasing[0].hasUnfinishedChunks(campaign.id) else { return }
                try await Task.sleep(for: settings.pollInterval)
                continue
            }
            let look = ahead.removeFirst()
            guard let chunk = try await look.chunk.value else {
                idle.append(look.store)
                dry = true
                continue
            }
            if chunk.lease.isTakeover {
                // As the lease counted them in the chunk's row: what `campaign status` shows.
                takeovers.chunks += 1
                takeovers.duplicates += Int(chunk.lease.lastSequence - chunk.lease.completedThrough)
            }
            // Its connection reads the next one while this one is taken.
            if dry { idle.append(look.store) } else { ahead.append((look.store, Task { try await self.lease(on: look.store) })) }
            let source = InterruptibleList(list: chunk.list, sequences: chunk.sequences)
            let reader = source.makeReader(stoppingAt: chunk.interruption)
            let submission = await sender.submit(contentsOf: source, startingWith: reader)
            pipe.yield(Submitted(chunk: chunk, submission: submission))
        }
        // Stopped with chunks leased and not read: hand them back for other workers.
        for look in ahead {
            guard let spare = try? await look.chunk.value else { continue }
            _ = try? await writing.writeBack(.init(completedThrough: spare.lease.completedThrough, isDone: false),
                                             for: spare.lease, of: campaign, worker: settings.name)
            held.remove(spare)
        }
        ahead = []
    }

    /// Leases the next free chunk on `store` and reads its items; nil when none is free.
    private func lease(on store: CampaignStore) async throws -> Chunk? {
        guard let lease = try await store.lease(campaign.id, worker: settings.name, for: settings.leaseDuration) else {
            return nil
        }
        let (list, sequences) = try await store.items(of: lease, in: campaign)
        let chunk = Chunk(lease: lease, list: list, sequences: sequences)
        held.insert(chunk)
        return chunk
    }

    // MARK: The writer

    /// Writes each submitted chunk back once its notifications are final, in the order
    /// they were submitted (the order they finish in, give or take a few answers), and
    /// sums up what it wrote (all but the takeovers, which the producer counts).
    private func writeBack(_ submitted: AsyncStream<Submitted>) async throws -> Summary {
        var written = Summary()
        var stoppedBy: (any Error)?
        var reported = (resent: 0, possibleDuplicates: 0)
        for await next in submitted {
            let chunk = next.chunk, lease = chunk.lease
            let outcome = await next.submission.outcome()
            let rejected = rejections.take(lease.firstSequence...lease.lastSequence)
            defer { held.remove(chunk) }
            switch chunk.interruption.reason ?? stopping.reason {
            case .leaseLost?:
                // Another worker holds the chunk now and resumes it from its checkpoint.
                written.lostLeases += 1
                continue
            case .databaseLost?:
                // Final, and left to expire: another worker resumes it from its checkpoint.
                continue
            case .cancelled?:
                written.cancelled = true
            case .senderStopped?, nil:
                break
            }
            if let error = outcome.stoppedBy, !(error is Interruption) {
                stoppedBy = stoppedBy ?? error
                stopping.raise(.senderStopped)
            }
            if outcome.failedByReason.keys.contains(where: Self.unsent.contains) {
                // Written back, these would be final and never sent. Left to expire instead,
                // as a dead worker's chunk: another worker, or this one once the gateway is
                // fixed, resumes it from its checkpoint, and what of it was accepted counts
                // as possible duplicates.
                continue
            }
            // Up to what the sender took, not what was read: a sender that stopped may have
            // read items it did not take, and they have no outcome.
            var back = CampaignStore.ChunkOutcome(completedThrough: chunk.completedThrough(afterTaking: outcome.published),
                                                  isDone: outcome.published == chunk.sequences.count)
            back.accepted = outcome.accepted
            back.rejected = outcome.rejected
            back.failed = outcome.failed
            back.rejectedByReason = outcome.rejectedByReason
            back.failedByReason = Dictionary(uniqueKeysWithValues: outcome.failedByReason.map { ($0.key.rawValue, $0.value) })
            back.byTopic = outcome.byTopic
            back.rejections = rejected.map { CampaignStore.RejectedItem(sequence: $0.sequence, token: $0.token, rejection: $0.rejection) }
            // Resends are the sender's, not a chunk's: those since the last write-back go
            // with this one (the campaign's totals are exact, a chunk's share is not).
            let progress = sender.progress
            (back.resent, back.possibleDuplicates) = (progress.resent - reported.resent,
                                                      progress.possibleDuplicates - reported.possibleDuplicates)
            do {
                guard try await writing.writeBack(back, for: lease, of: campaign, worker: settings.name,
                                                  speaking: sender.configuration.http2 == nil ? "binary" : "h2") else {
                    written.lostLeases += 1
                    continue
                }
            } catch {
                // The chunks after it are waited for all the same, so that what was sent is
                // final before the worker stops.
                stopAll(.databaseLost("\(error)"))
                continue
            }
            reported = (progress.resent, progress.possibleDuplicates)
            if back.isDone { written.chunks += 1 }
            written.accepted += back.accepted
            written.rejected += back.rejected
            written.failed += back.failed
            written.possibleDuplicates += back.possibleDuplicates
        }
        if case .databaseLost(let reason)? = stopping.reason, stoppedBy == nil {
            throw CampaignStoreError("worker \(settings.name) lost the database: \(reason); what it sent is final, and its "
                                     + "chunks will be taken over when their leases expire", isUsageError: false)
        }
        if let stoppedBy { throw stoppedBy }
        return written
    }

    // MARK: The heartbeat

    /// Renews the leases of the chunks not yet written back, every third of a lease, until
    /// cancelled; stops a chunk whose lease is lost, and everything when the campaign is
    /// cancelled or the database lost.
    private func renewLeases() async {
        while !Task.isCancelled {
            try? await Task.sleep(for: settings.leaseDuration / 3)
            if Task.isCancelled { return }
            for chunk in held.all {
                do {
                    switch try await heartbeat.renew(chunk.lease, worker: settings.name, for: settings.leaseDuration) {
                    case .held: continue
                    case .lost: chunk.interruption.raise(.leaseLost)
                    case .cancelled: stopAll(.cancelled)
                    }
                } catch {
                    stopAll(.databaseLost("\(error)"))
                    return
                }
            }
        }
    }

    private func stopAll(_ reason: Interruption) {
        stopping.raise(reason)
        for chunk in held.all { chunk.interruption.raise(reason) }
    }
}

/// The chunks a worker leased and has not written back, and a wait for there being none.
final class HeldChunks: Sendable {
    private let state = Locked<(chunks: [Int64: CampaignWorker.Chunk], waiters: [CheckedContinuation<Void, Never>])>(([:], []))

    var isEmpty: Bool { state.withLock { $0.chunks.isEmpty } }

    var all: [CampaignWorker.Chunk] { state.withLock { Array($0.chunks.values) } }

    func insert(_ chunk: CampaignWorker.Chunk) { state.withLock { $0.chunks[chunk.lease.firstSequence] = chunk } }

    func remove(_ chunk: CampaignWorker.Chunk) {
        let waiters = state.withLock { state -> [CheckedContinuation<Void, Never>] in
            state.chunks[chunk.lease.firstSequence] = nil
            guard state.chunks.isEmpty else { return [] }
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for waiter in waiters { waiter.resume() }
    }

    /// Returns once no chunk is held.
    func untilEmpty() async {
        await withCheckedContinuation { continuation in
            let now = state.withLock { state -> Bool in
                if state.chunks.isEmpty { return true }
                state.waiters.append(continuation)
                return false
            }
            if now { continuation.resume() }
        }
    }
}

/// A chunk's items as a source: each reports its campaign sequence. The producer's reader
/// stops (throws) once the chunk's lease is lost, the campaign cancelled or the database
/// gone; the readers the sender makes to resend read on, so that what was taken is settled.
struct InterruptibleList: NotificationSource {
    let list: NotificationList
    let sequences: [Int64]

    func makeReader() -> Reader { Reader(list.makeReader(), sequences: sequences, interruption: nil) }

    func makeReader(stoppingAt interruption: InterruptionFlag) -> Reader {
        Reader(list.makeReader(), sequences: sequences, interruption: interruption)
    }

    final class Reader: NotificationReader {
        private let base: NotificationList.Reader
        private let sequences: [Int64]
        private let interruption: InterruptionFlag?
        /// Notifications yielded by `next()`.
        private var readCount = 0

        init(_ base: NotificationList.Reader, sequences: [Int64], interruption: InterruptionFlag?) {
            self.base = base
            self.sequences = sequences
            self.interruption = interruption
        }

        func next() throws -> SourceNotification? {
            // Checked every 256: the lock is cheap, but not free at a million a second.
            if readCount & 255 == 0, let reason = interruption?.reason { throw reason }
            guard var notification = base.next() else { return nil }
            readCount += 1
            // The list's position is its index; the sequence reported is the campaign's.
            notification.position.sequence = UInt64(sequences[Int(notification.position.offset)])
            return notification
        }

        func seek(to position: SourcePosition) { base.seek(to: position) }
    }
}

/// Why a chunk's reading must stop, set by the lease renewal, read by the chunk's reader.
final class InterruptionFlag: Sendable {
    private let state = Locked<CampaignWorker.Interruption?>(nil)

    var reason: CampaignWorker.Interruption? { state.withLock { $0 } }

    /// Sets the reason, unless one was set before (the first one stands).
    func raise(_ reason: CampaignWorker.Interruption) { state.withLock { $0 = $0 ?? reason } }
}

/// The rejections the sender reports (on its shard threads), until their chunk is written back.
final class RejectionLog: Sendable {
    private let entries = Locked<[(sequence: Int64, token: DeviceToken, rejection: Rejection)]>([])

    func append(sequence: Int64, token: DeviceToken, rejection: Rejection) {
        entries.withLock { $0.append((sequence, token, rejection)) }
    }

    /// Removes and returns those whose sequence is in `range` (a chunk's).
    func take(_ range: ClosedRange<Int64>) -> [(sequence: Int64, token: DeviceToken, rejection: Rejection)] {
        entries.withLock { entries in
            guard !entries.isEmpty else { return [] }
            let taken = entries.filter { range.contains($0.sequence) }
            if !taken.isEmpty { entries.removeAll { range.contains($0.sequence) } }
            return taken
        }
    }
}
