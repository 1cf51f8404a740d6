internal import CLinuxShim
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// A plain OS thread running one `EventLoop` until it is stopped.
///
/// Salvo's loops are not Swift concurrency executors: each is a pinned pthread that owns
/// its connections outright, which is what keeps the hot path free of locks and hops.
public final class LoopThread: Sendable {
    /// The loop this thread runs.
    public let loop: EventLoop
    private let thread: pthread_t
    /// Set by the first `stopAndJoin`, from whichever thread calls it.
    private let joined = Atomic<Bool>(false)

    private final class Start {
        let loop: EventLoop
        let name: String
        let cpu: Int?
        init(loop: EventLoop, name: String, cpu: Int?) {
            self.loop = loop
            self.name = name
            self.cpu = cpu
        }
    }

    /// Starts a thread named `name` (at most 15 characters are kept by Linux), pinned to
    /// `cpu` when given, running a new event loop.
    public init(name: String, cpu: Int? = nil, eventCapacity: Int = 512) throws(IOError) {
        let loop = try EventLoop(eventCapacity: eventCapacity)
        self.loop = loop
        let start = Unmanaged.passRetained(Start(loop: loop, name: name, cpu: cpu)).toOpaque()
        var thread = pthread_t()
        let rc = pthread_create(&thread, nil, { raw in
            let start = Unmanaged<Start>.fromOpaque(raw!).takeRetainedValue()
            salvo_set_current_thread_name(start.name)
            if let cpu = start.cpu { _ = salvo_pin_current_thread(Int32(cpu)) }
            do {
                try start.loop.run()
            } catch {
                // epoll_wait failing is a programming error (EBADF/EINVAL); say so loudly.
                fatalError("event loop \(start.name) failed: \(error)")
            }
            return nil
        }, start)
        guard rc == 0 else {
            Unmanaged<AnyObject>.fromOpaque(start).release()
            throw IOError("pthread_create", errno: Errno(rawValue: rc), target: name)
        }
        self.thread = thread
    }

    /// Stops the loop and waits for the thread to end. Idempotent.
    public func stopAndJoin() {
        guard !joined.exchange(true, ordering: .acquiringAndReleasing) else { return }
        loop.stop()
        pthread_join(thread, nil)
    }

    deinit { stopAndJoin() }
}

/// The number of CPUs this process may run on.
public var availableCores: Int {
    max(1, Int(sysconf(Int32(_SC_NPROCESSORS_ONLN))))
}
