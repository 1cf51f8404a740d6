import ArgumentParser
import SalvoMock
import SalvoWire

extension H2Misbehaviour: ExpressibleByArgument {}

/// What a mock gateway does wrong on purpose: the failure-plan flags of `salvo mock` (both
/// protocols) and of `salvo demo`'s in-process mock. Each makes one field of `FailurePlan`
/// (binary), of `H2FailurePlan` (h2), or of both; `binaryOnlyFlag` and `h2OnlyFlag` name
/// the first flag given that the other protocol has no use for.
struct FailurePlanOptions: ParsableArguments {
    // MARK: Both protocols

    @Option(name: .customLong("reject-every"),
            help: ArgumentHelp("Reject every Nth notification, counted gateway-wide (h2: 400 BadDeviceToken).", valueName: "n"))
    var rejectEvery: Int?

    @Option(name: .customLong("drop-every"), help: ArgumentHelp("Close a connection silently at its Nth notification.", valueName: "n"))
    var dropEvery: Int?

    @Option(name: .customLong("stall-every"),
            help: ArgumentHelp("Stop reading a connection for --stall-ms after every N notifications.", valueName: "n"))
    var stallEvery: Int?

    @Option(name: .customLong("stall-ms"), help: ArgumentHelp("Length of each stall.", valueName: "ms"))
    var stallMilliseconds = 100

    // Unconditional: `--error-delay-ms -1` reaches the range check (and its message)
    // instead of reading as a missing value.
    @Option(name: .customLong("error-delay-ms"), parsing: .unconditional,
            help: ArgumentHelp("Hold back each error answer this long (0...600000): binary, discarding what arrives meanwhile; h2, instead of --response-delay-ms.",
                               valueName: "ms"))
    var errorDelayMilliseconds: Int?

    @Option(help: "Seed for the randomized rules.")
    var seed: UInt64 = 0

    // MARK: Binary only

    @Option(name: .customLong("invalid-token"), help: ArgumentHelp("binary: reject this token (64 hex digits) with status 8; repeatable.", valueName: "hex"))
    var invalidTokens: [String] = []

    @Option(name: .customLong("invalid-token-suffix"), help: ArgumentHelp("binary: reject tokens ending in these hex bytes with status 8.", valueName: "hex"))
    var invalidTokenSuffix: String?

    @Option(name: .customLong("reject-status"), help: ArgumentHelp("binary: the status for --reject-every and --reject-probability.", valueName: "code"))
    var rejectStatus = 8

    @Option(name: .customLong("reject-probability"), help: ArgumentHelp("binary: reject each notification with this probability (seeded).", valueName: "p"))
    var rejectProbability: Double?

    @Option(name: .customLong("shutdown-every"), help: ArgumentHelp("binary: answer status 10 after N notifications accepted on a connection.", valueName: "n"))
    var shutdownEvery: Int?

    @Option(name: .customLong("stall-jitter-ms"), help: ArgumentHelp("binary: up to this much (seeded) is added to each stall.", valueName: "ms"))
    var stallJitterMilliseconds = 0

    // MARK: HTTP/2 only

    @Option(name: .customLong("throttle-every"),
            help: ArgumentHelp("h2: answer every Nth valid request, gateway-wide, 429 TooManyRequests.", valueName: "n"))
    var throttleEvery: Int?

    @Option(name: .customLong("unavailable-every"),
            help: ArgumentHelp("h2: answer every Nth valid request, gateway-wide, 503 ServiceUnavailable.", valueName: "n"))
    var unavailableEvery: Int?

    @Option(name: .customLong("internal-error-every"),
            help: ArgumentHelp("h2: answer every Nth valid request, gateway-wide, 500 InternalServerError.", valueName: "n"))
    var internalErrorEvery: Int?

    @Option(name: .customLong("goaway-every"),
            help: ArgumentHelp("h2: the connection taking every Nth valid request, gateway-wide, sends GOAWAY (Shutdown).", valueName: "n"))
    var goawayEvery: Int?

    @Flag(name: .customLong("silent-after-client-goaway"),
          help: "h2: once a client sends GOAWAY, answer nothing more on that connection (as servers built on python's h2 do).")
    var silentAfterClientGoAway = false

    @Option(help: ArgumentHelp("h2: break the protocol on every connection: "
                               + H2Misbehaviour.allCases.map(\.rawValue).joined(separator: ", ") + ".", valueName: "mode"))
    var misbehave: H2Misbehaviour?

    // Unconditional, as --error-delay-ms.
    @Option(name: .customLong("response-delay-ms"), parsing: .unconditional,
            help: ArgumentHelp("h2: hold each answer D ms plus a seeded uniform jitter of 0...JITTER ms (each 0...600000).", valueName: "D[:JITTER]"))
    var responseDelay: String?

    // MARK: Plans

