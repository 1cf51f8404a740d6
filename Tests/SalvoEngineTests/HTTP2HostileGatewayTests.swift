import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoEngine

/// A real `Sender` against the HTTP/2 mock breaking the protocol one way per test
/// (`H2Misbehaviour`). Whatever the gateway does, the run ends on its own within a bound
/// its timeouts set, every notification is accepted, rejected or failed, and the report
/// says what the gateway did. The timeouts are shortened (the defaults are measured by
/// `scripts/h2-hostile.sh`); the rules are the same.
@Suite(.timeLimit(.minutes(2))) struct HTTP2HostileGatewayTests {
    static let count = 200

    /// One connection, the timeouts a fifteenth of their defaults, a short backoff.
    static func configuration(port: Int) -> SenderConfiguration {
        var configuration = LoopbackRig.oneConnection(port: port)
        var options = HTTP2Options(topic: "com.example.app")
        options.answerTimeout = .seconds(1)
        options.settingsTimeout = .milliseconds(200)
        configuration.transport = .http2(options)
        configuration.reconnectBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(20))
        return configuration
    }

    /// Sends `count` notifications to a mock that misbehaves as `misbehaviour`; returns the
    /// report. The send must end within `bound` (a hang is recorded, then cancelled).
    static func send(to misbehaviour: H2Misbehaviour, bound: Duration,
                     sourceLocation: SourceLocation = #_sourceLocation) async throws -> (SenderReport, H2Statistics) {
        let rig = try H2LoopbackRig(plan: H2FailurePlan(misbehaviour: misbehaviour))
        defer { rig.gateway.stop() }
        let sender = try Sender(configuration(port: rig.gateway.port))
        let sending = Task { try await sender.send(contentsOf: H2LoopbackRig.list(count)) }
        let ended = await HostileGatewayTests.value(of: sending, within: bound)
        if ended == nil { Issue.record("the run did not end within \(bound)", sourceLocation: sourceLocation) }
        let report = await sender.finish(timeout: ended == nil ? .zero : .seconds(10))
        #expect(report.submitted == count && report.isComplete, "\(report)", sourceLocation: sourceLocation)
        #expect(report.failedByReason["cancelled"] == nil, "nothing needed finish's cancellation", sourceLocation: sourceLocation)
        return (report, rig.gateway.statistics())
    }

    /// Each a mode that never answers: the run gives up, names what the gateway did, and
    /// fails what it held; nothing is counted accepted.
    @Test(arguments: [
        (H2Misbehaviour.zeroStreams, "allowed no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0)"),
        (.endlessAnswer, "had an answer begun and not finished"),
        (.noSettings, "sent no SETTINGS within"),
        (.garbage, "broke the HTTP/2 protocol"),
        (.hugeFrame, "a frame of 16777215 bytes"),
        (.continuationFlood, "a header block of more than"),
    ])
    func aGatewayThatNeverAnswersEndsTheRunNamingWhatItDid(_ misbehaviour: H2Misbehaviour, cause: String) async throws {
        // Three stalls of the answer timeout, or eight attempts with their backoff: seconds.
        let (report, _) = try await Self.send(to: misbehaviour, bound: .seconds(30))
        #expect(report.accepted == 0 && report.failed == Self.count)
        let why = try #require(report.failureCause, "the report says why they failed")
        #expect(why.contains(cause), "\(why)")
        // Failed when the connection gave up, or before, in flight on too many dropped ones.
        let reasons: Set = [FailureReason.gatewayUnreachable.rawValue, FailureReason.retryBudgetExhausted.rawValue]
        #expect(Set(report.failedByReason.keys).isSubset(of: reasons), "\(report.failedByReason)")
    }

    /// A hundred PINGs for every read: answered, and everything is still delivered.
    @Test func aPingFloodStillDeliversEverything() async throws {
        let (report, mock) = try await Self.send(to: .pingFlood, bound: .seconds(30))
        #expect(report.accepted == Self.count && report.failureCause == nil)
        #expect(mock.accepted == Self.count)
    }
}
