import Foundation
import Synchronization

/// A task executor with a thread of its own: a task that prefers it runs there, not on the
/// cooperative pool, which the suite's other tests (run in parallel, some blocking a thread
/// while they poll) can keep busy for seconds. For the tests whose premise is a sender's
/// producer going on within a bounded time. Its thread, and so the executor, lives as long
/// as the process: make one per suite, as a static.
public final class ThreadExecutor: TaskExecutor, @unchecked Sendable {
    private let jobs = Mutex<[UnownedJob]>([])
    private let ready = DispatchSemaphore(value: 0)

    public init(name: String) {
        let thread = Thread { [self] in
            while true {
                ready.wait()
                let job = jobs.withLock { $0.removeFirst() }
                job.runSynchronously(on: asUnownedTaskExecutor())
            }
        }
        thread.name = name
        thread.start()
    }

    public func enqueue(_ job: consuming ExecutorJob) {
        let job = UnownedJob(job)
        jobs.withLock { $0.append(job) }
        ready.signal()
    }
}
