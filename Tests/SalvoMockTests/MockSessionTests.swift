import Foundation
@testable import SalvoIO
import SalvoWire
import Testing
@testable import SalvoMock

/// The mock as a gateway that senders reconnect to after every error response: it resumes
/// their TLS sessions from memory, however the last connection ended.
@Suite(.timeLimit(.minutes(2))) struct MockSessionTests {
    let harness: MockHarness

    init() throws { harness = try MockHarness() }

    /// A client closes cleanly (close_notify, which the mock does not answer) or abruptly
    /// (a bare FIN); either way its next connection resumes. The mock used to answer with
    /// a TLS 1.2 ticket that it decrypted and deserialized (client certificate included) on
    /// every resumption; it keeps them by id now (TLS 1.3 tickets stay stateless: a stateful
    /// one is single-use), and a session a connection ended without its own close_notify is
    /// no longer evicted.
    @Test(arguments: [TLSVersion.v1_2, .v1_3], [true, false])
    func aClientResumesItsSessionAfterItsConnectionEnded(version: TLSVersion, cleanClose: Bool) throws {
        var tls = harness.strictServerTLS
        tls.maximumVersion = version
        let gateway = try MockGateway(.init(tls: tls, loops: 1))
        defer { gateway.stop() }
        let context = try TLSContext(.client(certificateChain: harness.pki.client.certificate,
                                             privateKey: harness.pki.client.privateKey,
                                             trustRoots: .certificates(harness.pki.authority.certificate)), role: .client)

        let first = try TLSStream.connect(host: "127.0.0.1", port: gateway.port, context: context, timeout: .seconds(5))
        try first.send(frames(1...3))
        #expect(eventually { gateway.statistics().accepted == 3 })
        // TLS 1.3 delivers the session after the handshake: reading takes it in.
        var scratch = [UInt8](repeating: 0, count: 16)
        _ = try scratch.withUnsafeMutableBytes { try first.read(into: $0) }
        let session = try #require(first.resumableSession)
        if version == .v1_2 { #expect(!session.hasTicket, "the mock keeps TLS 1.2 sessions by id") }

        if cleanClose { first.shutdown() } else { first.socket.shutdownWrite() }
        // The mock closes in turn: its side of the first connection is gone before the second.
        // Seen on the socket, not through TLS: a client reading an end without close_notify
        // spoils its own session.
        let readHangup: Int16 = 0x2000  // POLLRDHUP, which Glibc's module leaves out
        var hangup = pollfd(fd: first.socket.fd.rawValue, events: readHangup, revents: 0)
        #expect(poll(&hangup, 1, 5_000) == 1)

        let socket = try Socket.connect(host: "127.0.0.1", port: gateway.port, timeout: .seconds(5))
        let second = try TLSStream(context: context, socket: socket, serverName: "127.0.0.1", resuming: session)
        try second.completeHandshake()
        #expect(second.isResumed)
        try second.send(frames(4...5))
        #expect(eventually { gateway.statistics().accepted == 5 })
        withExtendedLifetime(first) {}  // freed without close_notify, the client would spoil its session too
    }
}
