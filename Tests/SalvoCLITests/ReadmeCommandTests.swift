import Crypto
import Foundation
import Testing
@testable import salvo

/// Every `salvo` command the README shows parses and passes validation as written: a flag
/// renamed or removed fails here, not in a new user's first minute. (What the commands do is
/// the other tests' business; these are only parsed.)
@Suite struct ReadmeCommandTests {
    /// A `salvo …` command of a README shell block, split as the shell splits it, up to a
    /// redirection, pipe, `&` or comment; and the README line it starts on.
    struct Command: CustomTestStringConvertible {
        var line: Int
        var arguments: [String]
        var testDescription: String { "README line \(line): salvo \(arguments.joined(separator: " "))" }
    }

    static func readme() throws -> String {
        let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent()
        return try String(contentsOfFile: root.appendingPathComponent("README.md").path, encoding: .utf8)
    }

    static func commands(in readme: String) -> [Command] {
        var commands: [Command] = []
        var inShell = false
        var pending: (line: Int, text: String)?
        for (number, line) in readme.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            if line.hasPrefix("```") {
                inShell = line == "```sh" || line == "```bash"
                continue
            }
            guard inShell else { continue }
            var text = pending.map { $0.text + " " } ?? ""
            text += line.trimmingCharacters(in: .whitespaces)
            let start = pending?.line ?? number + 1
            if text.hasSuffix("\\") {
                pending = (start, String(text.dropLast()))
                continue
            }
            pending = nil
            let words = shellWords(text)
            if words.first == "salvo" { commands.append(Command(line: start, arguments: Array(words.dropFirst()))) }
        }
        return commands
    }

    /// The words of `text` as a POSIX shell splits them (quotes, backslashes), up to the
    /// first unquoted `#`, `>`, `<`, `|` or `&`.
    static func shellWords(_ text: String) -> [String] {
        var words: [String] = []
        var word: String?
        var quote: Character?
        var escaped = false
        for character in text {
            if escaped {
                word = (word ?? "") + String(character)
                escaped = false
            } else if let open = quote {
                if character == open { quote = nil } else { word = (word ?? "") + String(character) }
            } else if character == "\\" {
                escaped = true
            } else if character == "'" || character == "\"" {
                quote = character
                word = word ?? ""
            } else if character == " " || character == "\t" {
                if let done = word { words.append(done) }
                word = nil
            } else if "><|&".contains(character) || (character == "#" && word == nil) {
                break
            } else {
                word = (word ?? "") + String(character)
            }
        }
        if let done = word { words.append(done) }
        return words
    }

    @Test func theSplitterSplitsAsTheShellDoes() {
        #expect(Self.shellWords(#"salvo payload --custom 'order={"id":1234}' --body "Your order" # note"#)
                == ["salvo", "payload", "--custom", #"order={"id":1234}"#, "--body", "Your order"])
        #expect(Self.shellWords("salvo campaign rejected --csv > rejected.csv") == ["salvo", "campaign", "rejected", "--csv"])
        #expect(Self.shellWords("salvo mock --port 0 &") == ["salvo", "mock", "--port", "0"])
    }

    @Test func everySalvoCommandInTheREADMEParses() throws {
        let commands = Self.commands(in: try Self.readme())
        #expect(commands.count >= 10, "the README's shell blocks show salvo's commands")
        // The mock reads its signing key while it parses: the README's .p8 files, made here.
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-readme-\(UUID())").path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let keyPEM = P256.Signing.PrivateKey().pemRepresentation
        func existing(_ argument: String) throws -> String {
            guard argument.hasSuffix(".p8") else { return argument }
            let path = "\(directory)/\((argument as NSString).lastPathComponent)"
            if !FileManager.default.fileExists(atPath: path) {
                try keyPEM.write(toFile: path, atomically: true, encoding: .utf8)
                try FileManager.default.setAttributes([.posixPermissions: 0o600], ofItemAtPath: path)
            }
            return path
        }
        for command in commands {
            do {
                _ = try Salvo.parseAsRoot(try command.arguments.map(existing))
            } catch {
                Issue.record("\(command.testDescription): \(Salvo.message(for: error))")
            }
        }
    }
}
