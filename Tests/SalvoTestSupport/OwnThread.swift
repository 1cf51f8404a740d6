import Testing

/// Runs a suite's tests on a thread of its own rather than on the cooperative pool. For
/// suites whose synchronous tests block while they wait (for a process to exit, for a mock
/// to count): on the pool, which has a thread per core, two such waits stop every async
/// test of the run until they end.
public struct OwnThread: SuiteTrait, TestTrait, TestScoping {
    private let executor: ThreadExecutor

    fileprivate init(_ name: String) {
        executor = try! ThreadExecutor(name: name)
    }

    public var isRecursive: Bool { true }

    public func provideScope(for test: Test, testCase: Test.Case?,
                             performing function: @Sendable () async throws -> Void) async throws {
        try await withTaskExecutorPreference(executor) { try await function() }
    }
}

extension Trait where Self == OwnThread {
    /// A thread named `name` for the suite's tests (one per suite: the trait is made once).
    public static func ownThread(_ name: String) -> Self { OwnThread(name) }
}
