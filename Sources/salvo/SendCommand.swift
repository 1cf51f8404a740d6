import ArgumentParser
import Foundation
import SalvoCampaignFiles
import SalvoEngine
import SalvoIO
import SalvoWire

/// `salvo send`: streams a campaign file through the sender and accounts for every line.
struct SendCommand: AsyncParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "send",
        abstract: "Send a campaign to APNs: Apple's HTTP/2 provider API, or a binary-protocol gateway.",
        discussion: """
            Protocol: --gateway production or sandbox is Apple's HTTP/2 provider API (api.push.apple.com, \
            api.sandbox.push.apple.com). HOST:PORT speaks the legacy binary protocol unless --protocol h2 \
            is given. HTTP/2 authenticates with --auth-key AuthKey_<KEYID>.p8 --key-id --team-id (a \
            provider token, with --topic) or with the certificate of --cert/--key. Several apps and teams \
            in one run: --credentials FILE instead, JSON: {"credentials": [{"team_id", "key_id", "key": \
            "AuthKey_<KEYID>.p8", "topics": ["<bundle id>", ...], "environment": "production"}, {"certificate", \
            "private_key", "passphrase_file", "topics", "environment"}, ...]} (paths relative to the file; a team \
            and a topic once). A line's topic picks its entry (--topic: the topic of lines that name none); a \
            line whose topic no entry serves is a bad line (under --on-bad-line abort the whole file is \
            checked first, so nothing is sent). The report breaks the outcomes down by topic.

            Input: --input FILE.jsonl, one object per line: {"token": "<hex>", "payload": {...}} with \
            optional "expiry" (or "expiration", UNIX seconds) and "priority" (10 or 5; HTTP/2 also 1); \
            for HTTP/2 also "push_type", "topic", "collapse_id" and "apns_id", and "channel_id" instead of \
            "token" for a broadcast to a channel's subscribers (iOS 18 Live Activities). Or --tokens FILE \
            (one hex token per line) with --payload FILE.json (one payload for all), or --broadcast \
            --channel ID --payload FILE.json. Files are streamed: memory does not grow with their size.

            Exit status: 0 when every notification was accepted or rejected by the gateway; 1 when any \
            failed (unreachable gateway, unknown fate after a drop under --on-drop report, retry budget); \
            2 for usage or input errors; 3 when SIGTERM or SIGINT stopped it early (nothing more was \
            taken, what was handed to the sender was finished, the report and checkpoint are written).
            """)

    @Option(help: ArgumentHelp("The gateway: production, sandbox (Apple's HTTP/2 API), host:port or [ipv6]:port.",
                               valueName: "host:port"))
    var gateway: String?

    @Option(help: "apns (default) or blackberry (the BlackBerry Dynamics Push Channel: --noc or --proxy).")
    var target: PushService = .apns

    @OptionGroup(title: "BlackBerry Dynamics Push Channel (--target blackberry)")
    var blackberry: BlackBerryOptions

    @OptionGroup(title: "Device registry (--target blackberry)")
    var registry: PushChannelRegistryOptions

    /// `--proxy URL` itself is in `blackberry` (one option, read by target).
    @OptionGroup(title: "Proxy (APNs: --proxy URL)")
    var proxyBypass: NoProxyOption

    @Option(name: .customLong("protocol"),
            help: "h2 (Apple's HTTP/2 provider API) or binary. Default: h2 for production and sandbox, binary for host:port.")
    var wireProtocol: WireProtocol?

    @OptionGroup(title: "HTTP/2 (--protocol h2)")
    var http2: ProviderAPIOptions

    @OptionGroup(title: "TLS")
    var tls: TLSOptions

    @OptionGroup(title: "Campaign")
    var campaign: CampaignOptions

    @OptionGroup(title: "Engine")
    var engine: EngineOptions

    @Option(help: ArgumentHelp("Write the final report as JSON to this file.", valueName: "file"))
    var report: String?

    @Option(help: ArgumentHelp("Write rejected tokens as CSV (token,status,reason,timestamp) to this file.", valueName: "file"))
    var rejected: String?

    @Option(help: ArgumentHelp("Record progress durably in this file (see --resume).", valueName: "file"))
    var checkpoint: String?

    @Flag(help: "Continue from --checkpoint: lines it records as done are skipped.")
    var resume = false

    @OptionGroup(title: "Logs and metrics")
    var observability: ObservabilityOptions

    func validate() throws {
        if resume && checkpoint == nil { throw ValidationError("--resume needs --checkpoint FILE") }
        if target == .blackberry { return try validateBlackBerry() }
        if let flag = blackberry.givenFlag ?? registry.givenFlag { throw ValidationError("\(flag) is for --target blackberry") }
        guard let gateway else { throw ValidationError("give --gateway (APNs), or --target blackberry with --noc or --proxy") }
        try Self.validateGateway(gateway, wireProtocol, http2: http2, tls: tls, engine: engine)
        _ = try proxyConfiguration()
        if campaign.broadcast {
            guard try ProviderAPIOptions.wireProtocol(wireProtocol, gateway: gateway) == .h2 else {
                throw ValidationError("--broadcast is for the HTTP/2 provider API (--protocol h2): the binary protocol has no broadcasts")
            }
            guard http2.topic != nil else { throw ValidationError("--broadcast needs --bundle-id: the app's bundle id") }
        }
    }

    /// The checks of --gateway, --protocol, the HTTP/2 and engine flags and the credentials,
    /// shared with `salvo campaign run`.
    static func validateGateway(_ gateway: String, _ wireProtocol: WireProtocol?, http2: ProviderAPIOptions,
                                tls: TLSOptions, engine: EngineOptions) throws {
        let spoken = try ProviderAPIOptions.wireProtocol(wireProtocol, gateway: gateway)
        do { _ = try Endpoint(parsing: gateway, service: spoken.service) } catch { throw ValidationError(error.description) }
        switch spoken {
        case .binary:
            if let flag = http2.givenFlag { throw ValidationError("\(flag) is for the HTTP/2 provider API (--protocol h2)") }
        case .h2:
            if let flag = engine.binaryOnlyFlag {
                throw ValidationError("\(flag) is for the binary protocol; HTTP/2 (--protocol h2) has no use for it")
            }
            if http2.token.credentialsFile != nil {
                if tls.certificate != nil {
                    throw ValidationError("give --credentials FILE or --cert, not both: list the certificate in the file")
                }
                return
            }
            if http2.authKey != nil, tls.certificate != nil {
                throw ValidationError("give --auth-key (token authentication) or --cert (certificate authentication), not both")
            }
            if http2.authKey == nil, tls.certificate == nil {
                throw ValidationError("HTTP/2 needs credentials: --auth-key AuthKey_<KEYID>.p8 --key-id ID --team-id ID --topic "
                                      + "BUNDLE_ID (token), or --cert FILE (certificate)")
            }
            if http2.authKey != nil, http2.topic == nil {
                throw ValidationError("token authentication needs --topic: the app's bundle id")
            }
        }
    }

    func run() async throws {
        if target == .blackberry {
            let campaign = self.campaign, maximum = blackberry.maximumPayloadBytes
            return try await BlackBerryRun(command: "send", source: { try campaign.pushChannelSource(maximumPayloadBytes: maximum) },
                                           onBadLine: campaign.onBadLine == .skip ? .skip : .abort,
                                           countLines: campaign.countLines, options: blackberry.connection,
                                           maximumPayloadBytes: maximum, trust: tls.trust, noProxy: proxyBypass.noProxy,
                                           request: .notify,
                                           reportPath: report, rejectedPath: rejected, checkpointPath: checkpoint,
                                           resume: resume, registry: registry.db == nil ? nil : registry).run()
        }
        let observability = try await observability.start(watchingSignals: true)
        let (campaign, reader, resumedAfter, run) = try prepare()
        let ending = await run.send(campaign, from: reader)
        let outcome = await run.finish(
            badLines: reader.skippedLines, badLineCount: reader.skippedLineCount, ending: ending, lastLine: reader.linesRead,
            resumedAfter: resumedAfter, reportPath: report)
        await observability.finish()
        if case .stopped(inputError: _?) = ending { throw ExitCode(2) }
        if ending == .interrupted || run.wasInterrupted { throw ExitCode(3) }
        if outcome.failed > 0 { throw ExitCode(1) }
    }
}

