import SalvoIO
import SalvoWire
import Synchronization

/// One socket of a connection, its active link or its standby, as the event loop sees it.
final class Link: EventHandler {
    let stream: TLSStream
    fileprivate(set) var registration: Registration?
    fileprivate var isHandshakeComplete = false
    /// Fails the attempt if the handshake is not complete by then.
    fileprivate var connectTimer: TimerID?
    /// The tunnel through the proxy while it is being opened; nil once open, and without a proxy.
    fileprivate var tunnel: ProxyTunnel?
    /// The proxy this link connects through, for messages.
    fileprivate var proxy: ProxyConfiguration?
    private unowned let owner: any LinkOwner

    fileprivate init(stream: TLSStream, owner: any LinkOwner) {
        self.stream = stream
        self.owner = owner
    }

    func handleEvents(_ events: IOEvents) { owner.handleEvents(events, on: self) }
}

private protocol LinkOwner: AnyObject {
    func handleEvents(_ events: IOEvents, on link: Link)
}

/// What a connection holds as its protocol: what it has to write, how it writes, reads
/// and settles. The `Connection` it belongs to does the rest, the same for both: the
/// sockets and their TLS streams, the `ConnectionMachine`, stalls, and applying what the
/// window settles. Calls from the connection are static (it is generic over its
/// transport); the transport reaches back through `connection`.
protocol ConnectionTransport: AnyObject {
    associatedtype Window: ConnectionWindow

    /// The connection it belongs to (set once, right after the connection is made).
    var connection: Connection<Self>! { get set }
    /// The window its connection's machine settles.
    var window: Window { get }
    /// Whether anything waits to be written.
    var hasWork: Bool { get }
    /// Connect if needed, then write what waits (`flush`: do not wait for a fuller record).
    func pump(flush: Bool)
    /// Readiness on one of its open (or draining, or retiring) links.
    func linkEvents(_ events: IOEvents, on link: Link)
    /// `link` became the active connection and the connection's bookkeeping is done.
    func didActivate(_ link: Link)
    /// Why a completed handshake is no use to this protocol, or nil.
    func handshakeProblem(_ link: Link) -> String?
    /// Send the gateway the end of what `link` writes (binary: TLS close_notify).
    func finishWriting(on link: Link)
    /// `link` is about to close (`notifying`: the sender ends it, with close_notify).
    func willClose(_ link: Link, notifying: Bool)
    /// When the window next needs the loop has changed: look again.
    func armSettleTimer(again: Bool)
    /// Nothing more will be published: finish what can be finished now.
    func finishWritingIfDone()
}

/// One connection of a shard to the gateway, whatever its protocol, on the shard's thread (debug
/// builds check): performs what the `ConnectionMachine` decides with real sockets, TLS
/// streams and timers, and applies every settlement of the window to the ledger, the
/// events and the sources in one place (`apply`). What is the protocol's is its
/// `transport`'s: `BinaryTransport` (frames and error responses) or `HTTP2Transport`
/// (streams and their answers).
final class Connection<Transport: ConnectionTransport>: LinkOwner, LaneConnection {
    typealias Window = Transport.Window

    let lane: Lane
    /// The shard owns its connections and outlives them, so the reference is neither counted
    /// nor checked: the write path reads it for every write.
    unowned(unsafe) let shard: Shard
    let index: Int
    var machine: ConnectionMachine<Link, Window>
    /// The machine's window, held here too: the write path touches it for every record.
    let window: Window
    let transport: Transport
    /// The last closed connection's TLS session: the next connection resumes it and skips
    /// the certificate work of a full handshake.
    private var session: TLSSession?
    private var stallTimer: TimerID?
    /// The link last activated, while it is open: its close clears `lane.isConnected`.
    private var activeLink: ObjectIdentifier?
    /// What the last stall check saw on the active connection: the bytes the gateway's TCP
    /// had acknowledged, and whether bytes were waiting for it.
    private var stallCheck: (acknowledged: UInt64?, waiting: Bool) = (nil, false)
    var ledger: DeliveryLedger { shard.ledger }

