import SalvoEngine
import SalvoIO
import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// How far a campaign got, kept in a small file so that a killed run can resume.
///
/// The file holds a line N such that every line up to N is final (accepted, rejected, or
/// failed), the lines up to N that failed (a resume sends them again: `retry`), and a
/// fingerprint of lines 1…N (`CampaignPrefix`), so that it is resumed only against the
/// campaign it was written for (`CampaignCheckpoint` checks). The format is text, easy to
/// read:
///
///     salvo-checkpoint v3
///     line 12345
///     prefix-bytes 1728300
///     prefix-sha256 9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08
///     retry 17 500-510
///
/// Without failed lines to retry it is written as version 2, the same without the `retry`
/// line, which older salvos read too. Version 2 files, and version 1 (`salvo-checkpoint v1`
/// and the `line` alone; `ResumePoint.prefix` nil), are still read.
///
/// `save` is atomic and durable: it writes a temporary file of its own in the same
/// directory, fsyncs it, renames it over the checkpoint and fsyncs the directory. After a
/// crash or `kill -9` the file holds either the old or the new point, never a torn one.
/// Saves never interfere with each other's temporary files; when two overlap, the one
/// renamed last is what the file holds (`CampaignCheckpoint` saves one at a time).
public struct Checkpoint: Sendable, Hashable {
    /// The checkpoint file.
    public let path: String

    /// A checkpoint kept at `path` (nothing is read or written yet).
    public init(path: String) {
        self.path = path
    }

    /// Records `point`.
    ///
    /// - Throws: `CheckpointError.io` when the file cannot be written; the previous
    ///   checkpoint is then left as it was.
    public func save(_ point: ResumePoint) throws(CheckpointError) {
        do throws(IOError) {
            try replaceFileAtomically(path, with: point.text, permissions: [.ownerReadWrite, .groupRead, .otherRead])
        } catch {
            throw .io(error)
        }
    }

    /// The point saved last, or nil when there is no checkpoint file yet.
    ///
    /// - Throws: `CheckpointError.corrupt` when the file is not a checkpoint (it is never
    ///   guessed at: resuming from a wrong line would resend or drop notifications);
    ///   `.io` when it cannot be read.
    public func load() throws(CheckpointError) -> ResumePoint? {
        let fd: FileDescriptor
        do throws(IOError) {
            fd = try FileDescriptor.open(path: path, .readOnly)
        } catch where error.errno == .noSuchFileOrDirectory {
            return nil
        } catch {
            throw .io(error)
        }
        defer { try? fd.close() }
        // One byte more than a checkpoint can hold is enough to tell a longer file.
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: ResumePoint.maximumTextLength + 1, alignment: 1)
        defer { bytes.deallocate() }
        var count = 0
        do throws(IOError) {
            while count < bytes.count {
                let n = try fd.readSome(into: UnsafeMutableRawBufferPointer(rebasing: bytes[count...]), target: path)
                if n == 0 { break }
                count += n
            }
        } catch {
            throw .io(error)
        }
        do throws(CheckpointFormatError) {
            return try ResumePoint.parse(Array(bytes[..<count]))
        } catch {
            throw .corrupt(path: path, reason: error.reason)
        }
    }
}

/// What a checkpoint holds: the line through which a campaign is final, the lines before
/// it that failed and are to be sent again, and what those lines were.
public struct ResumePoint: Sendable, Hashable {
    /// Every line up to and including this one is final (0: none yet): done, except those
    /// in `retry`.
    public var line: Int
    /// The fingerprint of lines 1…`line`; nil in a version-1 checkpoint, which had none.
    public var prefix: CampaignPrefix?
    /// Lines up to `line` that failed, which a resume sends again: ascending, disjoint and
    /// not adjacent, at most `maximumRetryRanges` of them.
    public var retry: [ClosedRange<Int>]

