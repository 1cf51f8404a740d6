import Foundation
import Logging
import SalvoTestSupport
import Synchronization
import Testing
@testable import SalvoEngine

/// How producers wait for the shard loops' progress: no wake-up is lost.
@Suite struct EventHubTests {
    final class Flags: Sendable {
        /// Room the waker made and a producer has not taken yet.
        let room = Atomic<Bool>(false)
        /// The waker gave up on a round: the producer stops.
        let stop = Atomic<Bool>(false)
    }

    /// Round after round, another thread makes room and reports progress while producers
    /// check for room and suspend; the two race. A wake-up lost between a producer's check
    /// and its suspension leaves the room untaken, and the waker's round times out.
    @Test(.timeLimit(.minutes(1)), arguments: [1, 3])
    func everyProgressWakesAWaitingProducer(producers: Int) async {
        let hub = EventHub(continuation: AsyncStream<SenderEvent>.makeStream().continuation, onRejected: nil,
                           logger: Logger(label: "event-hub-test"))
        let flags = Flags()
        let rounds = 20_000
        async let missedRounds = onOwnThread { () -> Int in
            for round in 0..<rounds {
                flags.room.store(true, ordering: .sequentiallyConsistent)
                hub.progress()
                let deadline = ContinuousClock.now + .seconds(10)
                while flags.room.load(ordering: .sequentiallyConsistent) {
                    guard ContinuousClock.now < deadline else {
                        flags.stop.store(true, ordering: .sequentiallyConsistent)
                        hub.progress()
                        return rounds - round
                    }
                    sched_yield()
                }
            }
            flags.stop.store(true, ordering: .sequentiallyConsistent)
            hub.progress()
            return 0
        }
        let taken = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<producers {
                group.addTask {
                    var taken = 0
                    while !flags.stop.load(ordering: .sequentiallyConsistent) {
                        let generation = hub.beginWaiting()
                        if flags.room.exchange(false, ordering: .sequentiallyConsistent) {
                            taken += 1
                        } else if !flags.stop.load(ordering: .sequentiallyConsistent) {
                            await hub.waitForProgress(after: generation)
                        }
                        hub.endWaiting()
                    }
                    return taken
                }
            }
            return await group.reduce(0, +)
        }
        #expect(await missedRounds == 0)
        #expect(taken == rounds)
    }
}
