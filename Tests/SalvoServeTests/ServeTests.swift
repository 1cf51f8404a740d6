import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import SalvoEngine
import SalvoMock
@testable import SalvoServe
import SalvoTestSupport
import SalvoWire
import Synchronization
import Testing

/// `salvo serve` against the real HTTP/2 mock, through a real HTTP client.
@Suite(.serialized, .timeLimit(.minutes(5)), .ownThread("serve-tests")) struct ServeTests {
    @Test func aBatchIsAnsweredPerNotificationAndTheMockGetsExactlyTheAcceptedOnes() async throws {
        let rig = try await ServeRig()
        let dead = H2LoopbackRig.deadToken(7)
        let body = ServeRig.batch([
            ServeRig.notification(0), ServeRig.notification(1, token: dead), #"{"token":"zz","payload":{}}"#,
            ServeRig.notification(2), "17",
        ])
        let answer = try await rig.post(body, query: "?wait=30")
        try await rig.stop()

        #expect(answer.status == 200)
        #expect(answer.json["taken"] as? Int == 3)
        #expect(answer.json["refused"] as? Int == 2)
        let notifications = answer.json.notifications
        #expect(notifications.map { $0["index"] as? Int } == [0, 1, 3])
        #expect(notifications.map { $0["state"] as? String } == ["accepted", "rejected", "accepted"])
        #expect(notifications[1]["status_code"] as? Int == 410)
        #expect(notifications[1]["reason"] as? String == "Unregistered")
        #expect(notifications[1]["timestamp"] as? Int != nil)
        #expect(notifications[1]["token_problem"] as? Bool == true)
        #expect(answer.json.errors.map { $0["index"] as? Int } == [2, 4])
        #expect((answer.json.errors[0]["reason"] as? String)?.contains("device token") == true)
        #expect((answer.json.errors[1]["reason"] as? String)?.contains("a JSON object, not a number") == true)
        // The mock holds exactly the two accepted notifications.
        let statistics = rig.mock.statistics { $0.accepted == 2 }
        #expect(statistics.acceptedDigests?.sorted() == H2LoopbackRig.digests([0, 2]))
        #expect(statistics.rejected == 1)
    }

    @Test func aTakenNotificationIsPendingThenFinalAndItsStatusIsKept() async throws {
        let rig = try await ServeRig(mockPlan: H2FailurePlan(responseDelay: .milliseconds(200)))
        let taken = try await rig.post(ServeRig.notification(5))
        #expect(taken.status == 202)
        #expect(taken.json["durability"] as? String == "memory")
        let id = try #require(taken.json.notifications.first?["id"] as? String)
        #expect(taken.json.notifications.first?["state"] as? String == "pending")
        let pending = try await rig.get("/v1/notifications/\(id)")
        #expect(pending.status == 200)
        #expect(["pending", "accepted"].contains(pending.json["state"] as? String))
        try await rig.stop()  // drains: every notification taken is final

        let final = rig.server.status(of: id)
        #expect(final?.state == .accepted)
        #expect(rig.mock.gateway.statistics().accepted == 1)
    }

    @Test func aRepeatedIdOrIdempotencyKeySendsNothingAgain() async throws {
        let rig = try await ServeRig()
        let id = "5E0C2E6B-4C9B-4E1A-9A41-0E0F7C6D5B4A"
        let first = try await rig.post(ServeRig.notification(1, extra: #","apns_id":"\#(id)""#), query: "?wait=30")
        let again = try await rig.post(ServeRig.notification(1, extra: #","apns_id":"\#(id)""#), query: "?wait=30")
        #expect(first.json.notifications.first?["state"] as? String == "accepted")
        #expect(again.status == 200)
        #expect(again.json["taken"] as? Int == 0)
        #expect(again.json["duplicates"] as? Int == 1)
        #expect(again.json.notifications.first?["duplicate"] as? Bool == true)
        #expect(again.json.notifications.first?["state"] as? String == "accepted")

        let batch = ServeRig.batch([ServeRig.notification(2), ServeRig.notification(3)])
        let keyed = try await rig.post(batch, query: "?wait=30", headers: [("Idempotency-Key", "order-42")])
        let retried = try await rig.post(batch, query: "?wait=30", headers: [("Idempotency-Key", "order-42")])
        #expect(keyed.status == 200)
        #expect(retried.status == 200)
        #expect(retried.headers.first(name: "Idempotent-Replayed") == "true")
        #expect((retried.json.notifications.map { $0["id"] as? String }) == (keyed.json.notifications.map { $0["id"] as? String }))
        try await rig.stop()
        #expect(rig.mock.gateway.statistics().accepted == 3)
    }

    @Test func callersWithoutAKeyOfTheFileAreRefused() async throws {
        let key = "s3cret-key-for-tests"
        let hash = SHA256.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined()
        let keys = try APIKeys(text: "# callers\nbilling \(hash)\n", path: "keys")
        let rig = try await ServeRig { $0.apiKeys = keys }
        let none = try await rig.post(ServeRig.notification(1))
        let wrong = try await rig.post(ServeRig.notification(1), headers: [("Authorization", "Bearer another")])
        let right = try await rig.post(ServeRig.notification(1), headers: [("Authorization", "Bearer \(key)")])
        let status = try await rig.get("/v1/notifications/5E0C2E6B-4C9B-4E1A-9A41-0E0F7C6D5B4A")
        let health = try await rig.get("/health")
        try await rig.stop()
        #expect(none.status == 401)
        #expect(none.headers.first(name: "WWW-Authenticate") == "Bearer")
        #expect(wrong.status == 401)
        #expect(right.status == 202)
        #expect(status.status == 401)
        #expect(health.status == 200)
        #expect(rig.mock.gateway.statistics().accepted == 1)
    }

    @Test func badRequestsGetAClearRefusalAndNothingIsSent() async throws {
        let rig = try await ServeRig { configuration in
            configuration.bodyLimit = 4096
            configuration.batchLimit = 3
        }
        let broken = try await rig.post(#"{"token": "ab"#)
        let empty = try await rig.post("[]")
        let allBad = try await rig.post(ServeRig.batch([#"{"token":"ab","payload":{}}"#]))
        let tooMany = try await rig.post(ServeRig.batch((0..<4).map { ServeRig.notification($0) }))
        let tooLarge = try await rig.post(String(repeating: " ", count: 5000) + ServeRig.notification(1))
        let deep = try await rig.post(String(repeating: "[", count: 100) + String(repeating: "]", count: 100))
        let badWait = try await rig.post(ServeRig.notification(1), query: "?wait=soon")
        let badID = try await rig.get("/v1/notifications/nope")
        let unknown = try await rig.get("/v1/notifications/5E0C2E6B-4C9B-4E1A-9A41-0E0F7C6D5B4A")
        try await rig.stop()
        #expect(broken.status == 400)
        #expect((broken.json["error"] as? String)?.contains("not JSON") == true)
        #expect(empty.status == 400)
        #expect(allBad.status == 400)
        #expect(allBad.json.errors.first?["index"] as? Int == 0)
        #expect(tooMany.status == 413)
        #expect((tooMany.json["error"] as? String)?.contains("at most 3") == true)
        #expect(tooLarge.status == 413)
        #expect(deep.status == 400)
        #expect(badWait.status == 400)
        #expect(badID.status == 400)
        #expect(unknown.status == 404)
        #expect(rig.mock.gateway.statistics().requests == 0)
    }

    @Test func aFullQueueAnswers429WithRetryAfterAndTakesNothing() async throws {
        // Answers held 8 s: the first batch fills the queue until then, however slowly the
        // test runs in a full suite (stopping waits for them).
        let rig = try await ServeRig(mockPlan: H2FailurePlan(responseDelay: .seconds(8))) { configuration in
            configuration.queueLimit = 4
            configuration.batchLimit = 4
        }
        let first = try await rig.post(ServeRig.batch((0..<3).map { ServeRig.notification($0) }))
        let second = try await rig.post(ServeRig.batch((3..<5).map { ServeRig.notification($0) }))
        let ready = try await rig.get("/ready")
        try await rig.stop()
        #expect(first.status == 202)
        #expect(second.status == 429)
        #expect(second.headers.first(name: "Retry-After") == "1")
        #expect(ready.status == 200)  // 3 of 4: room for one more
        #expect(rig.mock.gateway.statistics().accepted == 3)
    }

    @Test func aCallerOverItsRateIsToldWhenToComeBack() async throws {
        // One notification per 1,000 s: the bucket holds one, and the next comes back much later.
        let rig = try await ServeRig { $0.callerRate = 0.001 }
        let first = try await rig.post(ServeRig.notification(0))
        let second = try await rig.post(ServeRig.notification(1))
        try await rig.stop()
        #expect(first.status == 202)
        #expect(second.status == 429)
        let retryAfter = try #require(second.headers.first(name: "Retry-After").flatMap { Int($0) })
        #expect((990...1000).contains(retryAfter))
        #expect(rig.mock.gateway.statistics().accepted == 1)
    }

    @Test func rejectionsReachTheWebhookSignedAndOnlyThem() async throws {
        let secret = Array("webhook secret".utf8)
        // Bounds far beyond a slow full run: the drain delivers everything, and the receiver waits.
        try await withReceiver(within: .seconds(300)) { receiver in
            var webhookConfiguration = WebhookConfiguration(url: receiver.url, secret: secret)
            webhookConfiguration.flushInterval = .milliseconds(10)
            webhookConfiguration.drainTimeout = .seconds(300)
            webhookConfiguration.requestTimeout = .seconds(300)
            let webhook = try WebhookDelivery(webhookConfiguration)
            let rig = try await ServeRig(services: [webhook], onRefusal: { webhook.enqueue($0) })
            let answer = try await rig.post(ServeRig.batch([
                ServeRig.notification(0), ServeRig.notification(1, token: H2LoopbackRig.deadToken(1)),
                ServeRig.notification(2, token: H2LoopbackRig.deadToken(2)),
            ]), query: "?wait=30")
            try await rig.stop()  // the webhook delivers what it holds before it stops
            let posts = try await receiver.posts { $0.reduce(0) { $0 + $1.payload.events.count } >= 2 }
            #expect(receiver.requests == posts.count)
            let events = posts.flatMap(\.payload.events)
            let rejectedIDs = answer.json.notifications.filter { $0["state"] as? String == "rejected" }.compactMap { $0["id"] as? String }
            #expect(Set(events.map(\.id)) == Set(rejectedIDs))
            #expect(events.count == 2)
            #expect(events.allSatisfy { $0.state == .rejected && $0.statusCode == 410 && $0.reason == "Unregistered" })
            #expect(posts.allSatisfy { WebhookDelivery.isValidSignature($0.signature ?? "", of: $0.body, secret: secret) })
        }
    }

    @Test func sigtermDrainsEveryNotificationTaken() async throws {
        let rig = try await ServeRig(mockPlan: H2FailurePlan(responseDelay: .milliseconds(300)))
        var ids: [String] = []
        for start in stride(from: 0, to: 400, by: 100) {
            let answer = try await rig.post(ServeRig.batch((start..<start + 100).map { ServeRig.notification($0) }))
            #expect(answer.status == 202)
            ids += answer.json.notifications.compactMap { $0["id"] as? String }
        }
        try await rig.stop()
        #expect(ids.count == 400)
        #expect(ids.allSatisfy { rig.server.status(of: $0)?.state == .accepted })
        #expect(rig.mock.gateway.statistics().acceptedDigests?.sorted() == H2LoopbackRig.digests(0..<400))
    }

    @Test func curlAndAPythonClientGetTheSameAnswers() async throws {
        let rig = try await ServeRig()
        let body = ServeRig.notification(9)
        let curl = try await Self.run(["curl", "--silent", "--show-error", "--write-out", "\n%{http_code}",
                                                         "--data-binary", body, "\(rig.url)/v1/notifications?wait=30"])
        let python = try await Self.run(["python3", "-c", """
            import json, sys, urllib.request
            request = urllib.request.Request(sys.argv[1], data=sys.argv[2].encode(), headers={"Content-Type": "application/json"})
            with urllib.request.urlopen(request, timeout=60) as answer:
                print(answer.status, json.load(answer)["notifications"][0]["state"])
            """, "\(rig.url)/v1/notifications?wait=30", ServeRig.notification(10)])
        try await rig.stop()
        #expect(curl.status == 0, "\(curl.errors)")
        #expect(curl.output.hasSuffix("\n200"))
        #expect(curl.output.contains(#""state":"accepted""#))
        #expect(python.status == 0, "\(python.errors)")
        #expect(python.output.trimmingCharacters(in: .whitespacesAndNewlines) == "200 accepted")
    }

    /// Runs a command to its end (bounded): its exit status, output and errors.
    static func run(_ arguments: [String]) async throws -> (status: Int32, output: String, errors: String) {
        let process = try ChildProcess("/usr/bin/env", arguments)
        let status = try await process.exitStatus(within: .seconds(240))
        return (status, process.output, process.errors)
    }
}
