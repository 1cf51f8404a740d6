import SalvoIO

/// The threads, listener and connection bookkeeping shared by the mock gateway and the mock
/// feedback service: one listener accepted on the first loop, connections spread round-robin
/// over all loops, and an orderly, idempotent stop.
final class ServerRuntime: Sendable {
    /// One loop thread and what its connections share.
    ///
    /// Thread rule: `registry` and `buffer` on the loop's thread only (or once it was joined); debug builds check.
    final class Loop: @unchecked Sendable {
        let thread: LoopThread
        private let sharedRegistry = ConnectionRegistry()
        private let sharedBuffer: UnsafeMutableRawBufferPointer

        init(name: String, bufferSize: Int) throws(IOError) {
            thread = try LoopThread(name: name)
            sharedBuffer = .allocate(byteCount: bufferSize, alignment: 64)
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

    /// Makes the connection for an accepted socket, on the owning loop's thread; nil drops
    /// the socket. The second argument is the connection's ordinal (0-based, accept order).
    typealias Factory = @Sendable (Socket, Int, Loop) -> ServerConnection?

    let loops: [Loop]
    /// The port the listener is bound to.
    let port: Int
    private let acceptor: LoopBound<Acceptor?>
    private let stopped = Locked(false)

    init(name: String, host: String, port: Int, loopCount: Int, bufferSize: Int, factory: @escaping Factory) throws {
        let listener = try Socket.listen(host: host, port: port)
        self.port = listener.localAddress?.port ?? port
        var loops: [Loop] = []
        do {
            for index in 0..<max(1, loopCount) {
                loops.append(try Loop(name: "\(name)-\(index)", bufferSize: bufferSize))
            }
        } catch {
            loops.forEach { $0.thread.stopAndJoin() }
            throw error
        }
        self.loops = loops
        var nextOrdinal = 0
        let acceptor = Acceptor(listener: listener) { [loops] socket in
            let ordinal = nextOrdinal
            nextOrdinal += 1
            let loop = loops[ordinal % loops.count]
            // The acceptor runs on the first loop: its own connections start at once, without
            // a hand-off through the task queue and a wake-up.
            if loop === loops[0] {
                factory(socket, ordinal, loop)?.start()
            } else {
                loop.eventLoop.execute { factory(socket, ordinal, loop)?.start() }
            }
        }
        self.acceptor = LoopBound(acceptor, on: loops[0].eventLoop)
        do {
            try loops[0].eventLoop.runAndWait { try acceptor.register(on: loops[0].eventLoop) }
        } catch {
            loops.forEach { $0.thread.stopAndJoin() }
            throw error
        }
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
