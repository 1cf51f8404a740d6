import Foundation
import SalvoIO
import SalvoMock
import SalvoTestSupport
import SalvoWire
import Testing
@testable import SalvoEngine

/// Broadcasts (iOS 18 Live Activities) through the sender, against the mock's broadcast
/// endpoint and channel registry: the same engine, the same accounting as device pushes.
@Suite struct BroadcastSendTests {
    static let bundleID = "com.example.app"
    static let update = Array(#"{"aps":{"event":"update","timestamp":1767225600,"content-state":{"score":"2-1"}}}"#.utf8)

    /// What a run's events said, by sequence.
    struct Events {
        var rejected: [UInt64: (PushTarget, Rejection)] = [:]
        var failed: [UInt64: (PushTarget, FailureReason)] = [:]
    }

    static func send(_ list: NotificationList, _ configuration: SenderConfiguration) async throws -> (SenderReport, Events) {
        let sender = try Sender(configuration)
        try await sender.send(contentsOf: list)
        let report = await sender.finish(timeout: .seconds(60))
        var events = Events()
        for await event in sender.events {
            switch event {
            case .rejected(let target, let rejection, let sequence): events.rejected[sequence] = (target, rejection)
            case .failed(let target, let reason, let sequence): events.failed[sequence] = (target, reason)
            default: break
            }
        }
        return (report, events)
    }

    @Test func broadcastsAreAcceptedAndCountedPerChannel() async throws {
        let rig = try H2LoopbackRig()
        let channels = try (0..<3).map { _ in try rig.gateway.channels.create(bundleID: Self.bundleID, policy: .noStorage) }
        // Each its own payload: the mock counts a second identical broadcast as a duplicate.
        let targets = channels + channels + [channels[0]]
        let payloads = targets.indices.map { Array(#"{"aps":{"event":"update","timestamp":\#($0)}}"#.utf8) }
        let list = NotificationList(zip(targets, payloads).map { NotificationList.Item(channel: $0, payload: $1) })
        let (report, events) = try await Self.send(list, rig.senderConfiguration(topic: Self.bundleID))
        #expect(report.submitted == 7 && report.accepted == 7 && report.isComplete)
        #expect(events.rejected.isEmpty && events.failed.isEmpty)
        let mock = rig.statistics { $0.accepted >= 7 }
        #expect(mock.accepted == 7 && mock.rejected == 0 && mock.duplicates == 0)
        #expect(mock.broadcastsByChannel == [channels[0]: 3, channels[1]: 2, channels[2]: 2])
        #expect(mock.acceptedDigests == zip(targets, payloads).map { H2Statistics.broadcastDigest(channelID: $0, payload: $1) }.sorted())
    }

    /// create → send → delete → send: the second is rejected ChannelNotRegistered (never
    /// retried), and the event names the channel, not a token.
    @Test func aDeletedChannelIsRejectedAsNotRegisteredAndNamedByItsChannel() async throws {
        let rig = try H2LoopbackRig()
        let channel = try rig.gateway.channels.create(bundleID: Self.bundleID, policy: .mostRecent)
        let configuration = rig.senderConfiguration(topic: Self.bundleID)
        let (first, _) = try await Self.send(NotificationList(channels: [channel], payload: Self.update), configuration)
        #expect(first.accepted == 1)
        #expect(rig.gateway.channels.delete(channel, bundleID: Self.bundleID))
        let (second, events) = try await Self.send(NotificationList(channels: [channel], payload: Self.update), configuration)
        #expect(second.rejected == 1 && second.resent == 0 && second.rejectedByReason == ["ChannelNotRegistered": 1])
        let (target, rejection) = try #require(events.rejected[0])
        #expect(target == .channel(channel) && target.description == "channel:" + channel)
        #expect(rejection == .http(status: 400, reason: "ChannelNotRegistered", timestamp: nil))
    }

    /// A no-storage channel takes only `apns-expiration: 0`, which the sender sends by
    /// default; a line's own nonzero expiration is Apple's BadExpirationDate.
    @Test func aNonzeroExpirationOnANoStorageChannelIsRejected() async throws {
        let rig = try H2LoopbackRig()
        let noStorage = try rig.gateway.channels.create(bundleID: Self.bundleID, policy: .noStorage)
        let mostRecent = try rig.gateway.channels.create(bundleID: Self.bundleID, policy: .mostRecent)
        let list = NotificationList([
            .init(channel: noStorage, payload: Self.update),
            .init(channel: noStorage, payload: Self.update, expiry: 1_767_225_600),
            .init(channel: mostRecent, payload: Self.update, expiry: 1_767_225_600),
        ])
        let (report, events) = try await Self.send(list, rig.senderConfiguration(topic: Self.bundleID))
        #expect(report.accepted == 2 && report.rejected == 1 && report.rejectedByReason == ["BadExpirationDate": 1])
        #expect(events.rejected.keys.sorted() == [1])
    }

    /// 100,000 pushes to devices and 10,000 broadcasts over 1,000 channels in one list, with
    /// GOAWAYs and 503s: every one is accepted exactly once, and the mock's counts per
    /// channel are what was sent to each.
    @Test func aMixedCampaignUnderGoAwaysAnd503sIsExactPerChannel() async throws {
        // A 503 retires its connection: one every few thousand keeps the reconnections few.
        let rig = try H2LoopbackRig(plan: H2FailurePlan(unavailableEvery: 4_999, goawayEvery: 19_997))
        let channels = try (0..<1000).map { _ in try rig.gateway.channels.create(bundleID: Self.bundleID, policy: .noStorage) }
        var items: [NotificationList.Item] = []
        var expected: [UInt64] = []
        var perChannel: [String: Int] = [:]
        for n in 0..<110_000 {
            if n % 11 == 10 {
                let channel = channels[(n / 11) % channels.count]
                let payload = Array(#"{"aps":{"event":"update","timestamp":\#(n)}}"#.utf8)
                items.append(.init(channel: channel, payload: payload))
                expected.append(H2Statistics.broadcastDigest(channelID: channel, payload: payload))
                perChannel[channel, default: 0] += 1
            } else {
                // Tokens ending in dead or fade are the mock's 410s: numbers past the list's instead.
                let number = [0xDEAD, 0xFADE].contains(n & 0xFFFF) ? n + 200_000 : n
                items.append(.init(token: LoopbackRig.token(number), payload: LoopbackRig.payload(number)))
                expected.append(MockStatistics.digest(token: LoopbackRig.token(number), payload: LoopbackRig.payload(number)))
            }
        }
        let (report, events) = try await Self.send(NotificationList(items), rig.senderConfiguration(topic: Self.bundleID))
        #expect(report.submitted == 110_000 && report.accepted == 110_000 && report.isComplete,
                "accepted \(report.accepted), rejected \(report.rejectedByReason), failed \(report.failedByReason)")
        #expect(report.resent > 0)
        #expect(events.rejected.isEmpty && events.failed.isEmpty, "\(events.rejected.prefix(3).map { ($0.key, $0.value.0, $0.value.1) })")
        let mock = rig.statistics { $0.accepted - $0.duplicates >= 110_000 }
        #expect(mock.goaways > 0 && mock.rejected(.serviceUnavailable) > 0)
        // GOAWAYs and 503s resend only what was not processed; a connection dropped for a
        // stall on a loaded machine may resend what was, and says so (possible duplicates).
        #expect(mock.accepted - mock.duplicates == 110_000 && mock.duplicates <= report.possibleDuplicates,
                "mock accepted \(mock.accepted), duplicates \(mock.duplicates), possible \(report.possibleDuplicates)")
        let missing = Set(expected).subtracting(mock.acceptedDigests ?? []).count
        #expect(missing == 0 && mock.acceptedDigests?.count == expected.count, "\(missing) not accepted by the mock")
        // Each channel got what was sent to it; more only by a possible duplicate.
        let excess = perChannel.map { (mock.broadcastsByChannel[$0.key] ?? 0) - $0.value }
        #expect(Set(mock.broadcastsByChannel.keys) == Set(perChannel.keys))
        #expect(excess.allSatisfy { $0 >= 0 } && excess.reduce(0, +) <= mock.duplicates)
    }

    /// The binary protocol has no broadcasts: the sender refuses one where it is staged,
    /// instead of framing it to a token of zeros.
    @Test func aBinarySenderRefusesABroadcast() async throws {
        let rig = try LoopbackRig()
        defer { rig.gateway.stop() }
        let sender = try Sender(LoopbackRig.senderConfiguration(port: rig.gateway.port))
        await #expect(throws: SendError.self) {
            try await sender.send(contentsOf: NotificationList(channels: ["Y2hhbm5lbA=="], payload: Self.update))
        }
        let report = await sender.finish(timeout: .seconds(30))
        #expect(report.accepted == 0)
        #expect(rig.gateway.statistics().accepted == 0)
    }
}
