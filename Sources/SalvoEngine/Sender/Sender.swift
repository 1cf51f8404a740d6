import CoreMetrics
import Logging
import SalvoIO
import SalvoTelemetry
import SalvoWire
import Synchronization

/// The embeddable engine: sends notifications over a sharded set of TLS connections to
/// an APNs gateway, over the HTTP/2 provider API or the binary protocol
/// (`SenderConfiguration.transport`), and accounts for every one.
///
/// ```swift
/// let sender = try Sender(configuration)
/// try await sender.send(contentsOf: NotificationList(tokens: tokens, payload: payload))
/// let report = await sender.finish()
/// ```
///
/// Each notification ends in exactly one of accepted, rejected (the gateway refused it: an
/// error status on its HTTP/2 stream, or an error response naming it) or failed; `finish()`
/// returns the totals once all are final. Over HTTP/2 every notification's stream is
/// answered, so its outcome is known exactly. The binary protocol never acknowledges
/// success: a notification is presumed accepted once `errorWait` has passed after it was
/// written with no error naming it or anything before it, and counted as accepted when
/// its record is released, after `recordRetention` (or sooner, once nothing else is to be
/// sent). An error response that arrives later, while the record is kept, still rejects
/// exactly the notification it names and resends everything after it; it also raises the
/// error wait.
///
/// Two ways in:
/// - `send(contentsOf:)` takes a `NotificationSource` (a campaign file, a
///   `NotificationList`, your own database cursor). To resend, the sender reads the
///   source again, so nothing but a small record per run of notifications is kept, and
///   the rate does not depend on the error wait. The fast path.
/// - `send(token:payload:)` and `trySend` take one notification at a time. With no
///   source to read again, each lane keeps a copy until it is final: memory holds rate ×
///   error wait of them (`retainedCapacity`), and a full store is backpressure. The
///   expensive path, for notifications that come one by one.
///
/// With `FrameFormat.simple` (command 0) notifications carry no identifier, so the
/// gateway cannot say which one failed: it closes the connection. Salvo then treats the
/// in-flight window as after any silent drop (resent at least once, or reported unknown),
/// and a bad notification can be neither reported as rejected nor told apart from its
/// neighbours. Use command 2 (the default) or 1 when rejections matter.
///
/// Thread-safety: every method may be called from any thread or task.
public final class Sender: Sendable {
    /// The configuration the sender runs with.
    public let configuration: SenderConfiguration
    /// What happens as it runs: rejections, failures, connections. Bounded: when nobody
    /// reads, the oldest events are dropped (the report's counts are never affected).
    public let events: AsyncStream<SenderEvent>

    private let lanes: [Lane]
    private let shards: [Shard]
    /// Each lane with its shard, without reference counting: `lanes` and `shards` keep
    /// them alive, and the hot path then pays no retain/release per notification.
    private let publishTargets: [PublishTarget]
    /// Where `tryPublish` encodes a source's notifications: over HTTP/2 each shard's ring,
    /// otherwise each lane's (`publishTargets`' order). Not counted, as `publishTargets`.
    private let stagingTargets: [StagingTarget]
    /// Whether `stagingTargets` are the shards' rings (HTTP/2).
    private let stagesPerShard: Bool
    /// How many connections are in use: producers publish to the first ones (they alternate shards).
    private let growth: ConnectionGrowth
    /// Where producers publish: a lane, and the shard whose loop takes from it.
    private struct PublishTarget {
        // Not counted: `lanes` and `shards` keep both alive, and every publish reads them.
        unowned(unsafe) let lane: Lane
        unowned(unsafe) let shard: Shard
    }
    /// A staging ring, and the shard whose loop takes from it.
    private struct StagingTarget {
        unowned(unsafe) let ring: StagingRing
        unowned(unsafe) let shard: Shard
    }
    private let builder: RecordBuilder
    private let ledger: DeliveryLedger
    let sources = SourceRegistry()
    private let hub: EventHub
    private let cursor = Atomic<Int>(0)
    private let isFinished = Atomic<Bool>(false)
    /// What is not final is to fail now, whatever the finish timeout (`abandonUnsettled`).
    private let isAbandoning = Atomic<Bool>(false)
    /// The sequence of the last notification `send(contentsOf:)` published, plus one (0: none yet).
    private let submittedSequenceEnd = Atomic<UInt64>(0)
    private let started = Instant.now()
    /// The team's provider token (HTTP/2 token authentication), for its renewal count.
    private let providerTokens: ProviderTokenSigner?
    /// The first `finish()`'s drain: later calls (and `run()`'s) wait for the same report.
    private let finishing = Locked<Task<SenderReport, Never>?>(nil)
    /// Ends when `finish()` starts: what `run()` watches to stop reporting at once.
    let finishStarted = AsyncStream<Never>.makeStream()
    /// Where connection events, adaptations and give-ups are logged.
    let logger: Logger
    /// What reports through swift-metrics (`reportMetrics()`).
    let instruments: SenderInstruments

