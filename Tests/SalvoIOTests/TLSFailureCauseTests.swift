import Foundation
import Testing
@testable import SalvoIO

/// Real handshakes over loopback that fail in each way a gateway connection can, with
/// certificates made for the test: each side's `TLSError.cause` says what happened, its
/// description still carries OpenSSL's reason, and `isPermanent` follows the cause.
@Suite(.timeLimit(.minutes(2))) struct TLSFailureCauseTests {
    let pki: DevelopmentPKI.Bundle

    init() throws { pki = try DevelopmentPKI.Bundle() }

    var serverConfiguration: TLSConfiguration {
        .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey)
    }

    /// A server that requires client certificates issued by `authority`.
    func serverRequiringClients(of authority: DevelopmentPKI.Identity) -> TLSConfiguration {
        .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                clientCertificateRoots: .certificates(authority.certificate))
    }

    func client(trusting authority: DevelopmentPKI.Identity? = nil, certificate: DevelopmentPKI.Identity? = nil,
                applicationProtocols: [String] = []) throws -> TLSContext {
        var configuration = TLSConfiguration.client(
            certificateChain: certificate?.certificate, privateKey: certificate?.privateKey,
            trustRoots: .certificates((authority ?? pki.authority).certificate))
        configuration.applicationProtocols = applicationProtocols
        return try TLSContext(configuration, role: .client)
    }

    /// Connects and reads once: the client's failure, from the handshake or (TLS 1.3: the
    /// server judges the client's certificate after the client finished) the first read.
    func clientFailure(to server: EchoServer, _ context: TLSContext, serverName: String? = nil) -> TLSError? {
        do throws(TLSConnectError) {
            let stream = try TLSStream.connect(host: "127.0.0.1", port: server.port, context: context,
                                               serverName: serverName, timeout: .seconds(10))
            let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 16, alignment: 1)
            defer { buffer.deallocate() }
            do { _ = try stream.readSome(into: buffer, timeout: .seconds(10)) } catch { return error }
            return nil
        } catch .tls(let error) {
            return error
        } catch {
            Issue.record("the connection failed before TLS: \(error)")
            return nil
        }
    }

    /// The server's failure, once it gave up on the connection.
    func serverFailure(_ server: EchoServer) -> TLSError? {
        guard case .failure(let error)? = server.result() else { return nil }
        return error
    }

    @Test func anUntrustedCAIsAVerificationFailureHereAndARejectionThere() throws {
        let server = try EchoServer(serverConfiguration)
        let stranger = try DevelopmentPKI.makeAuthority(commonName: "Stranger CA")
        let client = try #require(clientFailure(to: server, try client(trusting: stranger)))
        #expect(client.cause == .certificateVerificationFailed(.unableToGetLocalIssuerCertificate))
        #expect(client.stage == .handshake)
        #expect(client.description.contains("certificate verify failed: unable to get local issuer certificate"))
        #expect(client.cause.isPermanent)

        let refused = try #require(serverFailure(server))
        #expect(refused.cause == .certificateRejected(.unknownCA))
        #expect(refused.description.contains("unknown ca"))
        #expect(refused.cause.isPermanent)
    }

    @Test func aWrongHostNameIsAVerificationFailureHereAndARejectionThere() throws {
        let server = try EchoServer(serverConfiguration)
        let client = try #require(clientFailure(to: server, try client(), serverName: "gateway.push.apple.com"))
        #expect(client.cause == .certificateVerificationFailed(.hostnameMismatch))
        #expect(client.description.contains("certificate verify failed: hostname mismatch"))
        #expect(client.cause.isPermanent)

        // The client tells the server with a bad_certificate alert: its certificate was refused.
        let refused = try #require(serverFailure(server))
        #expect(refused.cause == .certificateRejected(.badCertificate))
        #expect(refused.description.contains("bad certificate"))
    }

    @Test func anExpiredCertificateIsAVerificationFailureHereAndARejectionThere() throws {
        let expired = try DevelopmentPKI.makeServer(issuer: pki.authority, validFrom: .seconds(-7200), validFor: .seconds(3600))
        let server = try EchoServer(.server(certificateChain: expired.certificate, privateKey: expired.privateKey))
        let client = try #require(clientFailure(to: server, try client()))
        #expect(client.cause == .certificateVerificationFailed(.certificateHasExpired))
        #expect(client.description.contains("certificate has expired"))

        let refused = try #require(serverFailure(server))
        #expect(refused.cause == .certificateRejected(.certificateExpired))
        #expect(refused.description.contains("certificate expired"))
    }

    @Test func aClientCertificateFromAnotherCAIsRejected() throws {
        let server = try EchoServer(serverRequiringClients(of: pki.authority))
        let otherAuthority = try DevelopmentPKI.makeAuthority(commonName: "Other CA")
        let foreign = try DevelopmentPKI.makeClient(issuer: otherAuthority)
        let client = try #require(clientFailure(to: server, try client(certificate: foreign)))
        #expect(client.cause == .certificateRejected(.unknownCA))
        #expect(client.description.contains("unknown ca"))
        #expect(client.cause.isPermanent, "a gateway refusing our certificate refuses it again on the next connection")

        let refusing = try #require(serverFailure(server))
        #expect(refusing.cause == .certificateVerificationFailed(.unableToGetLocalIssuerCertificate))
        #expect(refusing.description.contains("certificate verify failed: unable to get local issuer certificate"))
    }

    @Test func noClientCertificateWhereOneIsRequiredIsRejected() throws {
        let server = try EchoServer(serverRequiringClients(of: pki.authority))
        let client = try #require(clientFailure(to: server, try client()))
        #expect(client.cause == .certificateRejected(.certificateRequired))
        #expect(client.description.contains("certificate required"))

        let refusing = try #require(serverFailure(server))
        #expect(refusing.cause == .peerCertificateMissing)
        #expect(refusing.description.contains("peer did not return a certificate"))
    }

    @Test(arguments: [["http/1.1"], ["x"]])
    func anApplicationProtocolMismatchIsAProtocolMismatchOnBothSides(offered: [String]) throws {
        var configuration = serverConfiguration
        configuration.applicationProtocols = ["h2"]
        let server = try EchoServer(configuration)
        let client = try #require(clientFailure(to: server, try client(applicationProtocols: offered)))
        #expect(client.cause == .protocolMismatch(.applicationProtocol))
        #expect(client.description.contains("no application protocol"))
        #expect(client.cause.isPermanent)

        let refusing = try #require(serverFailure(server))
        #expect(refusing.cause == .protocolMismatch(.applicationProtocol))
        #expect(refusing.description.contains("no application protocol"))
    }

    @Test func aPeerThatHangsUpMidHandshakeIsIOAndWorthARetry() throws {
        let listener = try Socket.listen(host: "127.0.0.1", port: 0)
        let port = listener.localAddress!.port
        let accepted = Thread {
            var poller = pollfd(fd: listener.fd.rawValue, events: Int16(POLLIN), revents: 0)
            guard poll(&poller, 1, 10_000) == 1, let socket = try? listener.accept() else { return }
            socket.shutdownWrite()  // and drops it: no TLS at all
        }
        accepted.start()
        #expect {
            _ = try TLSStream.connect(host: "127.0.0.1", port: port, context: client(), timeout: .seconds(10))
        } throws: { error in
            // An end of stream, or a reset when the close found the hello unread: I/O either way.
            guard case .tls(let tls) = error as? TLSConnectError, case .io = tls.cause else { return false }
            return !tls.cause.isPermanent
        }
    }

    @Test func configurationMistakesAreConfiguration() {
        #expect {
            _ = try TLSContext(.client(certificateChain: .file("/nonexistent/cert.pem"), privateKey: .file("/nonexistent/key.pem")),
                               role: .client)
        } throws: { error in
            (error as? TLSError)?.cause == .configuration && (error as? TLSError)?.cause.isPermanent == true
        }
    }

    @Test func alertsAndVerifyResultsReadAsOpenSSLNamesThem() {
        #expect(TLSError.Alert.unknownCA.description == "unknown CA")
        #expect(TLSError.Alert.noApplicationProtocol.description == "no application protocol")
        #expect(TLSError.CertificateVerification.hostnameMismatch.description == "hostname mismatch")
        #expect(TLSError.Alert.certificateRequired.refusesCertificate)
        #expect(!TLSError.Alert.handshakeFailure.refusesCertificate)
    }
}
