import SalvoEngine
import SalvoIO
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// What a checkpoint knows of the lines it covers, to tell its campaign file from another.
///
/// A resume skips lines by number, so it is only right against a file whose first N lines
/// are the ones the checkpoint covers. What a user does between runs decides what is
/// checked: fixing the line a run stopped at, or appending lines, leaves lines 1…N alone
/// and is fine; a shorter file, another file, or changed lines before N + 1 are refused.
///
/// The fingerprint is the length of lines 1…N and a SHA-256 of their first and last
/// 64 KiB. Hashing every byte would also catch an edit of the same length in the middle
/// of a long prefix, at the price of a second pass of SHA-256 over the whole file during
/// the run (a cost of the order of sending the line; see the Performance notes article);
/// the length, the start and the lines just before the resume point catch
/// what actually happens: another file, a shorter or regenerated one, lines inserted or
/// removed.
public struct CampaignPrefix: Sendable, Hashable {
    /// The bytes of lines 1…N, up to the end of line N's text: its line ending is left out,
    /// so a last line without one may gain one when lines are appended.
    public var byteCount: Int
    /// SHA-256 of those bytes when they are at most 128 KiB; otherwise of their first
    /// 64 KiB followed by their last 64 KiB.
    public var sha256: [UInt8]

    /// A fingerprint as read from a checkpoint file.
    public init(byteCount: Int, sha256: [UInt8]) {
        self.byteCount = byteCount
        self.sha256 = sha256
    }

    /// How much of each end of the prefix is hashed.
    static let sampleLength = 64 << 10
}

/// A checkpoint bound to its campaign file: it checks a resume point against the file,
/// and saves progress with the fingerprint of the lines it covers, one save at a time.
///
/// A run's periodic saves and its final one go through one `CampaignCheckpoint`, so saves
/// never overlap: each one fingerprints and renames into place before the next begins.
public final class CampaignCheckpoint: Sendable {
    /// The checkpoint file.
    public let checkpoint: Checkpoint
    /// The campaign file it belongs to.
    public let campaignPath: String
    private let prefixes: Locked<CampaignPrefixReader>

    /// Saves to `checkpoint` for the campaign file at `path`, whose lines it fingerprints.
    ///
    /// - Throws: `CheckpointError.campaignUnreadable` when the campaign cannot be opened.
    public init(_ checkpoint: Checkpoint, campaign path: String) throws(CheckpointError) {
        self.checkpoint = checkpoint
        campaignPath = path
        do throws(CampaignError) {
            prefixes = Locked(try CampaignPrefixReader(path: path))
        } catch {
            throw .campaignUnreadable(error)
        }
    }

    /// The resume point saved in the checkpoint, checked against the campaign; nil when
    /// there is no checkpoint file.
    ///
    /// A version-1 checkpoint has no fingerprint: it is accepted when the campaign has at
    /// least its N lines, and returned with `prefix` nil so that the caller can say it was
    /// not checked. (Refusing it would strand a run interrupted before an upgrade.)
    ///
    /// - Throws: `.otherCampaign` when the campaign has fewer lines than the checkpoint
    ///   covers, or lines 1…N differ from those it was written for; `.corrupt`, `.io`,
    ///   `.campaignUnreadable`.
    public func resumePoint() throws(CheckpointError) -> ResumePoint? {
        guard let saved = try checkpoint.load() else { return nil }
        let found = try prefixes.withLock { prefixes throws(CheckpointError) in try prefix(throughLine: saved.line, of: prefixes) }
        guard let expected = saved.prefix else { return saved }
        if found.byteCount != expected.byteCount {
            throw .otherCampaign(
                path: checkpoint.path, campaign: campaignPath,
                reason: "its lines 1…\(saved.line) are \(found.byteCount) bytes long, and the checkpoint was written when "
                    + "they were \(expected.byteCount) (lines were changed, added or removed before line \(saved.line + 1), "
                    + "or it is another file)")
        }
        if found.sha256 != expected.sha256 {
            throw .otherCampaign(
                path: checkpoint.path, campaign: campaignPath,
                reason: "its lines 1…\(saved.line) have the length the checkpoint recorded but other contents "
                    + "(they were edited, or it is another file)")
        }
        return saved
    }

