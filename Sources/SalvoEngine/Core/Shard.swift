import SalvoIO
import SalvoWire
import Synchronization

/// One event-loop thread and the gateway connections it owns.
///
/// Thread rule: the shard's loop thread, but for `init`, `wake`, `execute`, `settlingChanged`, `isFinishing`, `stop`; debug builds check.
final class Shard: @unchecked Sendable {
    let index: Int
    let configuration: SenderConfiguration
    let tlsContext: TLSContext
    let ledger: DeliveryLedger
    let sources: SourceRegistry
    let builder: RecordBuilder
    /// The team's provider token, with token authentication over HTTP/2.
    let providerTokens: ProviderTokenSigner?
    /// How many connections the sender uses (HTTP/2 connections report their saturation).
    let growth: ConnectionGrowth
    /// Reads rewound notifications again; this shard's own readers.
    let replayer: Replayer
    private let thread: LoopThread
    /// The gateway's addresses, or the proxy's when `proxyRoute` is set.
    private let addresses: [SocketAddress]
    private var nextAddressIndex = 0
    /// The proxy every connection tunnels through, or nil for direct connections.
    let proxyRoute: ProxyRoute?
    private var tunnelsMade = 0
    private var connections: [any LaneConnection] = []
    private let observer: SenderObserver
    private let finishing: Atomic<Bool>
    /// What a connection reads into, shared by the shard's connections: they read one at a
    /// time on its thread, and each keeps what it needs of it.
    let readBuffer: UnsafeMutableRawBufferPointer
    /// HTTP/2: what a connection gathers its frames in until the socket takes them, taken
    /// in turn by the shard's connections (each holds one only while its socket is full).
    let outputBuffers = SharedOutputBuffers()
    /// HTTP/2: where producers stage the notifications they read from sources, for
    /// whichever of the shard's connections in use has a stream free (see `StagingRing`).
    /// Nil for the binary protocol, whose connections each write their own ring.
    let staging: StagingRing?

    var loop: EventLoop { thread.loop }

    init(index: Int, lanes: [Lane], staging: StagingRing? = nil, configuration: SenderConfiguration, tlsContext: TLSContext,
         addresses: [SocketAddress], ledger: DeliveryLedger, sources: SourceRegistry, builder: RecordBuilder,
         providerTokens: ProviderTokenSigner? = nil, growth: ConnectionGrowth, observer: SenderObserver,
         proxyRoute: ProxyRoute? = nil) throws(IOError) {
        self.index = index
        self.staging = staging
        self.proxyRoute = proxyRoute
        self.configuration = configuration
        self.tlsContext = tlsContext
        self.addresses = addresses
        self.ledger = ledger
        self.sources = sources
        self.builder = builder
        self.providerTokens = providerTokens
        self.growth = growth
        self.observer = observer
        replayer = Replayer(sources: sources)
        finishing = Atomic(false)
        readBuffer = .allocate(byteCount: 4 * TLSStream.recordPayloadLimit, alignment: 64)
        let cpu = configuration.pinThreads ? index % availableCores : nil
        thread = try LoopThread(name: "salvo-shard-\(index)", cpu: cpu)
        // Connections are made and wired on the loop thread: they belong to it.
        thread.loop.execute { [self] in
            connections = lanes.enumerated().map { makeConnection(index: $0.offset, lane: $0.element) }
            loop.onWakeUp = { [unowned self] in
                for connection in connections {
                    if connection.hasWork { connection.pump() }
                    // A producer found the retained store full: release without waiting for the retention.
                    if connection.lane.retained.isUnderPressure.load(ordering: .relaxed) { connection.armSettleTimer(again: true) }
                }
            }
        }
    }

    /// A connection with the binary transport for binary frames, with the HTTP/2 transport
    /// for request records.
    private func makeConnection(index: Int, lane: Lane) -> any LaneConnection {
        switch builder {
        case .frame(let frames):
            Connection(shard: self, index: index, lane: lane,
                       transport: BinaryTransport(configuration: configuration, frames: frames, shard: self, lane: lane),
                       usesStandby: configuration.usesStandbyConnections)
        case .request(let requests):
            Connection(shard: self, index: index, lane: lane,
                       transport: HTTP2Transport(configuration: configuration, options: configuration.http2!, requests: requests,
                                                 seed: configuration.seed &+ UInt64(self.index * 1000 + index),
                                                 shard: self, lane: lane, position: position(ofConnection: index)),
                       usesStandby: false)
        }
    }

