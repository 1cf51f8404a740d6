import SalvoIO
import SalvoWire
import Synchronization

/// Why a sender could not start.
public struct SenderError: Error, Sendable, CustomStringConvertible {
    public var description: String
}

/// Why one notification was not taken.
public enum SendError: Error, Sendable, CustomStringConvertible, Equatable {
    /// The payload is empty or too long; nothing else is affected.
    case invalidPayload(FrameEncodingError)
    /// `finish()` was called.
    case finished
    /// Every connection gave up on the gateway; the reason says why (e.g. a certificate
    /// the gateway refuses).
    case gatewayUnreachable(String)

    public var description: String {
        switch self {
        case .invalidPayload(let error): "invalid payload: \(error)"
        case .finished: "the sender has finished; create a new one"
        case .gatewayUnreachable(let reason): "the gateway is unreachable: \(reason)"
        }
    }
}

/// The embeddable engine: sends notifications over a sharded set of TLS connections to
/// an APNs binary-protocol gateway and accounts for every one.
///
/// ```swift
/// let sender = try Sender(configuration)
/// try await sender.send(token: token, payload: Array(#"{"aps":{"alert":"Hi"}}"#.utf8))
/// let report = await sender.finish()
/// ```
///
/// Each notification ends in exactly one of accepted, rejected (the gateway named it in an
/// error response) or failed; `finish()` returns the totals once all are settled. The
/// binary protocol never acknowledges success: a notification counts as accepted once
/// `errorWait` has passed after it was written with no error naming it or anything
/// before it.
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

    private let rings: [SendRing]
    private let shards: [Shard]
    /// Each ring with its shard, without reference counting: `rings` and `shards` keep
    /// them alive, and the hot path then pays no retain/release per notification.
    private let slots: [Slot]
    private struct Slot {
        unowned(unsafe) let ring: SendRing
        unowned(unsafe) let shard: Shard
    }
    private let encoder: FrameEncoder
    private let ledger = DeliveryLedger()
    private let hub: EventHub
    private let cursor = Atomic<Int>(0)
    private let isFinished = Atomic<Bool>(false)
    private let started = Instant.now()

    /// Starts the shards and their connections.
    ///
    /// - Parameter onRejected: called for every rejected notification, on a shard thread,
    ///   with the token, the status and the sequence number given to `send` — the feed for
    ///   a provider's "remove this token" list. Keep it quick.
    public init(
        _ configuration: SenderConfiguration,
        onRejected: (@Sendable (DeviceToken, Status, UInt64) -> Void)? = nil
    ) throws(SenderError) {
        guard configuration.shards >= 1, configuration.connectionsPerShard >= 1 else {
            throw SenderError(description: "shards and connections per shard must be at least 1")
        }
        self.configuration = configuration
        encoder = FrameEncoder(format: configuration.format, maximumPayloadLength: configuration.maximumPayloadLength)
        let context: TLSContext
        let addresses: [SocketAddress]
        do {
            context = try TLSContext(configuration.tls, role: .client)
            addresses = try SocketAddress.resolve(host: configuration.host, port: configuration.port)
        } catch {
            throw SenderError(description: "\(error)")
        }
        let maximumFrame = encoder.encodedLength(payloadLength: configuration.maximumPayloadLength)
        guard configuration.ringCapacity >= 2 * maximumFrame else {
            throw SenderError(description: "ring capacity \(configuration.ringCapacity) is below twice the largest frame (\(2 * maximumFrame) bytes)")
        }
        let (stream, continuation) = AsyncStream.makeStream(of: SenderEvent.self, bufferingPolicy: .bufferingNewest(10_000))
        events = stream
        hub = EventHub(continuation: continuation, onRejected: onRejected)

        var rings: [SendRing] = []
        var shards: [Shard] = []
        var shardOfRing: [Int] = []
        do {
            for shardIndex in 0..<configuration.shards {
                let shardRings = (0..<configuration.connectionsPerShard).map { _ in
                    SendRing(byteCapacity: configuration.ringCapacity, format: configuration.format, maximumFrameLength: maximumFrame)
                }
                shards.append(try Shard(index: shardIndex, rings: shardRings, configuration: configuration, tlsContext: context,
                                        addresses: addresses, ledger: ledger, observer: hub))
                rings += shardRings
                shardOfRing += Array(repeating: shardIndex, count: shardRings.count)
            }
        } catch {
            shards.forEach { $0.stop() }
            throw SenderError(description: "cannot start a shard: \(error)")
        }
        self.rings = rings
        self.shards = shards
        slots = zip(rings, shardOfRing).map { Slot(ring: $0, shard: shards[$1]) }
    }

    deinit {
        shards.forEach { $0.stop() }
        hub.finish()
    }

    // MARK: Sending

    /// Hands one notification to a connection without waiting.
    ///
    /// - Parameters:
    ///   - sequence: your number for it (a campaign line, a database row), reported back
    ///     with rejections and used for checkpoints; by default the order of submission.
    /// - Returns: true when taken; false when every ring is full (backpressure: retry
    ///   after a moment, or use `send`, which waits).
    /// - Throws: `SendError` for a payload the encoder refuses, after `finish()`, or once
    ///   every connection gave up.
    @inline(__always)
    public func trySend(
        token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32? = nil, priority: UInt8? = nil,
        sequence: UInt64? = nil
    ) throws(SendError) -> Bool {
        guard !isFinished.load(ordering: .relaxed) else { throw .finished }
        // Consecutive notifications go to the same ring in runs of 64, so each wake-up of a
        // shard finds a slice worth an SSL_write.
        let ticket = cursor.wrappingAdd(1, ordering: .relaxed).oldValue
        let first = (ticket >> 6) % slots.count
        var unreachable = 0
        for offset in 0..<slots.count {
            let slot = slots[(first + offset) % slots.count]
            let ring = slot.ring
            if ring.gaveUp.load(ordering: .relaxed) {
                unreachable += 1
                continue
            }
            let result: SendRing.PublishResult
            do {
                result = try ring.publish(
                    encoder: encoder, token: token, payload: payload,
                    expiry: expiry ?? configuration.defaultExpiry, priority: priority ?? configuration.defaultPriority,
                    sequence: sequence ?? UInt64(ticket))
            } catch {
                throw .invalidPayload(error)
            }
            switch result {
            case .published(_, let wake):
                if wake { slot.shard.wake() }
                return true
            case .unavailable:
                unreachable += 1
            case .full:
                break
            }
        }
        if unreachable == slots.count { throw .gatewayUnreachable(hub.lastUnreachableReason ?? "every connection gave up") }
        return false
    }

    /// Hands one notification to a connection, suspending while every ring is full.
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

    /// Like `send(token:payload:...)` for payload bytes you hold (a campaign reader's
    /// buffer): they are copied into the ring before this returns.
    public func send(
        token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32? = nil, priority: UInt8? = nil,
        sequence: UInt64? = nil
    ) async throws(SendError) {
        if try trySend(token: token, payload: payload, expiry: expiry, priority: priority, sequence: sequence) { return }
        try await untilTaken { () throws(SendError) -> Bool in
            try trySend(token: token, payload: payload, expiry: expiry, priority: priority, sequence: sequence)
        }
    }

    /// Retries `attempt` each time a shard makes progress, until it is taken.
    private func untilTaken(_ attempt: () throws(SendError) -> Bool) async throws(SendError) {
        while true {
            let generation = hub.beginWaiting()
            defer { hub.endWaiting() }
            if try attempt() { return }
            await hub.waitForProgress(after: generation)
        }
    }

    // MARK: Progress

    /// Notifications taken so far: what the rings have published.
    private var submittedCount: Int { rings.reduce(0) { $0 + Int($1.published) } }

    /// The accounting so far (a snapshot; `finish()` returns the final one).
    public var progress: SenderReport {
        ledger.report(submitted: submittedCount, seconds: Instant.now().since(started).secondsDouble)
    }

    /// The oldest `sequence` not yet settled, or nil when everything sent so far is
    /// settled. For a checkpoint with increasing sequences: first note the highest
    /// sequence whose `send` has returned, then call this; everything below the smaller
    /// of the two (minus one) has reached its final state. (Taken the other way round, a
    /// notification sent during the call could be missed.)
    public func oldestUnsettledSequence() -> UInt64? {
        rings.compactMap { $0.oldestUnsettledSequence() }.min()
    }

    /// Stops taking notifications, waits until every one sent is settled (the error wait
    /// after the last write), stops the threads, and returns the final report.
    ///
    /// - Parameter timeout: after this long, what is still unsettled fails as `cancelled`.
    public func finish(timeout: Duration = .seconds(300)) async -> SenderReport {
        isFinished.store(true, ordering: .relaxed)
        let deadline = Instant.now() + timeout
        var cancelled = false
        while ledger.settledCount < submittedCount {
            if !cancelled && Instant.now() >= deadline {
                cancelled = true
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
        hub.finish()
        return ledger.report(submitted: submittedCount, seconds: Instant.now().since(started).secondsDouble)
    }
}

/// Events, rejection callbacks and progress wake-ups, shared by the shards and the sender.
final class EventHub: SenderObserver {
    private let continuation: AsyncStream<SenderEvent>.Continuation
    private let onRejected: (@Sendable (DeviceToken, Status, UInt64) -> Void)?
    private let waiting = Atomic<Int>(0)
    private let state = Mutex<(generation: UInt64, waiters: [(UInt64, CheckedContinuation<Void, Never>)], unreachable: String?)>(
        (0, [], nil))

    init(continuation: AsyncStream<SenderEvent>.Continuation, onRejected: (@Sendable (DeviceToken, Status, UInt64) -> Void)?) {
        self.continuation = continuation
        self.onRejected = onRejected
    }

    var lastUnreachableReason: String? { state.withLock { $0.unreachable } }

    func emit(_ event: SenderEvent) {
        if case .unreachable(let reason) = event { state.withLock { $0.unreachable = reason } }
        continuation.yield(event)
    }

    func rejected(token: DeviceToken, status: Status, sequence: UInt64) {
        onRejected?(token, status, sequence)
        continuation.yield(.rejected(token: token, status: status, sequence: sequence))
    }

    /// Announces a waiter; returns the generation to wait past. Pair with `endWaiting`.
    func beginWaiting() -> UInt64 {
        waiting.add(1, ordering: .sequentiallyConsistent)
        return state.withLock { $0.generation }
    }

    func endWaiting() { waiting.subtract(1, ordering: .sequentiallyConsistent) }

    /// Space was freed or frames settled: wake whoever waits. Free when nobody does.
    func progress() {
        guard waiting.load(ordering: .sequentiallyConsistent) > 0 else { return }
        let waiters = state.withLock { state -> [(UInt64, CheckedContinuation<Void, Never>)] in
            state.generation += 1
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for (_, waiter) in waiters { waiter.resume() }
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
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            let resumeNow = state.withLock { state -> Bool in
                if state.generation != generation { return true }
                state.waiters.append((generation, continuation))
                return false
            }
            if resumeNow { continuation.resume() }
        }
    }

    private func wakeAll() {
        let waiters = state.withLock { state -> [(UInt64, CheckedContinuation<Void, Never>)] in
            state.generation += 1
            defer { state.waiters.removeAll() }
            return state.waiters
        }
        for (_, waiter) in waiters { waiter.resume() }
    }

    func finish() { continuation.finish() }
}
