import Dispatch
import Logging
import SalvoIO
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The connections one loop owns, so that stopping can close them all.
final class ConnectionRegistry {
    private var members: [ObjectIdentifier: ServerConnection] = [:]

    func insert(_ connection: ServerConnection) { members[ObjectIdentifier(connection)] = connection }
    func remove(_ connection: ServerConnection) { members[ObjectIdentifier(connection)] = nil }

    /// Closes every connection at once (no lingering): the server is going away.
    func closeAll() {
        for connection in Array(members.values) { connection.close() }
    }
}

/// One accepted TLS connection on a loop: drives the handshake, then hands events to the
/// subclass; knows how to answer-and-close and how to close silently.
///
/// Closing is "send what is due, then FIN, then linger": the descriptor stays open,
/// discarding whatever the client still sends, until the client closes, has sent nothing
/// for `lingerQuietTime`, or `lingerLimit` has passed. Closing at once with unread bytes in
/// the receive queue would make the kernel send a RST, which can destroy the error response
/// before the client reads it; so would closing while the client is still writing. A
/// client may write for seconds before it reads: PyAPNs resends thousands of notifications
/// from the thread that reads error responses, and reads the next one only after that.
class ServerConnection: EventHandler {
    enum Phase {
        case handshaking
        case established
        /// Writing `outgoing`; then close_notify (when asked), FIN and linger.
        case flushing
        case lingering
        case closed
    }

    /// A lingering connection closes once its client has been quiet this long...
    static let lingerQuietTime: Duration = .seconds(2)
    /// ...or once it has lingered this long, however much its client still writes.
    static let lingerLimit: Duration = .seconds(60)

    let loop: EventLoop
    let stream: TLSStream
    let registry: ConnectionRegistry
    /// Scratch space owned by the loop; connections on one loop take turns with it.
    let buffer: UnsafeMutableRawBufferPointer
    private let counts: ConnectionCounts
    private let logger: Logger
    private(set) var phase: Phase = .handshaking
    private var registration: Registration?
    private var outgoing: [UInt8] = []
    private var outgoingOffset = 0
    private var sendCloseNotify = false
    private var lingerTimer: TimerID?
    private var lingerEnd = Instant(nanoseconds: 0)
    private var lastHeard = Instant(nanoseconds: 0)

    init(stream: TLSStream, loop: ServerRuntime.Loop) {
        self.loop = loop.eventLoop
        self.stream = stream
        registry = loop.registry
        buffer = loop.buffer
        counts = loop.counts
        logger = loop.logger
    }

    /// Registers with the loop and starts the handshake. On the loop thread.
    final func start() {
        loop.assertInLoop()
        registry.insert(self)
        do {
            registration = try loop.register(stream.socket.fd, interest: .read, handler: self)
        } catch {
            close()
            return
        }
        advanceHandshake()
    }

    final func handleEvents(_ events: IOEvents) {
        loop.assertInLoop()
        switch phase {
        case .handshaking: advanceHandshake()
        case .established: connectionEvents(events)
        case .flushing: flush()
        case .lingering: discardUntilClosed()
        case .closed: break
        }
    }

    // MARK: Subclass hooks

    /// The handshake finished; the connection is `.established`.
    func didEstablish() {}
    /// Readiness while `.established`.
    func connectionEvents(_ events: IOEvents) {}

    // MARK: Actions

    /// Reads what the client sent into the loop's buffer; nil when the stream failed.
    final func readClient() -> TLSReadResult? {
        try? stream.read(into: buffer)
    }

    /// Watches for `interest` (empty: nothing, e.g. while stalled).
    final func watch(_ interest: IOEvents) {
        guard let registration else { return }
        try? loop.setInterest(registration, interest)
    }

    /// Writes `bytes`, then (with `closeNotify`) TLS close_notify, then closes.
    final func respondAndClose(_ bytes: [UInt8], closeNotify: Bool = true) {
        guard phase == .handshaking || phase == .established else { return }
        outgoing = bytes
        outgoingOffset = 0
        sendCloseNotify = closeNotify
        phase = .flushing
        flush()
    }

    /// Closes with a bare FIN: no response, no close_notify.
    final func closeSilently() { respondAndClose([], closeNotify: false) }

    /// Closes the descriptor now. On the loop thread, or after it was joined.
    final func close() {
        loop.assertInLoop()
        guard phase != .closed else { return }
        phase = .closed
        if let registration { loop.deregister(registration) }
        registration = nil
        if let lingerTimer { loop.cancel(lingerTimer) }
        lingerTimer = nil
        registry.remove(self)
        // The socket closes when the stream is released, which is now (the loop and the
        // registry have let go).
    }