extension SendCommand {
    /// Everything before the first notification: configuration, input, checkpoint, sender.
    func prepare() throws -> (CampaignFile, CampaignReader, resumedAfter: Int, CampaignRun) {
        let (configuration, campaignProtocol) = try Self.senderConfiguration(
            gateway!, wireProtocol, http2: http2, tls: tls, engine: engine, command: "send",  // validate() checked it
            proxy: proxyConfiguration())
        let routes = try Self.credentialRoutes(http2, gateway: gateway!, base: configuration, tls: tls, command: "send")
        let routing = routes.map { TopicRouting(topics: $0.flatMap(\.topics), defaultTopic: http2.topic) }
        let (campaign, reader, checkpoint, plan) = try openCampaign(for: campaignProtocol, topicRouting: routing)
        // The line count feeds the progress display's ETA; without a terminal, skip the extra pass.
        let total = isatty(STDERR_FILENO) == 1 ? self.campaign.countLines() : nil
        let run = try CampaignRun(command: "send", configuration: configuration, routes: routes, defaultTopic: http2.topic,
                                  rejectedPath: rejected, checkpoint: checkpoint, resumePlan: plan, total: total)
        return (campaign, reader, plan.doneThrough, run)
    }

    /// The APNs proxy: `--proxy URL` (APNs reads the BlackBerry group's option), else the
    /// environment's unless `--no-proxy`.
    func proxyConfiguration() throws -> ProxyConfiguration? {
        let host = try Endpoint(parsing: gateway!, service: ProviderAPIOptions.wireProtocol(wireProtocol, gateway: gateway!).service).host
        return try ProxySelection.configuration(url: blackberry.connection.proxy, noProxy: proxyBypass.noProxy, host: host)
    }

