import CLinuxShim
import Foundation
import SalvoIO

/// A process started by a test: its standard output and error are both read as it writes
/// them, each by a thread of its own, so it never blocks on a full pipe whatever the test
/// reads and when; every wait is bounded.
///
/// Thread rule: any thread; every stored `var` is read and written holding `condition`.
public final class ChildProcess: @unchecked Sendable {
    // @unchecked because the waits need a condition variable with a deadline, which
    // `Mutex` lacks; `NSCondition` guards the state, and the compiler cannot see that.

    /// What a bounded wait ran out of.
    public struct Timeout: Error, CustomStringConvertible {
        public var description: String
    }

    private let process = Process()
    private let condition = NSCondition()
    private var outputBytes: [UInt8] = []
    private var errorBytes: [UInt8] = []
    private var openPipes = 2
    private var status: Int32?

    /// Starts `executable` with `arguments` and this process's environment changed by
    /// `environment`; standard input is /dev/null.
    public init(_ executable: String, _ arguments: [String], environment: [String: String] = [:]) throws {
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        if !environment.isEmpty {
            process.environment = ProcessInfo.processInfo.environment.merging(environment) { $1 }
        }
        let output = try Self.closeOnExecPipe(), errors = try Self.closeOnExecPipe()
        process.standardOutput = output.fileHandleForWriting
        process.standardError = errors.fileHandleForWriting
        process.standardInput = FileHandle.nullDevice
        try process.run()
        // The child has its own copies (dup2 into 1 and 2): the pipes end when it exits.
        try output.fileHandleForWriting.close()
        try errors.fileHandleForWriting.close()
        // Waited for on a thread of its own rather than through a termination handler:
        // Foundation's process keeps itself, its handler and its pipes alive after the
        // child ended when it has one (LeakSanitizer finds them at exit). The thread holds
        // the process only while the child runs; `self` weakly, so that it may go first.
        Thread { [weak self, process, condition] in
            process.waitUntilExit()
            condition.withLock { self?.status = process.terminationStatus }
            condition.broadcast()
        }.start()
        drain(output.fileHandleForReading, isOutput: true)
        drain(errors.fileHandleForReading, isOutput: false)
    }

    /// A pipe whose ends close on exec. Foundation's `Pipe` makes inheritable ones: a process
    /// another test starts at the same moment (a database server, a gateway) inherits the
    /// write end and holds it open long after this child exited, and the pipe never ends.
    private static func closeOnExecPipe() throws -> (fileHandleForReading: FileHandle, fileHandleForWriting: FileHandle) {
        var fds: [Int32] = [0, 0]
        try syscallOrThrow("pipe2") { salvo_pipe_cloexec(&fds) }
        return (FileHandle(fileDescriptor: fds[0], closeOnDealloc: true), FileHandle(fileDescriptor: fds[1], closeOnDealloc: true))
    }

    /// The process id, to send signals.
    public var processIdentifier: Int32 { process.processIdentifier }

    /// Everything written to standard output so far.
    public var output: String { condition.withLock { String(decoding: outputBytes, as: UTF8.self) } }

    /// Everything written to standard error so far.
    public var errors: String { condition.withLock { String(decoding: errorBytes, as: UTF8.self) } }

    /// Whether it is still running.
    public var isRunning: Bool { condition.withLock { status == nil } }

    /// The first whole line of standard output, waiting for it at most `timeout`.
    ///
    /// The wait is on a thread of its own (`onOwnThread`), not on the cooperative pool: the
    /// pool has as many threads as cores, and a test blocking one starves the others.
    ///
    /// - Throws: `Timeout` when no line came in time, or the output ended without one.
    public func firstLine(within timeout: Duration) async throws -> String {
        try await onOwnThread { [self] in
            try waitFor(timeout, "first line of output", unlessEnded: true) {
                outputBytes.firstIndex(of: 0x0A).map { String(decoding: outputBytes[..<$0], as: UTF8.self) }
            }
        }
    }

    /// Waits at most `timeout` for the process to exit and for both pipes to close; returns
    /// its exit status. When it does not exit in time it is killed (SIGKILL).
    ///
    /// The wait is on a thread of its own (`onOwnThread`), not on the cooperative pool: the
    /// pool has as many threads as cores, and a test blocking one starves the others.
    ///
    /// - Throws: `Timeout`, after the kill.
    @discardableResult
    public func exitStatus(within timeout: Duration) async throws -> Int32 {
        try await onOwnThread { [self] in try exitStatus(within: timeout) }
    }

    /// `exitStatus(within:)` blocking the calling thread: for a `defer`, which cannot await,
    /// reaping a process it has just killed. Everything else awaits the one above.
    @discardableResult
    public func exitStatus(within timeout: Duration) throws -> Int32 {
        do {
            return try waitFor(timeout, "exit") { openPipes == 0 ? status : nil }
        } catch {
            kill(SIGKILL)
            _ = try? waitFor(.seconds(10), "exit after SIGKILL") { status }
            throw error
        }
    }

    /// Sends `signal` (SIGTERM, SIGINT, SIGKILL, …), unless it has exited already.
    public func kill(_ signal: Int32) {
        condition.withLock {
            if status == nil { _ = Foundation.kill(process.processIdentifier, signal) }
        }
    }

    /// Waits until `ready` (evaluated under the lock) gives a value, at most `timeout`, or,
    /// `unlessEnded`, until both pipes closed without it.
    private func waitFor<T>(_ timeout: Duration, _ what: String, unlessEnded: Bool = false, _ ready: () -> T?) throws -> T {
        let deadline = Date().addingTimeInterval(timeout / .seconds(1))
        condition.lock()
        defer { condition.unlock() }
        while true {
            if let value = ready() { return value }
            if (unlessEnded && openPipes == 0) || !condition.wait(until: deadline) {
                let name = process.executableURL?.lastPathComponent ?? "the process"
                throw Timeout(description: "no \(what) from \(name) within \(timeout); its standard error so far: "
                                  + String(decoding: errorBytes.suffix(2000), as: UTF8.self))
            }
        }
    }

    /// Reads `handle` to its end on a thread of its own, into `output` or `errors`.
    private func drain(_ handle: FileHandle, isOutput: Bool) {
        // Weak, like the waiting thread: a thread that outlives the test must not keep
        // the object (and its process and pipes) alive.
        let thread = Thread { [weak self, condition] in
            let fd = handle.fileDescriptor
            var chunk = [UInt8](repeating: 0, count: 1 << 16)
            while true {
                // A failed read ends the pipe as its end does.
                let count = chunk.withUnsafeMutableBytes { bytes in
                    (try? syscallOrThrow("read") { read(fd, bytes.baseAddress, bytes.count) }) ?? 0
                }
                guard let self else { return }
                condition.withLock {
                    if count <= 0 {
                        openPipes -= 1
                    } else if isOutput {
                        outputBytes.append(contentsOf: chunk[..<count])
                    } else {
                        errorBytes.append(contentsOf: chunk[..<count])
                    }
                }
                condition.broadcast()
                if count <= 0 { return }
            }
        }
        thread.start()
    }
}
