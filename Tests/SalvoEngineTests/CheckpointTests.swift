import Foundation
import Testing
@testable import SalvoEngine

@Suite struct CheckpointTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    @Test func aMissingFileMeansNoCheckpoint() throws {
        #expect(try Checkpoint(path: "\(directory.path)/run.checkpoint").load() == nil)
    }

    @Test func saveAndLoadRoundTripAndOverwrite() throws {
        let checkpoint = Checkpoint(path: "\(directory.path)/run.checkpoint")
        try checkpoint.save(completedThroughLine: 12345)
        #expect(try checkpoint.load() == 12345)
        #expect(try String(contentsOfFile: checkpoint.path, encoding: .utf8) == "salvo-checkpoint v1\nline 12345\n")
        try checkpoint.save(completedThroughLine: 0)
        #expect(try checkpoint.load() == 0)
        try checkpoint.save(completedThroughLine: 9_000_000_000)
        #expect(try checkpoint.load() == 9_000_000_000)
        // Nothing is left behind but the checkpoint itself.
        #expect(try FileManager.default.contentsOfDirectory(atPath: directory.path) == ["run.checkpoint"])
    }

    @Test func theDirectoryToSyncIsTheFilesParent() {
        // Not tested by changing the working directory: tests run in parallel in one process.
        #expect(Checkpoint.directory(of: "run.checkpoint") == ".")
        #expect(Checkpoint.directory(of: "state/run.checkpoint") == "state")
        #expect(Checkpoint.directory(of: "/run.checkpoint") == "/")
        #expect(Checkpoint.directory(of: "/var/lib/salvo/run.checkpoint") == "/var/lib/salvo")
    }

    @Test(arguments: [
        ("", "the first line is not \"salvo-checkpoint v1\""),
        ("salvo-checkpoint v2\nline 5\n", "the first line is not \"salvo-checkpoint v1\""),
        ("salvo-checkpoint v1\n", "expected a second line \"line N\" and nothing after it"),
        ("salvo-checkpoint v1\nline 5", "expected a second line \"line N\" and nothing after it"),
        ("salvo-checkpoint v1\nline 5\nline 6\n", "expected a second line \"line N\" and nothing after it"),
        ("salvo-checkpoint v1\nline five\n", "\"line five\" does not give a line number"),
        ("salvo-checkpoint v1\nline -3\n", "\"line -3\" does not give a line number"),
        (String(repeating: "x", count: 300), "it is longer than a checkpoint can be"),
    ])
    func corruptFilesAreClearErrors(content: String, reason: String) throws {
        let path = try directory.write("bad.checkpoint", content)
        #expect(throws: CheckpointError.corrupt(path: path, reason: reason)) { try Checkpoint(path: path).load() }
    }

    @Test func theCorruptErrorSaysWhatToDo() throws {
        let path = try directory.write("bad.checkpoint", "garbage")
        do {
            _ = try Checkpoint(path: path).load()
            Issue.record("expected an error")
        } catch {
            #expect(error.description == """
                checkpoint \(path) is not valid: the first line is not "salvo-checkpoint v1"; delete it to start \
                from the beginning, or fix it to read "salvo-checkpoint v1\\nline N\\n"
                """)
        }
    }

    @Test func savingIntoAMissingDirectoryFailsAndNamesTheFile() throws {
        let path = "\(directory.path)/absent/run.checkpoint"
        #expect(throws: CheckpointError.io(.init("create", errno: ENOENT, target: "\(path).tmp-\(getpid())"))) {
            try Checkpoint(path: path).save(completedThroughLine: 1)
        }
    }

    @Test func resumeSkipsWhatTheCheckpointCovers() throws {
        let tokens = (1...6).map(campaignToken).joined(separator: "\n")
        let file = try directory.write("tokens.txt", tokens)
        let checkpoint = Checkpoint(path: "\(directory.path)/tokens.checkpoint")
        try checkpoint.save(completedThroughLine: 4)

        let reader = try CampaignReader(.tokens(file, payload: Array(#"{"aps":{}}"#.utf8)))
        if let line = try checkpoint.load() { try reader.skip(throughLine: line) }
        #expect(try readAll(reader).map(\.line) == [5, 6])
    }
}
