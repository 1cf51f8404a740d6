internal import CLinuxShim
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Readiness a handler is interested in, or was told about.
public struct IOEvents: OptionSet, Sendable, Hashable {
    public let rawValue: UInt8
    public init(rawValue: UInt8) { self.rawValue = rawValue }

    public static let read = IOEvents(rawValue: 1 << 0)
    public static let write = IOEvents(rawValue: 1 << 1)
    /// The peer hung up or the descriptor failed; reading tells which.
    public static let hangup = IOEvents(rawValue: 1 << 2)

    var epollMask: UInt32 {
        var mask: UInt32 = 0
        if contains(.read) { mask |= EPOLLIN.rawValue | EPOLLRDHUP.rawValue }
        if contains(.write) { mask |= EPOLLOUT.rawValue }
        return mask
    }

    init(epollMask mask: UInt32) {
        var events: IOEvents = []
        if mask & (EPOLLIN.rawValue | EPOLLPRI.rawValue) != 0 { events.insert(.read) }
        if mask & EPOLLOUT.rawValue != 0 { events.insert(.write) }
        if mask & (EPOLLHUP.rawValue | EPOLLERR.rawValue | EPOLLRDHUP.rawValue) != 0 { events.insert(.hangup) }
        self = events
    }
}

/// Something that owns a descriptor registered with an `EventLoop`.
///
/// Called on the loop's thread only. A handler may register, re-arm or deregister any
/// descriptor (its own included) from inside the call.
public protocol EventHandler: AnyObject {
    func handleEvents(_ events: IOEvents)
}

/// A registered descriptor. The generation makes an id stale once its slot is reused, so
/// an event still queued for a closed descriptor never reaches the slot's next owner.
public struct Registration: Hashable, Sendable {
    let slot: UInt32
    let generation: UInt32

    var epollData: UInt64 { UInt64(generation) << 32 | UInt64(slot) }
}

/// What a timer runs. Make one once and schedule it as often as needed: scheduling a
/// `TimerAction` allocates nothing, where each new closure would.
public final class TimerAction {
    let body: () -> Void
    public init(_ body: @escaping () -> Void) { self.body = body }
}

/// A scheduled timer; cancel it with `EventLoop.cancel(_:)`.
public struct TimerID: Hashable, Sendable {
    let value: UInt64
}

/// One thread's epoll event loop: level-triggered descriptors, timers, and an eventfd for
/// cross-thread wake-ups.
///
/// Thread rule: all but `execute(_:)`, `wakeUp()` and `stop()` on the loop's thread (or while no thread runs it); debug builds check (`assertInLoop()`).
///
/// That rule is what lets connections, rings and counters on a loop go without locks.
public final class EventLoop: @unchecked Sendable {
    private let epollFD: Int32
    private let wakeFD: Int32
    private let events: UnsafeMutablePointer<epoll_event>
    private let eventCapacity: Int

    // Registrations, by slot. Parallel arrays keep dispatch to two loads and a compare.
    private var handlers: [EventHandler?] = []
    private var generations: [UInt32] = []
    private var descriptors: [Int32] = []
    private var interests: [IOEvents] = []
    private var freeSlots: [UInt32] = []

    private var timers = MinHeap<TimerEntry>()
    private var timerActions: [UInt64: TimerAction] = [:]
    private var nextTimerID: UInt64 = 1

    /// Tasks for the loop thread; `isClosed` once `run()` has run its last ones.
    private let tasks = Locked<(queued: [@Sendable () -> Void], isClosed: Bool)>(([], false))
    /// The other half of a double buffer with `tasks`, so draining allocates nothing.
    private var draining: [@Sendable () -> Void] = []
    private let wakePending = Atomic<Bool>(false)
    private let stopRequested = Atomic<Bool>(false)
    /// The thread inside `run()`, 0 when none: what `assertInLoop()` compares with.
    private let runningThread = Atomic<UInt>(0)

    /// Called on the loop thread after every cross-thread wake-up, once the queued tasks ran.
    /// Producers that hand work over through their own queues use it to drain them.
    public var onWakeUp: (() -> Void)?

    /// The time at the start of the current loop iteration; cheaper than reading the clock.
    public private(set) var now: Instant = .now()

    private static let wakeData: UInt64 = .max

