import Dispatch
import Logging
import SalvoTestSupport
import Synchronization
import Testing
@testable import SalvoEngine

/// How producers wait for the shard loops' progress: no wake-up is lost. The producers run
/// on a thread of their own: each round wakes them, and behind the rest of the run's tests
/// on the cooperative pool, thousands of wake-ups took longer than the time limit.
@Suite(.ownThread("event-hub-test")) struct EventHubTests {
    final class Room: Sendable {
        /// Room the waker made and a producer has not taken yet.
        let isFree = Atomic<Bool>(false)
        /// The waker is done, or gave up on a round: the producers stop.
        let stop = Atomic<Bool>(false)
        /// Signalled by the producer that took the room.
        let taken = DispatchSemaphore(value: 0)
    }

    /// Round after round, another thread makes room and reports progress while producers
    /// check for room and suspend; the two race. A wake-up lost between a producer's check
    /// and its suspension leaves the room untaken, and the waker's round times out. Bounded
    /// in rounds and in time: behind the rest of a parallel run every round waits for two
    /// threads to be scheduled, and fewer rounds still test the race.
    @Test(.timeLimit(.minutes(3)), arguments: [1, 3])
    func everyProgressWakesAWaitingProducer(producers: Int) async {
        let hub = EventHub(continuation: AsyncStream<SenderEvent>.makeStream().continuation, onRejected: nil,
                           logger: Logger(label: "event-hub-test"))
        let room = Room()
        async let rounds = onOwnThread { () -> (made: Int, missed: Bool) in
            let end = ContinuousClock.now + .seconds(5)
            var made = 0
            var missed = false
            while made < 5_000 && ContinuousClock.now < end {
                room.isFree.store(true, ordering: .sequentiallyConsistent)
                hub.progress()
                made += 1
                // A short spin first: the next room then comes while the producer that took
                // this one is between its check and its suspension, the window a lost
                // wake-up needs. Then a wait that does not keep a core busy.
                var spins = 0
                while spins < 10_000 && room.isFree.load(ordering: .sequentiallyConsistent) { spins += 1 }
                if room.taken.wait(timeout: .now() + .seconds(10)) == .timedOut {
                    missed = true
                    break
                }
            }
            room.stop.store(true, ordering: .sequentiallyConsistent)
            hub.progress()
            return (made, missed)
        }
        let taken = await withTaskGroup(of: Int.self) { group in
            for _ in 0..<producers {
                group.addTask {
                    var taken = 0
                    while !room.stop.load(ordering: .sequentiallyConsistent) {
                        let generation = hub.beginWaiting()
                        if room.isFree.exchange(false, ordering: .sequentiallyConsistent) {
                            taken += 1
                            room.taken.signal()
                        } else if !room.stop.load(ordering: .sequentiallyConsistent) {
                            await hub.waitForProgress(after: generation)
                        }
                        hub.endWaiting()
                    }
                    return taken
                }
            }
            return await group.reduce(0, +)
        }
        let (made, missed) = await rounds
        #expect(!missed, "the room made in round \(made) was not taken: its producer was not woken")
        #expect(taken == made - (missed ? 1 : 0))
    }
}
