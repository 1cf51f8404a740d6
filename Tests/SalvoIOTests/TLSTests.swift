import Foundation
import Testing
@testable import SalvoIO

/// One TLS server connection on a background thread: accepts, handshakes, then echoes
/// everything it reads until the client closes — or, as a slow sink, only counts and
/// hashes what it reads, 512 bytes at a time through a small receive buffer.
final class EchoServer: Sendable {
    let port: Int
    private let listener: Socket
    private final class Outcome: Sendable {
        let value = Locked<Result<String?, TLSError>?>(nil)
    }
    private let outcome = Outcome()
    private let finished = DispatchSemaphore(value: 0)
    private final class Sink: Sendable {
        let value = Locked<(count: Int, hash: UInt64)>((0, 0xcbf29ce484222325))
    }
    private let sink = Sink()

    init(_ configuration: TLSConfiguration, slowReader: Bool = false, connections: Int = 1) throws {
        let context = try TLSContext(configuration, role: .server)
        listener = try Socket.listen(host: "127.0.0.1", port: 0)
        port = listener.localAddress!.port
        let thread = Thread { [listener, outcome, finished, sink] in
            defer { finished.signal() }
            for _ in 0..<connections {
                var poller = pollfd(fd: listener.fd.rawValue, events: Int16(POLLIN), revents: 0)
                guard poll(&poller, 1, 10_000) == 1, let socket = try? listener.accept() else { return }
                if slowReader { socket.setBufferSizes(send: nil, receive: 65536) }
                do {
                    let stream = try TLSStream(context: context, socket: socket)
                    try stream.completeHandshake()
                    outcome.value.withLock { $0 = .success(stream.peerCertificateSubject) }
                    let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: slowReader ? 512 : 65536, alignment: 1)
                    defer { buffer.deallocate() }
                    loop: while true {
                        switch try stream.readSome(into: buffer) {
                        case .bytes(let n) where slowReader:
                            sink.value.withLock { state in
                                for byte in buffer[0..<n] { state.hash = (state.hash ^ UInt64(byte)) &* 0x100000001b3 }
                                state.count += n
                            }
                        case .bytes(let n): try stream.writeAll(UnsafeRawBufferPointer(rebasing: buffer[0..<n]))
                        case .wouldBlock:
                            // Nothing yet (a loaded machine can delay the client): wait for more, bounded.
                            var poller = pollfd(fd: socket.fd.rawValue, events: Int16(POLLIN), revents: 0)
                            guard poll(&poller, 1, 10_000) == 1 else { break loop }
                        case .closed: break loop
                        }
                    }
                    stream.shutdown()
                } catch let error as TLSError {
                    outcome.value.withLock { $0 = .failure(error) }
                } catch {}
            }
        }
        thread.start()
    }

    /// What the slow sink received: byte count and FNV-1a hash (after the client closed).
    func received() -> (count: Int, hash: UInt64) {
        _ = finished.wait(timeout: .now() + 30)
        return sink.value.withLock { $0 }
    }

    /// The server's view once it is done: the client certificate subject, or its error.
    func result() -> Result<String?, TLSError>? {
        _ = finished.wait(timeout: .now() + 10)
        return outcome.value.withLock { $0 }
    }
}

