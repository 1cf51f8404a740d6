import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoEngine

/// `salvo send` through real proxies: exact against the mock, the proxy's refusals named
/// without the credentials, NO_PROXY, and the binary protocol.
@Suite(.serialized, .timeLimit(.minutes(3)), .ownThread("proxy-tests")) struct ProxyTests {
    typealias Workspace = SendCommandTests.Workspace

    static let user = "salvo"
    static let password = "pr0xy-s3cret"

    /// `salvo send` with extra environment variables (the parent's proxy variables are
    /// cleared unless given, so the tests do not depend on the machine's).
    static func run(_ arguments: [String], environment: [String: String] = [:]) async throws -> (Int32, String, String) {
        var variables = ["XDG_STATE_HOME": SendCommandTests.stateHome]
        for name in ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"] { variables[name] = "" }
        variables.merge(environment) { $1 }
        let process = try ChildProcess(SendCommandTests.salvo, arguments, environment: variables)
        let status = try await process.exitStatus(within: .seconds(100))
        return (status, process.output, process.errors)
    }

    static func h2Send(_ workspace: Workspace, port: Int, lines: Int, _ extra: [String]) throws -> [String] {
        let campaign = try workspace.writeCampaign(lines: lines)
        return ["send", "--protocol", "h2", "--gateway", "127.0.0.1:\(port)", "--input", campaign, "--topic", "com.example.app",
                "--report", workspace.path("report.json")] + workspace.tlsArguments() + extra
    }

    /// The run accepted every line, and the mock accepted exactly those.
    static func expectExact(_ workspace: Workspace, lines: Int, mock: () -> (Int, Set<UInt64>),
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        let report = try SendCommandTests.report(workspace.path("report.json"))
        #expect(report.isComplete && report.accepted == lines && report.failed == 0, sourceLocation: sourceLocation)
        let (accepted, digests) = mock()
        #expect(accepted == lines, sourceLocation: sourceLocation)
        expectSameAcceptedSet(digests, LoopbackRig.digests(count: lines + 1, excluding: [0]), sourceLocation: sourceLocation)
    }

    /// The run accepted every line, and the HTTP/2 mock accepted exactly those.
    static func expectExact(_ workspace: Workspace, lines: Int, _ rig: H2LoopbackRig,
                            sourceLocation: SourceLocation = #_sourceLocation) throws {
        try expectExact(workspace, lines: lines, mock: {
            let mock = rig.statistics { $0.accepted >= lines }
            return (mock.accepted, mock.acceptedDigestSet)
        }, sourceLocation: sourceLocation)
    }

    /// A workspace and an HTTP/2 mock for `body`, removed and stopped after it.
    static func withH2Mock(_ body: (Workspace, H2LoopbackRig) async throws -> Void) async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try H2LoopbackRig()
        defer { rig.gateway.stop() }
        try await body(workspace, rig)
    }

    @Test(.enabled(if: TestProxy.hasTinyproxy, "tinyproxy is not installed (make test installs it)"))
    func http2ThroughTinyproxyWithBasicAuthIsExactAgainstTheMock() async throws {
        try await Self.withH2Mock { workspace, rig in
            let proxy = try TestProxy.tinyproxy(in: workspace.directory, user: Self.user, password: Self.password,
                                                connectPort: rig.gateway.port)
            defer { proxy.stop() }
            let lines = 5000
            let (status, output, errors) = try await Self.run(Self.h2Send(workspace, port: rig.gateway.port, lines: lines, [
                "--proxy", "http://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)", "--connections", "2"]))
            #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
            try Self.expectExact(workspace, lines: lines, rig)
            let log = proxy.process.output + proxy.process.errors
            #expect(log.contains("CONNECT"), "the connections went through tinyproxy: \(log)")
            #expect(!(output + errors).contains(Self.password))
        }
    }

    @Test(.enabled(if: TestProxy.hasMicrosocks, "microsocks is not installed (make test installs it)"),
          arguments: ["socks5", "socks5h"])
    func http2ThroughMicrosocksWithAUserAndPasswordIsExactAgainstTheMock(scheme: String) async throws {
        try await Self.withH2Mock { workspace, rig in
            let proxy = try TestProxy.microsocks(user: Self.user, password: Self.password)
            defer { proxy.stop() }
            let lines = 5000
            let (status, output, errors) = try await Self.run(Self.h2Send(workspace, port: rig.gateway.port, lines: lines, [
                "--proxy", "\(scheme)://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)", "--connections", "2"]))
            #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
            try Self.expectExact(workspace, lines: lines, rig)
            #expect(!(output + errors).contains(Self.password))
        }
    }

    @Test(.enabled(if: TestProxy.hasTinyproxy, "tinyproxy is not installed (make test installs it)"))
    func aWrongPasswordForTinyproxyEndsTheRunNamingTheProxyAnd407() async throws {
        try await Self.withH2Mock { workspace, rig in
            let proxy = try TestProxy.tinyproxy(in: workspace.directory, user: Self.user, password: Self.password,
                                                connectPort: rig.gateway.port)
            defer { proxy.stop() }
            let (status, output, errors) = try await Self.run(Self.h2Send(workspace, port: rig.gateway.port, lines: 300, [
                "--proxy", "http://\(Self.user):wrong-secret@127.0.0.1:\(proxy.port)"]))
            #expect(status == 1, "stdout: \(output)\nstderr: \(errors)")
            // tinyproxy answers a CONNECT with refused credentials 401, not 407.
            #expect(errors.contains("the proxy 127.0.0.1:\(proxy.port) answered 401 Unauthorized")
                    || errors.contains("the proxy 127.0.0.1:\(proxy.port) answered 407"), "stderr: \(errors)")
            #expect(errors.contains("check the proxy's user and password"), "stderr: \(errors)")
            #expect(!(output + errors).contains("wrong-secret") && !(output + errors).contains("\(Self.user):"))
            let report = try SendCommandTests.report(workspace.path("report.json"))
            #expect(report.isComplete && report.accepted == 0 && report.failed == report.submitted)
            #expect(rig.gateway.statistics().accepted == 0)
        }
    }

    @Test(.enabled(if: TestProxy.hasTinyproxy, "tinyproxy is not installed (make test installs it)"))
    func aPortTinyproxyDoesNotAllowIsA403() async throws {
        try await Self.withH2Mock { workspace, rig in
            let proxy = try TestProxy.tinyproxy(in: workspace.directory, user: Self.user, password: Self.password, connectPort: 443)
            defer { proxy.stop() }
            let (status, _, errors) = try await Self.run(Self.h2Send(workspace, port: rig.gateway.port, lines: 10, [
                "--proxy", "http://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"]))
            #expect(status == 1, "stderr: \(errors)")
            #expect(errors.contains("the proxy 127.0.0.1:\(proxy.port) answered 403"), "stderr: \(errors)")
        }
    }

    @Test(.enabled(if: TestProxy.hasMicrosocks, "microsocks is not installed (make test installs it)"))
    func aWrongPasswordForMicrosocksEndsTheRunNamingTheSOCKSRefusal() async throws {
        try await Self.withH2Mock { workspace, rig in
            let proxy = try TestProxy.microsocks(user: Self.user, password: Self.password)
            defer { proxy.stop() }
            let (status, output, errors) = try await Self.run(Self.h2Send(workspace, port: rig.gateway.port, lines: 300, [
                "--proxy", "socks5://\(Self.user):wrong-secret@127.0.0.1:\(proxy.port)"]))
            #expect(status == 1, "stdout: \(output)\nstderr: \(errors)")
            #expect(errors.contains("the SOCKS5 proxy 127.0.0.1:\(proxy.port) refused the user and password"), "stderr: \(errors)")
            #expect(!(output + errors).contains("wrong-secret"))
            #expect(rig.gateway.statistics().accepted == 0)
        }
    }

    /// Nothing listens where the proxy should be: exit 1, the proxy named, everything
    /// accounted for as unreachable.
    @Test func aProxyThatIsDownEndsTheRunNamingIt() async throws {
        try await Self.withH2Mock { workspace, rig in
            let port = try TestProxy.freePort()
            let (status, output, errors) = try await Self.run(Self.h2Send(workspace, port: rig.gateway.port, lines: 200, [
                "--proxy", "http://127.0.0.1:\(port)"]))
            #expect(status == 1, "stdout: \(output)\nstderr: \(errors)")
            #expect(errors.contains("cannot reach the proxy 127.0.0.1:\(port)"), "stderr: \(errors)")
            let report = try SendCommandTests.report(workspace.path("report.json"))
            #expect(report.isComplete && report.accepted == 0 && report.failedByReason == ["gateway_unreachable": report.submitted])
        }
    }

    /// HTTPS_PROXY names a proxy that is down, NO_PROXY the gateway: the run connects directly.
    @Test func noProxyMatchingTheGatewayConnectsDirectly() async throws {
        try await Self.withH2Mock { workspace, rig in
            let dead = "http://127.0.0.1:\(try TestProxy.freePort())"
            let lines = 500
            let arguments = try Self.h2Send(workspace, port: rig.gateway.port, lines: lines, [])
            let (status, output, errors) = try await Self.run(arguments, environment: ["HTTPS_PROXY": dead, "NO_PROXY": "localhost,127.0.0.1"])
            #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
            try Self.expectExact(workspace, lines: lines, rig)
            // --no-proxy ignores the environment; without either, its proxy is used (and found down).
            let (direct, _, directErrors) = try await Self.run(arguments + ["--no-proxy"], environment: ["https_proxy": dead])
            #expect(direct == 0, "stderr: \(directErrors)")
            let (viaProxy, _, proxyErrors) = try await Self.run(arguments, environment: ["https_proxy": dead])
            #expect(viaProxy == 1 && proxyErrors.contains("cannot reach the proxy"), "stderr: \(proxyErrors)")
        }
    }

    @Test(.enabled(if: TestProxy.hasMicrosocks, "microsocks is not installed (make test installs it)"))
    func theBinaryProtocolGoesThroughAProxyToo() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let proxy = try TestProxy.microsocks(user: Self.user, password: Self.password)
        defer { proxy.stop() }
        let lines = 5000
        let campaign = try workspace.writeCampaign(lines: lines)
        let (status, output, errors) = try await Self.run(
            ["send", "--gateway", "127.0.0.1:\(rig.gateway.port)", "--input", campaign, "--error-wait-ms", "100",
             "--report", workspace.path("report.json"), "--proxy", "socks5://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"]
                + workspace.tlsArguments())
        #expect(status == 0, "stdout: \(output)\nstderr: \(errors)")
        try Self.expectExact(workspace, lines: lines) {
            let mock = rig.statistics { $0.accepted >= lines }
            return (mock.accepted, mock.acceptedDigestSet)
        }
    }

    @Test func proxyFlagsAreCheckedBeforeAnythingIsSent() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let campaign = try workspace.writeCampaign(lines: 1)
        let base = ["send", "--protocol", "h2", "--gateway", "127.0.0.1:9", "--input", campaign, "--topic", "t"] + workspace.tlsArguments()
        let (both, _, bothErrors) = try await Self.run(base + ["--proxy", "http://h:1", "--no-proxy"])
        #expect(both == 2 && bothErrors.contains("give --proxy or --no-proxy, not both"), "\(bothErrors)")
        let (bad, _, badErrors) = try await Self.run(base + ["--proxy", "ftp://user:hidden@h:1"])
        #expect(bad == 2 && badErrors.contains("--proxy: the proxy URL's scheme ftp://"), "\(badErrors)")
        #expect(!badErrors.contains("hidden"))
        let (environment, _, environmentErrors) = try await Self.run(base, environment: ["ALL_PROXY": "socks4://h:1"])
        #expect(environment == 2 && environmentErrors.contains("the environment's proxy"), "\(environmentErrors)")
        let (tls, _, tlsErrors) = try await Self.run(base + ["--proxy", "http://h:1", "--proxy-tls"])
        #expect(tls == 2 && tlsErrors.contains("--proxy-tls is for --target blackberry"), "\(tlsErrors)")
    }

    /// `--target blackberry` still reads `--proxy` as its BlackBerry Proxy (HOST:PORT).
    @Test func theBlackBerryTargetStillReadsProxyAsItsBlackBerryProxy() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let campaign = try workspace.writeCampaign(lines: 1)
        let blackberry = ["send", "--target", "blackberry", "--input", campaign]
        let (both, _, bothErrors) = try await Self.run(blackberry + ["--noc", "127.0.0.1:9", "--proxy", "127.0.0.1:17080"])
        #expect(both == 2 && bothErrors.contains("give --noc or --proxy, not both"), "\(bothErrors)")
        let (tls, _, tlsErrors) = try await Self.run(blackberry + ["--noc", "127.0.0.1:9", "--proxy-tls"])
        #expect(tls == 2 && tlsErrors.contains("--proxy-tls goes with --proxy"), "\(tlsErrors)")
    }

    @Test(.enabled(if: TestProxy.hasTinyproxy, "tinyproxy is not installed (make test installs it)"))
    func theFeedbackServiceIsReadThroughAProxy() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let pki = LoopbackRig.pki
        var serverTLS = TLSConfiguration.server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                                                clientCertificateRoots: .certificates(pki.authority.certificate))
        serverTLS.requireClientCertificate = true
        let sent = (1...250).map { FeedbackTuple(timestamp: UInt32($0) << 20, token: LoopbackRig.token($0)) }
        let feedback = try MockFeedback(.init(tls: serverTLS, tuples: sent))
        defer { feedback.stop() }
        let proxy = try TestProxy.tinyproxy(in: workspace.directory, user: Self.user, password: Self.password,
                                            connectPort: feedback.port)
        defer { proxy.stop() }
        let (status, output, errors) = try await Self.run(
            ["feedback", "--host", "127.0.0.1:\(feedback.port)", "--proxy", "http://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"]
                + workspace.tlsArguments())
        #expect(status == 0, "stderr: \(errors)")
        #expect(output.split(separator: "\n").count == 251 && output.contains(LoopbackRig.token(250).hex), "\(output)")
        let log = proxy.process.output + proxy.process.errors
        #expect(log.contains("CONNECT"), "through tinyproxy: \(log)")
    }

    /// `salvo channel` through tinyproxy with Basic credentials: the channel is made at the
    /// mock's management port, through a CONNECT; a wrong password and a proxy that is down
    /// exit 1 naming the proxy; SOCKS5 with credentials is refused before anything is sent.
    @Test(.enabled(if: TestProxy.hasTinyproxy, "tinyproxy is not installed (make test installs it)"))
    func channelManagementGoesThroughAnHTTPProxy() async throws {
        let workspace = try Workspace()
        defer { workspace.remove() }
        let (rig, _) = try ChannelCommandTests.managementRig(workspace)
        defer { rig.gateway.stop() }
        let proxy = try TestProxy.tinyproxy(in: workspace.directory, user: Self.user, password: Self.password,
                                            connectPort: rig.gateway.channelsPort!)
        defer { proxy.stop() }
        let through = "http://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"
        let (created, output, errors) = try await Self.run(ChannelCommandTests.channel("create", rig, workspace, ["--proxy", through]))
        #expect(created == 0, "stdout: \(output)\nstderr: \(errors)")
        let id = try #require(ChannelCommandTests.fields(output)["channel-id"])
        #expect(rig.gateway.channels.list(bundleID: "com.example.scores") == [id])
        let log = proxy.process.output + proxy.process.errors
        #expect(log.contains("CONNECT"), "through tinyproxy: \(log)")

        let (refused, _, refusedErrors) = try await Self.run(ChannelCommandTests.channel(
            "list", rig, workspace, ["--proxy", "http://\(Self.user):wrong-secret@127.0.0.1:\(proxy.port)"]))
        #expect(refused == 1 && refusedErrors.contains("the proxy 127.0.0.1:\(proxy.port)"), "stderr: \(refusedErrors)")
        #expect(!refusedErrors.contains("wrong-secret"))
        let down = try TestProxy.freePort()
        let (unreachable, _, downErrors) = try await Self.run(ChannelCommandTests.channel(
            "list", rig, workspace, ["--proxy", "http://127.0.0.1:\(down)"]))
        #expect(unreachable == 1 && downErrors.contains("cannot reach the proxy 127.0.0.1:\(down)"), "stderr: \(downErrors)")
        let (socks, _, socksErrors) = try await Self.run(ChannelCommandTests.channel(
            "list", rig, workspace, ["--proxy", "socks5://\(Self.user):\(Self.password)@127.0.0.1:\(down)"]))
        #expect(socks == 2 && socksErrors.contains("give an HTTP proxy"), "stderr: \(socksErrors)")
        #expect(!socksErrors.contains(Self.password))
        #expect(rig.gateway.statistics().channelOperations == ["create": 1])
    }

    /// The proxy dies mid-campaign and comes back on its port: the connections reconnect
    /// through it, the run ends exit 0, and every line is accepted (what was in flight at the
    /// drop may go twice, and is counted).
    @Test(.enabled(if: TestProxy.hasMicrosocks, "microsocks is not installed (make test installs it)"))
    func aProxyThatDiesMidCampaignIsReconnectedThroughWhenItIsBack() async throws {
        try await Self.withH2Mock { workspace, rig in
            var proxy = try TestProxy.microsocks(user: Self.user, password: Self.password)
            defer { proxy.stop() }
            let lines = 50_000  // token 57005 (…dead) is one the mock rejects
            var variables = ["XDG_STATE_HOME": SendCommandTests.stateHome]
            for name in ["HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy", "NO_PROXY", "no_proxy"] { variables[name] = "" }
            let sender = try ChildProcess(SendCommandTests.salvo, Self.h2Send(workspace, port: rig.gateway.port, lines: lines, [
                "--proxy", "socks5h://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"]), environment: variables)
            let before = eventually({ rig.gateway.statistics().accepted }, within: .seconds(60)) { $0 >= 2000 }
            try #require(before >= 2000 && before < lines, "the run was under way when the proxy died (\(before) accepted)")
            let port = proxy.port
            proxy.process.kill(SIGKILL)
            _ = try? await proxy.process.exitStatus(within: .seconds(10))
            proxy = try TestProxy.microsocks(user: Self.user, password: Self.password, port: port)
            let status = try await sender.exitStatus(within: .seconds(120))
            #expect(status == 0, "stderr: \(sender.errors)")
            let report = try SendCommandTests.report(workspace.path("report.json"))
            #expect(report.isComplete && report.accepted == lines && report.failed == 0,
                    "accepted \(report.accepted), rejected \(report.rejectedByReason), failed \(report.failedByReason); stderr: \(sender.errors)")
            let mock = rig.statistics { $0.accepted >= lines }
            expectSameAcceptedSet(mock.acceptedDigestSet, Set(LoopbackRig.digests(count: lines + 1, excluding: [0])))
            #expect(mock.accepted - lines <= report.possibleDuplicates, "duplicates only among those counted")
            #expect(report.reconnects >= 1, "the connections were made again through the proxy once it was back")
        }
    }

    /// A refused proxy password loses nothing: the checkpoint records no line as done, and
    /// the same command with the right password and --resume sends every line, once.
    @Test(.enabled(if: TestProxy.hasMicrosocks, "microsocks is not installed (make test installs it)"))
    func afterARefusedProxyPasswordTheResumeSendsEverything() async throws {
        try await Self.withH2Mock { workspace, rig in
            let proxy = try TestProxy.microsocks(user: Self.user, password: Self.password)
            defer { proxy.stop() }
            let lines = 2000
            let arguments = try Self.h2Send(workspace, port: rig.gateway.port, lines: lines, ["--checkpoint", workspace.path("c.ckpt")])
            let (refused, _, errors) = try await Self.run(arguments + ["--proxy", "socks5://\(Self.user):wrong@127.0.0.1:\(proxy.port)"])
            #expect(refused == 1 && errors.contains("the same command with --resume continues with line 1"), "stderr: \(errors)")
            let (resumed, _, resumeErrors) = try await Self.run(
                arguments + ["--resume", "--proxy", "socks5://\(Self.user):\(Self.password)@127.0.0.1:\(proxy.port)"])
            #expect(resumed == 0, "stderr: \(resumeErrors)")
            try Self.expectExact(workspace, lines: lines, rig)
        }
    }
}