    init(shard: Shard, index: Int, lane: Lane, transport: Transport, usesStandby: Bool) {
        self.shard = shard
        self.index = index
        self.lane = lane
        self.transport = transport
        window = transport.window
        let configuration = shard.configuration
        machine = ConnectionMachine(
            window: window,
            dropPolicy: DropHandling(atMostOnce: configuration.dropPolicy == .atMostOnce,
                                     retryBudget: configuration.retryBudget),
            usesStandby: usesStandby, maximumAttempts: configuration.connectAttempts,
            backoff: configuration.reconnectBackoff, seed: configuration.seed &+ UInt64(shard.index * 1000 + index))
        transport.connection = self
    }

    // MARK: LaneConnection

    var hasWork: Bool { transport.hasWork }
    func pump(flush: Bool) { transport.pump(flush: flush) }
    func armSettleTimer(again: Bool) { transport.armSettleTimer(again: again) }
    func finishWritingIfDone() { transport.finishWritingIfDone() }

    // MARK: Events

    func handleEvents(_ events: IOEvents, on link: Link) {
        shard.loop.assertInLoop()
        if !link.isHandshakeComplete {
            do {
                if events.contains(.write) { try link.stream.socket.finishConnect() }
            } catch {
                perform(machine.connectFailed(link, link.proxy.map { "cannot reach the proxy \($0.address): \(error)" } ?? "\(error)",
                                              permanent: false))
                return
            }
            if link.tunnel != nil { advanceTunnel(link) } else { advanceHandshake(link) }
        } else if machine.activeTransport === link || machine.isRetiring(link) {
            transport.linkEvents(events, on: link)
        } else {
            watchStandby(link)
        }
    }

    private func advanceHandshake(_ link: Link) {
        do {
            switch try link.stream.handshake() {
            case .complete:
                link.isHandshakeComplete = true
                cancelConnectTimer(link)
                setInterest(link, .read)  // for a ready standby, only its end is news
                if let problem = transport.handshakeProblem(link) {
                    perform(machine.connectFailed(link, problem, permanent: true))
                    return
                }
                perform(machine.handshakeCompleted(link))
            case .wantRead: setInterest(link, .read)
            case .wantWrite: setInterest(link, .write)
            }
        } catch {
            perform(machine.connectFailed(link, "\(error)", permanent: isPermanent(error)))
        }
    }

