internal import CLinuxShim
import Synchronization

/// A value behind a lock: Synchronization's `Mutex`, with each hand-off shown to
/// ThreadSanitizer.
///
/// On Linux, `Mutex` passes a contended lock from thread to thread inside the kernel (a
/// priority-inheriting futex), where ThreadSanitizer cannot see it, so every contended
/// `Mutex` shows up as a data race between its holders (Swift 6.3.1), and real races would
/// hide among those. Compiled with `-DSALVO_TSAN` (`make test-tsan` does), `withLock`
/// tells ThreadSanitizer that the lock was acquired and released; otherwise it is `Mutex`'s
/// own, at `Mutex`'s cost.
public struct Locked<Value: ~Copyable>: ~Copyable {
    @usableFromInline let mutex: Mutex<Value>

    /// A lock holding `initialValue`.
    @inlinable
    public init(_ initialValue: consuming sending Value) {
        mutex = Mutex(initialValue)
    }

    /// Runs `body` with the value while holding the lock, as `Mutex.withLock`.
    @inlinable
    public borrowing func withLock<Result: ~Copyable, E: Error>(
        _ body: (inout sending Value) throws(E) -> sending Result
    ) throws(E) -> sending Result {
        #if SALVO_TSAN
        let address = withUnsafePointer(to: mutex) { UnsafeRawPointer($0) }
        return try mutex.withLock { (value: inout sending Value) throws(E) -> sending Result in
            threadSanitizerAcquire(address)
            defer { threadSanitizerRelease(address) }
            return try body(&value)
        }
        #else
        return try mutex.withLock(body)
        #endif
    }
}

// Checked: its one stored property, `Mutex`, is Sendable for any value.
extension Locked: Sendable where Value: ~Copyable {}

#if SALVO_TSAN
@usableFromInline
func threadSanitizerAcquire(_ address: UnsafeRawPointer) {
    __tsan_acquire(UnsafeMutableRawPointer(mutating: address))
}

@usableFromInline
func threadSanitizerRelease(_ address: UnsafeRawPointer) {
    __tsan_release(UnsafeMutableRawPointer(mutating: address))
}
#endif
