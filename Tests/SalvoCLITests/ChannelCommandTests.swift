import Foundation
import SalvoIO
import SalvoTestSupport
import Testing

/// `salvo channel` as a user meets it, the built executable run as a process: usage errors
/// (exit 2) and an unreachable gateway (exit 1) need no server.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("channel-command-tests")) struct ChannelCommandTests {
    typealias Workspace = SendCommandTests.Workspace

    static func channel(_ operation: String, port: Int, _ workspace: Workspace, _ more: [String]) -> [String] {
        ["channel", operation, "--bundle-id", "com.example.scores", "--gateway", "127.0.0.1:\(port)"] + workspace.tlsArguments() + more
    }

    @Test func usageErrorsExitTwoAndSayWhatToGive() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let cases: [([String], String)] = [
            (Self.channel("read", port: 2196, workspace, []), "--channel-id"),
            (Self.channel("delete", port: 2196, workspace, []), "--channel-id"),
            (Self.channel("create", port: 2196, workspace, ["--storage-policy", "forever"]), "no-storage"),
            (Self.channel("create", port: 2196, workspace, ["--count", "10001"]), "10,000"),
            (Self.channel("create", port: 2196, workspace, ["--count", "0"]), "--count"),
            (["channel", "list", "--bundle-id", "com.example.scores", "--gateway", "sandbox"], "--auth-key"),
            (["channel", "list", "--bundle-id", "com.example.scores", "--gateway", "example.com"] + workspace.tlsArguments(),
             "needs a port"),
            (["channel", "list", "--bundle-id", "com.example.scores", "--gateway", "sandbox", "--auth-key", "k.p8"], "--key-id"),
            (Self.channel("list", port: 2196, workspace, ["--auth-key", "k.p8", "--key-id", "K", "--team-id", "T"]), "not both"),
        ]
        for (arguments, hint) in cases {
            let (status, output, errors) = try SendCommandTests.run(arguments)
            #expect(status == 2, "\(arguments): stdout \(output) stderr \(errors)")
            #expect(errors.contains(hint), "\(arguments): \(errors)")
            #expect(output.isEmpty)
        }
    }

    @Test func anUnreachableGatewayExitsOneNamingTheGatewayAndTheRequest() throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        // A port nothing listens on: bound, never listened.
        let socket = Glibc.socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(socket) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        _ = withUnsafePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(socket, $0, length) } }
        _ = withUnsafeMutablePointer(to: &address) { $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(socket, $0, &length) } }
        let port = Int(UInt16(bigEndian: address.sin_port))
        let (status, output, errors) = try SendCommandTests.run(Self.channel("list", port: port, workspace, []))
        #expect(status == 1, "stdout \(output) stderr \(errors)")
        #expect(errors.hasPrefix("salvo channel list: channel list at 127.0.0.1:\(port): no answer: cannot connect"), "\(errors)")
        #expect(errors.contains("apns-request-id"), "\(errors)")
    }

    @Test func helpNamesTheOperationsAndTheGateways() throws {
        let (status, output, _) = try SendCommandTests.run(["channel", "--help"])
        #expect(status == 0)
        for word in ["create", "read", "delete", "list", "api-manage-broadcast.push.apple.com:2196", "--auth-key"] {
            #expect(output.contains(word), "\(word): \(output)")
        }
        let (createStatus, createHelp, _) = try SendCommandTests.run(["channel", "create", "--help"])
        #expect(createStatus == 0 && createHelp.contains("most-recent") && createHelp.contains("--token-cache"), "\(createHelp)")
    }
}
