import Foundation
import SalvoIO
import SystemPackage
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

@Suite struct CheckpointTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    static let prefix = CampaignPrefix(byteCount: 1_728_300, sha256: (0..<32).map { UInt8($0 * 7) })

    @Test func aMissingFileMeansNoCheckpoint() throws {
        #expect(try Checkpoint(path: "\(directory.path)/run.checkpoint").load() == nil)
    }

    @Test func saveAndLoadRoundTripAndOverwrite() throws {
        let checkpoint = Checkpoint(path: "\(directory.path)/run.checkpoint")
        try checkpoint.save(ResumePoint(line: 12345, prefix: Self.prefix))
        #expect(try checkpoint.load() == ResumePoint(line: 12345, prefix: Self.prefix))
        #expect(try String(contentsOfFile: checkpoint.path, encoding: .utf8) == """
            salvo-checkpoint v2
            line 12345
            prefix-bytes 1728300
            prefix-sha256 00070e151c232a31383f464d545b626970777e858c939aa1a8afb6bdc4cbd2d9

            """)
        try checkpoint.save(ResumePoint(line: 0, prefix: CampaignPrefix(byteCount: 0, sha256: Self.prefix.sha256)))
        #expect(try checkpoint.load()?.line == 0)
        try checkpoint.save(ResumePoint(line: 9_000_000_000, prefix: Self.prefix))
        #expect(try checkpoint.load()?.line == 9_000_000_000)
        // Nothing is left behind but the checkpoint itself.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["run.checkpoint"])
    }

    /// The race behind "rename to c.ckpt c.ckpt.tmp-NNN failed: ENOENT": two saves in one
    /// process wrote the same temporary file, and the first rename took it from the second.
    @Test func savesAtTheSameTimeNeverFailAndLeaveOneOfThem() throws {
        let checkpoint = Checkpoint(path: "\(directory.path)/run.checkpoint")
        let failures = Locked<[CheckpointError]>([])
        DispatchQueue.concurrentPerform(iterations: 8) { thread in
            for save in 1...25 {
                do throws(CheckpointError) {
                    try checkpoint.save(ResumePoint(line: thread * 1000 + save, prefix: Self.prefix))
                } catch {
                    failures.withLock { $0.append(error) }
                }
            }
        }
        let failed = failures.withLock { $0 }
        #expect(failed.isEmpty, "\(failed.count) of 200 saves failed, the first: \(failed.first.map(String.init(describing:)) ?? "")")
        let line = try #require(try checkpoint.load()).line
        #expect((0..<8).contains { thread in (thread * 1000 + 1...thread * 1000 + 25).contains(line) })
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["run.checkpoint"])
    }

    @Test func theDirectoryToSyncIsTheFilesParent() {
        // Not tested by changing the working directory: tests run in parallel in one process.
        #expect(SalvoIO.directory(of: "run.checkpoint") == ".")
        #expect(SalvoIO.directory(of: "state/run.checkpoint") == "state")
        #expect(SalvoIO.directory(of: "/run.checkpoint") == "/")
        #expect(SalvoIO.directory(of: "/var/lib/salvo/run.checkpoint") == "/var/lib/salvo")
    }

    @Test func textAndParseAreInversesForSeededPoints() throws {
        var generator = SplitMix64(seed: 9)
        for _ in 0..<200 {
            let line = Int.random(in: 0...999_999_999_999, using: &generator)
            let prefix = Bool.random(using: &generator) ? nil : CampaignPrefix(
                byteCount: Int.random(in: 0...Int(Int64.max / 2), using: &generator),
                sha256: (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) })
            let point = ResumePoint(line: line, prefix: prefix)
            #expect(try ResumePoint.parse(Array(point.text.utf8)) == point)
        }
    }

    @Test func textAndParseAreInversesWithLinesToRetry() throws {
        var generator = SplitMix64(seed: 11)
        for _ in 0..<200 {
            let line = Int.random(in: 1...999_999_999, using: &generator)
            var retry: [ClosedRange<Int>] = []
            var next = 1
            for _ in 0..<Int.random(in: 1...20, using: &generator) {
                let first = next + Int.random(in: 0...1000, using: &generator)
                let last = first + (Bool.random(using: &generator) ? 0 : Int.random(in: 1...50, using: &generator))
                guard last <= line else { break }
                retry.append(first...last)
                next = last + 2
            }
            let point = ResumePoint(line: line, prefix: Self.prefix, retry: retry)
            #expect(point.text.hasPrefix(retry.isEmpty ? "salvo-checkpoint v2\n" : "salvo-checkpoint v3\n"))
            #expect(try ResumePoint.parse(Array(point.text.utf8)) == point)
        }
        let most = (0..<ResumePoint.maximumRetryRanges).map { $0 * 1_000_000_000 + 1...$0 * 1_000_000_000 + 999_999_999 }
        let fullest = ResumePoint(line: most.last!.upperBound, prefix: Self.prefix, retry: most)
        #expect(try ResumePoint.parse(Array(fullest.text.utf8)) == fullest, "the longest checkpoint is read back")
    }

    /// Without lines to retry a checkpoint is written as version 2, which salvos before
    /// version 3 read too.
    @Test func aCheckpointWithoutLinesToRetryIsVersion2() throws {
        let text = ResumePoint(line: 7, prefix: Self.prefix).text
        #expect(text.hasPrefix("salvo-checkpoint v2\nline 7\n") && !text.contains("retry"))
    }

    @Test func aVersion1CheckpointIsReadWithoutAPrefix() throws {
        #expect(try ResumePoint.parse(Array("salvo-checkpoint v1\nline 42\n".utf8)) == ResumePoint(line: 42, prefix: nil))
    }

    static let hex = String(repeating: "ab", count: 32)

    @Test(arguments: [
        ("", "the first line is not \"salvo-checkpoint v3\""),
        ("salvo-checkpoint v4\nline 5\n", "the first line is not \"salvo-checkpoint v3\""),
        ("salvo-checkpoint v3\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\n",
         "expected \"line N\", \"prefix-bytes B\", \"prefix-sha256 H\" and \"retry L...\" after the first line, one per line, and nothing after them"),
        ("salvo-checkpoint v3\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\nretry \n",
         "\"\" in the retry line is not a line number N or a run N-M with N < M"),
        ("salvo-checkpoint v3\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\nretry 3-3\n",
         "\"3-3\" in the retry line is not a line number N or a run N-M with N < M"),
        ("salvo-checkpoint v3\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\nretry 2 3\n",
         "the retry line's lines are not ascending and apart, or not within 1…5"),
        ("salvo-checkpoint v3\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\nretry 4-6\n",
         "the retry line's lines are not ascending and apart, or not within 1…5"),
        ("salvo-checkpoint v3\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\nretry 0\n",
         "the retry line's lines are not ascending and apart, or not within 1…5"),
        ("salvo-checkpoint v3\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\nfailed 2\n",
         "\"failed 2\" is not \"retry\" and the lines to send again"),
        ("salvo-checkpoint v2\nline 5\n",
         "expected \"line N\", \"prefix-bytes B\" and \"prefix-sha256 H\" after the first line, one per line, and nothing after them"),
        ("salvo-checkpoint v2\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)",
         "expected \"line N\", \"prefix-bytes B\" and \"prefix-sha256 H\" after the first line, one per line, and nothing after them"),
        ("salvo-checkpoint v2\nline five\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\n", "\"line five\" is not \"line N\" with N a whole number without leading zeros"),
        ("salvo-checkpoint v2\nline +5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex)\n", "\"line +5\" is not \"line N\" with N a whole number without leading zeros"),
        ("salvo-checkpoint v2\nline 5\nbytes 9\nprefix-sha256 \(CheckpointTests.hex)\n", "\"bytes 9\" is not \"prefix-bytes N\" with N a whole number without leading zeros"),
        ("salvo-checkpoint v2\nline 5\nprefix-bytes 9\nprefix-sha256 \(CheckpointTests.hex.uppercased())\n",
         "\"prefix-sha256 \(CheckpointTests.hex.uppercased())\" is not \"prefix-sha256\" and 64 lowercase hex digits"),
        ("salvo-checkpoint v2\nline 5\nprefix-bytes 9\nprefix-sha256 abc\n", "\"prefix-sha256 abc\" is not \"prefix-sha256\" and 64 lowercase hex digits"),
        ("salvo-checkpoint v1\n", "expected a second line \"line N\" and nothing after it"),
        ("salvo-checkpoint v1\nline 5", "expected a second line \"line N\" and nothing after it"),
        ("salvo-checkpoint v1\nline 5\nline 6\n", "expected a second line \"line N\" and nothing after it"),
        // Found by CheckpointFuzzer: the parser read this as prefix-bytes 728300, whose text has no zero.
        ("salvo-checkpoint v2\nline 5\nprefix-bytes 0728300\nprefix-sha256 \(CheckpointTests.hex)\n",
         "\"prefix-bytes 0728300\" is not \"prefix-bytes N\" with N a whole number without leading zeros"),
        ("salvo-checkpoint v1\nline 00\n", "\"line 00\" is not \"line N\" with N a whole number without leading zeros"),
        ("salvo-checkpoint v1\nline -3\n", "\"line -3\" is not \"line N\" with N a whole number without leading zeros"),
        ("salvo-checkpoint v1\nline 99999999999999999999\n", "\"line 99999999999999999999\" is not \"line N\" with N a whole number without leading zeros"),
        (String(repeating: "x", count: 50_000), "it is longer than a checkpoint can be"),
    ])
    func corruptFilesAreClearErrors(content: String, reason: String) throws {
        let path = try directory.write("bad.checkpoint", content)
        #expect(throws: CheckpointError.corrupt(path: path, reason: reason)) { try Checkpoint(path: path).load() }
    }

    @Test func theCorruptErrorSaysWhatToDo() throws {
        let path = try directory.write("bad.checkpoint", "garbage")
        let error = try #require(throws: CheckpointError.self) { try Checkpoint(path: path).load() }
        #expect(error.description == """
            checkpoint \(path) is not valid: the first line is not "salvo-checkpoint v3"; delete it to start from the beginning
            """)
    }

    @Test func savingIntoAMissingDirectoryFailsAndNamesTheFile() throws {
        let path = "\(directory.path)/absent/run.checkpoint"
        let error = try #require(throws: CheckpointError.self) { try Checkpoint(path: path).save(ResumePoint(line: 1, prefix: nil)) }
        guard case .io(let io) = error else { Issue.record("expected an I/O error, got \(error)"); return }
        #expect(io.operation == "create" && io.errno == .noSuchFileOrDirectory)
        #expect(io.target?.hasPrefix("\(path).tmp-\(getpid())-") == true, "\(io)")
    }
}

/// Checkpoints bound to their campaign file: what a user may do to the file between runs.
@Suite struct CampaignCheckpointTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    /// A token list of `count` lines (`campaignToken(n)` on line n), with a line ending
    /// after the last one unless told otherwise.
    func tokens(_ count: Int, from first: Int = 1, lastLineEnded: Bool = true) -> String {
        (first..<first + count).map(campaignToken).joined(separator: "\n") + (lastLineEnded ? "\n" : "")
    }

    func checkpoint(for campaign: String) throws -> CampaignCheckpoint {
        try CampaignCheckpoint(Checkpoint(path: "\(directory.path)/run.checkpoint"), campaign: campaign)
    }

    /// Saves through `line` of `before`, rewrites the campaign as `after`, and returns the
    /// resume point checked against it (or throws why it is refused).
    func resume(savedThrough line: Int, of before: String, against after: String) throws -> ResumePoint? {
        let campaign = try directory.write("tokens.txt", before)
        try checkpoint(for: campaign).save(completedThroughLine: line)
        try directory.write("tokens.txt", after)
        return try checkpoint(for: campaign).resumePoint()
    }

    func refusal(savedThrough line: Int, of before: String, against after: String) throws -> String {
        let error = try #require(throws: CheckpointError.self) { try resume(savedThrough: line, of: before, against: after) }
        guard case .otherCampaign(_, _, let reason) = error else {
            Issue.record("expected a refusal, got \(error)")
            return ""
        }
        #expect(error.description.contains("it is refused"))
        return reason
    }

    @Test func theSameFileResumesAfterTheSavedLine() throws {
        let point = try resume(savedThrough: 4, of: tokens(6), against: tokens(6))
        #expect(point?.line == 4)
        #expect(point?.prefix?.byteCount == 4 * 65 - 1, "four lines of 64 hex digits, the last one's line ending left out")
    }

    @Test func noCheckpointFileMeansStartingFromTheTop() throws {
        #expect(try checkpoint(for: try directory.write("tokens.txt", tokens(3))).resumePoint() == nil)
    }

    @Test func appendedLinesAndChangesAfterTheSavedLineAreFine() throws {
        // The run stopped at line 5; it was fixed, and more lines were added.
        #expect(try resume(savedThrough: 4, of: tokens(6), against: tokens(4) + "fixed line\n" + tokens(10, from: 6))?.line == 4)
    }

    @Test func aLastLineWithoutALineEndingMayGainOneWhenLinesAreAppended() throws {
        let point = try resume(savedThrough: 3, of: tokens(3, lastLineEnded: false), against: tokens(5))
        #expect(point?.line == 3)
    }

    @Test func aShorterFileIsRefused() throws {
        #expect(try refusal(savedThrough: 5, of: tokens(6), against: tokens(4))
            == "it has 4 lines, fewer than the 5 the checkpoint covers (a shorter file, or another one)")
    }

    @Test func anotherFileIsRefused() throws {
        // Same length, other tokens.
        #expect(try refusal(savedThrough: 5, of: tokens(6), against: tokens(6, from: 100))
            == "its lines 1…5 have the length the checkpoint recorded but other contents (they were edited, or it is another file)")
    }

    @Test func aLineRemovedOrInsertedBeforeTheSavedLineIsRefused() throws {
        let removed = try refusal(savedThrough: 5, of: tokens(8), against: tokens(2) + tokens(5, from: 4))
        #expect(removed.contains("other contents"), "\(removed)")
        let inserted = try refusal(savedThrough: 5, of: tokens(8), against: tokens(2) + "# a comment\n" + tokens(6, from: 3))
        #expect(inserted.hasPrefix("its lines 1…5 are 271 bytes long, and the checkpoint was written when they were 324"),
                "\(inserted)")
    }

    /// Beyond 128 KiB only the first and last 64 KiB are hashed: an edit in either is seen.
    @Test func aLongPrefixIsCheckedAtBothEnds() throws {
        let original = tokens(5000)  // 325,000 bytes
        func edited(line: Int) -> String {
            var lines = original.split(separator: "\n", omittingEmptySubsequences: false)
            lines[line - 1] = Substring(campaignToken(line + 1))
            return lines.joined(separator: "\n")
        }
        #expect(try resume(savedThrough: 4000, of: original, against: original)?.line == 4000)
        #expect(try refusal(savedThrough: 4000, of: original, against: edited(line: 1)).contains("other contents"))
        #expect(try refusal(savedThrough: 4000, of: original, against: edited(line: 4000)).contains("other contents"))
        #expect(try resume(savedThrough: 4000, of: original, against: edited(line: 4001))?.line == 4000)
    }

    @Test func aVersion1CheckpointIsAcceptedUncheckedUnlessTheFileIsShorter() throws {
        let campaign = try directory.write("tokens.txt", tokens(6))
        try directory.write("run.checkpoint", "salvo-checkpoint v1\nline 5\n")
        #expect(try checkpoint(for: campaign).resumePoint() == ResumePoint(line: 5, prefix: nil))
        try directory.write("tokens.txt", tokens(4))
        #expect(throws: CheckpointError.self) { try checkpoint(for: campaign).resumePoint() }
    }

    /// The periodic saves and the last one of a run share one `CampaignCheckpoint`: from
    /// many threads at once, in any order of lines, every save succeeds and the file always
    /// matches its line.
    @Test func savesFromManyThreadsAreSerialisedAndEachMatchesItsLine() throws {
        let campaign = try directory.write("tokens.txt", tokens(300))
        let checkpoint = try checkpoint(for: campaign)
        let failures = Locked<[CheckpointError]>([])
        DispatchQueue.concurrentPerform(iterations: 6) { thread in
            var generator = SplitMix64(seed: UInt64(thread))
            for _ in 0..<20 {
                do throws(CheckpointError) {
                    try checkpoint.save(completedThroughLine: Int.random(in: 0...300, using: &generator))
                    _ = try checkpoint.resumePoint()
                } catch {
                    failures.withLock { $0.append(error) }
                }
            }
        }
        let failed = failures.withLock { $0 }
        #expect(failed.isEmpty, "\(failed.count) of 120 failed, the first: \(failed.first.map(String.init(describing:)) ?? "")")
    }

    @Test func resumeSkipsWhatTheCheckpointCovers() throws {
        let file = try directory.write("tokens.txt", tokens(6))
        try checkpoint(for: file).save(completedThroughLine: 4)
        let reader = try CampaignReader(.tokens(file, payload: Array(#"{"aps":{}}"#.utf8)))
        if let point = try checkpoint(for: file).resumePoint() { try reader.skip(throughLine: point.line) }
        #expect(try readAll(reader).map(\.line) == [5, 6])
    }
}
