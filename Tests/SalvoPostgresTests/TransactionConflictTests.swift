@testable import SalvoPostgres
import SalvoTestSupport
import Testing

/// A transaction PostgreSQL aborts to break a deadlock runs again, against a real server.
@Suite(.timeLimit(.minutes(2))) struct TransactionConflictTests {
    /// Two transactions update two rows in opposite orders. Each takes its first row, then
    /// waits until the other has taken its own before asking for its second: a deadlock
    /// every time, which PostgreSQL breaks (after `deadlock_timeout`, 1 s) by aborting one.
    /// Retrying conflicts, the aborted one runs again and both commit; without, the abort
    /// is the error and only the other commits.
    @Test(arguments: [true, false])
    func aTransactionAbortedForADeadlockRunsAgain(retrying: Bool) async throws {
        let cluster = try PostgresCluster()
        defer { cluster.stop() }
        let url = try DatabaseURL(cluster.url())
        let first = try await CampaignDatabase.connect(url)
        let second = try await CampaignDatabase.connect(url)
        try await first.query("CREATE TABLE pair (id integer PRIMARY KEY, updates integer NOT NULL)")
        try await first.query("INSERT INTO pair VALUES (1, 0), (2, 0)")
        let bothHoldOne = Meeting(parties: 2)

        /// One run of a transaction's body.
        func updateBoth(_ database: CampaignDatabase, first mine: Int32, then theirs: Int32) async throws {
            try await database.query("UPDATE pair SET updates = updates + 1 WHERE id = \(mine)")
            await bothHoldOne.arrive()
            try await database.query("UPDATE pair SET updates = updates + 1 WHERE id = \(theirs)")
        }
        let attempts = retrying ? 3 : 1
        async let one = failure {
            try await first.transaction(retryingConflicts: attempts) { try await updateBoth($0, first: 1, then: 2) }
        }
        async let two = failure {
            try await second.transaction(retryingConflicts: attempts) { try await updateBoth($0, first: 2, then: 1) }
        }
        let failures = await [one, two].compactMap { $0 }
        var committed = 0
        for try await sum in try await first.query("SELECT sum(updates)::integer FROM pair").decode(Int32.self) {
            committed = Int(sum)
        }
        await first.close()
        await second.close()

        #expect(failures.allSatisfy(CampaignDatabase.isConflict), "\(failures)")
        if retrying {
            #expect(await bothHoldOne.arrivals == 3, "the transaction PostgreSQL aborted ran again")
            #expect(failures.isEmpty)
            #expect(committed == 4, "both transactions committed both their updates")
        } else {
            #expect(await bothHoldOne.arrivals == 2)
            #expect(failures.count == 1, "one transaction was aborted for the deadlock")
            #expect(committed == 2)
        }
    }

    private func failure(_ body: () async throws -> Void) async -> (any Error)? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }
}

/// Holds the first `parties` arrivals until all of them are there; later ones go on at once
/// (a transaction's second run must not wait for the other, which is over by then).
private actor Meeting {
    private let parties: Int
    private var waiting: [CheckedContinuation<Void, Never>] = []
    private(set) var arrivals = 0

    init(parties: Int) { self.parties = parties }

    func arrive() async {
        arrivals += 1
        guard arrivals < parties else {
            waiting.forEach { $0.resume() }
            waiting = []
            return
        }
        await withCheckedContinuation { waiting.append($0) }
    }
}
