import Dispatch
import Glibc
import Synchronization
import Testing
@testable import SalvoIO

@Suite(.timeLimit(.minutes(2))) struct EventLoopTests {
    @Test func timersFireInDeadlineOrderAndCancelledOnesDoNot() throws {
        let loop = try EventLoop()
        var fired: [Int] = []
        let start = Instant.now()
        loop.schedule(at: start + .milliseconds(3)) { fired.append(3) }
        loop.schedule(at: start + .milliseconds(1)) { fired.append(1) }
        let cancelled = loop.schedule(at: start + .milliseconds(2)) { fired.append(2) }
        loop.schedule(at: start + .milliseconds(4)) { fired.append(4); loop.stop() }
        loop.cancel(cancelled)
        try loop.run()
        #expect(fired == [1, 3, 4])
    }

    @Test func executeFromAnotherThreadRunsOnTheLoopAndWakeUpsCoalesce() throws {
        let thread = try LoopThread(name: "test-loop")
        defer { thread.stopAndJoin() }
        let counter = Atomic<Int>(0)
        let done = Locked<Bool>(false)
        for _ in 0..<1000 {
            thread.loop.execute { counter.add(1, ordering: .relaxed) }
        }
        thread.loop.execute { done.withLock { $0 = true } }
        let deadline = Instant.now() + .seconds(10)
        while !done.withLock({ $0 }) && Instant.now() < deadline { sched_yield() }
        #expect(counter.load(ordering: .relaxed) == 1000)
    }

    /// A loop whose `run()` has returned runs nothing more: a task queued then is dropped at
    /// once, and what it captures is released (kept, one that captured a shard kept the
    /// shard and all its connections alive after the sender finished).
    @Test func aTaskQueuedAfterTheLoopEndedIsDroppedAndWhatItCapturesReleased() throws {
        final class Captured: Sendable {}
        let thread = try LoopThread(name: "test-loop")
        thread.stopAndJoin()
        let ran = Atomic<Bool>(false)
        weak var released: Captured?
        do {
            let captured = Captured()
            released = captured
            thread.loop.execute { withExtendedLifetime(captured) { ran.store(true, ordering: .relaxed) } }
        }
        let didRun = ran.load(ordering: .relaxed)
        #expect(released == nil, "dropped at once, not kept for a loop that will not run it")
        #expect(!didRun)
    }

    @Test func readinessIsDispatchedToTheRegisteredHandler() throws {
        let loop = try EventLoop()
        let listener = try Socket.listen(host: "127.0.0.1", port: 0)
        let port = try #require(listener.localAddress).port
        final class Acceptor: EventHandler {
            let listener: Socket
            let loop: EventLoop
            var accepted: [Socket] = []
            init(listener: Socket, loop: EventLoop) { self.listener = listener; self.loop = loop }
            func handleEvents(_ events: IOEvents) {
                while let socket = try? listener.accept() { accepted.append(socket) }
                loop.stop()
            }
        }
        let acceptor = Acceptor(listener: listener, loop: loop)
        let registration = try loop.register(listener.fd, interest: .read, handler: acceptor)
        let client = try Socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        let bound = loop.schedule(after: .seconds(10)) { loop.stop() }  // bound the test
        try loop.run()
        // The loop holds the handler and the timer, both of which hold the loop.
        loop.deregister(registration)
        loop.cancel(bound)
        #expect(acceptor.accepted.count == 1)
        #expect(acceptor.accepted.first?.peer?.port == client.localAddress?.port)
    }

    @Test func timerHeapPopsInOrder() {
        var heap = MinHeap<TimerEntry>()
        var generator = SplitMix64(seed: 0x7173)
        let deadlines = (0..<500).map { _ in UInt64.random(in: 0..<1_000_000, using: &generator) }
        for (i, d) in deadlines.enumerated() { heap.insert(TimerEntry(deadline: Instant(nanoseconds: d), id: UInt64(i))) }
        var popped: [UInt64] = []
        while let entry = heap.popFirst() { popped.append(entry.deadline.nanoseconds) }
        #expect(popped == deadlines.sorted())
    }
}

