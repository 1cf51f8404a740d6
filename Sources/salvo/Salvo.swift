import ArgumentParser
import Foundation
import SalvoIO
// A sanitizer brings its own allocator: with jemalloc replacing malloc underneath it, one
// frees what the other allocated, and the process crashes (make test-tsan, test-asan).
#if !SALVO_SANITIZED
internal import CJemalloc
#endif

/// `salvo`: bulk sends to APNs (Apple's HTTP/2 provider API, or the legacy binary protocol), the
/// mock gateway, and the benchmarks.
@main
struct Salvo: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "salvo",
        abstract: "A high-throughput APNs sender: Apple's HTTP/2 provider API, and the legacy binary protocol.",
        discussion: """
            Exit codes: 0 when every notification was accepted or rejected by the gateway, \
            1 when any failed, 2 for usage or input errors.
            """,
        version: "0.1.0 (jemalloc \(jemallocVersion))",
        subcommands: [SendCommand.self, DemoCommand.self, MockCommand.self, BenchCommand.self, FeedbackCommand.self,
                      PayloadCommand.self, DelayLineCommand.self, CheckTokenCommand.self, ChannelCommand.self,
                      CampaignCommand.self, RegistryCommand.self, ServeCommand.self]
    )

    /// Runs the command. Every error is told in one form, `salvo <command>: <what>` on
    /// standard error; usage errors exit with 2 (ArgumentParser's own default is 64), so
    /// scripts can tell "fix the command line" from "some notifications failed" (1).
    static func main() async {
        do {
            var command = try parseAsRoot()
            if var asyncCommand = command as? AsyncParsableCommand {
                try await asyncCommand.run()
            } else {
                try command.run()
            }
        } catch {
            let code = exitCode(for: error)
            // Help, version, and exits whose message the command printed itself.
            if error is ExitCode || code == .success { exit(withError: error) }
            let name = commandPath(CommandLine.arguments.dropFirst())
            printError("\(name): \(message(for: error))")
            guard code == .validationFailure else { Foundation.exit(code.rawValue) }
            printError("see '\(name) --help'")
            Foundation.exit(2)
        }
    }

    /// `salvo` and the subcommands `arguments` start with, as the user typed them:
    /// `salvo campaign create`. What messages are prefixed with.
    static func commandPath(_ arguments: ArraySlice<String>) -> String {
        var path = ["salvo"]
        var commands = configuration.subcommands
        for argument in arguments {
            guard let command = commands.first(where: { $0._commandName == argument }) else { break }
            path.append(argument)
            commands = command.configuration.subcommands
        }
        return path.joined(separator: " ")
    }
}

/// The allocator's version; referencing jemalloc also keeps the linker from dropping it.
var jemallocVersion: String {
    #if SALVO_SANITIZED
    return "not linked: sanitizer build"
    #else
    var version: UnsafePointer<CChar>?
    var length = MemoryLayout<UnsafePointer<CChar>?>.size
    guard mallctl("version", &version, &length, nil, 0) == 0, let version else { return "unknown" }
    return String(cString: version)
    #endif
}

/// jemalloc's count of allocation requests so far (small + large, all arenas), or nil when
/// its statistics are unavailable: `salvo bench`'s allocations per notification.
@Sendable func jemallocAllocationRequests() -> Int? {
    #if SALVO_SANITIZED
    return nil
    #else
    // Writing "epoch" makes jemalloc refresh the statistics it reports.
    var epoch: UInt64 = 1
    guard mallctl("epoch", nil, nil, &epoch, MemoryLayout<UInt64>.size) == 0 else { return nil }
    var total = 0
    for name in ["stats.arenas.4096.small.nrequests", "stats.arenas.4096.large.nrequests"] {  // 4096: MALLCTL_ARENAS_ALL
        var value: UInt64 = 0
        var size = MemoryLayout<UInt64>.size
        guard mallctl(name, &value, &size, nil, 0) == 0 else { return nil }
        total += Int(value)
    }
    return total
    #endif
}

/// `count` and the noun, grouped and in the number it takes: `1 notification`,
/// `20,000 notifications` (`plural`: when adding an s will not do).
func counted(_ count: Int, _ singular: String, _ plural: String? = nil) -> String {
    "\(count.formatted(.number.grouping(.automatic))) \(count == 1 ? singular : plural ?? singular + "s")"
}

/// The first flag of `flags` whose condition holds: what a message about flags that do
/// not go together names.
func firstGivenFlag(_ flags: [(String, Bool)]) -> String? { flags.first { $0.1 }?.0 }
