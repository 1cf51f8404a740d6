import Foundation
import SalvoIO
#if canImport(Glibc)
import Glibc
#endif

/// A stand-in for an enterprise BlackBerry Proxy's plain-HTTP port: it accepts plain TCP on
/// loopback and relays each connection's bytes, both ways, over a TLS connection of its own
/// to the NOC, as the proxy relays app servers' requests. One thread per connection, poll(2)
/// with a short timeout so `stop()` ends them all.
final class PlainProxyRelay: @unchecked Sendable {
    let port: Int
    private let listener: Socket
    private let context: TLSContext
    private let nocPort: Int
    private let stopped = Locked(false)
    /// Connections relayed (each with its own TLS connection to the NOC).
    let relayed = Locked(0)
    /// Entered by every thread as it starts, left as it ends: `stop()` joins them with it.
    private let running = DispatchGroup()

    init(nocPort: Int, trusting caPEM: String) throws {
        listener = try Socket.listen(host: "127.0.0.1", port: 0)
        port = listener.localAddress?.port ?? 0
        context = try TLSContext(.client(trustRoots: .certificates(.text(caPEM))), role: .client)
        self.nocPort = nocPort
        start { [self] in acceptLoop() }
    }

    /// Stops accepting and relaying, and waits (bounded) for every thread to end: each
    /// polls at most 50 ms before it sees the flag.
    func stop() {
        stopped.withLock { $0 = true }
        _ = running.wait(timeout: .now() + 10)
    }

    private var isStopped: Bool { stopped.withLock { $0 } }

    private func start(_ body: @escaping @Sendable () -> Void) {
        running.enter()
        Thread { [running] in
            body()
            running.leave()
        }.start()
    }

    private func acceptLoop() {
        while !isStopped {
            guard Self.poll([listener.fd.rawValue]).first == true else { continue }
            while let client = (try? listener.accept()) ?? nil {
                relayed.withLock { $0 += 1 }
                start { [self] in relay(client) }
            }
        }
    }

    private func relay(_ client: Socket) {
        guard let upstream = try? TLSStream.connect(host: "127.0.0.1", port: nocPort, context: context) else { return }
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 1 << 16, alignment: 16)
        defer {
            buffer.deallocate()
            upstream.shutdown()
        }
        while !isStopped {
            let ready = Self.poll([client.fd.rawValue, upstream.socket.fd.rawValue])
            if ready[0] {
                guard case .processed(let n)? = try? client.read(into: buffer), n > 0 else { return }
                guard (try? upstream.writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))) != nil else { return }
            }
            if ready[1] || upstream.hasBufferedBytes {
                repeat {
                    switch try? upstream.read(into: buffer) {
                    case .bytes(let n)?:
                        guard Self.writeAll(client, UnsafeRawBufferPointer(rebasing: buffer[0..<n])) else { return }
                    case .wouldBlock?: break
                    default: return
                    }
                } while upstream.hasBufferedBytes
            }
        }
    }

    private static func writeAll(_ socket: Socket, _ bytes: UnsafeRawBufferPointer) -> Bool {
        var offset = 0
        while offset < bytes.count {
            switch try? socket.write(UnsafeRawBufferPointer(rebasing: bytes[offset...])) {
            case .processed(let n)?: offset += n
            case .wouldBlock?:
                var entry = pollfd(fd: socket.fd.rawValue, events: Int16(POLLOUT), revents: 0)
                _ = Glibc.poll(&entry, 1, 100)
            case nil: return false
            }
        }
        return true
    }

    /// Which descriptors are readable (or closed), waiting up to 50 ms.
    private static func poll(_ descriptors: [Int32]) -> [Bool] {
        var entries = descriptors.map { pollfd(fd: $0, events: Int16(POLLIN), revents: 0) }
        _ = Glibc.poll(&entries, nfds_t(entries.count), 50)
        return entries.map { $0.revents != 0 }
    }
}
