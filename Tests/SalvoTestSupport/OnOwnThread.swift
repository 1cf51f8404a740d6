import Foundation

/// Runs `body`, which blocks (waits for a process, a pipe, a semaphore), on a thread of its
/// own and suspends until it returns; its result or error is this call's.
///
/// Swift's cooperative pool has as many threads as cores, and Swift Testing runs every test
/// there: a test blocking one of them starves every other test's task, Swift Testing's own
/// (exit tests, time limits) among them, for as long as it waits.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () throws -> T) async throws -> T {
    try await withCheckedThrowingContinuation { continuation in
        Thread { continuation.resume(with: Result(catching: body)) }.start()
    }
}

/// `onOwnThread` for a `body` that cannot fail.
public func onOwnThread<T: Sendable>(_ body: @escaping @Sendable () -> T) async -> T {
    await withCheckedContinuation { continuation in
        Thread { continuation.resume(returning: body()) }.start()
    }
}
