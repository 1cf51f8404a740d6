import Foundation
import SalvoEngine
import SalvoIO
import SalvoTestSupport
import Testing
@testable import salvo

/// The `--credentials` file read and checked, and the mock's repeatable `--auth-key`, without
/// a process or a gateway.
@Suite struct CredentialsFileTests {
    typealias Workspace = SendCommandTests.Workspace

    /// Writes `json` as the workspace's credentials file, with a key for the names it uses.
    static func file(_ workspace: Workspace, _ json: String) throws -> String {
        let key = try DevelopmentPKI.makeSigningKey()
        for name in ["A.p8", "B.p8"] {
            try key.write(toFile: workspace.path(name), atomically: true, encoding: .utf8)
            chmod(workspace.path(name), 0o600)
        }
        let path = workspace.path("credentials.json")
        try json.write(toFile: path, atomically: true, encoding: .utf8)
        return path
    }

    static func problem(_ json: String) throws -> String {
        let workspace = try Workspace()
        defer { workspace.remove() }
        do {
            _ = try CredentialsFile(path: try file(workspace, json))
        } catch {
            return "\(error)"
        }
        return "accepted"
    }

    @Test func eachMistakeIsToldWithItsEntry() throws {
        let team = #""team_id": "TEAMAAAAA1", "key_id": "KEYAAAAAA1", "key": "A.p8""#
        #expect(try Self.problem(#"[{\#(team), "topics": ["com.a"]}, {"team_id": "TEAMAAAAA1", "key_id": "K2", "key": "B.p8", "topics": ["com.b"]}]"#)
            .contains("entry 2 (team TEAMAAAAA1): team TEAMAAAAA1 is listed in entry 1 too"))
        #expect(try Self.problem(#"[{\#(team), "topics": ["com.a"]}, {"certificate": "c.pem", "topics": ["com.a"]}]"#)
            .contains("entry 2 (certificate c.pem): topic com.a is served by entry 1 too"))
        #expect(try Self.problem(#"[{\#(team), "certificate": "c.pem", "topics": ["com.a"]}]"#).contains("not both"))
        #expect(try Self.problem(#"[{"team_id": "T", "topics": ["com.a"]}]"#).contains("needs team_id, key_id and key"))
        #expect(try Self.problem(#"[{\#(team), "topics": []}]"#).contains("lists no topics"))
        #expect(try Self.problem(#"[{\#(team), "topics": ["com.a.voip"]}]"#).contains("not a bundle id"))
        #expect(try Self.problem(#"[{\#(team), "topics": ["com.a"], "environment": "staging"}]"#).contains("production or sandbox"))
        #expect(try Self.problem(#"{"credentials": [{\#(team)}]}"#).contains(#"missing "topics""#))
        #expect(try Self.problem("[]").contains("lists no credentials"))
        #expect(try Self.problem(#"{"credentials": [{\#(team), "topics": ["com.a", "com.b"]}]}"#) == "accepted")
    }

    @Test func anEntryOfTheOtherEnvironmentIsRefusedAgainstApplesGateway() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let file = try CredentialsFile(path: try Self.file(workspace, #"""
            [{"team_id": "TEAMAAAAA1", "key_id": "KEYAAAAAA1", "key": "A.p8", "topics": ["com.a"], "environment": "sandbox"}]
            """#))
        let base = SenderConfiguration(gateway: .production, tls: .client(), transport: .http2(HTTP2Options(topic: nil)))
        #expect(throws: (any Error).self) {
            _ = try file.routes(base: base, gatewayEnvironment: "production", tokenStore: nil, allowWorldReadableKey: false)
        }
        let (routes, _) = try file.routes(base: base, gatewayEnvironment: "sandbox", tokenStore: nil, allowWorldReadableKey: false)
        #expect(routes.map(\.topics) == [["com.a"]] && routes.map(\.label) == ["TEAMAAAAA1"])
        // Against HOST:PORT the environment is the user's to know.
        #expect(try file.routes(base: base, gatewayEnvironment: nil, tokenStore: nil, allowWorldReadableKey: false).0.count == 1)
    }

    @Test func theMockTakesSeveralKeysEachWithItsIdsInOrder() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        _ = try Self.file(workspace, "[]")
        let two = try MockCommand.parse(["--protocol", "h2", "--auth-key", workspace.path("A.p8"), "--key-id", "KA", "--team-id", "TA",
                                         "--auth-key", workspace.path("B.p8"), "--key-id", "KB", "--team-id", "TB"])
        let verifiers = try two.h2.tokenVerifiers()
        #expect(verifiers.map(\.keyID) == ["KA", "KB"] && verifiers.map(\.teamID) == ["TA", "TB"])
        let uneven = ["--protocol", "h2", "--auth-key", workspace.path("A.p8"), "--key-id", "KA", "--team-id", "TA",
                      "--auth-key", workspace.path("B.p8"), "--key-id", "KB"]
        #expect { _ = try MockCommand.parse(uneven) } throws: { "\($0)".contains("as often as the others") }

        // Or the keys of a credentials file, beside those of --auth-key.
        let credentials = try Self.file(workspace, #"""
            [{"team_id": "TF", "key_id": "KF", "key": "B.p8", "topics": ["com.f"]}, {"certificate": "c.pem", "topics": ["com.c"]}]
            """#)
        let both = try MockCommand.parse(["--protocol", "h2", "--auth-key", workspace.path("A.p8"), "--key-id", "KA", "--team-id", "TA",
                                          "--credentials", credentials])
        #expect(try both.h2.tokenVerifiers().map(\.teamID) == ["TA", "TF"])
    }
}
