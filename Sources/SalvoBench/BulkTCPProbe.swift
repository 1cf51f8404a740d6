import Foundation
import SalvoIO
#if canImport(Glibc)
import Glibc
#endif

/// What a plain TCP stream carries through a delay line: the reference a sender over that
/// path is measured against. A sink thread enters the far end's namespace and counts what
/// one connection from this side writes in 1 MiB chunks for a while.
package enum BulkTCPProbe {
    /// Bytes per second received, over `duration` of writing.
    package static func measure(namespace: String, farAddress: String, duration: Duration) throws -> Double {
        let sink = Sink()
        let thread = Thread { sink.run(namespace: namespace, address: farAddress) }
        thread.start()
        guard let port = sink.waitForPort() else { throw BenchError("bulk TCP probe: \(sink.failure ?? "the sink did not start")") }

        let fd = try connect(to: farAddress, port: port)
        defer { close(fd) }
        let chunk = [UInt8](repeating: 0x5A, count: 1 << 20)
        let deadline = ContinuousClock.now + duration
        while ContinuousClock.now < deadline {
            do {
                _ = try chunk.withUnsafeBytes { bytes in try syscallOrThrow("write") { Glibc.write(fd, bytes.baseAddress, bytes.count) } }
            } catch {
                throw BenchError("bulk TCP probe: \(error)")
            }
        }
        shutdown(fd, Int32(SHUT_WR))
        guard let (bytes, seconds) = sink.waitForEnd(), seconds > 0 else {
            throw BenchError("bulk TCP probe: \(sink.failure ?? "the sink did not finish")")
        }
        return Double(bytes) / seconds
    }

    private static func connect(to host: String, port: Int) throws -> Int32 {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_port = in_port_t(UInt16(port).bigEndian)
        inet_pton(AF_INET, host, &address.sin_addr)
        let result = withUnsafePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { Glibc.connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        }
        guard result == 0 else {
            close(fd)
            throw BenchError("bulk TCP probe: cannot connect to \(host):\(port): \(String(cString: strerror(errno)))")
        }
        return fd
    }

    /// The far end: accepts one connection and counts bytes from the first to the end.
    private final class Sink: Sendable {
        private struct State {
            var port: Int?
            var result: (bytes: Int, seconds: Double)?
            var failure: String?
        }
        private let ready = DispatchSemaphore(value: 0)
        private let ended = DispatchSemaphore(value: 0)
        private let state = Locked(State())

        var failure: String? { state.withLock { $0.failure } }

        /// Records why the sink stopped and wakes whoever waits on `waiter`.
        private func fail(_ reason: String, waking waiter: DispatchSemaphore) {
            state.withLock { $0.failure = reason }
            waiter.signal()
        }

        func run(namespace: String, address: String) {
            do {
                try enterNetworkNamespace(namespace)
            } catch {
                fail("\(error)", waking: ready)
                return
            }
            let listener = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
            defer { close(listener) }
            var local = sockaddr_in()
            local.sin_family = sa_family_t(AF_INET)
            inet_pton(AF_INET, address, &local.sin_addr)
            var length = socklen_t(MemoryLayout<sockaddr_in>.size)
            let bound = withUnsafeMutablePointer(to: &local) {
                $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                    bind(listener, pointer, length) == 0 && listen(listener, 1) == 0
                        && getsockname(listener, pointer, &length) == 0
                }
            }
            guard bound else {
                fail("cannot listen on \(address): \(String(cString: strerror(errno)))", waking: ready)
                return
            }
            state.withLock { [port = Int(UInt16(bigEndian: local.sin_port))] in $0.port = port }
            ready.signal()
            let connection: Int32
            do {
                connection = try syscallOrThrow("accept") { accept(listener, nil, nil) }
            } catch {
                fail("\(error)", waking: ended)
                return
            }
            defer { close(connection) }
            var buffer = [UInt8](repeating: 0, count: 1 << 20)
            var total = 0
            var first: ContinuousClock.Instant?
            while true {
                // A failed read ends the count as the end of the stream does.
                let count = buffer.withUnsafeMutableBytes { bytes in
                    (try? syscallOrThrow("recv") { recv(connection, bytes.baseAddress, bytes.count, 0) }) ?? 0
                }
                guard count > 0 else { break }
                if first == nil { first = .now }
                total += count
            }
            let result = (bytes: total, seconds: first.map { $0.duration(to: .now).secondsDouble } ?? 0)
            state.withLock { $0.result = result }
            ended.signal()
        }

        func waitForPort() -> Int? {
            ready.wait()
            return state.withLock { $0.port }
        }

        func waitForEnd() -> (Int, Double)? {
            ended.wait()
            return state.withLock { $0.result }
        }
    }
}
