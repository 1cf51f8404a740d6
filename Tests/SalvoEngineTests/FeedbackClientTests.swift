import Foundation
import SalvoIO
import SalvoWire
import Testing
@testable import SalvoEngine
import SalvoMock
import SalvoTestSupport

/// A feedback service for one client: accepts, handshakes, writes `bytes`, and closes.
final class OneShotFeedbackServer: Sendable {
    let port: Int
    private let listener: Socket
    private let finished = DispatchSemaphore(value: 0)

    init(context: TLSContext, sending bytes: [UInt8]) throws {
        listener = try Socket.listen(host: "127.0.0.1", port: 0)
        port = listener.localAddress!.port
        let thread = Thread { [listener, finished] in
            defer { finished.signal() }
            var poller = pollfd(fd: listener.fd.rawValue, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 10_000) == 1, let socket = try? listener.accept() else { return }
            guard let stream = try? TLSStream(context: context, socket: socket) else { return }
            try? stream.completeHandshake()
            try? bytes.withUnsafeBytes { try stream.writeAll($0) }
            stream.shutdown()
        }
        thread.start()
    }

    /// Waits until the server thread has finished (the connection is closed once the stream is gone).
    func wait() { _ = finished.wait(timeout: .now() + 10) }

    /// `wait()` on a thread of its own, off the cooperative pool.
    func finish() async { await onOwnThread { self.wait() } }
}

@Suite(.timeLimit(.minutes(2))) struct FeedbackClientTests {
    let pki: DevelopmentPKI.Bundle
    let serverContext: TLSContext
    let clientContext: TLSContext

    init() throws {
        pki = try DevelopmentPKI.Bundle()
        serverContext = try TLSContext(
            .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                    clientCertificateRoots: .certificates(pki.authority.certificate)), role: .server)
        clientContext = try TLSContext(
            .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                    trustRoots: .certificates(pki.authority.certificate)), role: .client)
    }

    func tuples(_ count: Int) throws -> [FeedbackTuple] {
        try (0..<count).map { n in
            FeedbackTuple(timestamp: 1_700_000_000 + UInt32(n), token: try DeviceToken(hex: campaignToken(n)))
        }
    }

    /// `FeedbackClient.fetch` from a one-shot server of `bytes`; the client (which blocks
    /// until the server closes) and the wait for the server run off the cooperative pool.
    func fetch(serving bytes: [UInt8], timeout: Duration = .seconds(10)) async throws(FeedbackError) -> [FeedbackTuple] {
        let server = try! OneShotFeedbackServer(context: serverContext, sending: bytes)
        let context = clientContext
        let result = await onOwnThread {
            Result { () throws(FeedbackError) in
                try FeedbackClient.fetch(host: "127.0.0.1", port: server.port, context: context, timeout: timeout)
            }
        }
        await server.finish()
        return try result.get()
    }

    @Test(arguments: [0, 1, 3, 5000])
    func tuplesArriveByteExact(count: Int) async throws {
        let sent = try tuples(count)
        let received = try await fetch(serving: sent.flatMap(\.bytes))
        #expect(received == sent)
        #expect(received.flatMap(\.bytes) == sent.flatMap(\.bytes))
    }

    @Test func aStreamCutMidTupleKeepsWhatArrived() async throws {
        let sent = try tuples(3)
        do {
            _ = try await fetch(serving: sent.flatMap(\.bytes) + sent[0].bytes.prefix(10))
            Issue.record("expected an error")
        } catch {
            #expect(error.problem == .truncated(pendingBytes: 10))
            #expect(error.received == sent)
            #expect(error.description.hasSuffix(
                "the server closed in the middle of a tuple (10 of 38 bytes); 3 tuples were received before that"))
            #expect(error.description.hasPrefix("feedback service 127.0.0.1:"))
        }
    }

    @Test func aWrongTokenLengthIsCorruption() async throws {
        let sent = try tuples(2)
        var broken = sent[1].bytes
        broken[5] = 31
        do {
            _ = try await fetch(serving: sent[0].bytes + broken)
            Issue.record("expected an error")
        } catch {
            #expect(error.problem == .corrupt(FeedbackDecodingError.invalidTokenLength(31).description))
            #expect(error.received == [sent[0]])
        }
    }

    @Test func aRefusedConnectionNamesTheEndpoint() throws {
        // Bind a port, then close it: nothing listens there any more.
        let port = try Socket.listen(host: "127.0.0.1", port: 0).localAddress!.port
        do {
            _ = try FeedbackClient.fetch(host: "127.0.0.1", port: port, context: clientContext, timeout: .seconds(5))
            Issue.record("expected an error")
        } catch {
            guard case .connect(let reason) = error.problem else {
                Issue.record("expected a connect error, got \(error)")
                return
            }
            #expect(reason.contains("ECONNREFUSED"))
            #expect(error.description.hasPrefix("feedback service 127.0.0.1:\(port): cannot connect: "))
        }
    }

    @Test func anUntrustedServerIsAConnectError() async throws {
        let other = try DevelopmentPKI.Bundle()
        let stranger = try TLSContext(
            .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                    trustRoots: .certificates(other.authority.certificate)), role: .client)
        let server = try OneShotFeedbackServer(context: serverContext, sending: [])
        let result = await onOwnThread {
            Result { () throws(FeedbackError) in try FeedbackClient.fetch(host: "127.0.0.1", port: server.port, context: stranger) }
        }
        await server.finish()
        do {
            _ = try result.get()
            Issue.record("expected an error")
        } catch {
            #expect(error.description.contains("certificate verify failed"))
        }
    }
}