    // MARK: Internals

    private func advanceHandshake() {
        do {
            switch try stream.handshake() {
            case .complete:
                phase = .established
                logger.debug("client connected", metadata: ["peer": "\(stream.socket.peer?.description ?? "unknown")"])
                watch(.read)
                didEstablish()
            case .wantRead: watch(.read)
            case .wantWrite: watch(.write)
            }
        } catch {
            counts.handshakeFailures.wrappingAdd(1, ordering: .relaxed)
            logger.info("TLS handshake failed", metadata: [
                "peer": "\(stream.socket.peer?.description ?? "unknown")", "cause": "\(error)",
            ])
            close()
        }
    }

    private func flush() {
        while outgoingOffset < outgoing.count {
            let result = outgoing.withUnsafeBytes { bytes in
                Result { () throws(TLSError) in try stream.write(UnsafeRawBufferPointer(rebasing: bytes[outgoingOffset...])) }
            }
            switch result {
            case .success(.wrote(let n)): outgoingOffset += n
            case .success(.wouldBlock(let progress)):
                watch(progress == .wantWrite ? .write : .read)
                return
            case .failure:
                close()
                return
            }
        }
        if sendCloseNotify { stream.shutdown() }
        stream.socket.shutdownWrite()
        phase = .lingering
        watch(.read)
        lastHeard = loop.now
        lingerEnd = loop.now + Self.lingerLimit
        checkLinger()
        discardUntilClosed()
    }

    private func discardUntilClosed() {
        while true {
            switch try? stream.socket.read(into: buffer) {
            case .processed(let n) where n > 0: lastHeard = loop.now
            case .wouldBlock: return
            default:
                close()
                return
            }
        }
    }

    /// Closes a lingering connection whose client has gone quiet (or that reached the limit),
    /// else looks again when it would have.
    private func checkLinger() {
        let due = min(lastHeard + Self.lingerQuietTime, lingerEnd)
        if loop.now >= due {
            close()
        } else {
            lingerTimer = loop.schedule(at: due) { [weak self] in self?.checkLinger() }
        }
    }
}

/// Accepts connections on a listening socket registered with one loop and hands each to
/// `onAccept` (which picks the loop that will own it).
final class Acceptor: EventHandler {
    let listener: Socket
    private let onAccept: (Socket) -> Void
    private var registration: Registration?
    private weak var loop: EventLoop?

    init(listener: Socket, onAccept: @escaping (Socket) -> Void) {
        self.listener = listener
        self.onAccept = onAccept
    }

    /// Starts accepting. On `loop`'s thread.
    func register(on loop: EventLoop) throws(IOError) {
        self.loop = loop
        registration = try loop.register(listener.fd, interest: .read, handler: self)
    }

    /// Stops accepting. On the loop's thread.
    func deregister() {
        if let registration, let loop { loop.deregister(registration) }
        registration = nil
    }

    func handleEvents(_ events: IOEvents) {
        // Accept errors (EMFILE, ECONNABORTED) are the client's loss, not the server's:
        // stop for this round and let the next readiness retry.
        while let socket = (try? listener.accept()) ?? nil {
            onAccept(socket)
        }
    }
}

extension EventLoop {
    /// Runs `body` on the loop's thread and waits for it: setup and teardown from another
    /// thread, where the loop's objects may not be touched directly.
    func runAndWait<R: Sendable>(_ body: @escaping () throws -> R) throws -> R {
        let work = LoopBound(body, on: self)
        let done = DispatchSemaphore(value: 0)
        let outcome = Locked<Result<R, any Error>?>(nil)
        execute {
            let result = Result { try work.value() }
            outcome.withLock { $0 = result }
            done.signal()
        }
        done.wait()
        return try outcome.withLock { $0 }!.get()
    }
}

/// A value that lives on one event loop, made on (or carried from) another thread: the
/// queued task or the semaphore that hands it over orders the accesses.
///
/// Thread rule: `value` on `loop`'s thread only (or while no thread runs it); debug builds check.
final class LoopBound<Value>: @unchecked Sendable {
    private let loop: EventLoop
    private var storage: Value

    init(_ value: Value, on loop: EventLoop) {
        self.loop = loop
        storage = value
    }

    var value: Value {
        get {
            loop.assertInLoop()
            return storage
        }
        set {
            loop.assertInLoop()
            storage = newValue
        }
    }
}
