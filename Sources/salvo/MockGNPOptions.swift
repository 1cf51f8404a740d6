import ArgumentParser
import Foundation
import SalvoIO
import SalvoMock
import SalvoWire

/// What `salvo mock --protocol` speaks.
enum MockProtocol: String, ExpressibleByArgument, CaseIterable {
    /// The legacy binary provider protocol (and the feedback service).
    case binary
    /// Apple's HTTP/2 provider API.
    case h2
    /// The BlackBerry Dynamics Push Channel back-end API (a mock NOC).
    case gnp
}

/// The mock NOC's own flags (`--protocol gnp`); the shared failure flags map onto its plan.
struct GNPMockOptions: ParsableArguments {
    @Option(name: .customLong("busy-every"),
            help: ArgumentHelp("gnp: answer every Nth notification HTTP 200 with code 503 Service Unavailable.", valueName: "n"))
    var busyEvery: Int?

    @Option(name: .customLong("unknown-code-every"),
            help: ArgumentHelp("gnp: answer every Nth notification with code 409 Conflict, a code no sender knows.", valueName: "n"))
    var unknownCodeEvery: Int?

    @Option(name: .customLong("dead-token-suffix"),
            help: ArgumentHelp("gnp: tokens ending in this text are dead (402); empty: none.", valueName: "text"))
    var deadTokenSuffix = "dead"

    @Option(name: .customLong("max-payload-bytes"), help: ArgumentHelp("gnp: payloads over this get code 413.", valueName: "bytes"))
    var maximumPayloadBytes = GNP.defaultMaximumPayloadBytes

    /// The first flag given that only the mock NOC understands.
    var givenFlag: String? {
        firstGivenFlag([("--busy-every", busyEvery != nil), ("--unknown-code-every", unknownCodeEvery != nil),
                        ("--dead-token-suffix", deadTokenSuffix != "dead"),
                        ("--max-payload-bytes", maximumPayloadBytes != GNP.defaultMaximumPayloadBytes)])
    }

    /// The plan: `--reject-every` (402), `--unavailable-every` (HTTP 503), `--drop-every`,
    /// `--response-delay-ms D` from the shared flags, and this group's own.
    func plan(_ failures: FailurePlanOptions) throws(UsageError) -> GNPFailurePlan {
        let unsupported = firstGivenFlag([
            ("--throttle-every", failures.throttleEvery != nil), ("--internal-error-every", failures.internalErrorEvery != nil),
            ("--goaway-every", failures.goawayEvery != nil), ("--stall-every", failures.stallEvery != nil),
            ("--error-delay-ms", failures.errorDelayMilliseconds != nil),
            ("--silent-after-client-goaway", failures.silentAfterClientGoAway), ("--misbehave", failures.misbehave != nil),
        ]) ?? failures.binaryOnlyFlag
        if let unsupported { throw UsageError("\(unsupported) is not a --protocol gnp rule") }
        var plan = GNPFailurePlan()
        plan.invalidTokenSuffix = deadTokenSuffix
        plan.invalidEvery = failures.rejectEvery
        plan.unavailableEvery = failures.unavailableEvery
        plan.dropEvery = failures.dropEvery
        plan.busyEvery = busyEvery
        plan.unknownCodeEvery = unknownCodeEvery
        plan.maximumPayloadBytes = maximumPayloadBytes
        let (delay, jitter) = try failures.responseDelays()
        if jitter != .zero { throw UsageError("--response-delay-ms: --protocol gnp takes D without a jitter") }
        plan.responseDelay = delay
        try FailurePlanOptions.validate { () throws(FailurePlanError) in try plan.validate() }
        return plan
    }
}

extension MockCommand {
    /// `--protocol gnp`: the mock NOC until a signal or `--duration`, then its statistics.
    func runGNP(_ serverTLS: TLSConfiguration) async throws {
        var configuration = GNPMockNOC.Configuration(
            server: MockServerSettings(host: host, port: port ?? GNP.nocPort, tls: serverTLS, recordAccepted: recordAccepted),
            failurePlan: try gnp.plan(failures))
        if let loops { configuration.loops = loops }
        let noc = try GNPMockNOC(configuration)
        let stop = StopSignal(duration: duration)
        print("listening noc=\(noc.port)")
        fflush(nil)
        await stop.wait()
        noc.stop()
        try writeReport(noc.statistics())
    }
}