@Suite struct EndpointTests {
    @Test func presetsAndParsing() throws {
        #expect(try Endpoint(parsing: "production") == .production)
        #expect(try Endpoint(parsing: "sandbox").description == "api.sandbox.push.apple.com:443")
        #expect(try Endpoint(parsing: "production", service: .providerAPI).description == "api.push.apple.com:443")
        #expect(try Endpoint(parsing: "localhost", service: .providerAPI).port == 443)
        #expect(try Endpoint(parsing: "localhost").port == 2195)
        #expect(try Endpoint(parsing: "production", service: .feedback).description == "feedback.push.apple.com:2196")
        #expect(try Endpoint(parsing: "sandbox", service: .feedback) == .feedbackSandbox)
        #expect(try Endpoint(parsing: "localhost:12195") == Endpoint(host: "localhost", port: 12195))
        #expect(try Endpoint(parsing: "example.com") == Endpoint(host: "example.com", port: 2195))
        #expect(try Endpoint(parsing: "example.com", service: .feedback).port == 2196)
        #expect(try Endpoint(parsing: "[::1]:2196") == Endpoint(host: "::1", port: 2196))
        #expect(try Endpoint(parsing: "[fe80::1]").description == "[fe80::1]:2195")
    }

    @Test(arguments: [
        (":2195", "the host is empty"),
        ("host:0", "the port must be a number from 1 to 65535"),
        ("host:http", "the port must be a number from 1 to 65535"),
        ("host:", "the port must be a number from 1 to 65535"),
        ("::1:2195", "put an IPv6 address in brackets, e.g. [::1]:2195"),
        ("[::1", "'[' without a closing ']'"),
        ("[::1]2195", "expected ':' and a port after ']'"),
    ])
    func badEndpointsSayWhy(text: String, reason: String) {
        #expect(throws: EndpointError(text: text, reason: reason)) { try Endpoint(parsing: text) }
    }
}

/// The client against the project's mock feedback service, as `salvo feedback` would use it.
@Suite(.timeLimit(.minutes(2))) struct FeedbackClientAgainstMockTests {
    @Test func theMockListArrivesOnceThenIsEmpty() throws {
        let pki = try DevelopmentPKI.Bundle()
        var serverTLS = TLSConfiguration.server(
            certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
            clientCertificateRoots: .certificates(pki.authority.certificate))
        serverTLS.requireClientCertificate = true
        let sent = try (1...250).map { n in
            FeedbackTuple(timestamp: UInt32(n) << 20, token: try DeviceToken(hex: campaignToken(n)))
        }
        let feedback = try MockFeedback(.init(tls: serverTLS, tuples: sent))
        defer { feedback.stop() }
        let client = try TLSContext(
            .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                    trustRoots: .certificates(pki.authority.certificate)), role: .client)

        let first = try FeedbackClient.fetch(host: "127.0.0.1", port: feedback.port, context: client)
        #expect(first.flatMap(\.bytes) == sent.flatMap(\.bytes))
        // Apple (and the mock) clear the list once it has been read.
        #expect(try FeedbackClient.fetch(host: "127.0.0.1", port: feedback.port, context: client).isEmpty)
    }
}
