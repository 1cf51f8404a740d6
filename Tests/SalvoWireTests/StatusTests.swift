import SalvoWire
import Testing

@Suite("Status")
struct StatusTests {
    static let known: [(Status, UInt8, String)] = [
        (.noErrors, 0, "no_errors"),
        (.processingError, 1, "processing_error"),
        (.missingDeviceToken, 2, "missing_device_token"),
        (.missingTopic, 3, "missing_topic"),
        (.missingPayload, 4, "missing_payload"),
        (.invalidTokenSize, 5, "invalid_token_size"),
        (.invalidTopicSize, 6, "invalid_topic_size"),
        (.invalidPayloadSize, 7, "invalid_payload_size"),
        (.invalidToken, 8, "invalid_token"),
        (.shutdown, 10, "shutdown"),
        (.protocolError, 128, "protocol_error"),
        (.unknown, 255, "unknown"),
    ]

    @Test("the wire codes' snake_case names")
    func codesAndNames() {
        for (status, code, name) in Self.known {
            #expect(Status(rawValue: code).name == name)
            #expect(status.description.hasSuffix("(status \(code))"))
        }
        #expect(Set(Self.known.map(\.0.description)).count == Self.known.count)
    }

    @Test("codes without a name survive and render as status_NN")
    func unnamedCodes() {
        #expect(Status(rawValue: 9).name == "status_9")
        #expect(Status(rawValue: 42).name == "status_42")
        #expect(Status(rawValue: 42).description.contains("42"))
    }

    @Test("classification: token problems and retryable codes")
    func classification() {
        let tokenProblems = Set((0...255).map { Status(rawValue: UInt8($0)) }.filter(\.isTokenProblem))
        let retryable = Set((0...255).map { Status(rawValue: UInt8($0)) }.filter(\.isRetryable))
        #expect(tokenProblems == [.invalidToken, .invalidTokenSize])
        #expect(retryable == [.processingError, .shutdown, .unknown])
        #expect(tokenProblems.isDisjoint(with: retryable))
    }
}