    /// Saves that every line up to and including `line` is done, with the fingerprint of
    /// those lines. A later line than the last save reads on from there; an earlier one
    /// reads the campaign from its start again.
    ///
    /// - Throws: `.io` when the checkpoint cannot be written (the previous one is left as
    ///   it was); `.campaignUnreadable`; `.otherCampaign` when the campaign has fewer than
    ///   `line` lines (it was cut short during the run).
    public func save(completedThroughLine line: Int) throws(CheckpointError) {
        try save(ResumePlan(doneThrough: line, retry: []))
    }

    /// Saves `plan`: every line up to its `doneThrough` is final, and those of its `retry`
    /// are to be sent again; with the fingerprint of lines 1…`doneThrough`.
    ///
    /// - Throws: as `save(completedThroughLine:)`.
    public func save(_ plan: ResumePlan) throws(CheckpointError) {
        try prefixes.withLock { prefixes throws(CheckpointError) in
            let prefix = try prefix(throughLine: plan.doneThrough, of: prefixes)
            try checkpoint.save(ResumePoint(line: plan.doneThrough, prefix: prefix, retry: plan.retry))
        }
    }

    private func prefix(throughLine line: Int, of prefixes: CampaignPrefixReader) throws(CheckpointError) -> CampaignPrefix {
        let prefix: CampaignPrefix?
        do throws(CampaignError) {
            prefix = try prefixes.prefix(throughLine: line)
        } catch {
            throw .campaignUnreadable(error)
        }
        guard let prefix else {
            throw .otherCampaign(path: checkpoint.path, campaign: campaignPath,
                                 reason: "it has \(prefixes.linesRead) lines, fewer than the \(line) the checkpoint covers "
                                     + "(a shorter file, or another one)")
        }
        return prefix
    }
}

/// Reads a campaign's lines as a run completes them, to fingerprint lines 1…N for each
/// save: its lines are numbered as `CampaignReader` numbers them, and reading on from the
/// last save costs one more pass over the file in all.
final class CampaignPrefixReader {
    let path: String
    private var lines: LineReader
    private let fd: FileDescriptor
    private var sample: [UInt8]

    init(path: String) throws(CampaignError) {
        self.path = path
        lines = try LineReader(path: path, maximumLineLength: CampaignReader.defaultMaximumLineLength)
        do throws(IOError) { fd = try FileDescriptor.open(path: path, .readOnly) } catch { throw .io(error) }
        sample = []
    }

    deinit { try? fd.close() }

    /// Lines read so far: after `prefix` returned nil, the number of lines in the file.
    var linesRead: Int { lines.lineNumber }

    /// The fingerprint of lines 1…`line`, or nil when the file has fewer lines.
    func prefix(throughLine line: Int) throws(CampaignError) -> CampaignPrefix? {
        if line < lines.lineNumber {
            lines = try LineReader(path: path, maximumLineLength: CampaignReader.defaultMaximumLineLength)
        }
        while lines.lineNumber < line {
            guard try lines.nextLine() != nil else { return nil }
        }
        let byteCount = line == 0 ? 0 : Int(lines.lineEnd)
        let sampled = CampaignPrefix.sampleLength
        sample.removeAll(keepingCapacity: true)
        if byteCount <= 2 * sampled {
            try append(0..<byteCount)
        } else {
            try append(0..<sampled)
            try append(byteCount - sampled..<byteCount)
        }
        return CampaignPrefix(byteCount: byteCount, sha256: sample.withUnsafeBytes { SHA256.digest([$0]) })
    }

    /// Appends the file's bytes in `range` to `sample` (fewer if the file is shorter now:
    /// the fingerprint then differs, as it should).
    private func append(_ range: Range<Int>) throws(CampaignError) {
        let start = sample.count
        sample.append(contentsOf: repeatElement(0, count: range.count))
        var done = 0
        while done < range.count {
            let read = sample.withUnsafeMutableBytes { bytes in
                Result { () throws(IOError) in
                    try fd.readSome(into: UnsafeMutableRawBufferPointer(rebasing: bytes[(start + done)..<(start + range.count)]),
                                    atOffset: range.lowerBound + done, target: path)
                }
            }
            let n: Int
            do throws(IOError) { n = try read.get() } catch { throw .io(error) }
            if n == 0 { break }
            done += n
        }
        sample.removeLast(range.count - done)
    }
}