    /// Starts the shards and their connections.
    ///
    /// - Parameters:
    ///   - configuration: the gateway, the transport and the engine's settings.
    ///   - logger: where connection events (debug), reconnects and their causes, rejections
    ///     (debug), adaptations (a raised error wait, a connection added, a token renewed:
    ///     info and notice) and give-ups (error) go, with structured metadata. Nothing is
    ///     logged per notification above debug, and a level that is off costs a compare.
    ///     Never logs keys, passphrases or provider tokens. Default: nothing is logged.
    ///   - metricsFactory: where `reportMetrics()` and the histograms report; nil: the
    ///     global `MetricsSystem.factory` (a no-op until the host bootstraps one).
    ///   - onRejected: called for every rejected notification, on a shard thread, with its
    ///     target (a device token, or a broadcast channel), why (`Rejection.isTokenProblem`
    ///     says whether to drop a device's token) and its sequence — the feed for a
    ///     provider's "remove this token" list. Keep it quick.
    /// - Throws: `SenderError` when the configuration cannot work (the reason says why), the
    ///   TLS material cannot be loaded, or the host cannot be resolved.
    public init(
        _ configuration: SenderConfiguration,
        logger: Logger = .disabled,
        metricsFactory: (any MetricsFactory)? = nil,
        onRejected: (@Sendable (PushTarget, Rejection, UInt64) -> Void)? = nil
    ) throws(SenderError) {
        guard configuration.shards >= 1, configuration.connectionsPerShard >= 1 else {
            throw SenderError(description: "shards and connections per shard must be at least 1")
        }
        self.configuration = configuration
        self.logger = logger
        let instruments = SenderInstruments(factory: metricsFactory ?? MetricsSystem.factory, http2: configuration.http2 != nil)
        self.instruments = instruments
        builder = try Self.recordBuilder(configuration)
        try Self.checkCapacities(configuration, maximumFrame: builder.maximumLength)
        ledger = DeliveryLedger(errorWait: configuration.errorWait, retention: configuration.recordRetention,
                                instruments: instruments)
        let (context, addresses, proxyRoute) = try Self.gateway(configuration)
        let (stream, continuation) = AsyncStream.makeStream(of: SenderEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        events = stream
        hub = EventHub(continuation: continuation, onRejected: onRejected, logger: logger)
        // One provider token for the team, shared by every connection of every shard.
        let providerTokens = try Self.providerTokenSigner(configuration, logger: logger)
        self.providerTokens = providerTokens
        // Lanes for the ceiling are made now (their memory is untouched until used) and
        // connect once something is published to them.
        let lanesPerShard = max(configuration.connectionsPerShard, configuration.maximumConnectionsPerShard)
        let growth = ConnectionGrowth(initial: configuration.shards * configuration.connectionsPerShard,
                                      ceiling: configuration.shards * lanesPerShard,
                                      interval: configuration.connectionGrowthInterval, logger: logger)
        self.growth = growth
        let maximumFrame = builder.maximumLength
        stagesPerShard = configuration.http2 != nil
        var lanes: [Lane] = []
        var shards: [Shard] = []
        do {
            for shardIndex in 0..<configuration.shards {
                let shardLanes = (0..<lanesPerShard).map { _ in Self.lane(configuration, maximumFrame: maximumFrame) }
                let staging = stagesPerShard
                    ? StagingRing(byteCapacity: configuration.sharedStagingCapacity, maximumFrameLength: maximumFrame,
                                  bytesPerSlot: 128)
                    : nil
                shards.append(try Shard(index: shardIndex, lanes: shardLanes, staging: staging, configuration: configuration,
                                        tlsContext: context, addresses: addresses, ledger: ledger, sources: sources, builder: builder,
                                        providerTokens: providerTokens, growth: growth, observer: hub,
                                        proxyRoute: proxyRoute))
                lanes += shardLanes
            }
        } catch {
            shards.forEach { $0.stop() }
            throw SenderError(description: "cannot start a shard: \(error)")
        }
        self.lanes = lanes
        self.shards = shards
        // Connections wait for a token from the store; its arrival wakes them. Cleared in
        // `deinit`, which ends the cycle it makes.
        providerTokens?.setWaker { [shards] in for shard in shards { shard.wake() } }
        // Over HTTP/2, a connection growth adds takes from its shard's ring: growth wakes the
        // shards, and lets their rings hold more (cleared in `deinit` too).
        if let streams = configuration.http2?.maximumConcurrentStreams {
            Self.limitStaging(shards, connections: growth.count, streams: streams)
            growth.setWaker { [shards, unowned growth] in
                Self.limitStaging(shards, connections: growth.count, streams: streams)
                for shard in shards { shard.wake() }
            }
        }
        // Shards alternate, so connections added one at a time spread over the threads.
        publishTargets = (0..<lanesPerShard).flatMap { laneIndex in
            shards.indices.map { PublishTarget(lane: lanes[$0 * lanesPerShard + laneIndex], shard: shards[$0]) }
        }
        stagingTargets = stagesPerShard ? shards.map { StagingTarget(ring: $0.staging!, shard: $0) }
            : publishTargets.map { StagingTarget(ring: $0.lane.staging, shard: $0.shard) }
    }

    /// Lets each shard's ring hold two stream limits of records per connection in use on
    /// it: enough for the bursts that answers held long free, little enough that what a
    /// slow gateway has not taken when the run stops drains in seconds.
    private static func limitStaging(_ shards: [Shard], connections: Int, streams: Int) {
        for shard in shards {
            let inUse = (connections - shard.index + shards.count - 1) / shards.count
            shard.staging?.limitRecords(to: max(1, inUse) * 2 * streams)
        }
    }

    /// What encodes a notification for the configured protocol.
    private static func recordBuilder(_ configuration: SenderConfiguration) throws(SenderError) -> RecordBuilder {
        switch configuration.transport {
        case .binary(let format):
            return .frame(FrameBuilder(
                encoder: FrameEncoder(format: format, maximumPayloadLength: configuration.maximumPayloadLength),
                defaultExpiry: configuration.defaultExpiry, defaultPriority: configuration.defaultPriority))
        case .http2(let options):
            if let problem = options.problem(defaultPriority: configuration.defaultPriority) {
                throw SenderError(description: problem)
            }
            return .request(RequestRecordBuilder(defaultPushType: options.pushType, defaultExpiry: configuration.defaultExpiry,
                                                 defaultPriority: configuration.defaultPriority,
                                                 defaultCollapseID: Array((options.collapseID ?? "").utf8)))
        }
    }

    /// A lane's ring and retained store hold at least two of the largest notifications: told
    /// here as a configuration error, not met later as the ring's precondition.
    private static func checkCapacities(_ configuration: SenderConfiguration, maximumFrame: Int) throws(SenderError) {
        guard configuration.ringCapacity >= 2 * maximumFrame else {
            throw SenderError(description: "ring capacity \(configuration.ringCapacity) is below twice the largest frame (\(2 * maximumFrame) bytes)")
        }
        guard configuration.http2 == nil || configuration.sharedStagingCapacity >= 2 * maximumFrame else {
            throw SenderError(description: "shared staging capacity \(configuration.sharedStagingCapacity) is below twice the largest request (\(2 * maximumFrame) bytes)")
        }
        guard configuration.retainedCapacity >= 2 * (maximumFrame + 64) else {
            throw SenderError(description: "retained capacity \(configuration.retainedCapacity) is below two of the largest notifications")
        }
    }

    /// A connection's staging ring (its slots sized for the protocol's records: see
    /// `StagingRing.init`) and retained store.
    private static func lane(_ configuration: SenderConfiguration, maximumFrame: Int) -> Lane {
        Lane(staging: StagingRing(byteCapacity: configuration.ringCapacity, maximumFrameLength: maximumFrame,
                                  bytesPerSlot: configuration.http2 == nil ? 64 : 128),
             retained: RetainedStore(byteCapacity: configuration.retainedCapacity,
                                     maximumPayloadLength: configuration.payloadLimit))
    }

    /// The TLS context every connection shares and where connections connect: the
    /// gateway's addresses, or the proxy's and the route through it. For HTTP/2: ALPN h2,
    /// and record buffers released while idle, as an HTTP/2 connection mostly waits for
    /// answers (a binary one streams, and keeps its buffers busy).
    private static func gateway(_ configuration: SenderConfiguration)
        throws(SenderError) -> (TLSContext, [SocketAddress], ProxyRoute?)
    {
        var tls = configuration.tls
        if configuration.http2 != nil {
            tls.applicationProtocols = ["h2"]
            tls.releasesIdleBuffers = true
        }
        let context: TLSContext
        do { context = try TLSContext(tls, role: .client) } catch { throw SenderError(description: "\(error)") }
        guard let proxy = configuration.proxy else {
            do {
                return (context, try SocketAddress.resolve(host: configuration.host, port: configuration.port), nil)
            } catch {
                throw SenderError(description: "\(error)")
            }
        }
        let proxyAddresses: [SocketAddress]
        do {
            proxyAddresses = try SocketAddress.resolve(host: proxy.host, port: proxy.port)
        } catch {
            throw SenderError(description: "cannot resolve the proxy \(proxy.address): \(error.reason)")
        }
        // socks5:// is given an address, resolved here; socks5h:// and HTTP are given the name.
        var gatewayAddresses: [SocketAddress] = []
        if proxy.kind == .socks5 {
            do {
                gatewayAddresses = try SocketAddress.resolve(host: configuration.host, port: configuration.port)
            } catch {
                throw SenderError(description: "\(error) (socks5:// resolves the gateway here; socks5h:// lets the proxy resolve it)")
            }
        }
        return (context, proxyAddresses,
                ProxyRoute(proxy: proxy, gatewayHost: configuration.host, gatewayPort: configuration.port,
                           gatewayAddresses: gatewayAddresses))
    }

    /// The team's provider token signer, with HTTP/2 token authentication.
    private static func providerTokenSigner(_ configuration: SenderConfiguration,
                                            logger: Logger) throws(SenderError) -> ProviderTokenSigner? {
        guard case .token(let credentials) = configuration.http2?.authentication else { return nil }
        do {
            return try ProviderTokenSigner(credentials: credentials,
                                           clock: configuration.tokenClock ?? ProviderTokenSigner.systemClock,
                                           logger: logger, store: configuration.http2?.tokenStore)
        } catch {
            throw SenderError(description: error.description)
        }
    }

    deinit {
        providerTokens?.setWaker(nil)
        growth.setWaker(nil)
        shards.forEach { $0.stop() }
        hub.finish()
    }

    // MARK: Sending from a source

    /// Sends every notification `source` yields, reading it again to resend whatever the
    /// gateway discards; returns when every one of them is final (accepted, rejected or
    /// failed) — the error wait after the last write.
    ///
    /// Notifications go to the connections in turns of a few hundred, so each connection
    /// writes full TLS records and keeps one small record per run. Backpressure suspends
    /// the reading, never loses anything.
    ///
    /// - Parameters:
    ///   - source: the notifications, in order; read again from any position reported to
    ///     resend.
    ///   - reader: where to start, e.g. a reader moved past a checkpoint; by default a new
    ///     reader from the beginning. The sender reads it on this task.
    /// - Throws: the reader's error (e.g. a bad campaign line under the abort policy),
    ///   after everything read before it is final; `SendError.invalidPayload` for a
    ///   notification the encoder refuses (nothing after it is sent); `SendError.finished`;
    ///   `SendError.gatewayUnreachable` once every connection gave up.
    public func send<Source: NotificationSource>(contentsOf source: Source, startingWith reader: Source.Reader? = nil)
        async throws
    {
        let outcome = await submit(contentsOf: source, startingWith: reader).outcome()
        if let stopped = outcome.stoppedBy { throw stopped }
    }

    /// Hands every notification `source` yields to the connections, and returns once the
    /// last one is taken, without waiting for the answers: the returned `Submission` waits
    /// for those, and counts the source's outcomes.
    ///
    /// Sources submitted one after the other keep the connections busy across their
    /// boundaries (the next one's notifications go out while the previous one's last
    /// answers, or its error wait, are awaited), and each source's counts stay its own: a
    /// campaign worker sends chunk after chunk through one sender this way. `send(contentsOf:)`
    /// is `submit` followed by `Submission.outcome()`.
    ///
    /// - Parameters:
    ///   - source: the notifications, in order; read again from any position reported to
    ///     resend, until its submission's outcome is known.
    ///   - reader: where to start; by default a new reader from the beginning. The sender
    ///     reads it on this task.
    ///   - observingRefusals: told of each of this source's notifications the gateway
    ///     rejects or Salvo gives up on (the `.rejected`, `.failed` and `.failedUnnamed`
    ///     events naming them, which `events` carries too), before the submission counts it
    ///     final: when `outcome()` returns, it has been told of every one. Called on a shard
    ///     thread: keep it short. What it is not told of was accepted.
    /// - Returns: the submission; what stopped its reading early (the reader's error,
    ///   `SendError`) is its outcome's `stoppedBy`.
    public func submit<Source: NotificationSource>(contentsOf source: Source, startingWith reader: Source.Reader? = nil,
                                                   observingRefusals: RefusalObserver? = nil) async -> Submission
    {
        guard !isFinished.load(ordering: .relaxed) else { return Submission(finishedSender: self) }
        let entry = sources.register(source, refusalObserver: observingRefusals)
        var published = 0
        var stopped: (any Error)?
        do {
            let reader = try reader ?? source.makeReader()
            var turn = firstTurn()
            while let waiting = try publishUntilFull(reader, source: entry.id, turn: &turn, published: &published) {
                try await untilTaken { () throws(SendError) -> Bool in
                    try tryPublish(waiting, source: entry.id, turn: &turn)
                }
                countPublished(waiting, &published)
            }
        } catch {
            stopped = error
        }
        sourceExhausted(entry, after: published)
        return Submission(sender: self, entry: entry, stoppedBy: stopped)
    }

    /// Where a reader starts publishing: the lanes' turns rotate between readers.
    func firstTurn() -> LaneTurn { LaneTurn(lane: cursor.wrappingAdd(1, ordering: .relaxed).oldValue % growth.count) }

    /// Publishing from `entry`'s source is over, `count` notifications in all: once no
    /// other source is read, the connections drain.
    func sourceExhausted(_ entry: SourceRegistry.Entry, after count: Int) {
        entry.exhausted(after: count)
        shards.forEach { $0.settlingChanged() }
    }

    /// The source is no longer read again: its readers go.
    func forget(_ entry: SourceRegistry.Entry) {
        sources.unregister(entry)
        shards.forEach { shard in shard.execute { $0.replayer.forget(entry.id) } }
    }

    /// Publishes what `reader` yields while a lane takes it at once, without suspending (a
    /// notification held across a suspension lives in the task's heap frame, a copy per
    /// notification); returns the first one no lane could take, nil at the reader's end.
    private func publishUntilFull<Reader: NotificationReader>(
        _ reader: Reader, source: SourceID, turn: inout LaneTurn, published: inout Int
    ) throws -> SourceNotification? {
        while let notification = try reader.next() {
            guard try tryPublish(notification, source: source, turn: &turn) else { return notification }
            countPublished(notification, &published)
        }
        return nil
    }

    @inline(__always)
    private func countPublished(_ notification: SourceNotification, _ count: inout Int) {
        count += 1
        submittedSequenceEnd.store(notification.position.sequence &+ 1, ordering: .releasing)
    }

    /// Which lane (over HTTP/2, which shard's ring) a source's reader publishes to, and for
    /// how much longer.
    struct LaneTurn {
        var lane: Int
        var taken = 0
        /// The lane the previous notification went to: the next one continues its run there.
        var previous = -1
    }

    /// Notifications a reader gives one lane before moving on to the next: long enough
    /// that a lane's records are a run of consecutive notifications (over the binary
    /// protocol, one record of the run log: its longest run), short enough that every
    /// connection gets work at the start.
    private static let turnLength = 256

    @inline(__always)
    func tryPublish(_ notification: SourceNotification, source: SourceID, turn: inout LaneTurn) throws(SendError) -> Bool {
        guard !isFinished.load(ordering: .relaxed) else { throw .finished }
        var unreachable = 0
        // HTTP/2: into the rings of the shards with a connection in use (connections
        // alternate shards), from which those connections take as streams free up. Binary:
        // into the rings of the connections in use, each writing its own.
        let count = stagesPerShard ? min(growth.count, stagingTargets.count) : growth.count
        for offset in 0..<count {
            let index = (turn.lane + offset) % count
            let target = stagingTargets[index]
            let result: StagingRing.PublishResult
            do {
                result = try target.ring.publish(notification, source: source, continuesRun: index == turn.previous,
                                                 builder: builder)
            } catch {
                throw .invalidPayload(error, sequence: notification.position.sequence)
            }
            switch result {
            case .published(let wake):
                if wake { target.shard.wake() }
                turn.previous = index
                if index == turn.lane {
                    turn.taken += 1
                } else {
                    (turn.lane, turn.taken) = (index, 1)
                }
                if turn.taken == Self.turnLength { (turn.lane, turn.taken) = ((index + 1) % count, 0) }
                return true
            case .unavailable:
                unreachable += 1
            case .full:
                break
            }
        }
        if unreachable == count { throw hub.givenUp ?? .gatewayUnreachable("every connection gave up") }
        // Every connection is full: with one more, the notification goes there at once.
        if growth.stalled(at: Instant.now().nanoseconds) { return try tryPublish(notification, source: source, turn: &turn) }
        return false
    }

    // MARK: Sending one at a time

    /// Hands one notification to a connection without waiting. The expensive path: the
    /// notification is kept in memory until it is final (see the type's notes); prefer
    /// `send(contentsOf:)` for anything that can be read again.
    ///
    /// - Parameters:
    ///   - token: the device.
    ///   - payload: the JSON payload, copied before this returns.
    ///   - expiry: UNIX seconds after which APNs may drop it; nil: the configuration's default.
    ///   - priority: 10, 5 (or 1 over HTTP/2); nil: the configuration's default.
    ///   - sequence: your number for it (a row id), reported back with rejections; by
    ///     default the order of submission.
    /// - Returns: true when taken; false when every lane is full (backpressure: retry
    ///   after a moment, or use `send`, which waits).
    /// - Throws: `SendError` for a payload the encoder refuses, after `finish()`, or once
    ///   every connection gave up.
    public func trySend(
        token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32? = nil, priority: UInt8? = nil,
        sequence: UInt64? = nil
    ) throws(SendError) -> Bool {
        guard !isFinished.load(ordering: .relaxed) else { throw .finished }
        let ticket = cursor.wrappingAdd(1, ordering: .relaxed).oldValue
        let sequence = sequence ?? UInt64(ticket)
        guard (1...configuration.payloadLimit).contains(payload.count) else {
            throw .invalidPayload(payload.isEmpty ? .emptyPayload : .payloadTooLong(
                length: payload.count, maximum: configuration.payloadLimit), sequence: sequence)
        }
        // Consecutive notifications go to the same lane in runs of 64, so each wake-up of a
        // shard finds a slice worth an SSL_write.
        let count = growth.count
        let first = (ticket >> 6) % count
        var unreachable = 0
        for offset in 0..<count {
            let target = publishTargets[(first + offset) % count]
            let retained = target.lane.retained
            let result = retained.lock.withLock { _ -> StagingRing.PublishResult in
                guard let position = retained.append(token: token, payload: payload, expiry: expiry, priority: priority,
                                                     sequence: sequence) else { return .full }
                let notification = SourceNotification(token: token, payload: payload, expiry: expiry, priority: priority,
                                                      position: position)
                // Encoding cannot fail: the payload's length, all it checks, was checked above.
                let result = (try? target.lane.staging.publish(notification, source: RetainedStore.sourceID, continuesRun: true,
                                                             builder: builder)) ?? .unavailable
                if case .published = result {} else { retained.removeLast() }
                return result
            }
            switch result {
            case .published(let wake):
                if wake { target.shard.wake() }
                return true
            case .unavailable:
                unreachable += 1
            case .full:
                // A full store releases without waiting for the retention: tell the loop.
                if retained.isUnderPressure.load(ordering: .relaxed) { target.shard.wake() }
            }
        }
        if unreachable == count { throw hub.givenUp ?? .gatewayUnreachable("every connection gave up") }
        // Every connection is full: the caller's retry may find one more.
        _ = growth.stalled(at: Instant.now().nanoseconds)
        return false
    }

    /// Hands one notification to a connection, suspending while every lane is full. The
    /// expensive path (see `trySend`).
    public func send(
        token: DeviceToken, payload: [UInt8], expiry: UInt32? = nil, priority: UInt8? = nil, sequence: UInt64? = nil
    ) async throws(SendError) {
        try await untilTaken { () throws(SendError) -> Bool in
            try payload.withUnsafeBytes { bytes in
                Result { () throws(SendError) -> Bool in
                    try trySend(token: token, payload: bytes, expiry: expiry, priority: priority, sequence: sequence)
                }
            }.get()
        }
    }

    /// Retries `attempt` each time a shard makes progress, until it is taken.
    func untilTaken(_ attempt: () throws(SendError) -> Bool) async throws(SendError) {
        while true {
            let generation = hub.beginWaiting()
            defer { hub.endWaiting() }
            if try attempt() { return }
            await hub.waitForProgress(after: generation)
        }
    }

    // MARK: Progress

    /// Notifications taken so far: what the lanes and the shards' staging rings have published.
    private var submittedCount: Int {
        lanes.reduce(0) { $0 + Int($1.staging.published) } + shards.reduce(0) { $0 + Int($1.staging?.published ?? 0) }
    }

    /// The accounting so far (a snapshot; `finish()` returns the final one).
    public var progress: SenderReport {
        ledger.report(submitted: submittedCount, connections: growth.count, connectionsReason: growth.reason,
                      started: started.nanoseconds, now: Instant.now().nanoseconds)
    }

    /// The highest sequence S such that every notification `send(contentsOf:)` submitted
    /// with a sequence up to S was accepted or rejected; nil before the first. A failed
    /// notification holds it back for good (S stays below it), so that resuming from a
    /// checkpoint sends it again. Meaningful for one source at a time whose sequences
    /// increase (a campaign's line numbers): what a checkpoint records.
    ///
    /// - Parameter holdingBackFailures: false: every notification up to S is final, failed
    ///   ones included; for a caller that knows which ones failed (a checkpoint that lists
    ///   them).
    public func completedSequence(holdingBackFailures: Bool = true) -> UInt64? {
        // The high-water mark first: every notification up to it is then either final or
        // still in a lane when the lanes are read. (Read the other way round, one
        // published during the scan could be missed.)
        let end = submittedSequenceEnd.load(ordering: .acquiring)
        guard end > 0 else { return nil }
        return Self.completedSequence(end: end, oldestUnfinished: oldestUnfinishedSequence(holdingBackFailures: holdingBackFailures))
    }

    /// The lowest sequence of a notification in the lanes that is not final (with
    /// `holdingBackFailures`, or that failed); `UInt64.max`: none. Read after the
    /// high-water mark of what was published (see `completedSequence`).
    func oldestUnfinishedSequence(holdingBackFailures: Bool) -> UInt64 {
        var oldest = UInt64.max
        // The shards' rings before the lanes: what leaves a shard's ring goes into a
        // connection's window first, so it is seen in one or the other.
        for shard in shards {
            if let sequence = shard.staging?.oldestUnwrittenSequence() { oldest = min(oldest, sequence) }
        }
        for lane in lanes {
            if let sequence = lane.staging.oldestUnwrittenSequence() { oldest = min(oldest, sequence) }
            oldest = min(oldest, lane.oldestSequenceInWindow.load(ordering: .acquiring))
        }
        // Failures are noted before they leave the lanes: read after them, so none is missed.
        if holdingBackFailures { oldest = min(oldest, ledger.firstFailedSequence.load(ordering: .acquiring)) }
        return oldest
    }

    /// The completed sequence given the high-water mark `end` (the last published
    /// sequence plus one, 0: none) and the oldest sequence not finished.
    static func completedSequence(end: UInt64, oldestUnfinished oldest: UInt64) -> UInt64? {
        guard end > 0 else { return nil }
        if oldest == .max { return end - 1 }
        return oldest == 0 ? nil : min(end - 1, oldest - 1)
    }

    /// Stops taking notifications, waits until every one sent is final (the error wait
    /// after the last write), stops the threads, reports the metrics a last time, and
    /// returns the final report. Later calls (and `run()`'s graceful shutdown) return the
    /// same report.
    ///
    /// - Parameter timeout: after this long, what is still not final fails: as
    ///   `deliveryUnknown` under at-most-once (it may have arrived), else as `cancelled`
    ///   (the first call's timeout counts).
    public func finish(timeout: Duration = .seconds(300)) async -> SenderReport {
        let drain = finishing.withLock { drain in
            if let drain { return drain }
            let started = Task { await self.drain(timeout: timeout) }
            drain = started
            return started
        }
        return await drain.value
    }

    /// What `finish` does, once.
    private func drain(timeout: Duration) async -> SenderReport {
        isFinished.store(true, ordering: .relaxed)
        finishStarted.continuation.finish()
        logger.debug("finishing: no more notifications are taken", metadata: ["submitted": "\(submittedCount)"])
        shards.forEach { $0.settlingChanged(finishing: true) }
        let deadline = Instant.now() + timeout
        var cancelled = false
        while ledger.settledCount < submittedCount {
            if !cancelled && (Instant.now() >= deadline || isAbandoning.load(ordering: .relaxed)) {
                cancelled = true
                logger.error("giving up: notifications still not final after the finish timeout fail as cancelled",
                             metadata: ["timeout": "\(timeout)", "unsettled": "\(submittedCount - ledger.settledCount)"])
                shards.forEach { $0.execute { $0.cancelAll() } }
            }
            let generation = hub.beginWaiting()
            if ledger.settledCount >= submittedCount {
                hub.endWaiting()
                break
            }
            await hub.waitForProgress(after: generation, atMost: .milliseconds(50))
            hub.endWaiting()
        }
        shards.forEach { $0.stop() }
        // The threads are gone, and their connections with them (the gauges say so).
        for lane in lanes {
            lane.isConnected.store(false, ordering: .relaxed)
            lane.openStreams.store(0, ordering: .relaxed)
        }
        hub.finish()
        var report = ledger.report(submitted: submittedCount, connections: growth.count, connectionsReason: growth.reason,
                                   started: started.nanoseconds, now: Instant.now().nanoseconds)
        report.failureCause = hub.failureCause(report.failedByReason)
        reportMetrics(of: report)
        logger.info("finished", metadata: [
            "submitted": "\(report.submitted)", "accepted": "\(report.accepted)", "rejected": "\(report.rejected)",
            "failed": "\(report.failed)", "resent": "\(report.resent)", "reconnects": "\(report.reconnects)",
        ])
        return report
    }

    /// Ends a `finish` under way (or the next one) at once: what is not final fails as
    /// after its timeout. What a second SIGTERM does.
    package func abandonUnsettled() {
        isAbandoning.store(true, ordering: .relaxed)
        hub.progress()
    }

    /// Whether `finish()` was called (by the host, or by a graceful shutdown).
    var hasFinished: Bool { isFinished.load(ordering: .relaxed) }

    /// Provider tokens renewed so far (HTTP/2 token authentication; 0 otherwise).
    var tokensRefreshed: Int { providerTokens?.renewals ?? 0 }

    /// Connections open now (active ones, standbys not counted), over every shard.
    var openConnections: Int { lanes.reduce(0) { $0 + ($1.isConnected.load(ordering: .relaxed) ? 1 : 0) } }

    /// HTTP/2 streams open now, over every connection (as of each connection's last turn).
    var openStreams: Int { lanes.reduce(0) { $0 + $1.openStreams.load(ordering: .relaxed) } }
}

/// Events, rejection callbacks and progress wake-ups, shared by the shards and the sender.
final class EventHub: SenderObserver {
    private let continuation: AsyncStream<SenderEvent>.Continuation
    private let onRejected: (@Sendable (PushTarget, Rejection, UInt64) -> Void)?
    let logger: Logger
    /// Waiters between `beginWaiting` and `endWaiting`: while there are none, progress is free.
    private let waiting = Atomic<Int>(0)
    /// Counts progress. Read and bumped without the lock: the shard loops report progress on
    /// most turns while a producer waits, and taking the lock each time made the producer
    /// contend for it on every wait.
    private let generation = Atomic<UInt64>(0)
    /// Waiters whose continuation is in `waiters` (changed only under its lock): progress
    /// takes the lock only when someone is suspended there.
    private let parked = Atomic<Int>(0)
    private let waiters = Locked(Waiters())
    private let givenUpError = Locked<SendError?>(nil)
    /// Why a connection was last lost (a drop, a stall, a protocol error).
    private let lastLoss = Locked<String?>(nil)

