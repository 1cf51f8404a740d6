import SalvoIO

/// A task executor on a `LoopThread` of its own: a task that prefers it runs there, not on
/// the cooperative pool, which the suite's other tests (run in parallel, some blocking a
/// thread while they poll) can keep busy for seconds. For the tests whose premise is a
/// sender's producer going on within a bounded time. Its thread lives as long as the
/// process: make one per suite, as a static.
public final class ThreadExecutor: TaskExecutor {
    private let thread: LoopThread

    public init(name: String) throws(IOError) { thread = try LoopThread(name: name) }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        thread.loop.execute { job.runSynchronously(on: self.asUnownedTaskExecutor()) }
    }
}
