import ArgumentParser
import SalvoBlackBerry

/// `salvo check-token --target blackberry`: asks the Push Channel service about every token
/// of a list (checkToken), to clean it before a campaign: dead tokens (402) go to
/// `--rejected`, and the report counts the living as accepted.
struct CheckTokenCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "check-token",
        abstract: "Check a list of Push Channel tokens with the NOC's checkToken service (--target blackberry).",
        discussion: """
            Input: --tokens FILE, one Push Channel token per line. Each gets GET \
            /GNP1.0?method=checkToken; code 100 counts as accepted (alive), 402 as rejected (dead: \
            written to --rejected as token,402,Invalid Token,). --checkpoint and --resume, the \
            report and the exit codes are those of salvo send.
            """)

    @Option(help: "blackberry (the only target with a token check).")
    var target: PushService

    @Option(help: ArgumentHelp("Push Channel tokens, one per line.", valueName: "file"))
    var tokens: String

    @Option(name: .customLong("on-bad-line"), help: "abort (default) or skip lines that cannot be sent.")
    var onBadLine: CampaignOptions.BadLineChoice = .abort

    @OptionGroup(title: "BlackBerry Dynamics Push Channel")
    var blackberry: BlackBerryConnectionOptions

    @OptionGroup(title: "TLS")
    var trust: ServerTrustOptions

    @OptionGroup var proxyBypass: NoProxyOption

    @Option(help: ArgumentHelp("Write the final report as JSON to this file.", valueName: "file"))
    var report: String?

    @Option(help: ArgumentHelp("Write dead tokens as CSV (token,status,reason,timestamp) to this file.", valueName: "file"))
    var rejected: String?

    @Option(help: ArgumentHelp("Record progress durably in this file (see --resume).", valueName: "file"))
    var checkpoint: String?

    @Flag(help: "Continue from --checkpoint.")
    var resume = false

    func validate() throws {
        guard target == .blackberry else { throw ValidationError("check-token is for --target blackberry") }
        if resume && checkpoint == nil { throw ValidationError("--resume needs --checkpoint FILE") }
        try refuseDirectory(tokens, flag: "--tokens")
        try blackberry.check()
    }

    func run() async throws {
        let tokens = self.tokens
        try await BlackBerryRun(command: "check-token", source: { .tokens(tokens, payload: []) },
                                onBadLine: onBadLine == .skip ? .skip : .abort, countLines: { CampaignOptions.countLines(path: tokens) },
                                options: blackberry, trust: trust, noProxy: proxyBypass.noProxy, request: .checkToken,
                                reportPath: report,
                                rejectedPath: rejected, checkpointPath: checkpoint, resume: resume).run()
    }
}