    init(continuation: AsyncStream<SenderEvent>.Continuation, onRejected: (@Sendable (PushTarget, Rejection, UInt64) -> Void)?,
         logger: Logger) {
        self.continuation = continuation
        self.onRejected = onRejected
        self.logger = logger
    }


    /// Why connections gave up, for the sender to throw once all have: refused credentials
    /// if any connection saw that (it is what the user must fix), else the last reason.
    var givenUp: SendError? { givenUpError.withLock { $0 } }

    func connectionLost(_ reason: String) { lastLoss.withLock { $0 = reason } }

    /// What made notifications fail for the gateway's sake, for the report: why the
    /// connections gave up, or else, when some failed after the drops of their connections
    /// (their retries used up, or their fate unknown), why the last connection was lost.
    func failureCause(_ failedByReason: [String: Int]) -> String? {
        if let givenUp { return givenUp.description }
        let afterDrops = [FailureReason.retryBudgetExhausted, .deliveryUnknown].contains { failedByReason[$0.rawValue] != nil }
        return afterDrops ? lastLoss.withLock { $0 }.map { "the last connection lost: \($0)" } : nil
    }

    func emit(_ event: SenderEvent) {
        switch event {
        case .unreachable(let reason):
            givenUpError.withLock { givenUp in
                if case .credentialsRefused? = givenUp { return }
                givenUp = .gatewayUnreachable(reason)
            }
        case .credentialsRefused(let reason):
            givenUpError.withLock { $0 = .credentialsRefused(reason) }
        default:
            break
        }
        log(event)
        continuation.yield(event)
    }