    /// The binary gateway's plan; a flag out of range is a usage error that names it.
    func plan() throws(UsageError) -> FailurePlan {
        var plan = FailurePlan(seed: seed)
        for text in invalidTokens {
            do { plan.invalidTokens.insert(try DeviceToken(hex: text)) } catch {
                throw UsageError("--invalid-token \(text): \(error)")
            }
        }
        if let invalidTokenSuffix {
            guard let bytes = Self.hexBytes(invalidTokenSuffix), !bytes.isEmpty, bytes.count <= 32 else {
                throw UsageError("--invalid-token-suffix must be 1 to 32 bytes of hex (an even number of digits), got '\(invalidTokenSuffix)'")
            }
            plan.invalidTokenSuffix = bytes
        }
        guard let status = UInt8(exactly: rejectStatus) else {
            throw UsageError("--reject-status must be a status byte 0...255, got \(rejectStatus)")
        }
        plan.rejectStatus = Status(rawValue: status)
        plan.rejectEvery = rejectEvery
        plan.rejectProbability = rejectProbability
        plan.shutdownEvery = shutdownEvery
        plan.dropEvery = dropEvery
        plan.stallEvery = stallEvery
        guard stallMilliseconds >= 0, stallJitterMilliseconds >= 0 else {
            throw UsageError("--stall-ms and --stall-jitter-ms must not be negative")
        }
        plan.stallDuration = .milliseconds(stallMilliseconds)
        plan.stallJitter = .milliseconds(stallJitterMilliseconds)
        plan.errorDelay = try errorDelay() ?? .zero
        try Self.validate { () throws(FailurePlanError) in try plan.validate() }
        return plan
    }

    /// The HTTP/2 gateway's plan; a flag out of range is a usage error that names it.
    func h2Plan() throws(UsageError) -> H2FailurePlan {
        guard stallMilliseconds >= 0 else { throw UsageError("--stall-ms must not be negative") }
        let (delay, jitter) = try responseDelays()
        let plan = H2FailurePlan(
            seed: seed, rejectEvery: rejectEvery, throttleEvery: throttleEvery, unavailableEvery: unavailableEvery,
            internalErrorEvery: internalErrorEvery, goawayEvery: goawayEvery, dropEvery: dropEvery, stallEvery: stallEvery,
            stallDuration: .milliseconds(stallMilliseconds), responseDelay: delay, responseJitter: jitter,
            errorDelay: try errorDelay(), silentAfterClientGoAway: silentAfterClientGoAway, misbehaviour: misbehave)
        try Self.validate { () throws(FailurePlanError) in try plan.validate() }
        return plan
    }

    /// The longest delay a flag takes, in milliseconds (10 minutes).
    private static let delayRange = 0...600_000

    /// `--error-delay-ms`, checked; nil when not given.
    private func errorDelay() throws(UsageError) -> Duration? {
        guard let errorDelayMilliseconds else { return nil }
        guard Self.delayRange.contains(errorDelayMilliseconds) else {
            throw UsageError("--error-delay-ms must be 0...600000 (at most 10 minutes), got \(errorDelayMilliseconds)")
        }
        return .milliseconds(errorDelayMilliseconds)
    }

    /// `--response-delay-ms D[:JITTER]`, checked; zero when not given.
    func responseDelays() throws(UsageError) -> (delay: Duration, jitter: Duration) {
        guard let responseDelay else { return (.zero, .zero) }
        let parts = responseDelay.split(separator: ":", omittingEmptySubsequences: false).map { Int($0) }
        guard (1...2).contains(parts.count), parts.allSatisfy({ $0.map(Self.delayRange.contains) == true }) else {
            throw UsageError("--response-delay-ms wants D or D:JITTER, milliseconds 0...600000 each, got '\(responseDelay)'")
        }
        return (.milliseconds(parts[0]!), .milliseconds(parts.count == 2 ? parts[1]! : 0))
    }

    /// The flag each plan field comes from, for messages about them.
    private static let flagsByField = [
        ("rejectEvery", "--reject-every"), ("rejectProbability", "--reject-probability"),
        ("shutdownEvery", "--shutdown-every"), ("dropEvery", "--drop-every"), ("stallEvery", "--stall-every"),
        ("throttleEvery", "--throttle-every"), ("unavailableEvery", "--unavailable-every"),
        ("internalErrorEvery", "--internal-error-every"), ("goawayEvery", "--goaway-every"),
    ]

    /// Runs a plan's own check, its message spelling the plan's field names as the flags.
    static func validate(_ check: () throws(FailurePlanError) -> Void) throws(UsageError) {
        do { try check() } catch {
            var message = error.description
            for (field, flag) in flagsByField {
                message = message.replacingOccurrences(of: field, with: flag)
            }
            throw UsageError(message)
        }
    }

    /// The first flag given that only the binary gateway understands.
    var binaryOnlyFlag: String? {
        firstGivenFlag([
            ("--invalid-token", !invalidTokens.isEmpty), ("--invalid-token-suffix", invalidTokenSuffix != nil),
            ("--reject-status", rejectStatus != 8), ("--reject-probability", rejectProbability != nil),
            ("--shutdown-every", shutdownEvery != nil), ("--stall-jitter-ms", stallJitterMilliseconds != 0),
        ])
    }

    /// The first flag given that only the HTTP/2 gateway understands.
    var h2OnlyFlag: String? {
        firstGivenFlag([
            ("--throttle-every", throttleEvery != nil), ("--unavailable-every", unavailableEvery != nil),
            ("--internal-error-every", internalErrorEvery != nil), ("--goaway-every", goawayEvery != nil),
            ("--response-delay-ms", responseDelay != nil), ("--silent-after-client-goaway", silentAfterClientGoAway),
            ("--misbehave", misbehave != nil),
        ])
    }

    static func hexBytes(_ text: String) -> [UInt8]? {
        let digits = Array(text.utf8)
        guard digits.count % 2 == 0 else { return nil }
        var bytes: [UInt8] = []
        for index in stride(from: 0, to: digits.count, by: 2) {
            guard let byte = UInt8(String(decoding: digits[index..<index + 2], as: UTF8.self), radix: 16) else { return nil }
            bytes.append(byte)
        }
        return bytes
    }
}
