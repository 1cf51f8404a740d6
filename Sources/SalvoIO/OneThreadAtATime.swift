import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// The debug-build check behind a "one thread at a time" rule, for state that moves
/// between threads (made on one, driven by an event loop on another, torn down on a
/// third), where no single owner thread can be named: `enter()` stops a debug build when
/// another thread is still inside. The same thread may enter again while inside (nested
/// calls). Release builds compile both calls to nothing and never touch the atomic.
///
/// ```
/// let entered = loopSide.enter()
/// defer { loopSide.leave(entered) }
/// ```
///
/// The atomic is relaxed on purpose: the check must not add an ordering that would hide,
/// from ThreadSanitizer, the very race it looks for.
package struct OneThreadAtATime: ~Copyable, Sendable {
    @usableFromInline let holder = Atomic<UInt>(0)

    package init() {}

    /// Marks the calling thread inside; hand the result to `leave`.
    @inlinable @inline(__always)
    package func enter(file: StaticString = #fileID, line: UInt = #line) -> Bool {
        #if DEBUG
        let me = UInt(pthread_self())
        let (claimed, holder) = holder.compareExchange(expected: 0, desired: me, ordering: .relaxed)
        precondition(claimed || holder == me, "two threads at once inside state that allows one at a time",
                     file: file, line: line)
        return claimed
        #else
        return false
        #endif
    }

    /// Marks the calling thread outside again, if its `enter` was the outermost.
    @inlinable @inline(__always)
    package func leave(_ entered: Bool) {
        #if DEBUG
        if entered { holder.store(0, ordering: .relaxed) }
        #endif
    }
}
