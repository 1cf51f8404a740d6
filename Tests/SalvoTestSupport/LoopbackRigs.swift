import Foundation
import Glibc
import SalvoEngine
import SalvoIO
import SalvoMock
import SalvoWire
import Testing

/// A mock gateway with throwaway certificates and a sender configured for it.
public struct LoopbackRig {
    public static let pki = try! DevelopmentPKI.Bundle()

    public let gateway: MockGateway

    public init(plan: FailurePlan = .none, port: Int = 0, requireClientCertificate: Bool = true, tlsVersion: TLSVersion = .v1_3) throws {
        var tls = TLSConfiguration.server(certificateChain: Self.pki.server.certificate, privateKey: Self.pki.server.privateKey,
                                          clientCertificateRoots: .certificates(Self.pki.authority.certificate))
        tls.requireClientCertificate = requireClientCertificate
        tls.maximumVersion = tlsVersion
        gateway = try MockGateway(.init(port: port, tls: tls, loops: 2, failurePlan: plan, recordAccepted: true))
    }

    /// The mock's statistics once `condition` holds (bounded). The sender settles by time,
    /// so when it finishes the mock may still be reading frames from its socket buffers.
    public func statistics(when condition: (MockStatistics) -> Bool) -> MockStatistics {
        eventually(gateway.statistics, until: condition)
    }

    /// The mock's statistics once it has seen at least what `report` says was settled by it.
    public func statistics(caughtUpWith report: SenderReport) -> MockStatistics {
        statistics { $0.accepted - $0.duplicates >= report.accepted && $0.rejected >= report.rejected }
    }

    public static func senderConfiguration(port: Int, trusting authority: DevelopmentPKI.Identity = pki.authority) -> SenderConfiguration {
        var configuration = SenderConfiguration(
            host: "127.0.0.1", port: port,
            tls: .client(certificateChain: pki.client.certificate, privateKey: pki.client.privateKey,
                         trustRoots: .certificates(authority.certificate)))
        configuration.shards = 2
        configuration.connectionsPerShard = 2
        configuration.errorWait = .milliseconds(300)
        configuration.reconnectBackoff = Backoff(initial: .milliseconds(5), maximum: .milliseconds(100))
        configuration.connectAttempts = 50
        configuration.retryBudget = 20
        configuration.pinThreads = false
        return configuration
    }

    /// The rig's sender on a single connection, so that everything the gateway does to a
    /// connection (a late answer, a misbehaviour) happens to the one that wrote what it names.
    public static func oneConnection(port: Int) -> SenderConfiguration {
        var configuration = senderConfiguration(port: port)
        configuration.shards = 1
        configuration.connectionsPerShard = 1
        configuration.maximumConnectionsPerShard = 1
        return configuration
    }

    public static func token(_ n: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0xA5, count: 32)
        withUnsafeBytes(of: UInt64(n).bigEndian) { bytes.replaceSubrange(24..<32, with: $0) }
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }

    public static func payload(_ n: Int) -> [UInt8] { Array(#"{"aps":{"alert":"campaign"},"n":\#(n)}"#.utf8) }

    /// Sends `count` notifications with `trySend`, spinning politely on backpressure, and
    /// returns the final report plus the sequences reported rejected.
    public static func run(_ configuration: SenderConfiguration, count: Int) async throws -> (SenderReport, Set<UInt64>) {
        let rejected = Locked<Set<UInt64>>([])
        let sender = try Sender(configuration) { _, _, sequence in
            _ = rejected.withLock { $0.insert(sequence) }
        }
        let deadline = Instant.now() + .seconds(120)
        for n in 0..<count {
            let payload = payload(n)
            while try !payload.withUnsafeBytes({ try sender.trySend(token: token(n), payload: $0, sequence: UInt64(n)) }) {
                guard Instant.now() < deadline else { Issue.record("backpressure never cleared"); break }
                await Task.yield()
            }
        }
        let report = await sender.finish(timeout: .seconds(60))
        return (report, rejected.withLock { $0 })
    }

    /// The digests of notifications 0..<count minus the excluded sequences.
    public static func digests(count: Int, excluding excluded: Set<UInt64>) -> Set<UInt64> {
        Set((0..<count).lazy.filter { !excluded.contains(UInt64($0)) }.map { MockStatistics.digest(token: token($0), payload: payload($0)) })
    }
}

/// Compares the mock's accepted set with the sender's without printing a million digests.
public func expectSameAcceptedSet(_ mock: Set<UInt64>, _ sender: Set<UInt64>, sourceLocation: SourceLocation = #_sourceLocation) {
    let missing = sender.subtracting(mock).count
    let unexpected = mock.subtracting(sender).count
    #expect(missing == 0 && unexpected == 0,
            "accepted by the sender but not the mock: \(missing); by the mock but not the sender: \(unexpected)",
            sourceLocation: sourceLocation)
}

/// An HTTP/2 mock gateway with throwaway certificates and a sender configured for it.
public struct H2LoopbackRig {
    public static let pki = LoopbackRig.pki

    public let gateway: H2MockGateway

    public init(plan: H2FailurePlan = H2FailurePlan(), clientCertificates: Bool = true,
         _ configure: (inout H2MockGateway.Configuration) -> Void = { _ in }) throws {
        var tls = TLSConfiguration.server(certificateChain: Self.pki.server.certificate, privateKey: Self.pki.server.privateKey,
                                          clientCertificateRoots: clientCertificates ? .certificates(Self.pki.authority.certificate) : nil)
        tls.requireClientCertificate = clientCertificates
        var configuration = H2MockGateway.Configuration(tls: tls, loops: 2, failurePlan: plan, recordAccepted: true)
        configure(&configuration)
        gateway = try H2MockGateway(configuration)
    }

    /// A sender for the rig, authenticating with the client certificate.
    public func senderConfiguration(topic: String = "com.example.app") -> SenderConfiguration {
        var configuration = LoopbackRig.senderConfiguration(port: gateway.port)
        configuration.transport = .http2(HTTP2Options(topic: topic))
        return configuration
    }

    /// The mock's statistics once `condition` holds (bounded).
    public func statistics(when condition: (H2Statistics) -> Bool) -> H2Statistics {
        eventually(gateway.statistics, until: condition)
    }

    /// Notifications 0..<count, each with its own token and payload.
    public static func list(_ count: Int) -> NotificationList {
        NotificationList((0..<count).map { NotificationList.Item(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0)) })
    }

    /// The digests the mock records for what a sender had accepted.
    public static func digests(_ sequences: some Sequence<Int>) -> [UInt64] {
        sequences.map { MockStatistics.digest(token: LoopbackRig.token($0), payload: LoopbackRig.payload($0)) }.sorted()
    }

    /// Token n, ending in `dead`: the mock answers 410 Unregistered.
    public static func deadToken(_ n: Int) -> DeviceToken {
        var bytes = [UInt8](repeating: 0xA5, count: 32)
        withUnsafeBytes(of: UInt32(n).bigEndian) { bytes.replaceSubrange(24..<28, with: $0) }
        bytes[30] = 0xDE
        bytes[31] = 0xAD
        return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
    }
}
