import Logging
import SalvoIO
import SalvoTelemetry
import Synchronization

/// The threads, listener and connection bookkeeping shared by the mock gateways and the
/// mock feedback service: one listener accepted on the first loop, each accepted socket
/// counted and wrapped in a TLS stream, connections spread round-robin over all loops, and
/// an orderly, idempotent stop.
final class ServerRuntime: Sendable {
    /// One loop thread and what its connections share.
    ///
    /// Thread rule: `registry` and `buffer` on the loop's thread only (or once it was joined); debug builds check.
    final class Loop: @unchecked Sendable {
        let thread: LoopThread
        private let sharedRegistry = ConnectionRegistry()
        private let sharedBuffer: UnsafeMutableRawBufferPointer
        /// The runtime's, shared by every loop.
        let counts: ConnectionCounts
        /// Where its connections log their handshakes.
        let logger: Logger

        init(name: String, bufferSize: Int, counts: ConnectionCounts, logger: Logger) throws(IOError) {
            thread = try LoopThread(name: name)
            sharedBuffer = .allocate(byteCount: bufferSize, alignment: 64)
            self.counts = counts
            self.logger = logger
        }

        var eventLoop: EventLoop { thread.loop }

        /// The connections open on this loop.
        var registry: ConnectionRegistry {
            eventLoop.assertInLoop()
            return sharedRegistry
        }

        /// The read buffer every connection on this loop shares.
        var buffer: UnsafeMutableRawBufferPointer {
            eventLoop.assertInLoop()
            return sharedBuffer
        }

        deinit { sharedBuffer.deallocate() }
    }

    /// Makes the connection for an accepted client's TLS stream, on the owning loop's
    /// thread; nil drops it. The second argument is the connection's ordinal (0-based,
    /// accept order).
    typealias Factory = @Sendable (TLSStream, Int, Loop) -> ServerConnection?

    let loops: [Loop]
    /// The port the listener is bound to.
    let port: Int
    /// Connections accepted and handshakes failed, over all loops.
    let counts = ConnectionCounts()
    private let acceptor: LoopBound<Acceptor?>
    private let stopped = Locked(false)

    /// Listens as `settings` say, with `settings.loops` loop threads (at least one).
    ///
    /// - Parameters:
    ///   - bufferSize: the scratch buffer of each loop, which its connections read into.
    ///   - receiveBuffer: SO_RCVBUF of each accepted socket; nil leaves the kernel's.
    ///   - logger: where listening, stopping and each connection's handshake are logged.
    /// - Throws: `TLSError` for unusable certificates or keys, `ConnectError`/`IOError`
    ///   when the address cannot be bound.
    init(name: String, settings: MockServerSettings, bufferSize: Int, receiveBuffer: Int? = nil,
         logger: Logger = .disabled, factory: @escaping Factory) throws {
        let context = try TLSContext(settings.tls, role: .server)
        let listener = try Socket.listen(host: settings.host, port: settings.port)
        self.port = listener.localAddress?.port ?? settings.port
        let counts = self.counts
        var loops: [Loop] = []
        do {
            for index in 0..<max(1, settings.loops) {
                loops.append(try Loop(name: "\(name)-\(index)", bufferSize: bufferSize, counts: counts, logger: logger))
            }
        } catch {
            loops.forEach { $0.thread.stopAndJoin() }
            throw error
        }
        self.loops = loops
        // On the owning loop's thread: the stream belongs to that loop from the start.
        let start = { @Sendable (socket: Socket, ordinal: Int, loop: Loop) in
            guard let stream = try? TLSStream(context: context, socket: socket) else { return }
            factory(stream, ordinal, loop)?.start()
        }
        var nextOrdinal = 0
        let acceptor = Acceptor(listener: listener) { [loops] socket in
            counts.accepted.wrappingAdd(1, ordering: .relaxed)
            if let receiveBuffer { socket.setBufferSizes(send: nil, receive: receiveBuffer) }
            let ordinal = nextOrdinal
            nextOrdinal += 1
            let loop = loops[ordinal % loops.count]
            // The acceptor runs on the first loop: its own connections start at once, without
            // a hand-off through the task queue and a wake-up.
            if loop === loops[0] {
                start(socket, ordinal, loop)
            } else {
                loop.eventLoop.execute { start(socket, ordinal, loop) }
            }
        }
        self.acceptor = LoopBound(acceptor, on: loops[0].eventLoop)
        do {
            try loops[0].eventLoop.runAndWait { try acceptor.register(on: loops[0].eventLoop) }
        } catch {
            loops.forEach { $0.thread.stopAndJoin() }
            throw error
        }
        logger.info("listening", metadata: ["host": "\(settings.host)", "port": "\(port)", "loops": "\(loops.count)"])
    }

    /// Stops accepting, stops and joins every loop, then closes what connections remain.
    /// Idempotent; safe from any thread but the loops' own.
    func stop() {
        let alreadyStopped = stopped.withLock { value in
            defer { value = true }
            return value
        }
        guard !alreadyStopped else { return }
        // Accepting stops first, so that no hand-off can reach a loop after its last sweep.
        let acceptor = self.acceptor
        try? loops[0].eventLoop.runAndWait {
            acceptor.value?.deregister()
            acceptor.value = nil  // closes the listener
        }
        for loop in loops { loop.thread.stopAndJoin() }
        // The threads are gone; what they owned can be touched from here.
        for loop in loops { loop.registry.closeAll() }
    }

    deinit { stop() }
}

/// What every server on a runtime counts the same way: its connections, and those whose TLS
/// handshake failed. Written by the loops, read by statistics from any thread.
final class ConnectionCounts: Sendable {
    /// TCP connections accepted (handshake failures included).
    let accepted = Atomic<Int>(0)
    /// Connections whose TLS handshake failed.
    let handshakeFailures = Atomic<Int>(0)
}