@Suite(.timeLimit(.minutes(3))) struct TLSTests {
    let pki: DevelopmentPKI.Bundle

    init() throws { pki = try DevelopmentPKI.Bundle() }

    var serverConfiguration: TLSConfiguration {
        .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey)
    }

    func clientContext(trusting roots: TrustRoots? = nil, certificate: DevelopmentPKI.Identity? = nil) throws -> TLSContext {
        try TLSContext(.client(certificateChain: certificate?.certificate, privateKey: certificate?.privateKey,
                               trustRoots: roots ?? .certificates(pki.authority.certificate)), role: .client)
    }

    @Test func handshakeWithTheRightCAAndEcho() throws {
        let server = try EchoServer(serverConfiguration)
        let stream = try TLSStream.connect(host: "127.0.0.1", port: server.port, context: clientContext())
        #expect(stream.protocolVersion == "TLSv1.3")
        let message = Array("hello, gateway".utf8)
        try message.withUnsafeBytes { try stream.writeAll($0) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let result = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0) }
        #expect(result == .bytes(message.count))
        #expect(Array(buffer.prefix(message.count)) == message)
    }

    @Test func kernelTLSIsAnOptionThatNeverBreaksTheStream() throws {
        var server = serverConfiguration
        server.kernelTLS = true
        let echo = try EchoServer(server)
        var client = TLSConfiguration.client(trustRoots: .certificates(pki.authority.certificate))
        client.kernelTLS = true
        let stream = try TLSStream.connect(host: "127.0.0.1", port: echo.port, context: TLSContext(client, role: .client))
        // Whether it engaged depends on the kernel's tls module; either way bytes must flow.
        let engaged = stream.isKernelTLSSending
        let message = Array("kTLS \(engaged ? "on" : "off")".utf8)
        try message.withUnsafeBytes { try stream.writeAll($0) }
        var buffer = [UInt8](repeating: 0, count: 64)
        let result = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0) }
        #expect(result == .bytes(message.count))
        #expect(Array(buffer.prefix(message.count)) == message)
    }

    @Test(arguments: ["localhost", "127.0.0.1"])
    func serverNameAndAddressAreVerified(name: String) throws {
        let server = try EchoServer(serverConfiguration)
        _ = try TLSStream.connect(host: "127.0.0.1", port: server.port, context: clientContext(), serverName: name)
    }

    @Test func aSecondConnectionResumesTheSessionWithAClientCertificate() throws {
        var configuration = serverConfiguration
        configuration.trustRoots = .certificates(pki.authority.certificate)
        configuration.verifyPeer = true
        configuration.requireClientCertificate = true
        let server = try EchoServer(configuration, connections: 2)
        let context = try clientContext(certificate: pki.client)

        let first = try TLSStream.connect(host: "127.0.0.1", port: server.port, context: context)
        // TLS 1.3 sends the session ticket after the handshake: one round trip delivers it.
        let ping = Array("ping".utf8)
        try ping.withUnsafeBytes { try first.writeAll($0) }
        var buffer = [UInt8](repeating: 0, count: 16)
        _ = try buffer.withUnsafeMutableBytes { try first.readSome(into: $0) }
        #expect(!first.isResumed)
        let session = try #require(first.resumableSession)
        first.shutdown()

        let socket = try Socket.connect(host: "127.0.0.1", port: server.port, timeout: .seconds(5))
        let second = try TLSStream(context: context, socket: socket, serverName: "127.0.0.1", resuming: session)
        try second.completeHandshake()
        try ping.withUnsafeBytes { try second.writeAll($0) }
        let echoed = try buffer.withUnsafeMutableBytes { try second.readSome(into: $0) }
        #expect(echoed == .bytes(4))
        #expect(second.isResumed)
        second.shutdown()
        #expect(try server.result()?.get()?.contains("Apple Push Services") == true, "the resumed session keeps the client's identity")
    }

    @Test func applicationProtocolsAreNegotiated() throws {
        var server = serverConfiguration
        server.applicationProtocols = ["h2", "http/1.1"]
        let echo = try EchoServer(server)
        var client = TLSConfiguration.client(trustRoots: .certificates(pki.authority.certificate))
        client.applicationProtocols = ["h2"]
        let stream = try TLSStream.connect(host: "127.0.0.1", port: echo.port, context: TLSContext(client, role: .client))
        #expect(stream.negotiatedApplicationProtocol == "h2")
    }

    @Test func unknownCAFailsWithOpenSSLsReason() throws {
        let server = try EchoServer(serverConfiguration)
        let stranger = try DevelopmentPKI.makeAuthority(commonName: "Stranger CA")
        #expect {
            _ = try TLSStream.connect(host: "127.0.0.1", port: server.port,
                                      context: clientContext(trusting: .certificates(stranger.certificate)))
        } throws: { error in
            "\(error)".contains("certificate verify failed") && "\(error)".contains("unable to get local issuer certificate")
        }
    }

    @Test func hostNameMismatchFails() throws {
        let server = try EchoServer(serverConfiguration)
        #expect {
            _ = try TLSStream.connect(host: "127.0.0.1", port: server.port, context: clientContext(),
                                      serverName: "gateway.push.apple.com")
        } throws: { error in
            "\(error)".contains("certificate verify failed") && "\(error)".contains("hostname mismatch")
        }
    }

    @Test func expiredServerCertificateFails() throws {
        let expired = try DevelopmentPKI.makeServer(issuer: pki.authority, validFrom: .seconds(-7200), validFor: .seconds(3600))
        let server = try EchoServer(.server(certificateChain: expired.certificate, privateKey: expired.privateKey))
        #expect {
            _ = try TLSStream.connect(host: "127.0.0.1", port: server.port, context: clientContext())
        } throws: { error in
            "\(error)".contains("certificate has expired")
        }
    }

    @Test func insecureClientAcceptsAnUnknownCAAndSaysSo() throws {
        let server = try EchoServer(serverConfiguration)
        var configuration = TLSConfiguration.client(trustRoots: .system)
        configuration.verifyPeer = false
        _ = try TLSStream.connect(host: "127.0.0.1", port: server.port,
                                  context: TLSContext(configuration, role: .client))
    }

    @Test func requiredClientCertificateIsCheckedAndSeen() throws {
        var configuration = serverConfiguration
        configuration.trustRoots = .certificates(pki.authority.certificate)
        configuration.verifyPeer = true
        configuration.requireClientCertificate = true

        let good = try EchoServer(configuration)
        let stream = try TLSStream.connect(host: "127.0.0.1", port: good.port,
                                           context: clientContext(certificate: pki.client))
        stream.shutdown()
        let subject = try #require(try good.result()?.get())
        #expect(subject.contains("CN=Apple Push Services: com.example.salvo"))

        // Without a certificate: TLS 1.3 finishes the client's handshake before the server
        // decides, so the refusal surfaces on the first read as the server's alert.
        let strict = try EchoServer(configuration)
        #expect {
            let stream = try TLSStream.connect(host: "127.0.0.1", port: strict.port, context: clientContext())
            var buffer = [UInt8](repeating: 0, count: 16)
            _ = try buffer.withUnsafeMutableBytes { try stream.readSome(into: $0) }
        } throws: { error in
            "\(error)".contains("certificate required")
        }
        guard case .failure(let serverError)? = strict.result() else {
            Issue.record("the server accepted a client without a certificate")
            return
        }
        #expect("\(serverError)".contains("peer did not return a certificate"))
    }

    @Test func worldReadableKeyIsRefusedUnlessAllowed() throws {
        let directory = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-\(UUID())").path
        try pki.write(to: directory)
        defer { try? FileManager.default.removeItem(atPath: directory) }
        let keyPath = "\(directory)/client.key"
        chmod(keyPath, 0o644)
        var configuration = TLSConfiguration.client(certificateChain: .file("\(directory)/client.pem"),
                                                    privateKey: .file(keyPath),
                                                    trustRoots: .certificates(.file("\(directory)/ca.pem")))
        #expect {
            _ = try TLSContext(configuration, role: .client)
        } throws: { error in
            "\(error)".contains("readable by every user") && "\(error)".contains(keyPath)
                && !"\(error)".contains("PRIVATE KEY")
        }
        configuration.allowWorldReadableKey = true
        _ = try TLSContext(configuration, role: .client)
        chmod(keyPath, 0o600)
        configuration.allowWorldReadableKey = false
        _ = try TLSContext(configuration, role: .client)
    }

    @Test func missingFilesAndMismatchedKeysAreClearErrors() throws {
        #expect {
            _ = try TLSContext(.client(certificateChain: .file("/nonexistent/cert.pem"), privateKey: .file("/nonexistent/key.pem")),
                               role: .client)
        } throws: { error in "\(error)".contains("/nonexistent/cert.pem") && "\(error)".contains("No such file") }
        #expect {
            _ = try TLSContext(.client(certificateChain: pki.client.certificate, privateKey: pki.server.privateKey), role: .client)
        } throws: { error in "\(error)".contains("does not match the certificate") }
    }

    @Test func largeWritesSurvivePartialWritesToASlowReader() throws {
        // Made before connecting: in a debug build on a busy machine, making 8 MiB can take
        // longer than the server waits for the first bytes (10 s), and it would hang up.
        let total = 8 << 20
        let payload = (0..<total).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ $0 >> 11) }
        let server = try EchoServer(serverConfiguration, slowReader: true)
        let stream = try TLSStream.connect(host: "127.0.0.1", port: server.port, context: clientContext())
        stream.socket.setBufferSizes(send: 16384, receive: nil)
        var offset = 0
        var stalledWrites = 0
        let deadline = Instant.now() + .seconds(60)
        try payload.withUnsafeBytes { bytes in
            while offset < total && Instant.now() < deadline {
                // Retries pass the same bytes (same offset), possibly followed by more.
                switch try stream.write(UnsafeRawBufferPointer(rebasing: bytes[offset..<min(total, offset + 65536)])) {
                case .wrote(let n): offset += n
                case .wouldBlock(let progress):
                    stalledWrites += 1
                    var poller = pollfd(fd: stream.socket.fd.rawValue, events: Int16(progress == .wantWrite ? POLLOUT : POLLIN), revents: 0)
                    _ = poll(&poller, 1, 1000)
                }
            }
        }
        stream.shutdown()
        let expectedHash = payload.reduce(UInt64(0xcbf29ce484222325)) { ($0 ^ UInt64($1)) &* 0x100000001b3 }
        let received = server.received()
        #expect(stalledWrites > 0, "the slow reader should have pushed back")
        #expect(received.count == total)
        #expect(received.hash == expectedHash)
    }
}