    /// The sender's configuration from the gateway, TLS, HTTP/2 and engine flags, and the
    /// protocol a campaign is read for; shared with `salvo campaign run`.
    static func senderConfiguration(_ gateway: String, _ wireProtocol: WireProtocol?, http2: ProviderAPIOptions, tls: TLSOptions,
                                    engine: EngineOptions, command: String, proxy: ProxyConfiguration?,
                                    tokenStore: (any ProviderTokenStore)? = nil) throws -> (SenderConfiguration, CampaignProtocol) {
        let spoken = try ProviderAPIOptions.wireProtocol(wireProtocol, gateway: gateway)
        let endpoint = try Endpoint(parsing: gateway, service: spoken.service)
        var configuration = SenderConfiguration(host: endpoint.host, port: endpoint.port, tls: try tls.configuration())
        configuration.proxy = proxy
        if tls.insecure { _ = try tls.makeContext(command: command) }  // prints the warning once
        engine.apply(to: &configuration)
        switch spoken {
        case .binary:
            configuration.transport = .binary(engine.frameFormat)
            return (configuration, .binary(maximumPayloadLength: configuration.maximumPayloadLength))
        case .h2:
            do {
                let warnings = try http2.apply(to: &configuration, allowWorldReadableKey: tls.allowWorldReadableKey,
                                               tokenStore: try http2.providerTokenStore(fallback: tokenStore))
                for warning in warnings { printError("salvo \(command): warning: \(warning)") }
            } catch {
                printError("salvo \(command): \(error)")
                throw ExitCode(2)
            }
            return (configuration, .http2(defaultPushType: http2.pushType))
        }
    }

    /// With `--credentials`: a route per entry of the file, each key and certificate read
    /// and checked now (an error names the file and the entry: exit 2); nil without.
    /// `base` is the run's configuration: gateway, engine, HTTP/2 defaults and trust.
    static func credentialRoutes(_ http2: ProviderAPIOptions, gateway: String, base: SenderConfiguration, tls: TLSOptions,
                                 command: String, tokenStore fallback: (any ProviderTokenStore)? = nil) throws -> [RoutingSender.Route]? {
        guard let path = http2.token.credentialsFile else { return nil }
        do {
            let file = try CredentialsFile(path: path)
            if let topic = http2.topic, !file.topics.contains(topic) {
                throw FileInputError(description: "--topic \(topic) is served by no entry of --credentials \(path) (it serves "
                                     + "\(file.topics.joined(separator: ", ")))")
            }
            let environment = ["production", "sandbox"].contains(gateway) ? gateway : nil
            let (routes, warnings) = try file.routes(base: base, gatewayEnvironment: environment,
                                                     tokenStore: try http2.providerTokenStore(fallback: fallback),
                                                     allowWorldReadableKey: tls.allowWorldReadableKey)
            for warning in warnings { printError("salvo \(command): warning: \(warning)") }
            return routes
        } catch {
            printError("salvo \(command): \(error)")
            throw ExitCode(2)
        }
    }