    /// Creates the epoll instance and the wake-up eventfd. Ignores SIGPIPE process-wide:
    /// writes to a closed socket then fail with EPIPE instead of killing the process.
    public init(eventCapacity: Int = 512) throws(IOError) {
        ignoreSIGPIPE()
        epollFD = try syscallOrThrow("epoll_create1") { epoll_create1(Int32(EPOLL_CLOEXEC)) }
        do {
            wakeFD = try syscallOrThrow("eventfd") { eventfd(0, Int32(EFD_NONBLOCK | EFD_CLOEXEC)) }
        } catch {
            close(epollFD)
            throw error
        }
        self.eventCapacity = eventCapacity
        events = .allocate(capacity: eventCapacity)
        var event = epoll_event()
        event.events = EPOLLIN.rawValue
        event.data.u64 = Self.wakeData
        do {
            try syscallOrThrow("epoll_ctl(ADD eventfd)") { epoll_ctl(epollFD, EPOLL_CTL_ADD, wakeFD, &event) }
        } catch {
            close(epollFD)
            close(wakeFD)
            events.deallocate()
            throw error
        }
    }

    deinit {
        close(wakeFD)
        close(epollFD)
        events.deallocate()
    }

    // MARK: Descriptors

    /// Watches `descriptor` for `interest`; `handler` is retained until `deregister`.
    public func register(_ descriptor: FileDescriptor, interest: IOEvents, handler: EventHandler) throws(IOError) -> Registration {
        let fd = descriptor.rawValue
        assertInLoop()
        let slot: UInt32
        if let free = freeSlots.popLast() {
            slot = free
        } else {
            slot = UInt32(handlers.count)
            handlers.append(nil)
            generations.append(0)
            descriptors.append(-1)
            interests.append([])
        }
        let index = Int(slot)
        generations[index] &+= 1
        let registration = Registration(slot: slot, generation: generations[index])
        var event = epoll_event()
        event.events = interest.epollMask
        event.data.u64 = registration.epollData
        do {
            try syscallOrThrow("epoll_ctl(ADD)", target: "fd \(fd)") { epoll_ctl(epollFD, EPOLL_CTL_ADD, fd, &event) }
        } catch {
            freeSlots.append(slot)
            throw error
        }
        handlers[index] = handler
        descriptors[index] = fd
        interests[index] = interest
        return registration
    }

    /// Changes what a registration waits for; a no-op when unchanged (so callers can
    /// re-arm EPOLLOUT on every write without paying a syscall).
    public func setInterest(_ registration: Registration, _ interest: IOEvents) throws(IOError) {
        assertInLoop()
        let index = Int(registration.slot)
        guard isCurrent(registration), interests[index] != interest else { return }
        var event = epoll_event()
        event.events = interest.epollMask
        event.data.u64 = registration.epollData
        let fd = descriptors[index]
        try syscallOrThrow("epoll_ctl(MOD)", target: "fd \(fd)") { epoll_ctl(epollFD, EPOLL_CTL_MOD, fd, &event) }
        interests[index] = interest
    }

    /// Stops watching; the handler is released. Call before closing the descriptor.
    public func deregister(_ registration: Registration) {
        assertInLoop()
        let index = Int(registration.slot)
        guard isCurrent(registration) else { return }
        var event = epoll_event()
        _ = epoll_ctl(epollFD, EPOLL_CTL_DEL, descriptors[index], &event)
        handlers[index] = nil
        descriptors[index] = -1
        interests[index] = []
        generations[index] &+= 1
        freeSlots.append(registration.slot)
    }

    private func isCurrent(_ registration: Registration) -> Bool {
        let index = Int(registration.slot)
        return index < generations.count && generations[index] == registration.generation && handlers[index] != nil
    }

    // MARK: Timers

    /// Runs `action` on the loop thread at `deadline` (or at the next iteration if it has passed).
    @discardableResult
    public func schedule(at deadline: Instant, _ action: TimerAction) -> TimerID {
        assertInLoop()
        let id = nextTimerID
        nextTimerID += 1
        timerActions[id] = action
        timers.insert(TimerEntry(deadline: deadline, id: id))
        return TimerID(value: id)
    }

    /// Runs `body` on the loop thread at `deadline`. Allocates the closure's action; hot
    /// paths schedule a `TimerAction` they keep.
    @discardableResult
    public func schedule(at deadline: Instant, _ body: @escaping () -> Void) -> TimerID {
        schedule(at: deadline, TimerAction(body))
    }

    /// Runs `body` on the loop thread after `delay`.
    @discardableResult
    public func schedule(after delay: Duration, _ body: @escaping () -> Void) -> TimerID {
        schedule(at: Instant.now() + delay, body)
    }

    /// Cancels a timer; harmless when it already fired.
    public func cancel(_ timer: TimerID) {
        assertInLoop()
        timerActions[timer.value] = nil
    }

    // MARK: Cross-thread

    /// Runs `task` on the loop thread soon. Safe from any thread. Once `run()` has returned,
    /// nothing runs it: it is dropped at once, so that what it captures is released (kept,
    /// a task capturing a shard kept the shard and every connection of it alive).
    public func execute(_ task: @escaping @Sendable () -> Void) {
        let queued = tasks.withLock { tasks in
            guard !tasks.isClosed else { return false }
            tasks.queued.append(task)
            return true
        }
        if queued { wakeUp() }
    }

