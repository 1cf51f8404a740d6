import Foundation
import Glibc
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoEngine

@Suite(.serialized, .timeLimit(.minutes(5))) struct SenderTests {
    @Test func everyNotificationIsAcceptedOverSeveralShardsAndConnections() async throws {
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let count = 1_000_000
        let (report, rejected) = try await LoopbackRig.run(LoopbackRig.senderConfiguration(port: rig.gateway.port), count: count)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(report.submitted == count)
        #expect(report.accepted == count)
        #expect(report.isComplete)
        #expect(rejected.isEmpty)
        #expect(report.windowOverruns == 0)
        #expect(mock.accepted == count)
        #expect(mock.duplicates == 0)
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: count, excluding: []))
        #expect(mock.connections >= 4)
    }

    @Test func invalidTokensAreRejectedOnceAndEverythingElseArrives() async throws {
        // Tokens whose last byte is 0x07 are invalid: 1 in 256.
        let rig = try LoopbackRig(plan: FailurePlan(invalidTokenSuffix: [0x07]))
        defer { rig.gateway.stop() }
        let count = 20_000
        let (report, rejected) = try await LoopbackRig.run(LoopbackRig.senderConfiguration(port: rig.gateway.port), count: count)
        let mock = rig.statistics(caughtUpWith: report)
        let expectedRejected = Set((0..<count).filter { $0 & 0xff == 0x07 }.map(UInt64.init))
        #expect(rejected == expectedRejected)
        #expect(report.rejected == expectedRejected.count)
        #expect(report.rejectedByReason == ["invalid_token": expectedRejected.count])
        #expect(report.accepted == count - expectedRejected.count)
        #expect(report.isComplete)
        #expect(report.resent > 0)
        #expect(mock.rejected(.invalidToken) == expectedRejected.count)
        #expect(mock.duplicates == 0)
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: count, excluding: expectedRejected))
    }

    @Test(arguments: [
        FailurePlan(rejectEvery: 997),
        FailurePlan(shutdownEvery: 1500),
        FailurePlan(stallEvery: 3000, stallDuration: .milliseconds(50)),
    ])
    func failurePlansKeepTheAccountingExact(plan: FailurePlan) async throws {
        let rig = try LoopbackRig(plan: plan)
        defer { rig.gateway.stop() }
        let count = 20_000
        let (report, rejected) = try await LoopbackRig.run(LoopbackRig.senderConfiguration(port: rig.gateway.port), count: count)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(report.isComplete)
        #expect(report.failed == 0)
        #expect(report.windowOverruns == 0)
        #expect(report.accepted == mock.accepted)
        #expect(report.rejected == mock.rejected)
        #expect(rejected.count == report.rejected)
        #expect(mock.duplicates == 0)
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: count, excluding: rejected))
        if plan.shutdownEvery != nil { #expect(mock.shutdowns > 0 && report.reconnects > 0) }
        if plan.rejectEvery != nil { #expect(report.rejected > 0) }
        if plan.stallEvery != nil { #expect(mock.stalls > 0) }
    }

    /// At TLS 1.2 (`salvo mock`'s default) the ticket comes inside the handshake, so every
    /// reconnect resumes. At TLS 1.3 it comes after it, and the first standby is opened as soon
    /// as the first connection is up, before the gateway's single-use tickets have all arrived:
    /// one of the next two connections may handshake in full, once. Every later one resumes.
    @Test(arguments: TLSVersion.allCases)
    func reconnectsAfterErrorResponsesResumeTheTLSSession(gatewayTLS: TLSVersion) async throws {
        let rig = try LoopbackRig(plan: FailurePlan(shutdownEvery: 500), tlsVersion: gatewayTLS)
        defer { rig.gateway.stop() }
        var configuration = LoopbackRig.senderConfiguration(port: rig.gateway.port)
        configuration.shards = 1
        configuration.connectionsPerShard = 1
        let sender = try Sender(configuration)
        let count = 3000
        for n in 0..<count {
            try await sender.send(token: LoopbackRig.token(n), payload: LoopbackRig.payload(n))
        }
        let report = await sender.finish()
        var connections: [Bool] = []
        for await event in sender.events {
            if case .connected(_, _, let resumed, _) = event { connections.append(resumed) }
        }
        #expect(report.accepted == count)
        #expect(connections.count >= 5)
        #expect(connections.first == false)
        #expect(report.resumedReconnects == connections.dropFirst().filter { $0 }.count, "the report counts what the events say")
        switch gatewayTLS {
        case .v1_2:
            #expect(connections.dropFirst().allSatisfy { $0 }, "every reconnect resumes: \(connections)")
        case .v1_3:
            #expect(connections.prefix(3).filter { !$0 }.count <= 2, "\(connections)")
            #expect(connections.dropFirst(3).allSatisfy { $0 }, "every later connection resumes: \(connections)")
        }
    }

    @Test func silentDropsResendAndBoundTheDuplicates() async throws {
        let rig = try LoopbackRig(plan: FailurePlan(dropEvery: 2500))
        defer { rig.gateway.stop() }
        let count = 20_000
        let (report, _) = try await LoopbackRig.run(LoopbackRig.senderConfiguration(port: rig.gateway.port), count: count)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(report.isComplete)
        #expect(report.accepted == count)
        #expect(mock.droppedConnections > 0)
        expectSameAcceptedSet(mock.acceptedDigestSet, LoopbackRig.digests(count: count, excluding: []))
        #expect(mock.duplicates <= report.possibleDuplicates)
        #expect(report.possibleDuplicates > 0)
    }

    @Test func silentDropsUnderAtMostOnceAreReportedNotResent() async throws {
        let rig = try LoopbackRig(plan: FailurePlan(dropEvery: 2500))
        defer { rig.gateway.stop() }
        let count = 20_000
        var configuration = LoopbackRig.senderConfiguration(port: rig.gateway.port)
        configuration.dropPolicy = .atMostOnce
        let (report, _) = try await LoopbackRig.run(configuration, count: count)
        let mock = rig.statistics(caughtUpWith: report)
        #expect(report.isComplete)
        #expect(report.possibleDuplicates == 0)
        #expect(mock.duplicates == 0)
        #expect(report.failedByReason["delivery_unknown", default: 0] == report.failed)
        #expect(report.failed > 0)
        // Every notification the sender counts accepted really arrived; the unknown ones may have.
        #expect(mock.accepted >= report.accepted)
        #expect(mock.accepted <= report.accepted + report.failed)
    }

    @Test func refusedConnectionsBackOffUntilTheGatewayAppears() async throws {
        let port = try #require(try Socket.listen(host: "127.0.0.1", port: 0).localAddress).port
        var configuration = LoopbackRig.senderConfiguration(port: port)
        // The rig's attempts run out within seconds of backoff, which a loaded machine can
        // take to bring the gateway up: this test is about backing off, not giving up.
        configuration.connectAttempts = 1000
        let sender = try Sender(configuration)
        let count = 1000
        for n in 0..<count {
            _ = try LoopbackRig.payload(n).withUnsafeBytes { try sender.trySend(token: LoopbackRig.token(n), payload: $0) }
        }
        // Wait for a refused attempt, then bring the gateway up on that port.
        for await event in sender.events {
            if case .connectionFailed(_, _, let reason) = event {
                #expect(reason.contains("ECONNREFUSED"))
                break
            }
        }
        let rig = try LoopbackRig(port: port)
        defer { rig.gateway.stop() }
        let report = await sender.finish(timeout: .seconds(60))
        #expect(report.accepted == count)
        #expect(rig.statistics(caughtUpWith: report).accepted == count)
    }

    @Test func anUntrustedGatewayIsAClearErrorAndNothingCountsAsAccepted() async throws {
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let stranger = try DevelopmentPKI.makeAuthority(commonName: "Stranger CA")
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port, trusting: stranger))
        var sent = 0
        var failure: SendError?
        let deadline = Instant.now() + .seconds(30)
        while failure == nil && Instant.now() < deadline {
            do {
                if try LoopbackRig.payload(sent).withUnsafeBytes({ try sender.trySend(token: LoopbackRig.token(sent), payload: $0) }) {
                    sent += 1
                }
            } catch let error as SendError {
                failure = error
            }
            await Task.yield()
        }
        let report = await sender.finish(timeout: .seconds(10))
        let reason = try #require(failure).description
        #expect(reason.contains("certificate verify failed"))
        #expect(report.accepted == 0)
        #expect(report.failed == sent)
        #expect(report.failedByReason["gateway_unreachable"] == sent)
        #expect(rig.gateway.statistics().accepted == 0)
    }

    @Test func aRefusedClientCertificateFailsEverything() async throws {
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        var configuration = LoopbackRig.senderConfiguration(port: rig.gateway.port)
        configuration.tls.certificateChain = nil
        configuration.tls.privateKey = nil
        let sender = try Sender(configuration)
        for n in 0..<10 {
            _ = try LoopbackRig.payload(n).withUnsafeBytes { try sender.trySend(token: LoopbackRig.token(n), payload: $0) }
        }
        let report = await sender.finish(timeout: .seconds(30))
        #expect(report.accepted == 0)
        #expect(report.failed == 10)
        #expect(rig.gateway.statistics().accepted == 0)
    }

    @Test func oversizePayloadsAreRefusedAloneWithAClearError() async throws {
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port))
        let big = [UInt8](repeating: 0x20, count: 2049)
        #expect(throws: SendError.invalidPayload(.payloadTooLong(length: 2049, maximum: 2048), sequence: 7)) {
            _ = try big.withUnsafeBytes { try sender.trySend(token: LoopbackRig.token(1), payload: $0, sequence: 7) }
        }
        try await sender.send(token: LoopbackRig.token(2), payload: LoopbackRig.payload(2))
        let report = await sender.finish()
        #expect(report.submitted == 1 && report.accepted == 1)
    }
}