    /// Opens the input and the checkpoint; with --resume, checks that the checkpoint belongs
    /// to the input and reads only what it does not record as done: the lines after it,
    /// and those that failed before it. Says so, and ends the command (before connecting)
    /// when there is nothing to send. With `topicRouting` (`--credentials`), a line whose
    /// topic no entry serves is a bad line; under `--on-bad-line abort` the whole input is
    /// read first, so that such a line stops the run before anything is sent.
    func openCampaign(for campaignProtocol: CampaignProtocol, topicRouting: TopicRouting? = nil)
        throws -> (CampaignFile, CampaignReader, CampaignCheckpoint?, ResumePlan)
    {
        do {
            var file = try campaign.campaignFile(for: campaignProtocol)
            file.topicRouting = topicRouting
            let bound = try checkpoint.map { try CampaignCheckpoint(Checkpoint(path: $0), campaign: file.source.path) }
            var plan = ResumePlan.fresh
            if resume, let bound, let point = try bound.resumePoint() {
                if point.prefix == nil {
                    printError("salvo send: warning: checkpoint \(bound.checkpoint.path) is from an older salvo and does not "
                               + "record its campaign: resuming after line \(point.line) of \(file.source.path) without checking "
                               + "that they belong together (the checkpoint is rewritten in the current format)")
                }
                plan = ResumePlan(point)
                file.resumePlan = plan
                printError(Self.resumeNote(plan, checkpoint: bound.checkpoint.path))
            }
            try Self.refuseEmpty(file, plan: plan, command: "send")
            if topicRouting != nil, file.badLinePolicy == .abort { try Self.checkEveryLine(file, command: "send") }
            let reader = try file.makeReader()
            // From here on the checkpoint describes this run (without --resume it starts
            // over), and one that cannot be written stops the run before anything is sent.
            try bound?.save(plan)
            return (file, reader, bound, plan)
        } catch let exit as ExitCode {
            throw exit
        } catch {
            printError("salvo send: \(error)")
            throw ExitCode(2)
        }
    }

    /// Reads all of `file` once, before anything is sent: its first bad line (a topic no
    /// credentials serve, or any other) ends the command, exit 2, with nothing sent.
    static func checkEveryLine(_ file: CampaignFile, command: String) throws {
        let reader = try file.makeReader()
        do {
            while try reader.next() != nil {}
        } catch {
            printError("salvo \(command): \(error); nothing was sent (with --credentials the whole campaign is checked first; "
                       + "--on-bad-line skip sends the other lines)")
            throw ExitCode(2)
        }
    }

    /// What a resume reads, for stderr: `resuming after line N (from FILE)`, and the failed
    /// lines it sends again first.
    static func resumeNote(_ plan: ResumePlan, checkpoint: String) -> String {
        let failed = plan.retryLineCount
        guard failed > 0 else { return "resuming after line \(plan.doneThrough) (from \(checkpoint))" }
        return "resuming after line \(plan.doneThrough) (from \(checkpoint)); first sending again the \(failed) line"
            + "\(failed == 1 ? "" : "s") that failed: \(ResumePlan.describe(plan.retry))"
    }

    /// Ends the command before anything connects when `file` holds no notification to send
    /// under `plan`: an empty campaign (or one of bad lines only) is an input error, exit 2;
    /// a resume with nothing left is done, exit 0.
    static func refuseEmpty(_ file: CampaignFile, plan: ResumePlan, command: String) throws {
        let probe = try file.makeReader()
        do {
            if try probe.nextItem() != nil { return }
        } catch {
            return  // a bad line under --on-bad-line abort: the run reports it, with its number
        }
        let path = file.source.path
        if plan != .fresh {
            print("nothing left to send: the checkpoint records every line of \(path) as done")
            throw ExitCode.success
        }
        if probe.skippedLineCount > 0 {
            let first = probe.skippedLines.first.map { " (the first, \($0))" } ?? ""
            printError("salvo \(command): none of the \(probe.skippedLineCount) notification lines of \(path) can be sent"
                       + "\(first): nothing was sent")
        } else {
            printError("salvo \(command): the campaign \(path) has no notifications (\(probe.linesRead) line"
                       + "\(probe.linesRead == 1 ? "" : "s"), none of them a notification): nothing was sent")
        }
        throw ExitCode(2)
    }
}

extension WireProtocol {
    /// The service a `--gateway` value names in this protocol (its default port).
    var service: Endpoint.Service { self == .h2 ? .providerAPI : .gateway }
}
