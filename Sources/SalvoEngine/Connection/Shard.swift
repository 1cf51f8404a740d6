import SalvoIO
import SalvoWire

/// One event-loop thread and the gateway connections it owns. Everything here runs on
/// the shard's thread, except `init` and `wake`.
final class Shard: @unchecked Sendable {
    let index: Int
    let configuration: SenderConfiguration
    let tlsContext: TLSContext
    let ledger: DeliveryLedger
    private let thread: LoopThread
    private let addresses: [SocketAddress]
    private var nextAddressIndex = 0
    private var connections: [GatewayConnection] = []
    private let observer: SenderObserver

    var loop: EventLoop { thread.loop }

    init(index: Int, rings: [SendRing], configuration: SenderConfiguration, tlsContext: TLSContext,
         addresses: [SocketAddress], ledger: DeliveryLedger, observer: SenderObserver) throws(IOError) {
        self.index = index
        self.configuration = configuration
        self.tlsContext = tlsContext
        self.addresses = addresses
        self.ledger = ledger
        self.observer = observer
        let cpu = configuration.pinThreads ? index % availableCores : nil
        thread = try LoopThread(name: "salvo-shard-\(index)", cpu: cpu)
        // Connections are made and wired on the loop thread: they belong to it.
        thread.loop.execute { [self] in
            connections = rings.enumerated().map { GatewayConnection(shard: self, index: $0.offset, ring: $0.element) }
            loop.onWakeUp = { [unowned self] in
                for connection in connections where connection.ring.hasUnwritten { connection.pump() }
            }
        }
    }

    /// Tells the loop new frames were published. Any thread; cheap when already pending.
    @inline(__always)
    func wake() { thread.loop.wakeUp() }

    /// Runs `body` on the shard's thread.
    func execute(_ body: @escaping @Sendable (Shard) -> Void) {
        thread.loop.execute { [self] in body(self) }
    }

    /// Fails every unsettled frame of every connection (the sender is giving up).
    func cancelAll() {
        for connection in connections {
            _ = connection.ring.failAllUnsettled(reason: .cancelled, sink: connection)
        }
        notifyProgress()
    }

    /// Stops the loop and joins the thread.
    func stop() { thread.stopAndJoin() }

    /// The gateway addresses in turn, so several connections spread over them.
    func nextAddress() throws(IOError) -> SocketAddress {
        defer { nextAddressIndex += 1 }
        return addresses[nextAddressIndex % addresses.count]
    }

    func emit(_ event: SenderEvent) { observer.emit(event) }

    func reportRejection(token: DeviceToken, status: Status, sequence: UInt64) {
        observer.rejected(token: token, status: status, sequence: sequence)
    }

    func notifyProgress() { observer.progress() }
}

/// Where shards report to the sender (any thread).
protocol SenderObserver: AnyObject, Sendable {
    func emit(_ event: SenderEvent)
    func rejected(token: DeviceToken, status: Status, sequence: UInt64)
    func progress()
}
