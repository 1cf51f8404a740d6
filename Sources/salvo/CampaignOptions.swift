import ArgumentParser
import Foundation
import SalvoCampaignFiles
import SalvoEngine

/// The campaign input flags.
struct CampaignOptions: ParsableArguments {
    @Option(help: ArgumentHelp("A JSONL campaign: one {\"token\", \"payload\"} object per line.", valueName: "file"))
    var input: String?

    @Option(help: ArgumentHelp("A list of hex device tokens, one per line (use with --payload).", valueName: "file"))
    var tokens: String?

    @Option(help: ArgumentHelp("The JSON payload sent to every token of --tokens.", valueName: "file"))
    var payload: String?

    @Option(name: .customLong("on-bad-line"), help: "abort (default) or skip lines that cannot be sent; skipped lines are listed in the report.")
    var onBadLine: BadLineChoice = .abort

    enum BadLineChoice: String, ExpressibleByArgument, CaseIterable {
        case abort, skip
    }

    func validate() throws { try Self.validateInput(input: input, tokens: tokens, payload: payload) }

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
        if let input {
            return CampaignFile(.jsonl(input), for: campaignProtocol, onBadLine: policy)
        }
        let payloadBytes = try readWholeFile(payload!, limit: 1 << 20, what: "payload file")
        return CampaignFile(.tokens(tokens!, payload: payloadBytes), for: campaignProtocol, onBadLine: policy)
    }

    /// Lines in the input, for the progress display's ETA (a fast newline count).
    func countLines() -> Int? {
        (input ?? tokens).flatMap(Self.countLines(path:))
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
