internal import CLinuxShim
import SystemPackage
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
    /// What the system call said, e.g. `.connectionRefused`.
    public var errno: Errno
    /// The address, host or path the operation was about, if any.
    public var target: String?

    public init(_ operation: String, errno: Errno, target: String? = nil) {
        self.operation = operation
        self.errno = errno
        self.target = target
    }

    /// The symbolic errno name, e.g. `ECONNREFUSED`.
    public var errnoName: String { errno.symbolicName }

    public var description: String {
        let subject = target.map { "\(operation) \($0)" } ?? operation
        return "\(subject) failed: \(errnoName) (\(errno))"
    }
}

extension Errno {
    /// The C name, e.g. `ECONNREFUSED` (`errno 4242` for a value Linux does not name);
    /// `description` is strerror's sentence.
    public var symbolicName: String {
        if let name = salvo_errno_name(rawValue) { return String(cString: name) }
        return "errno \(rawValue)"
    }
}

/// The outcome of a nonblocking system call: it did its work, or it would have blocked.
public enum IOResult<Value: Sendable>: Sendable {
    case processed(Value)
    case wouldBlock
}

// The one place that retries EINTR. Every system call that can be interrupted goes
// through `syscall` or `syscallOrThrow`, in every module, so that no caller forgets the
// retry and every failure becomes the same `IOError`.
//
// `body` runs again after EINTR: compute what changes with time (a poll timeout) inside it.
// close(2) is the exception and never goes through here: Linux releases the descriptor
// even when close is interrupted, and retrying could close one another thread just opened.

/// Runs a system call that returns -1 and sets errno on failure: retries EINTR, turns
/// EAGAIN/EWOULDBLOCK (and EINPROGRESS for connect) into `.wouldBlock`, throws the rest.
@inlinable @inline(__always)
package func syscall<T: FixedWidthInteger>(
    _ operation: @autoclosure () -> String,
    target: @autoclosure () -> String? = nil,
    _ body: () -> T
) throws(IOError) -> IOResult<T> {
    while true {
        let result = body()
        if result >= 0 { return .processed(result) }
        // Raw values, not `Errno` patterns: those would match through Errno's `~=` for any
        // Error, a dynamic cast on the would-block path.
        let err = Glibc.errno
        switch err {
        case Errno.interrupted.rawValue: continue
        case Errno.resourceTemporarilyUnavailable.rawValue, Errno.wouldBlock.rawValue, Errno.nowInProgress.rawValue:
            return .wouldBlock
        default: throw IOError(operation(), errno: Errno(rawValue: err), target: target())
        }
    }
}

/// Like `syscall`, for calls where would-block is itself an error (setup calls, and
/// blocking descriptors: files, pipes, poll).
@inlinable @inline(__always)
@discardableResult
package func syscallOrThrow<T: FixedWidthInteger>(
    _ operation: @autoclosure () -> String,
    target: @autoclosure () -> String? = nil,
    _ body: () -> T
) throws(IOError) -> T {
    while true {
        let result = body()
        if result >= 0 { return result }
        let err = Glibc.errno
        if err == Errno.interrupted.rawValue { continue }
        throw IOError(operation(), errno: Errno(rawValue: err), target: target())
    }
}
