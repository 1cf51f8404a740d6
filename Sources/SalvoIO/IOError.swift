internal import CLinuxShim
#if canImport(Glibc)
import Glibc
#endif

/// A failed system call: which operation, the errno with its symbolic name, and the address
/// or path involved when there is one.
///
/// The description reads like `connect to 127.0.0.1:2195 failed: ECONNREFUSED (Connection refused)`.
public struct IOError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The operation that failed ("connect", "bind", "epoll_ctl").
    public var operation: String
    /// The errno value.
    public var errno: Int32
    /// The address, host or path the operation was about, if any.
    public var target: String?

    public init(_ operation: String, errno: Int32, target: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.target = target
    }

    /// The symbolic errno name, e.g. `ECONNREFUSED`.
    public var errnoName: String {
        if let name = salvo_errno_name(errno) { return String(cString: name) }
        return "errno \(errno)"
    }

    public var description: String {
        let message = String(cString: strerror(errno))
        let subject = target.map { "\(operation) \($0)" } ?? operation
        return "\(subject) failed: \(errnoName) (\(message))"
    }
}

/// The outcome of a nonblocking system call: it did its work, or it would have blocked.
public enum IOResult<Value: Sendable>: Sendable {
    case processed(Value)
    case wouldBlock
}

/// Runs a system call that returns -1 and sets errno on failure: retries EINTR, turns
/// EAGAIN/EWOULDBLOCK (and EINPROGRESS for connect) into `.wouldBlock`, throws the rest.
@inline(__always)
func syscall<T: FixedWidthInteger>(
    _ operation: @autoclosure () -> String,
    target: @autoclosure () -> String? = nil,
    _ body: () -> T
) throws(IOError) -> IOResult<T> {
    while true {
        let result = body()
        if result >= 0 { return .processed(result) }
        let err = Glibc.errno
        switch err {
        case EINTR: continue
        case EAGAIN, EWOULDBLOCK, EINPROGRESS: return .wouldBlock
        default: throw IOError(operation(), errno: err, target: target())
        }
    }
}

/// Like `syscall`, for calls where would-block is itself an error (setup calls).
@inline(__always)
@discardableResult
func syscallOrThrow<T: FixedWidthInteger>(
    _ operation: @autoclosure () -> String,
    target: @autoclosure () -> String? = nil,
    _ body: () -> T
) throws(IOError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        let err = Glibc.errno
        if err == EINTR { continue }
        throw IOError(operation(), errno: err, target: target())
    }
}
