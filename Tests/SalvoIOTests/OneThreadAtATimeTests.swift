import Foundation
import Testing
@testable import SalvoIO

/// The debug-build check behind the "one thread at a time" rules (`StagingRing`,
/// `RetainedStore`): threads taking turns pass, a thread inside again passes, two threads
/// at once stop the process.
@Suite struct OneThreadAtATimeTests {
    final class Guarded: Sendable {
        let check = OneThreadAtATime()
    }

    @Test func threadsTakingTurnsAndNestedCallsPass() async {
        let guarded = Guarded()
        let outer = guarded.check.enter()
        let inner = guarded.check.enter()
        guarded.check.leave(inner)
        guarded.check.leave(outer)
        // Another thread, after this one left: its turn.
        let done = DispatchSemaphore(value: 0)
        Thread {
            let entered = guarded.check.enter()
            guarded.check.leave(entered)
            done.signal()
        }.start()
        #expect(done.wait(timeout: .now() + 10) == .success)
        let again = guarded.check.enter()
        guarded.check.leave(again)
    }

    #if DEBUG
    @Test func aSecondThreadInsideStopsADebugBuild() async {
        await #expect(processExitsWith: .failure) {
            let guarded = Guarded()
            _ = guarded.check.enter()
            let done = DispatchSemaphore(value: 0)
            Thread {
                _ = guarded.check.enter()  // stops the process here
                done.signal()
            }.start()
            _ = done.wait(timeout: .now() + 10)
        }
    }
    #endif
}