    /// Writes the tunnel's requests and takes the proxy's answers until the tunnel is open,
    /// then starts the TLS handshake. The proxy's answer is peeked at and only its own bytes
    /// are read: whatever follows is the gateway's TLS.
    private func advanceTunnel(_ link: Link) {
        guard var tunnel = link.tunnel else { return advanceHandshake(link) }
        let socket = link.stream.socket
        do {
            while true {
                if !tunnel.pendingOutput.isEmpty {
                    let result = try tunnel.pendingOutput.withUnsafeBytes { bytes throws(IOError) in try socket.write(bytes) }
                    guard case .processed(let count) = result else {
                        link.tunnel = tunnel
                        return setInterest(link, .write)
                    }
                    tunnel.didWrite(count)
                    continue
                }
                if case .open = tunnel.state {
                    link.tunnel = nil
                    return advanceHandshake(link)
                }
                let buffer = UnsafeMutableRawBufferPointer(rebasing: shard.readBuffer.prefix(4096))
                guard case .processed(let count) = try socket.peek(into: buffer) else {
                    link.tunnel = tunnel
                    return setInterest(link, .read)
                }
                guard count > 0 else { throw tunnel.proxyClosed() }
                let taken = try tunnel.receive(UnsafeRawBufferPointer(rebasing: buffer.prefix(count)))
                if taken > 0 { _ = try socket.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer.prefix(taken))) }
            }
        } catch let error as ProxyTunnelError {
            link.tunnel = nil
            perform(machine.connectFailed(link, error.description, permanent: error.isPermanent))
        } catch {
            link.tunnel = nil
            let proxy = tunnel.proxy
            perform(machine.connectFailed(link, "the connection to the proxy \(proxy.address) failed while opening the tunnel to "
                                          + "\(tunnel.target): \(error)", permanent: false))
        }
    }

    /// `link` became the active connection.
    private func activated(_ link: Link) {
        if machine.opened > 1 {
            ledger.reconnects.add(1, ordering: .relaxed)
            if link.stream.isResumed { ledger.resumedReconnects.add(1, ordering: .relaxed) }
        }
        stallCheck = (nil, false)
        activeLink = ObjectIdentifier(link)
        lane.isConnected.store(true, ordering: .relaxed)
        if stallTimer == nil {
            stallTimer = shard.loop.schedule(at: shard.loop.now + shard.configuration.stallTimeout, stallAction)
        }
        shard.emit(.connected(shard: shard.index, connection: index, resumed: link.stream.isResumed,
                              kernelTLS: link.stream.isKernelTLSSending))
        transport.didActivate(link)
        transport.pump(flush: false)
    }

    /// A ready standby said something: the gateway closed it (or speaks out of turn).
    private func watchStandby(_ link: Link) {
        var scratch = (UInt64(0), UInt64(0))
        let result = withUnsafeMutableBytes(of: &scratch) { buffer in Result { () throws(TLSError) in try link.stream.read(into: buffer) } }
        if case .success(.wouldBlock) = result { return }
        perform(machine.connectionLost(link, "the standby connection ended", permanentReason: nil))
    }

    func connectionLost(_ link: Link, _ reason: String, permanent: String?, stalled: Bool = false,
                              unanswered: Bool = false) {
        shard.noteConnectionLost(reason)
        perform(machine.connectionLost(link, reason, permanentReason: permanent, stalled: stalled, unanswered: unanswered))
    }

    // MARK: Actions

    func perform(_ actions: [ConnectionMachine<Link, Window>.Action]) {
        for action in actions {
            switch action {
            case .connect:
                startConnect(standby: false)
            case .connectStandby:
                startConnect(standby: true)
            case .close(let link, let reason, let how):
                close(link, reason: reason, how: how)
            case .reconnect(let delay):
                // Timers hold their connection `unowned`, never `weak`: a connection lives
                // as long as its shard's loop runs, and a weak reference would give it a
                // side table, putting every retain and release of it on Swift's slow path.
                shard.loop.schedule(after: delay) { [unowned self] in
                    guard let action = machine.reconnectTimerFired() else { return }
                    self.perform([action])
                }
            case .openStandby(let delay):
                shard.loop.schedule(after: delay) { [unowned self] in
                    guard let action = machine.standbyTimerFired() else { return }
                    self.perform([action])
                }
            case .activated(let link):
                activated(link)
            case .finishWriting(let link):
                transport.finishWriting(on: link)
            case .settle(let settlement):
                apply(settlement)
            case .giveUp(let reason, let failing):
                shard.emit(failing == .authenticationFailed ? .credentialsRefused(reason: reason) : .unreachable(reason: reason))
                failUnwritten(failing)
                shard.connectionGaveUp(failing)
            }
        }
    }

    private func startConnect(standby: Bool) {
        let configuration = shard.configuration
        let link: Link
        do {
            let address = try shard.nextAddress()
            // Resume the session kept when the last connection closed, once (TLS 1.3 tickets
            // are single-use); lacking one, the active connection's (TLS 1.2 has it at once;
            // a TLS 1.3 server sends its ticket after the handshake).
            let resuming = session ?? machine.activeTransport?.stream.resumableSession
            session = nil
            let (socket, connected) = try Socket.startConnect(to: address)
            if let size = configuration.socketSendBuffer { socket.setBufferSizes(send: size, receive: nil) }
            // Through a proxy too, TLS names and verifies the gateway, never the proxy.
            link = Link(stream: try TLSStream(context: shard.tlsContext, socket: socket,
                                              serverName: configuration.serverName ?? configuration.host, resuming: resuming),
                        owner: self)
            link.tunnel = shard.nextTunnel()
            link.proxy = link.tunnel?.proxy
            if standby { machine.standbyStarted(link) } else { machine.connectStarted(link) }
            armConnectTimer(link)
            if connected {
                if link.tunnel != nil { advanceTunnel(link) } else { advanceHandshake(link) }
                return
            }
        } catch {
            perform(standby ? machine.standbyCouldNotStart("\(error)")
                            : machine.connectFailed(nil, "\(error)", permanent: isPermanent(error)))
            return
        }
        do {
            link.registration = try shard.loop.register(link.stream.socket.fd, interest: .write, handler: link)
        } catch {
            perform(machine.connectFailed(link, "\(error)", permanent: false))
        }
    }

    private func close(_ link: Link, reason: String, how: ConnectionMachine<Link, Window>.Closing) {
        if activeLink == ObjectIdentifier(link) {
            activeLink = nil
            lane.isConnected.store(false, ordering: .relaxed)
        }
        transport.willClose(link, notifying: how == .withCloseNotify)
        if let registration = link.registration { shard.loop.deregister(registration) }
        link.registration = nil
        cancelConnectTimer(link)
        guard how != .unopened else {
            shard.emit(.connectionFailed(shard: shard.index, connection: index, reason: reason))
            return
        }
        // Shut down before taking the session: OpenSSL marks the session of a connection
        // freed otherwise as not resumable. A gateway that answered an error has closed its
        // side already: a close_notify would only cost a write and wake it.
        link.stream.shutdown(notifyingPeer: how == .withCloseNotify)
        session = link.stream.resumableSession ?? session
        shard.emit(.disconnected(shard: shard.index, connection: index, reason: reason))
    }

    /// Fails the attempt on `link` if it is still connecting after `connectTimeout`.
    private func armConnectTimer(_ link: Link) {
        let timeout = shard.configuration.connectTimeout
        link.connectTimer = shard.loop.schedule(after: timeout) { [unowned self, weak link] in
            guard let link else { return }
            link.connectTimer = nil
            guard machine.isConnecting(link) else { return }
            let what = link.proxy.map { "TCP connect to the proxy \($0.address), its tunnel and the TLS handshake" }
                ?? "TCP connect and TLS handshake"
            perform(machine.connectFailed(link, "\(what) not complete after \(timeout)", permanent: false))
        }
    }

    private func cancelConnectTimer(_ link: Link) {
        if let timer = link.connectTimer { shard.loop.cancel(timer) }
        link.connectTimer = nil
    }

    /// Certificate, trust and protocol mismatches do not heal by retrying (`TLSError.Cause`).
    func isPermanent(_ error: any Error) -> Bool {
        guard let tls = error as? TLSError else { return false }
        return tls.cause.isPermanent
    }

    func setInterest(_ link: Link, _ interest: IOEvents) {
        guard let registration = link.registration else { return }
        try? shard.loop.setInterest(registration, interest)
    }

    var hasGivenUp: Bool { machine.givenUpFailure != nil }

    /// Fails what waits in `ring` (by default its lane's) and refuses more: the connection
    /// gave up, or the sender is cancelling. (Its shard's ring, once every connection in use
    /// has given up: `Shard.connectionGaveUp`.)
    func failUnwritten(_ reason: FailureReason, in ring: StagingRing? = nil) {
        shard.loop.assertInLoop()
        let ring = ring ?? lane.staging
        var settlement = Settlement()
        var failed = 0
        ring.refuseAndTakeUnwritten { _, origin, record in
            ledger.noteFailed(sequence: origin.position.sequence)
            shard.sources.noteFailed(origin.source, reason, count: 1)
            settlement.noteFinal(source: origin.source, position: origin.position, count: 1)
            failed += 1
            if let target = shard.builder.target(inRecord: record) {
                report(.failed(target: target, reason: reason, sequence: origin.position.sequence), of: origin.source)
            }
        }
        guard failed > 0 else { return }
        if ring === lane.staging { window.skipNew(to: ring.written) }
        ledger.recordFailed(reason, count: failed)
        apply(settlement)
    }

    func cancel() {
        perform(machine.cancel())
        failUnwritten(.cancelled)
    }

    // MARK: Settling

    /// Applies what the window decided: the one place where notifications become final
    /// for the ledger, the events, the sources and the retained store.
    func apply(_ settlement: Settlement, unreadable: String? = nil) {
        if settlement.accepted > 0 { ledger.accepted.add(settlement.accepted, ordering: .relaxed) }
        for refused in settlement.refused {
            ledger.recordRejected(refused.rejection)
            shard.sources.noteRejected(refused.run.source, refused.rejection)
            if let (target, sequence) = refused.named.map({ (PushTarget.device($0.token), $0.sequence) })
                ?? (try? shard.replayer.name(refused.run, item: refused.item, retained: lane.retained)) {
                shard.reportRejection(target: target, rejection: refused.rejection, sequence: sequence)
                shard.sources.observe(.rejected(target: target, rejection: refused.rejection, sequence: sequence),
                                      of: refused.run.source)
            }
        }
        for (run, reason) in settlement.failures {
            ledger.recordFailed(reason, count: run.count)
            shard.sources.noteFailed(run.source, reason, count: run.count)
            if let unreadable {
                ledger.noteFailed(sequence: run.position.sequence)
                report(.failedUnnamed(count: run.count, reason: reason, firstSequence: run.position.sequence,
                                      detail: unreadable), of: run.source)
            } else {
                reportFailures(of: run, reason: reason)
            }
        }
        if settlement.resent > 0 { ledger.resent.add(settlement.resent, ordering: .relaxed) }
        if settlement.possibleDuplicates > 0 { ledger.possibleDuplicates.add(settlement.possibleDuplicates, ordering: .relaxed) }
        publishOldestSequence()
        shard.sources.noteFinals(settlement.finals)
        if let end = settlement.retainedFinalEnd { lane.retained.release(before: end) }
        // Whoever waits for staging or retained space is woken when it can get on; a
        // producer waiting for staging space while a ring is still full would only go back
        // to sleep. (A source's completion wakes its own waiter: `noteFinals`.)
        if lane.staging.hasRoomForProducers && shard.staging?.hasRoomForProducers != false
            || settlement.retainedFinalEnd != nil {
            shard.notifyProgress()
        }
    }

    func publishOldestSequence() {
        lane.oldestSequenceInWindow.store(window.oldestSequence ?? .max, ordering: .releasing)
    }

    /// One failure event per notification of `run`, named by reading it again; the first
    /// one's sequence holds back the checkpoint.
    private func reportFailures(of run: SourceRun, reason: FailureReason) {
        var named = 0
        do {
            try shard.replayer.read(run, items: run.skip..<run.skip + run.count, retained: lane.retained) { notification in
                if named == 0 { ledger.noteFailed(sequence: notification.position.sequence) }
                report(.failed(target: notification.target, reason: reason, sequence: notification.position.sequence),
                       of: run.source)
                named += 1
                return true
            }
        } catch {
            if named == 0 { ledger.noteFailed(sequence: run.position.sequence) }
            report(.failedUnnamed(count: run.count - named, reason: reason, firstSequence: run.position.sequence,
                                  detail: "\(error)"), of: run.source)
        }
    }

    /// A failure, to the sender's events and to the submission of its source.
    private func report(_ failure: SenderEvent, of source: SourceID) {
        shard.emit(failure)
        shard.sources.observe(failure, of: source)
    }

    // MARK: Stalls

    private lazy var stallAction = TimerAction { [unowned self] in self.stallTimerFired() }

    /// Every `stallTimeout` while a connection is open: when bytes waited for the gateway
    /// at the last check and still do, and its TCP acknowledged none of them since, the
    /// gateway has stopped taking them, and the connection is dropped.
    private func stallTimerFired() {
        stallTimer = nil
        guard let link = machine.activeTransport else { return }  // the next connection to open checks again
        let socket = link.stream.socket
        let waiting = socket.unacknowledgedBytes
        let acknowledged = socket.acknowledgedBytes
        let timeout = shard.configuration.stallTimeout
        if waiting > 0, stallCheck.waiting, let acknowledged, acknowledged == stallCheck.acknowledged {
            connectionLost(link, "the gateway took no bytes for \(timeout) (\(waiting) waiting)", permanent: nil, stalled: true)
            return
        }
        stallCheck = (acknowledged, waiting > 0)
        stallTimer = shard.loop.schedule(at: shard.loop.now + timeout, stallAction)
    }
}
