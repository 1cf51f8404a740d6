import Foundation
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoWire
import SalvoTestSupport
import Testing

// README-EXAMPLE-BEGIN
func sendWeeklyDigest(to tokens: [String], port: Int, ca: PEMSource, certificate: PEMSource, key: PEMSource)
    async throws -> SenderReport
{
    let configuration = SenderConfiguration(
        host: "127.0.0.1", port: port,
        tls: .client(certificateChain: certificate, privateKey: key, trustRoots: .certificates(ca)))
    let sender = try Sender(configuration) { target, status, _ in
        print("remove \(target): \(status)")  // the provider's clean-up list
    }
    var payload = PayloadBuilder()
    payload.alertBody = "Your weekly digest is ready"
    payload.badge = 1
    let digest = NotificationList(tokens: try tokens.map { try DeviceToken(hex: $0) }, payload: try payload.build())
    try await sender.send(contentsOf: digest)  // returns when every one is accepted, rejected or failed
    return await sender.finish()
}
// README-EXAMPLE-END

@Suite(.timeLimit(.minutes(2))) struct ReadmeExampleTests {
    @Test func theExampleSendsToTheMockAndReportsEveryNotification() async throws {
        let pki = LoopbackRig.pki
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let tokens = (0..<500).map { LoopbackRig.token($0).hex }
        let report = try await sendWeeklyDigest(to: tokens, port: rig.gateway.port, ca: pki.authority.certificate,
                                                certificate: pki.client.certificate, key: pki.client.privateKey)
        #expect(report.accepted == 500)
        #expect(report.isComplete)
        #expect(rig.statistics { $0.accepted >= 500 }.accepted == 500)
    }

    @Test func theREADMEShowsExactlyThisCode() throws {
        let testFile = try String(contentsOfFile: #filePath, encoding: .utf8)
        let readme = try String(contentsOfFile: URL(fileURLWithPath: #filePath)
            .deletingLastPathComponent().deletingLastPathComponent().deletingLastPathComponent()
            .appendingPathComponent("README.md").path, encoding: .utf8)
        let begin = testFile.range(of: "// README-EXAMPLE-BEGIN\n")!.upperBound
        let end = testFile.range(of: "// README-EXAMPLE-END")!.lowerBound
        let example = String(testFile[begin..<end])
        #expect(readme.contains("```swift\n" + example + "```"), "README.md's embedding example differs from the tested one")
    }
}