    /// Final through `line` (0 or more), with the fingerprint of lines 1…`line` if known,
    /// and the failed lines to send again.
    public init(line: Int, prefix: CampaignPrefix?, retry: [ClosedRange<Int>] = []) {
        precondition(line >= 0, "a checkpoint line cannot be negative")
        precondition(retry.isEmpty || prefix != nil, "a checkpoint with lines to retry has a fingerprint")
        precondition(ResumePlan.isWellFormed(retry, through: line), "retry ranges must be ascending, apart and within 1...line")
        self.line = line
        self.prefix = prefix
        self.retry = retry
    }

    static let header = "salvo-checkpoint v3"
    static let headerVersion2 = "salvo-checkpoint v2"
    static let headerVersion1 = "salvo-checkpoint v1"
    /// The most runs of failed lines a checkpoint records; a run with more holds its line
    /// back before the first that does not fit (what follows is then sent again).
    public static let maximumRetryRanges = 1000
    /// Longer than any checkpoint Salvo writes (the header lines and the retry ranges).
    static let maximumTextLength = 256 + maximumRetryRanges * 41

    /// The checkpoint file's contents: version 3 with lines to retry, else version 2, or
    /// version 1 when there is no prefix.
    public var text: String {
        guard let prefix else { return "\(Self.headerVersion1)\nline \(line)\n" }
        let hex = prefix.sha256.map { ($0 < 16 ? "0" : "") + String($0, radix: 16) }.joined()
        let common = "line \(line)\nprefix-bytes \(prefix.byteCount)\nprefix-sha256 \(hex)\n"
        guard !retry.isEmpty else { return "\(Self.headerVersion2)\n" + common }
        return "\(Self.header)\n" + common + "retry " + ResumePlan.describe(retry, separator: " ", dash: "-") + "\n"
    }

    /// Reads a checkpoint file's contents: the inverse of `text`, and nothing else.
    ///
    /// - Throws: `CheckpointFormatError` saying what is wrong, for anything but a
    ///   checkpoint exactly as Salvo writes it.
    public static func parse(_ bytes: [UInt8]) throws(CheckpointFormatError) -> ResumePoint {
        guard bytes.count <= maximumTextLength else { throw .init("it is longer than a checkpoint can be") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw .init("it is not UTF-8 text") }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        switch lines.first {
        case Substring(header)?:
            guard lines.count == 6, lines[5].isEmpty else {
                throw .init("expected \"line N\", \"prefix-bytes B\", \"prefix-sha256 H\" and \"retry L...\" after the "
                            + "first line, one per line, and nothing after them")
            }
            let line = try number(lines[1], key: "line")
            let byteCount = try number(lines[2], key: "prefix-bytes")
            let sha256 = try digest(lines[3], key: "prefix-sha256")
            let retry = try ranges(lines[4], key: "retry", through: line)
            return ResumePoint(line: line, prefix: CampaignPrefix(byteCount: byteCount, sha256: sha256), retry: retry)
        case Substring(headerVersion2)?:
            guard lines.count == 5, lines[4].isEmpty else {
                throw .init("expected \"line N\", \"prefix-bytes B\" and \"prefix-sha256 H\" after the first line, "
                            + "one per line, and nothing after them")
            }
            let line = try number(lines[1], key: "line")
            let byteCount = try number(lines[2], key: "prefix-bytes")
            let sha256 = try digest(lines[3], key: "prefix-sha256")
            return ResumePoint(line: line, prefix: CampaignPrefix(byteCount: byteCount, sha256: sha256))
        case Substring(headerVersion1)?:
            guard lines.count == 3, lines[2].isEmpty else {
                throw .init("expected a second line \"line N\" and nothing after it")
            }
            return ResumePoint(line: try number(lines[1], key: "line"), prefix: nil)
        default:
            throw .init("the first line is not \"\(header)\"")
        }
    }

    /// The decimal value of a `key N` line, written as `text` writes it: no leading zero.
    private static func number(_ line: Substring, key: String) throws(CheckpointFormatError) -> Int {
        guard line.hasPrefix(key + " "), let value = decimal(line.dropFirst(key.count + 1))
        else { throw .init("\"\(line)\" is not \"\(key) N\" with N a whole number without leading zeros") }
        return value
    }