/// The rule that a loop's state belongs to the thread running it, as debug builds check it.
///
/// The exit test's child is reaped only once the test's task runs again after spawning it,
/// on the cooperative pool (as many threads as cores). In the full suite, synchronous tests
/// can hold that pool for tens of seconds, and the child stays a zombie meanwhile: well over
/// a minute of wall time for under a second of work. Hence the limit.
@Suite(.timeLimit(.minutes(3))) struct LoopOwnershipTests {
    @Test func onlyTheThreadRunningALoopMayTouchItWhileItRuns() throws {
        #expect(try EventLoop().isInLoopOrIdle, "a loop that does not run yet may be set up from any thread")
        let thread = try LoopThread(name: "owner-test")
        let onLoop = Locked<Bool?>(nil)
        let ran = DispatchSemaphore(value: 0)
        thread.loop.execute {
            onLoop.withLock { $0 = thread.loop.isInLoopOrIdle }
            ran.signal()
        }
        #expect(ran.wait(timeout: .now() + 10) == .success)
        #expect(onLoop.withLock { $0 } == true)
        #expect(!thread.loop.isInLoopOrIdle)
        thread.stopAndJoin()
        #expect(thread.loop.isInLoopOrIdle, "a joined loop may be torn down from any thread")
    }

    @Test(.enabled(if: _isDebugAssertConfiguration(), "assertInLoop compiles to nothing in release builds"))
    func schedulingOnARunningLoopFromAnotherThreadStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            let thread = try! LoopThread(name: "owner-test")
            let ran = DispatchSemaphore(value: 0)
            thread.loop.execute { ran.signal() }
            _ = ran.wait(timeout: .now() + 10)
            thread.loop.schedule(after: .seconds(1)) {}
        }
    }
}

@Suite(.timeLimit(.minutes(2))) struct SocketTests {
    @Test func refusedConnectionNamesTheErrnoAndTheAddress() throws {
        // Bind then close to find a port nobody listens on.
        let port = try #require(try Socket.listen(host: "127.0.0.1", port: 0).localAddress).port
        #expect {
            _ = try Socket.connect(host: "127.0.0.1", port: port, timeout: .seconds(5))
        } throws: { error in
            "\(error)".contains("ECONNREFUSED") && "\(error)".contains("127.0.0.1:\(port)")
        }
    }

    @Test func resolvesIPv4IPv6AndNames() throws {
        #expect(try SocketAddress.resolve(host: "127.0.0.1", port: 80).first?.description == "127.0.0.1:80")
        #expect(try SocketAddress.resolve(host: "[::1]", port: 443).first?.description == "[::1]:443")
        #expect(try SocketAddress.resolve(host: "localhost", port: 1).isEmpty == false)
        #expect(throws: ResolutionError.self) { try SocketAddress.resolve(host: "no-such-host.invalid", port: 1) }
    }

    @Test func aSocketIsReadableOnceBytesOrTheEndArriveAndPeekingTakesNothing() throws {
        let listener = try Socket.listen(host: "127.0.0.1", port: 0)
        let client = try Socket.connect(host: "127.0.0.1", port: try #require(listener.localAddress).port, timeout: .seconds(5))
        let server = try #require(try Self.accept(listener))
        #expect(!client.isReadable)
        let bytes: [UInt8] = [8, 8, 0, 0, 0, 1]
        _ = try bytes.withUnsafeBytes { try server.write($0) }
        #expect(Self.eventually { client.isReadable })
        #expect(client.isReadable, "peeking again still finds them")
        var buffer = [UInt8](repeating: 0, count: 16)
        let read = try buffer.withUnsafeMutableBytes { try client.read(into: $0) }
        let count: Int? = if case .processed(let count) = read { count } else { nil }
        #expect(count == 6 && Array(buffer.prefix(6)) == bytes)
        #expect(!client.isReadable)
        server.shutdownWrite()
        #expect(Self.eventually { client.isReadable }, "the end of the stream is something to read")
    }

    /// Looking must not consume what it sees: a reset's error is reported once, by whichever
    /// call meets it first, and the read after the look has to be the one that says ECONNRESET.
    @Test func lookingAtAResetSocketLeavesTheResetToTheRead() throws {
        let listener = try Socket.listen(host: "127.0.0.1", port: 0)
        let client = try Socket.connect(host: "127.0.0.1", port: try #require(listener.localAddress).port, timeout: .seconds(5))
        do {
            let server = try #require(try Self.accept(listener))
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            setsockopt(server.fd.rawValue, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
        }  // closed with a zero linger: a reset
        #expect(Self.eventually { client.isReadable })
        #expect(client.isReadable)
        var buffer = [UInt8](repeating: 0, count: 16)
        #expect {
            _ = try buffer.withUnsafeMutableBytes { try client.read(into: $0) }
        } throws: { error in
            "\(error)".contains("ECONNRESET")
        }
    }

    static func accept(_ listener: Socket) throws -> Socket? {
        let deadline = Instant.now() + .seconds(5)
        while Instant.now() < deadline {
            if let socket = try listener.accept() { return socket }
            usleep(1_000)
        }
        return nil
    }

    /// Polls `condition` for up to 5 s; the pause only keeps the CPU free.
    static func eventually(_ condition: () -> Bool) -> Bool {
        let deadline = Instant.now() + .seconds(5)
        while !condition() {
            guard Instant.now() < deadline else { return false }
            usleep(1_000)
        }
        return true
    }

    @Test func ipv6LoopbackListensAndConnects() throws {
        let listener = try Socket.listen(host: "::1", port: 0)
        let port = try #require(listener.localAddress).port
        let client = try Socket.connect(host: "::1", port: port, timeout: .seconds(5))
        #expect(client.peer?.description == "[::1]:\(port)")
    }
}
