import Testing
@testable import SalvoEngine

/// When a connection's turn at writing ends, without sockets: the gateway's answer is a
/// flag, the other connections' work another.
@Suite struct WriteTurnsTests {
    static func ends(_ turns: WriteTurns, after records: Int, gatewaySpoke: Bool = false, othersWaiting: Bool = false) -> Bool {
        turns.turnEnds(after: records, gatewaySpoke: { gatewaySpoke }, othersWaiting: { othersWaiting })
    }

    @Test func withoutErrorsAConnectionWritesAFullTurnWhateverTheOthersWait() {
        let turns = WriteTurns()
        #expect(!turns.errorsAreRecent)
        #expect(!Self.ends(turns, after: 1, othersWaiting: true))
        #expect(!Self.ends(turns, after: WriteTurns.recordsPerTurn - 1, othersWaiting: true))
        #expect(Self.ends(turns, after: WriteTurns.recordsPerTurn))
    }

    @Test func aTurnEndsAsSoonAsTheGatewaySaidSomething() {
        #expect(Self.ends(WriteTurns(), after: 1, gatewaySpoke: true))
    }

    @Test func afterAnErrorResponseConnectionsTakeTurnsRecordByRecordForAWhile() {
        var turns = WriteTurns()
        turns.errorResponseArrived()
        #expect(Self.ends(turns, after: 1, othersWaiting: true))
        #expect(!Self.ends(turns, after: 1, othersWaiting: false), "alone, a connection keeps writing")
        for _ in 1..<WriteTurns.errorResponseMemory { turns.recordWritten() }
        #expect(turns.errorsAreRecent)
        turns.recordWritten()
        #expect(!turns.errorsAreRecent && !Self.ends(turns, after: 1, othersWaiting: true))
        // The count stops at the memory: a long run without errors cannot wrap it round.
        for _ in 0..<10_000 { turns.recordWritten() }
        #expect(turns.recordsSinceErrorResponse == WriteTurns.errorResponseMemory && !turns.errorsAreRecent)
        turns.errorResponseArrived()
        #expect(turns.errorsAreRecent)
    }

    @Test func theGatewayIsLookedAtOnlyWhenTheTurnIsNotFull() {
        var looked = false
        _ = WriteTurns().turnEnds(after: WriteTurns.recordsPerTurn, gatewaySpoke: { looked = true; return false },
                                  othersWaiting: { false })
        #expect(!looked, "a full turn ends without a system call")
    }
}