    /// `digits` as `text` writes a number: 1 to 19 ASCII digits, no leading zero.
    private static func decimal(_ digits: Substring) -> Int? {
        guard (1...19).contains(digits.count), digits.allSatisfy({ $0.isASCII && $0.isNumber }),
              digits.count == 1 || digits.first != "0" else { return nil }
        return Int(digits)
    }

    /// The ranges of a `key A B-C ...` line, as `text` writes them: at least one, each a line
    /// or a `first-last` run, ascending and apart, within 1…`through`.
    private static func ranges(_ line: Substring, key: String, through last: Int) throws(CheckpointFormatError)
        -> [ClosedRange<Int>]
    {
        guard line.hasPrefix(key + " ") else { throw .init("\"\(line)\" is not \"\(key)\" and the lines to send again") }
        var ranges: [ClosedRange<Int>] = []
        for item in line.dropFirst(key.count + 1).split(separator: " ", omittingEmptySubsequences: false) {
            let bounds = item.split(separator: "-", omittingEmptySubsequences: false)
            guard (1...2).contains(bounds.count), let first = decimal(bounds[0]), let final = decimal(bounds.last!),
                  bounds.count == 1 || first < final else {
                throw .init("\"\(item)\" in the \(key) line is not a line number N or a run N-M with N < M")
            }
            ranges.append(first...final)
        }
        guard ranges.count <= maximumRetryRanges else {
            throw .init("the \(key) line has \(ranges.count) runs of lines; a checkpoint holds at most \(maximumRetryRanges)")
        }
        guard ResumePlan.isWellFormed(ranges, through: last) else {
            throw .init("the \(key) line's lines are not ascending and apart, or not within 1…\(last)")
        }
        return ranges
    }

    /// The 32 bytes of a `key <64 lowercase hex digits>` line.
    private static func digest(_ line: Substring, key: String) throws(CheckpointFormatError) -> [UInt8] {
        let hex = Array(line.utf8.dropFirst(key.count + 1))
        guard line.hasPrefix(key + " "), hex.count == 64,
              hex.allSatisfy({ (0x30...0x39).contains($0) || (0x61...0x66).contains($0) }) else {
            throw .init("\"\(line)\" is not \"\(key)\" and 64 lowercase hex digits")
        }
        return stride(from: 0, to: 64, by: 2).map { UInt8(String(decoding: hex[$0..<$0 + 2], as: UTF8.self), radix: 16)! }
    }
}

/// Why bytes are not a checkpoint.
public struct CheckpointFormatError: Error, Sendable, Hashable {
    /// What is wrong, e.g. `the first line is not "salvo-checkpoint v2"`.
    public var reason: String

    /// Not a checkpoint, for `reason`.
    public init(_ reason: String) { self.reason = reason }
}

/// Why a checkpoint could not be saved, loaded or resumed from.
public enum CheckpointError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A system call failed.
    case io(IOError)
    /// The file exists but is not a checkpoint Salvo wrote.
    case corrupt(path: String, reason: String)
    /// The checkpoint was written for another campaign file, or the campaign's lines that
    /// it covers changed since.
    case otherCampaign(path: String, campaign: String, reason: String)
    /// The campaign file could not be read to fingerprint the lines a checkpoint covers.
    case campaignUnreadable(CampaignError)

    /// The problem and what to do about it, for error messages.
    public var description: String {
        switch self {
        case .io(let error):
            return "checkpoint: \(error)"
        case .corrupt(let path, let reason):
            return "checkpoint \(path) is not valid: \(reason); delete it to start from the beginning"
        case .otherCampaign(let path, let campaign, let reason):
            return "checkpoint \(path) does not belong to \(campaign): \(reason). Resuming would skip lines by their "
                + "number, so it is refused: give the campaign file the checkpoint was written for, or start without "
                + "--resume to send \(campaign) from its first line (the checkpoint then starts over)"
        case .campaignUnreadable(let error):
            return "checkpoint: cannot fingerprint the campaign: \(error)"
        }
    }
}
