import ArgumentParser
import Foundation
import SalvoBench
import SalvoIO

/// `salvo delay-line`: a long path on this machine (see `DelayLine`), for measuring Salvo
/// and other senders against a gateway tens of milliseconds away on a kernel without netem.
struct DelayLineCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delay-line",
        abstract: "Make a network namespace reached over a delayed path, until SIGTERM.",
        discussion: """
            Needs root and iproute2. The first line on stdout is \
            `ready namespace=NAME near=10.78.0.1 far=10.78.0.2`; run a gateway inside with \
            `ip netns exec NAME ...` on the far address, and connect to it from here. Every \
            packet is held --delay-ms each way, so a round trip takes twice that. With \
            --bulk-probe-seconds, a line `path bulk_tcp_bytes_per_s=N` comes first: what one \
            plain TCP stream carried through the path, the reference for a sender over it.
            """)

    @Option(name: .customLong("delay-ms"), help: ArgumentHelp("Delay each way, ms (1...1000).", valueName: "ms"))
    var delayMilliseconds: Int

    @Option(help: ArgumentHelp("The devices' MTU (default 1500, as on a real path).", valueName: "bytes"))
    var mtu = 1500

    @Option(help: ArgumentHelp("Stop after this many seconds (default: at SIGINT/SIGTERM).", valueName: "seconds"))
    var duration: Double?

    @Option(name: .customLong("bulk-probe-seconds"),
            help: ArgumentHelp("First measure one bulk TCP stream through the path for this long.", valueName: "seconds"))
    var bulkProbeSeconds: Double?

    func validate() throws {
        guard (1...1000).contains(delayMilliseconds) else { throw ValidationError("--delay-ms must be 1...1000") }
        if let duration, duration <= 0 { throw ValidationError("--duration must be positive") }
        if let bulkProbeSeconds, !(0.1...600).contains(bulkProbeSeconds) {
            throw ValidationError("--bulk-probe-seconds must be 0.1...600")
        }
        guard (576...65000).contains(mtu) else { throw ValidationError("--mtu must be 576...65000") }
    }

    func run() async throws {
        let line: DelayLine
        do {
            line = try DelayLine(delay: .milliseconds(delayMilliseconds), mtu: mtu)
        } catch {
            printError("salvo delay-line: \(error)")
            throw ExitCode(1)
        }
        if let bulkProbeSeconds {
            do {
                let rate = try BulkTCPProbe.measure(namespace: line.namespace, farAddress: DelayLine.farAddress,
                                                    duration: .milliseconds(Int(bulkProbeSeconds * 1000)))
                print("path bulk_tcp_bytes_per_s=\(Int(rate))")
            } catch {
                line.stop()
                printError("salvo delay-line: \(error)")
                throw ExitCode(1)
            }
        }
        let stop = StopSignal(duration: duration)
        print("ready namespace=\(line.namespace) near=\(DelayLine.nearAddress) far=\(DelayLine.farAddress)")
        fflush(nil)
        await stop.wait()
        line.stop()
    }
}
