import ArgumentParser
import Foundation
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire

/// The campaign input flags.
struct CampaignOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A JSONL campaign: one {\"token\", \"payload\"} object per line.", valueName: "file"))
    var input: String?

    @Option(help: ArgumentHelp("A list of hex device tokens, one per line (use with --payload).", valueName: "file"))
    var tokens: String?

    @Option(help: ArgumentHelp("The JSON payload sent to every token of --tokens.", valueName: "file"))
    var payload: String?

    @Flag(help: "Broadcast --payload (a Live Activity update or end) to the subscribers of each --channel (HTTP/2, iOS 18).")
    var broadcast = false

    @Option(name: .customLong("channel"),
            help: ArgumentHelp("A broadcast channel's id, as `salvo channel create` printed it (with --broadcast; repeat for several).",
                               valueName: "id"))
    var channels: [String] = []

    @Option(name: .customLong("on-bad-line"), help: "abort (default) or skip lines that cannot be sent; skipped lines are listed in the report.")
    var onBadLine: BadLineChoice = .abort

    enum BadLineChoice: String, ExpressibleByArgument, CaseIterable {
        case abort, skip
    }

    func validate() throws {
        guard broadcast || !channels.isEmpty else { return try Self.validateInput(input: input, tokens: tokens, payload: payload) }
        guard broadcast else { throw ValidationError("--channel goes with --broadcast") }
        guard !channels.isEmpty else {
            throw ValidationError("--broadcast needs --channel ID (or a campaign with \"channel_id\" lines: --input FILE.jsonl)")
        }
        if input != nil || tokens != nil { throw ValidationError("--broadcast --channel sends --payload; give no --input or --tokens") }
        guard let payload else { throw ValidationError("--broadcast needs --payload FILE.json (a Live Activity update or end)") }
        try refuseDirectory(payload, flag: "--payload")
        for channel in channels where !BroadcastRules.isChannelID(channel) {
            throw ValidationError("--channel \(channel) is not a channel id (base64, as Apple made it)")
        }
    }

    /// --input, or --tokens with --payload: shared with `salvo campaign create`.
    static func validateInput(input: String?, tokens: String?, payload: String?) throws {
        switch (input, tokens, payload) {
        case (_?, nil, nil), (nil, _?, _?): break
        case (_?, _, _): throw ValidationError("give either --input or --tokens with --payload, not both")
        case (nil, _?, nil): throw ValidationError("--tokens needs --payload FILE.json (the payload sent to every token)")
        case (nil, nil, _?): throw ValidationError("--payload goes with --tokens FILE")
        case (nil, nil, nil): throw ValidationError("nothing to send: give --input FILE.jsonl, or --tokens FILE with --payload FILE.json")
        }
        try refuseDirectory(input, flag: "--input")
        try refuseDirectory(tokens, flag: "--tokens")
        try refuseDirectory(payload, flag: "--payload")
    }

    /// The campaign as a source the sender can read again.
    func campaignFile(for campaignProtocol: CampaignProtocol) throws -> CampaignFile {
        let policy: BadLinePolicy = onBadLine == .skip ? .skip : .abort
        if broadcast {
            return CampaignFile(.jsonl(try broadcastCampaign()), for: campaignProtocol, onBadLine: policy)
        }
        if let input {
            return CampaignFile(.jsonl(input), for: campaignProtocol, onBadLine: policy)
        }
        let payloadBytes = try readWholeFile(payload!, limit: 1 << 20, what: "payload file")
        return CampaignFile(.tokens(tokens!, payload: payloadBytes), for: campaignProtocol, onBadLine: policy)
    }

    /// `--broadcast --channel …` as a JSONL campaign, one line per channel, in a private
    /// file: the same channels and payload make the same file, so a checkpoint of it resumes.
    /// The reader checks the payload as it checks any line's.
    private func broadcastCampaign() throws -> String {
        let payload = try readWholeFile(self.payload!, limit: 1 << 20, what: "payload file")
        var text = ""
        for channel in channels {
            text += #"{"channel_id":""# + channel + #"","payload":"# + String(decoding: payload, as: UTF8.self)
                .replacingOccurrences(of: "\n", with: " ").replacingOccurrences(of: "\r", with: " ") + "}\n"
        }
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-broadcast-\(getpid())")
        try FileManager.default.createDirectory(at: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        let path = directory.appendingPathComponent("broadcast.jsonl").path
        guard FileManager.default.createFile(atPath: path, contents: Data(text.utf8), attributes: [.posixPermissions: 0o600]) else {
            throw ValidationError("cannot write the broadcast campaign to \(path)")
        }
        atexit { try? FileManager.default.removeItem(atPath: FileManager.default.temporaryDirectory
            .appendingPathComponent("salvo-broadcast-\(getpid())").path) }
        return path
    }

    /// Lines in the input, for the progress display's ETA (a fast newline count).
    func countLines() -> Int? {
        broadcast ? channels.count : (input ?? tokens).flatMap(Self.countLines(path:))
    }

    /// Lines in the file at `path` (a fast newline count); nil when it cannot be read.
    static func countLines(path: String) -> Int? {
        guard let handle = FileHandle(forReadingAtPath: path) else { return nil }
        defer { try? handle.close() }
        var count = 0
        while let chunk = try? handle.read(upToCount: 1 << 20), !chunk.isEmpty {
            count += chunk.withUnsafeBytes { bytes in bytes.reduce(0) { $0 + ($1 == 0x0A ? 1 : 0) } }
        }
        return count
    }
}
