import Foundation
import SalvoIO
import SalvoWire
@testable import SalvoMock

/// Certificates, a gateway started on a free port, and a plain blocking TLS client.
struct MockHarness {
    let pki: DevelopmentPKI.Bundle

    init() throws { pki = try DevelopmentPKI.Bundle() }

    var serverTLS: TLSConfiguration {
        .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey)
    }

    /// A server configuration that requires client certificates issued by the test CA.
    var strictServerTLS: TLSConfiguration {
        .server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                clientCertificateRoots: .certificates(pki.authority.certificate))
    }

    func gateway(_ plan: FailurePlan = .none, recordAccepted: Bool = false, strict: Bool = false,
                 loops: Int = 2) throws -> MockGateway {
        try MockGateway(.init(tls: strict ? strictServerTLS : serverTLS, loops: loops, failurePlan: plan,
                              recordAccepted: recordAccepted))
    }

    func connect(_ port: Int, withCertificate: Bool = false) throws -> TLSStream {
        let identity = withCertificate ? pki.client : nil
        let context = try TLSContext(.client(certificateChain: identity?.certificate, privateKey: identity?.privateKey,
                                             trustRoots: .certificates(pki.authority.certificate)), role: .client)
        return try TLSStream.connect(host: "127.0.0.1", port: port, context: context, timeout: .seconds(5))
    }
}

/// Token number `n`: distinct per `n`, last byte `n & 0xff`.
func testToken(_ n: Int) -> DeviceToken {
    var bytes = [UInt8](repeating: 0xa5, count: 32)
    withUnsafeBytes(of: UInt64(n).bigEndian) { bytes.replaceSubrange(24..<32, with: $0) }
    return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
}

let testPayload = Array(#"{"aps":{"alert":"Hello from the mock tests"}}"#.utf8)

/// One encoded notification.
func encoded(_ format: FrameFormat = .frame, token: DeviceToken, identifier: UInt32,
             payload: [UInt8] = testPayload) -> [UInt8] {
    let encoder = FrameEncoder(format: format)
    var frame = [UInt8](repeating: 0, count: encoder.encodedLength(payloadLength: payload.count))
    let result = frame.withUnsafeMutableBytes { buffer in
        payload.withUnsafeBytes { try! encoder.encode(token: token, payload: $0, identifier: identifier,
                                                      expiry: 0, priority: 10, into: buffer) }
    }
    guard case .written(let length) = result else { fatalError("frame buffer too small") }
    return Array(frame.prefix(length))
}

/// Notifications 1...count (token `testToken(i)`, identifier i), back to back.
func frames(_ identifiers: ClosedRange<Int>, _ format: FrameFormat = .frame) -> [UInt8] {
    identifiers.flatMap { encoded(format, token: testToken($0), identifier: UInt32($0)) }
}

extension TLSStream {
    func send(_ bytes: [UInt8]) throws {
        try bytes.withUnsafeBytes { try writeAll($0, timeout: .seconds(10)) }
    }

    /// Reads until the peer closes. An abrupt close (reset) ends the read like a FIN does.
    func drain() throws -> [UInt8] { try readToEnd(timeout: .seconds(5)) }
}

/// Polls `condition` until it holds or `timeout` passes; the condition is the
/// synchronisation, the pause between polls only keeps the CPU free.
@discardableResult
func eventually(timeout: Duration = .seconds(5), _ condition: () -> Bool) -> Bool {
    let deadline = Instant.now() + timeout
    while !condition() {
        if Instant.now() >= deadline { return false }
        usleep(1000)
    }
    return true
}

/// The 6-byte error response.
func errorBytes(_ status: Status, _ identifier: UInt32) -> [UInt8] {
    ErrorResponse(status: status, identifier: identifier).bytes
}