    /// Wakes the loop so that it runs queued tasks and `onWakeUp`. Safe from any thread;
    /// wake-ups coalesce, so a producer may call it after every hand-off.
    @inline(__always)
    public func wakeUp() {
        // The plain load keeps a busy producer off the cache line's exclusive state: while
        // a wake-up is pending, further calls cost one shared read.
        guard !wakePending.load(ordering: .relaxed),
              !wakePending.exchange(true, ordering: .acquiringAndReleasing) else { return }
        var one: UInt64 = 1
        _ = write(wakeFD, &one, 8)
    }

    /// Makes `run()` return after the current iteration. Safe from any thread.
    public func stop() {
        stopRequested.store(true, ordering: .releasing)
        wakePending.store(false, ordering: .releasing)
        wakeUp()
    }

    // MARK: Running

    /// Runs the loop on the calling thread until `stop()`.
    public func run() throws(IOError) {
        runningThread.store(UInt(pthread_self()), ordering: .relaxed)
        defer { runningThread.store(0, ordering: .relaxed) }
        while !stopRequested.load(ordering: .acquiring) {
            try runOnce(timeoutMilliseconds: nextTimeoutMilliseconds())
        }
        runQueuedTasks(closing: true)
    }

    /// Stops a debug build when called off the loop's thread while `run()` runs: the check
    /// behind the rule that loop-owned state is touched on the loop's thread only. Before
    /// `run()` starts and after it returns, any thread may set up and tear down. Compiles
    /// to nothing in release builds, like SwiftNIO's `assertInEventLoop`.
    @inlinable
    public func assertInLoop(file: StaticString = #fileID, line: UInt = #line) {
        assert(isInLoopOrIdle, "called off the event loop's thread while the loop runs", file: file, line: line)
    }

    /// Whether the calling thread may touch the loop's state: it runs the loop, or no
    /// thread does.
    @usableFromInline
    var isInLoopOrIdle: Bool {
        let running = runningThread.load(ordering: .relaxed)
        return running == 0 || pthread_equal(pthread_t(running), pthread_self()) != 0
    }

    /// One iteration: wait for events (at most `timeoutMilliseconds`, -1 for no limit),
    /// dispatch them, then run due timers. Exposed for tests that drive a loop by hand.
    public func runOnce(timeoutMilliseconds: Int32) throws(IOError) {
        assertInLoop()
        let ready: Int32
        switch try syscall("epoll_wait", { epoll_wait(epollFD, events, Int32(eventCapacity), timeoutMilliseconds) }) {
        case .processed(let n): ready = n
        case .wouldBlock: ready = 0
        }
        now = .now()
        for i in 0..<Int(ready) {
            let data = events[i].data.u64
            let mask = events[i].events
            if data == Self.wakeData {
                drainWakeUps()
                continue
            }
            let slot = Int(UInt32(truncatingIfNeeded: data))
            let generation = UInt32(truncatingIfNeeded: data >> 32)
            guard slot < generations.count, generations[slot] == generation, let handler = handlers[slot] else {
                continue  // stale: the descriptor was deregistered earlier in this batch
            }
            handler.handleEvents(IOEvents(epollMask: mask))
        }
        runDueTimers()
    }

    private func drainWakeUps() {
        var value: UInt64 = 0
        _ = read(wakeFD, &value, 8)
        wakePending.store(false, ordering: .releasing)
        runQueuedTasks()
        onWakeUp?()
    }

    /// Runs what was queued; with `closing`, the last: later tasks are dropped (`execute`).
    private func runQueuedTasks(closing: Bool = false) {
        tasks.withLock { tasks in
            swap(&tasks.queued, &draining)
            if closing { tasks.isClosed = true }
        }
        for task in draining { task() }
        draining.removeAll(keepingCapacity: true)
    }

    private func nextTimeoutMilliseconds() -> Int32 {
        while let top = timers.first, timerActions[top.id] == nil { _ = timers.popFirst() }
        guard let top = timers.first else { return -1 }
        let current = Instant.now()
        if top.deadline <= current { return 0 }
        let nanos = top.deadline.nanoseconds - current.nanoseconds
        return Int32(clamping: (nanos + 999_999) / 1_000_000)
    }

    private func runDueTimers() {
        while let top = timers.first, top.deadline <= now {
            _ = timers.popFirst()
            if let action = timerActions.removeValue(forKey: top.id) { action.body() }
        }
    }
}

/// A timer in the loop's `MinHeap`, earliest deadline first (then the earlier made).
/// Cancelled timers stay in the heap until they surface.
struct TimerEntry: Comparable {
    var deadline: Instant
    var id: UInt64

    static func < (a: TimerEntry, b: TimerEntry) -> Bool { (a.deadline, a.id) < (b.deadline, b.id) }
}