    /// Whether the sender is finishing: nothing more will be published, so connections drain
    /// once what they wrote is past its error wait (`BinaryTransport.finishWritingIfDone`).
    var isFinishing: Bool { finishing.load(ordering: .relaxed) }

    /// When a connection's turn at writing ends (see `WriteTurns`).
    var turns = WriteTurns()

    /// The place of the shard's connection `index` among the sender's: growth takes them
    /// into use in that order (the first `growth.count`), alternating shards.
    func position(ofConnection index: Int) -> Int { index * configuration.shards + self.index }

    /// A connection gave up on the gateway: once every connection in use has, what waits in
    /// the shard's staging ring fails with `reason`, and the ring takes no more.
    func connectionGaveUp(_ reason: FailureReason) {
        loop.assertInLoop()
        guard let staging, connections.indices.allSatisfy({ position(ofConnection: $0) >= growth.count || connections[$0].hasGivenUp })
        else { return }
        // Any connection keeps the books: the ring's records are in no connection's window.
        connections[0].failUnwritten(reason, in: staging)
    }

    /// Whether a connection other than `connection` has something to write.
    func hasWork(besides connection: any LaneConnection) -> Bool {
        loop.assertInLoop()
        return connections.contains { $0 !== connection && $0.hasWork }
    }

    /// Tells the loop new frames were published. Any thread; cheap when already pending.
    @inline(__always)
    func wake() { thread.loop.wakeUp() }

    /// Runs `body` on the shard's thread.
    func execute(_ body: @escaping @Sendable (Shard) -> Void) {
        thread.loop.execute { [self] in body(self) }
    }

    /// The sender is finishing, a source was read to its end, or the error wait changed:
    /// every connection re-derives its settle deadline, and drains if it is done. Any thread.
    func settlingChanged(finishing: Bool = false) {
        if finishing { self.finishing.store(true, ordering: .relaxed) }
        execute { shard in
            for connection in shard.connections {
                connection.armSettleTimer(again: true)
                connection.finishWritingIfDone()
            }
        }
    }

    /// Fails every notification not final (the sender is giving up).
    func cancelAll() {
        loop.assertInLoop()
        connections.forEach { $0.cancel() }
        if let staging { connections[0].failUnwritten(.cancelled, in: staging) }
        notifyProgress()
    }

    /// Stops the loop and joins the thread.
    func stop() { thread.stopAndJoin() }

    deinit { readBuffer.deallocate() }

    /// A tunnel for the next connection attempt through the proxy, or nil without one.
    func nextTunnel() -> ProxyTunnel? {
        guard let proxyRoute else { return nil }
        defer { tunnelsMade += 1 }
        return proxyRoute.tunnel(attempt: tunnelsMade)
    }

    /// The gateway addresses in turn, so several connections spread over them.
    func nextAddress() throws(IOError) -> SocketAddress {
        loop.assertInLoop()
        defer { nextAddressIndex += 1 }
        return addresses[nextAddressIndex % addresses.count]
    }

    func emit(_ event: SenderEvent) {
        loop.assertInLoop()
        if case .errorWaitRaised = event { connections.forEach { $0.armSettleTimer(again: true) } }
        observer.emit(event)
    }

    /// A connection ended without the gateway's word on what it held: the report names the
    /// last such reason when notifications failed for it.
    func noteConnectionLost(_ reason: String) { observer.connectionLost(reason) }

    func reportRejection(target: PushTarget, rejection: Rejection, sequence: UInt64) {
        observer.rejected(target: target, rejection: rejection, sequence: sequence)
    }

    func notifyProgress() { observer.progress() }
}

/// Where shards report to the sender (any thread).
protocol SenderObserver: AnyObject, Sendable {
    func emit(_ event: SenderEvent)
    func connectionLost(_ reason: String)
    func rejected(target: PushTarget, rejection: Rejection, sequence: UInt64)
    func progress()
}
