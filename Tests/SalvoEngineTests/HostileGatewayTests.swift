import Foundation
import Glibc
import SalvoIO
import SalvoTestSupport
import SalvoWire
import Synchronization
import Testing
@testable import SalvoEngine

/// A real `Sender` against a gateway that misbehaves, one behaviour per test. Whatever
/// the gateway does, the sender must end on its own, with every notification accepted,
/// rejected or failed, nothing it counts as accepted missing at the gateway, and a message
/// that says what the gateway did.
@Suite(.serialized, .timeLimit(.minutes(2))) struct HostileGatewayTests {
    /// One slot, so the misbehaving connection is the one carrying the notifications, and a
    /// short reconnection backoff. The error wait is the binary protocol's only guarantee: a
    /// gateway that drops a connection later than that after reading loses what the sender
    /// presumed accepted, and a gateway thread descheduled on a loaded machine is exactly such
    /// a gateway. So it is long enough for any scheduling delay, not short for speed. The
    /// connect and stall timeouts stay long too unless a test is about them.
    static func configuration(port: Int) -> SenderConfiguration {
        var configuration = LoopbackRig.oneConnection(port: port)
        configuration.errorWait = .seconds(1)
        configuration.reconnectBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(20))
        configuration.connectAttempts = 3
        configuration.retryBudget = 2
        return configuration
    }

    /// What a run left behind.
    struct Outcome {
        var report: SenderReport
        /// Why connections closed or failed, and why the sender gave up.
        var reasons: [String] = []
        var rejected: [UInt64: Status] = [:]
        /// Sequences reported failed, one by one.
        var failed: Set<UInt64> = []

        func anyReason(containing text: String) -> Bool { reasons.contains { $0.contains(text) } }
    }

    /// Sends notifications 0..<count from a list, then finishes, and expects every one of
    /// them final by the sender's own doing. A send still running after `limit` is a hang:
    /// recorded as an issue, then ended by `finish(timeout: .zero)`. (Each send takes well
    /// under a second; the limit leaves room for a machine busy with other suites.)
    static func send(_ count: Int, with configuration: SenderConfiguration, limit: Duration = .seconds(30),
                     sourceLocation: SourceLocation = #_sourceLocation) async throws -> Outcome
    {
        let sender = try Sender(configuration)
        let list = SourceSendingTests.list(0..<count)
        let sending = Task { try await sender.send(contentsOf: list) }
        let ended = await value(of: sending, within: limit)
        if ended == nil { Issue.record("send(contentsOf:) was still running after \(limit)") }
        let report = await sender.finish(timeout: ended == nil ? .zero : .seconds(10))
        var outcome = Outcome(report: report)
        for await event in sender.events {
            switch event {
            case .disconnected(_, _, let reason), .connectionFailed(_, _, let reason), .unreachable(let reason):
                outcome.reasons.append(reason)
            case .rejected(_, .binary(let status), let sequence):
                outcome.rejected[sequence] = status
            case .failed(_, _, let sequence):
                outcome.failed.insert(sequence)
            default:
                break
            }
        }
        expectAccountedFor(report, count: count, sourceLocation: sourceLocation)
        return outcome
    }

    /// The common case: `count` notifications, sent with this suite's configuration as
    /// `configure` leaves it, to a gateway that misbehaves as `misbehaviour` after `after`
    /// notifications on `times` connections; nothing the sender counts as accepted may be
    /// missing at the gateway (`expectNothingLost`). Returns what the run left behind, and
    /// the gateway (stopped) for the test's own checks.
    static func send(
        _ count: Int, to misbehaviour: HostileGateway.Misbehaviour, after: Int, times: Int = 1,
        configure: (inout SenderConfiguration) -> Void = { _ in }, sourceLocation: SourceLocation = #_sourceLocation
    ) async throws -> (Outcome, HostileGateway) {
        let gateway = try HostileGateway(misbehaviour, after: after, times: times)
        defer { gateway.stop() }
        var configuration = Self.configuration(port: gateway.port)
        configure(&configuration)
        let outcome = try await send(count, with: configuration, sourceLocation: sourceLocation)
        await expectNothingLost(outcome, count: count, at: gateway, sourceLocation: sourceLocation)
        return (outcome, gateway)
    }

    /// Waits for `task` at most `timeout`: its result, or nil when it was still running.
    static func value<T: Sendable>(of task: Task<T, any Error>, within timeout: Duration) async -> Result<T, any Error>? {
        let (results, continuation) = AsyncStream.makeStream(of: Result<T, any Error>?.self)
        Task { continuation.yield(await task.result) }
        let timer = Task {
            try await Task.sleep(for: timeout)
            continuation.yield(nil)
        }
        defer { timer.cancel() }
        var iterator = results.makeAsyncIterator()
        return await iterator.next() ?? nil
    }

    /// Every submitted notification is final, by the sender's own doing (not cancelled).
    private static func expectAccountedFor(_ report: SenderReport, count: Int, sourceLocation: SourceLocation) {
        #expect(report.submitted == count, sourceLocation: sourceLocation)
        #expect(report.accepted + report.rejected + report.failed == report.submitted,
                "accepted \(report.accepted) + rejected \(report.rejected) + failed \(report.failed)",
                sourceLocation: sourceLocation)
        #expect(report.failedByReason["cancelled"] == nil, "nothing needed finish's cancellation", sourceLocation: sourceLocation)
    }

    /// Every notification the sender did not reject or fail reached the gateway, each one
    /// it saw twice is among the sender's possible duplicates, and each connection the
    /// gateway ruined cost at most two new ones (no reconnection storm).
    static func expectNothingLost(_ outcome: Outcome, count: Int, at gateway: HostileGateway,
                                  sourceLocation: SourceLocation = #_sourceLocation) async {
        let expected = Set((0..<UInt64(count)).filter { outcome.rejected[$0] == nil && !outcome.failed.contains($0) })
        // The sender settles by time: the gateway may still be reading the last frames, for
        // long in a loaded full run. The wait ends as soon as they are all there; a
        // notification really lost stays missing however long, so the wait stays well inside
        // the suite's time limit and the failure says what was lost.
        let processed = await eventuallyYielding({ gateway.processed }, within: .seconds(60)) { expected.isSubset(of: $0.keys) }
        let missing = expected.subtracting(processed.keys)
        #expect(missing.isEmpty, "\(missing.count) accepted by the sender never reached the gateway, e.g. \(missing.sorted().prefix(5))",
                sourceLocation: sourceLocation)
        let duplicates = processed.values.reduce(0) { $0 + $1 - 1 }
        #expect(duplicates <= outcome.report.possibleDuplicates, sourceLocation: sourceLocation)
        #expect(gateway.connections <= 2 + 2 * gateway.misbehaved, sourceLocation: sourceLocation)
    }

    // MARK: Answers that are not error responses

    @Test func junkInsteadOfAnErrorResponseIsADropAndEverythingIsResent() async throws {
        let (outcome, gateway) = try await Self.send(2000, to: .junk, after: 500)
        #expect(outcome.report.accepted == 2000)
        #expect(gateway.misbehaved == 1)
        #expect(outcome.anyReason(containing: "got byte \(HostileGateway.junk[0])"), "\(outcome.reasons)")
    }

    @Test func threeOfTheSixErrorResponseBytesThenACloseIsADropThatSaysSo() async throws {
        let (outcome, _) = try await Self.send(2000, to: .truncatedErrorResponse, after: 500)
        #expect(outcome.report.accepted == 2000)
        #expect(outcome.anyReason(containing: "3 of the 6 bytes"), "\(outcome.reasons)")
    }

    // MARK: Error responses that make no sense

    @Test(arguments: [Status.noErrors.rawValue, 200])
    func statusZeroOrAnUnknownStatusRejectsExactlyTheNamedNotification(status: UInt8) async throws {
        let (outcome, gateway) = try await Self.send(2000, to: .errorResponse(status: status), after: 500)
        #expect(gateway.named == [501])
        #expect(outcome.rejected == [500: Status(rawValue: status)])
        #expect(outcome.report.rejectedByReason == [Status(rawValue: status).name: 1])
        #expect(outcome.report.accepted == 1999 && outcome.report.possibleDuplicates == 0)
    }

    @Test func anErrorNamingAnIdentifierNeverSentIsADrop() async throws {
        let (outcome, _) = try await Self.send(2000, to: .errorNamingUnsentIdentifier, after: 500)
        #expect(outcome.report.accepted == 2000 && outcome.report.rejected == 0)
        #expect(outcome.anyReason(containing: "named #\(501 + HostileGateway.unsentIdentifierOffset), which this connection never sent"),
                "\(outcome.reasons)")
    }

    // MARK: Connections that end badly

    @Test func anErrorResponseThenAFINWithoutCloseNotifyRejectsExactly() async throws {
        let (outcome, _) = try await Self.send(2000, to: .errorResponseThenFINWithoutCloseNotify, after: 500)
        #expect(outcome.rejected == [500: .invalidToken])
        #expect(outcome.report.accepted == 1999 && outcome.report.possibleDuplicates == 0)
    }

    @Test func silentDropsOnSeveralConnectionsInARowAreResentWithoutGivingUp() async throws {
        // More drops than connection attempts: every connection opened, so none is a failed
        // attempt, whether it was made fresh or was the standby taking over.
        let (outcome, gateway) = try await Self.send(2000, to: .finWithoutCloseNotify, after: 300, times: 4) {
            $0.retryBudget = 5  // the first notifications after 300 are in flight on all four
        }
        #expect(gateway.misbehaved == 4)
        #expect(outcome.report.accepted == 2000, "\(outcome.report.failedByReason)")
        #expect(outcome.anyReason(containing: "closed (no TLS close_notify) by the gateway without an error response"),
                "\(outcome.reasons)")
    }

    @Test func aResetWhileTheClientWritesIsADrop() async throws {
        // 20,000 notifications (about 2 MB): the sender is still writing when the reset comes.
        let (outcome, _) = try await Self.send(20_000, to: .reset, after: 2000)
        #expect(outcome.report.accepted == 20_000)
        #expect(outcome.anyReason(containing: "ECONNRESET") || outcome.anyReason(containing: "EPIPE"), "\(outcome.reasons)")
    }

    // MARK: Gateways that leave the sender waiting

    @Test func aGatewayThatNeverReadsIsGivenUpOnAfterTheStallTimeout() async throws {
        let gateway = try HostileGateway(.neverRead, receiveBuffer: 4096)
        defer { gateway.stop() }
        var configuration = Self.configuration(port: gateway.port)
        configuration.stallTimeout = .milliseconds(200)
        let outcome = try await Self.send(2000, with: configuration)
        #expect(outcome.anyReason(containing: "the gateway took no bytes for 0.2 seconds"), "\(outcome.reasons)")
        #expect(outcome.anyReason(containing: "(gave up after 3 attempts)"), "\(outcome.reasons)")
        #expect(outcome.report.failedByReason["gateway_unreachable", default: 0] > 0)
        #expect(gateway.connections <= 2 + 2 * 3)
        // Acknowledged by the gateway's TCP is all a sender can know of a binary-protocol
        // gateway: at most its receive buffer's worth per connection can pass for accepted.
        let frameLength = 61 + LoopbackRig.payload(0).count
        #expect(outcome.report.accepted <= gateway.connections * (2 * 4096 / frameLength + 1))
    }

    @Test func aHandshakeThatNeverCompletesTimesOutAndFailsEverything() async throws {
        let gateway = try HostileGateway(.neverHandshake)
        defer { gateway.stop() }
        var configuration = Self.configuration(port: gateway.port)
        configuration.connectTimeout = .milliseconds(200)
        let outcome = try await Self.send(100, with: configuration)
        #expect(outcome.report.failedByReason == ["gateway_unreachable": 100])
        #expect(outcome.anyReason(containing: "TCP connect and TLS handshake not complete after 0.2 seconds (gave up after 3 attempts)"),
                "\(outcome.reasons)")
        #expect(gateway.connections == 3, "one per attempt")
    }

    @Test func finishWithATimeoutEndsASendTheGatewayHolds() async throws {
        let gateway = try HostileGateway(.neverRead, receiveBuffer: 4096)
        defer { gateway.stop() }
        let sender = try Sender(Self.configuration(port: gateway.port))  // the stall timeout is long: finish ends it
        let sending = Task { try await sender.send(contentsOf: SourceSendingTests.list(0..<2000)) }
        #expect(await eventuallyYielding({ sender.progress.submitted }, within: .seconds(10)) { $0 == 2000 } == 2000,
                "the sender took all 2000")
        let report = await sender.finish(timeout: .milliseconds(200))
        let ended = await Self.value(of: sending, within: .seconds(10))
        #expect(ended != nil, "the send ended once finish cancelled")
        #expect(report.accepted + report.rejected + report.failed == report.submitted)
        #expect(report.failedByReason["cancelled", default: 0] > 0)
    }
}
