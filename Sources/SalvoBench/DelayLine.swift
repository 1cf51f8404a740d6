import DequeModule
import Foundation
import SalvoIO

/// A long path on one machine, for tests and benchmarks on a kernel without netem: a
/// network namespace reached through a pair of TUN devices, joined by an event loop that
/// holds every packet `delay` before passing it on, each way. TCP on both sides sees a real
/// round trip of twice the delay, so congestion windows, socket buffers and the gateway's
/// answers behave as they do over a network.
///
/// The near end is `nearAddress` on this side; `farAddress` is inside the namespace, where
/// `command(_:)` runs a gateway. One delay line at a time per machine (the addresses are
/// fixed). Needs root (namespaces, TUN devices) and `ip` from iproute2.
package final class DelayLine: Sendable {
    package static let nearAddress = "10.78.0.1"
    package static let farAddress = "10.78.0.2"

    package let namespace: String
    package let delay: Duration
    private let thread: LoopThread
    private let near: TunDevice
    private let far: TunDevice
    private let stopped = Locked(false)

    /// Why a delay line cannot be made here, or nil when it can.
    package static var unavailableReason: String? {
        if getuid() != 0 { return "a delay line needs root (network namespaces and TUN devices)" }
        if access("/dev/net/tun", R_OK | W_OK) != 0 { return "/dev/net/tun is missing or not accessible" }
        if findExecutable("ip") == nil { return "the ip command (Debian's iproute2) is not installed" }
        return nil
    }

    /// Makes the namespace, the devices and their addresses, and starts forwarding.
    ///
    /// - Parameter mtu: the devices' MTU. 1500 by default, as on the paths to a real
    ///   gateway: with much larger segments a receiver's window autotuning starts from a
    ///   single segment and can stay there, which no real path shows.
    package init(delay: Duration, mtu: Int = 1500) throws {
        if let reason = Self.unavailableReason { throw DelayLineError(reason) }
        let tag = "\(getpid() % 100_000)"
        namespace = "salvo-wan-\(tag)"
        self.delay = delay
        try Self.ip(["netns", "add", namespace])
        do {
            near = try TunDevice(name: "swn\(tag)")
            far = try TunDevice(name: "swf\(tag)")
            try Self.ip(["link", "set", far.name, "netns", namespace])
            try Self.ip(["addr", "add", Self.nearAddress, "peer", Self.farAddress, "dev", near.name])
            try Self.ip(["link", "set", near.name, "mtu", String(mtu), "up"])
            try Self.ip(["netns", "exec", namespace, "ip", "addr", "add", Self.farAddress, "peer", Self.nearAddress, "dev", far.name])
            try Self.ip(["netns", "exec", namespace, "ip", "link", "set", far.name, "mtu", String(mtu), "up"])
            try Self.ip(["netns", "exec", namespace, "ip", "link", "set", "lo", "up"])
            thread = try LoopThread(name: "delay-line")
        } catch {
            try? Self.ip(["netns", "delete", namespace])
            throw error
        }
        let loop = thread.loop
        let delayNanoseconds = delay.nanosecondsClamped
        let started = StartOutcome()
        loop.execute { [near, far] in
            // The loop keeps the forwarders (registered handlers) for as long as it lives.
            let outward = Forwarder(from: near, to: far, delay: delayNanoseconds, loop: loop)
            let inward = Forwarder(from: far, to: near, delay: delayNanoseconds, loop: loop)
            do {
                _ = try loop.register(near.fd, interest: .read, handler: outward)
                _ = try loop.register(far.fd, interest: .read, handler: inward)
                started.finish(nil)
            } catch {
                started.finish(error)
            }
        }
        if let error = started.wait() {
            stop()
            throw error
        }
    }

    /// The command line that runs `arguments` inside the far end's namespace.
    package func command(_ arguments: [String]) -> [String] {
        ["ip", "netns", "exec", namespace] + arguments
    }

    /// Stops forwarding and removes the namespace (the devices go with their descriptors).
    package func stop() {
        guard !stopped.withLock({ stopped in defer { stopped = true }; return stopped }) else { return }
        thread.stopAndJoin()
        try? Self.ip(["netns", "delete", namespace])
    }

    deinit { stop() }

    private static func ip(_ arguments: [String]) throws {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: findExecutable("ip") ?? "/usr/sbin/ip")
        process.arguments = arguments
        let errors = Pipe()
        process.standardError = errors
        try process.run()
        let message = errors.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else {
            throw DelayLineError("ip \(arguments.joined(separator: " ")) failed: \(String(decoding: message, as: UTF8.self))")
        }
    }

    private static func findExecutable(_ name: String) -> String? {
        ["/usr/sbin", "/sbin", "/usr/bin", "/bin"].map { "\($0)/\(name)" }.first { access($0, X_OK) == 0 }
    }

    /// Reads packets from one device and writes each to the other once it is due.
    private final class Forwarder: EventHandler {
        private let source: TunDevice
        private let destination: TunDevice
        private let delay: UInt64
        private unowned let loop: EventLoop
        /// Packets in flight, oldest first: a constant delay keeps them in order.
        private var queue: Deque<(due: UInt64, packet: [UInt8])> = []
        private var buffer = [UInt8](repeating: 0, count: 65536)
        private lazy var deliver = TimerAction { [unowned self] in self.deliverDue() }

        init(from source: TunDevice, to destination: TunDevice, delay: UInt64, loop: EventLoop) {
            self.source = source
            self.destination = destination
            self.delay = delay
            self.loop = loop
        }

        func handleEvents(_ events: IOEvents) {
            let due = loop.now.nanoseconds + delay
            while let count = buffer.withUnsafeMutableBytes({ try? source.read(into: $0) }) ?? nil {
                if queue.isEmpty { loop.schedule(at: Instant(nanoseconds: due), deliver) }
                queue.append((due, Array(buffer[0..<count])))
            }
        }

        private func deliverDue() {
            let now = Instant.now().nanoseconds
            while let first = queue.first, first.due <= now {
                first.packet.withUnsafeBytes { destination.write($0) }
                queue.removeFirst()
            }
            if let next = queue.first { loop.schedule(at: Instant(nanoseconds: next.due), deliver) }
        }
    }
}

/// Why a delay line could not be made.
package struct DelayLineError: Error, CustomStringConvertible {
    package var description: String
    init(_ description: String) { self.description = description }
}

/// How the forwarders' start went, handed from the loop thread to the thread that waits for it.
private final class StartOutcome: Sendable {
    private let done = DispatchSemaphore(value: 0)
    private let error = Locked<(any Error)?>(nil)

    func finish(_ error: (any Error)?) {
        self.error.withLock { $0 = error }
        done.signal()
    }

    func wait() -> (any Error)? {
        done.wait()
        return error.withLock { $0 }
    }
}