    func rejected(target: PushTarget, rejection: Rejection, sequence: UInt64) {
        logger.debug("rejected", metadata: [
            "target": "\(target)", "status": "\(rejection.statusCode)", "reason": "\(rejection.reasonName)",
            "sequence": "\(sequence)",
        ])
        onRejected?(target, rejection, sequence)
        continuation.yield(.rejected(target: target, rejection: rejection, sequence: sequence))
    }

    /// Announces a waiter; returns the generation to wait past. Pair with `endWaiting`.
    func beginWaiting() -> UInt64 {
        waiting.add(1, ordering: .sequentiallyConsistent)
        return generation.load(ordering: .sequentiallyConsistent)
    }

    func endWaiting() { waiting.subtract(1, ordering: .sequentiallyConsistent) }

    /// Space was freed or frames settled: wake whoever waits. Free when nobody does.
    func progress() {
        guard waiting.load(ordering: .sequentiallyConsistent) > 0 else { return }
        wakeAll()
    }

    /// Suspends until `progress()` runs after `generation` was read (or `atMost` passes).
    func waitForProgress(after generation: UInt64, atMost: Duration? = nil) async {
        if let atMost {
            // A bounded wait for the drain loop: progress or a tick, whichever comes first.
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.waitForProgress(after: generation) }
                group.addTask {
                    try? await Task.sleep(for: atMost)
                    if !Task.isCancelled { self.wakeAll() }
                }
                await group.next()
                group.cancelAll()
            }
            return
        }
        // A producer waits here each time every ring is full, thousands of times a campaign:
        // the unsafe continuation skips the checked one's allocation (each is resumed once,
        // by `wakeAll` or right here).
        await withUnsafeContinuation { (continuation: UnsafeContinuation<Void, Never>) in
            // Parked first, the generation read second; `wakeAll` bumps the generation first
            // and reads `parked` second. Sequentially consistent, at least one of the two sees
            // the other's write: this waiter sees the progress and goes on, or the waker
            // sees it parked and takes the lock, which this waiter holds until it is listed.
            let resumeNow = waiters.withLock { waiters -> Bool in
                parked.add(1, ordering: .sequentiallyConsistent)
                if self.generation.load(ordering: .sequentiallyConsistent) != generation {
                    parked.subtract(1, ordering: .sequentiallyConsistent)
                    return true
                }
                waiters.add(continuation)
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    /// Counts progress and resumes every parked waiter, outside the lock: resuming schedules
    /// the task, which can take long enough (a thread woken, the waker preempted) for the
    /// resumed producer to fill the rings and come back for the lock while it is still held.
    private func wakeAll() {
        generation.add(1, ordering: .sequentiallyConsistent)
        guard parked.load(ordering: .sequentiallyConsistent) > 0 else { return }
        let woken = waiters.withLock { waiters in
            let woken = waiters
            parked.subtract(waiters.count, ordering: .sequentiallyConsistent)
            waiters = Waiters()
            return woken
        }
        woken.resumeAll()
    }

    /// The parked waiters' continuations. Usually one producer waits: it is held apart from
    /// the array, so that handing the waiters out to resume them allocates nothing.
    private struct Waiters {
        private var first: UnsafeContinuation<Void, Never>?
        private var others: [UnsafeContinuation<Void, Never>] = []

        var count: Int { (first == nil ? 0 : 1) + others.count }

        mutating func add(_ waiter: UnsafeContinuation<Void, Never>) {
            if first == nil { first = waiter } else { others.append(waiter) }
        }

        func resumeAll() {
            first?.resume()
            for waiter in others { waiter.resume() }
        }
    }

    func finish() { continuation.finish() }
}
