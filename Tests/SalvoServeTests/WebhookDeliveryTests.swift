import Crypto
import Foundation
import Hummingbird
import Logging
import NIOCore
import SalvoServe
import Synchronization
import Testing

@Suite struct WebhookDeliveryTests {
    static let secret = Array("a secret the receiver shares".utf8)
    /// How long a test waits for its receiver before failing: a full parallel run on two
    /// busy cores can leave a test without a thread for tens of seconds.
    static let patience: Duration = .seconds(300)

    static func configuration(_ url: String) -> WebhookConfiguration {
        var configuration = WebhookConfiguration(url: url, secret: secret)
        configuration.flushInterval = .milliseconds(20)
        configuration.retryDelay = .milliseconds(2)
        configuration.maximumRetryDelay = .milliseconds(10)
        // Longer than a test waits: a starved process reads its in-process receiver's answer
        // late, and a request timeout would then retry a POST the receiver already took
        // (HTTPClientError.readTimeout), which the exact counts below must not see.
        configuration.requestTimeout = patience * 2
        return configuration
    }

    static func rejection(_ number: Int) -> NotificationStatus {
        NotificationStatus(id: String(format: "00000000-0000-0000-0000-%012X", number), state: .rejected, statusCode: 410,
                           reason: "Unregistered", timestamp: 1_700_000_000_000, tokenProblem: true)
    }

    @Test func deliversEveryEventOnceInSignedBatches() async throws {
        let expected = Set((0..<2500).map { Self.rejection($0).id })
        try await withReceiver(within: Self.patience) { receiver in
            var configuration = Self.configuration(receiver.url)
            configuration.batchLimit = 1000
            let log = LogRecorder()
            let webhook = try WebhookDelivery(configuration, logger: log.logger)
            let posts = try await running(webhook) {
                // Four producers at once, as the engine's shard threads would be.
                await withTaskGroup(of: Void.self) { producers in
                    for producer in 0..<4 {
                        producers.addTask {
                            for number in stride(from: producer, to: 2500, by: 4) { webhook.enqueue(Self.rejection(number)) }
                        }
                    }
                }
                return try await receiver.posts { $0.reduce(0) { $0 + $1.payload.events.count } >= 2500 }
            }

            let ids = posts.flatMap { $0.payload.events.map(\.id) }
            #expect(ids.count == 2500)
            #expect(Set(ids) == expected)
            #expect(posts.count >= 3)
            #expect(posts.allSatisfy { $0.payload.events.count <= 1000 })
            for post in posts {
                #expect(post.signature == "sha256=" + hex(HMAC<SHA256>.authenticationCode(for: post.body, using: SymmetricKey(data: Self.secret))))
                #expect(WebhookDelivery.isValidSignature(post.signature ?? "", of: post.body, secret: Self.secret))
                #expect(!WebhookDelivery.isValidSignature(post.signature ?? "", of: post.body, secret: Array("another".utf8)))
                #expect(post.contentType == "application/json")
                #expect(post.userAgent == "salvo")
                #expect(abs(post.payload.sentAt - Int64(Date().timeIntervalSince1970 * 1000)) < 600_000)
            }
            // No POST failed, so none was retried: each reached the receiver once, answered 200.
            #expect(webhook.counts == WebhookCounts(delivered: 2500, attempts: posts.count), "\(log.lines)")
            #expect(receiver.requests == posts.count)
        }
    }

    @Test func retriesABatchTheReceiverCouldNotTakeYet() async throws {
        try await withReceiver(within: Self.patience, answering: { $0 <= 3 ? .serviceUnavailable : .ok }) { receiver in
            var configuration = Self.configuration(receiver.url)
            // The batch goes when full, never split by a slow test thread.
            configuration.batchLimit = 5
            configuration.flushInterval = .seconds(600)
            let webhook = try WebhookDelivery(configuration)
            let posts = try await running(webhook) {
                for number in 0..<5 { webhook.enqueue(Self.rejection(number)) }
                return try await receiver.posts { $0.last?.status == 200 }
            }

            #expect(posts.map(\.status) == [503, 503, 503, 200])
            #expect(posts.allSatisfy { $0.payload.events.map(\.id) == (0..<5).map { Self.rejection($0).id } })
            #expect(webhook.counts == WebhookCounts(delivered: 5, attempts: 4))
        }
    }

    @Test func abandonsABatchTheReceiverRefuses() async throws {
        try await withReceiver(within: Self.patience, answering: { _ in .badRequest }) { receiver in
            var configuration = Self.configuration(receiver.url)
            configuration.batchLimit = 3
            configuration.flushInterval = .seconds(600)
            let log = LogRecorder()
            let webhook = try WebhookDelivery(configuration, logger: log.logger)
            let posts = try await running(webhook) {
                for number in 0..<3 { webhook.enqueue(Self.rejection(number)) }
                return try await receiver.posts { !$0.isEmpty }
            }

            #expect(posts.map(\.status) == [400])
            // One batch: it goes when full (`batchLimit`), never split by a slow test thread.
            #expect(posts.allSatisfy { $0.payload.events.map(\.id) == (0..<3).map { Self.rejection($0).id } })
            // With 2 ms between attempts, a retry would have been made long before `finish`.
            #expect(webhook.counts == WebhookCounts(abandoned: 3, attempts: 1), "\(log.lines)")
            #expect(receiver.requests == 1)
        }
    }

    @Test func dropsWhatExceedsTheBufferWhileTheReceiverIsDownAndFinishesInTime() async throws {
        // Nothing listens on port 1: every connection is refused at once.
        var configuration = Self.configuration("http://127.0.0.1:1/hook")
        configuration.batchLimit = 10
        configuration.bufferLimit = 100
        configuration.attempts = 1_000_000
        // Pauses long enough that an enqueue waiting for delivery would take minutes.
        configuration.retryDelay = .milliseconds(100)
        configuration.maximumRetryDelay = .milliseconds(200)
        let log = LogRecorder()
        let webhook = try WebhookDelivery(configuration, logger: log.logger)
        let delivery = Task { await webhook.run() }

        let clock = ContinuousClock()
        let enqueueing = clock.measure {
            for number in 0..<1000 { webhook.enqueue(Self.rejection(number)) }
        }
        #expect(enqueueing < .seconds(2))
        #expect(webhook.counts.pending == 100)
        #expect(webhook.counts.dropped == 900)

        let finishing = await clock.measure { await webhook.finish(within: .milliseconds(300)) }
        // Without the deadline the receiver being down would hold 10 batches for a million
        // attempts each, hours. With it, finishing takes the 300 ms plus the hops from the
        // deadline to this test (the deadline's task, `run()`, the cancelled POST or pause,
        // the HTTP client's shutdown, `finish`), each waiting for one of the cooperative
        // threads: seconds when idle, close to a minute measured in a full parallel run on
        // two busy cores. The log shows where the time went if this fails.
        #expect(finishing < .seconds(150), "\(log.lines)")
        await delivery.value

        let counts = webhook.counts
        #expect(counts.attempts > 0)
        #expect(counts == WebhookCounts(dropped: 900, abandoned: 100, attempts: counts.attempts))
        webhook.enqueue(Self.rejection(1000))
        #expect(webhook.counts.dropped == 901)
    }

    @Test func cancellingStopsAtOnceAndCountsWhatWasHeld() async throws {
        var configuration = Self.configuration("http://127.0.0.1:1/hook")
        configuration.attempts = 1_000_000
        let webhook = try WebhookDelivery(configuration)
        for number in 0..<5 { webhook.enqueue(Self.rejection(number)) }
        let delivery = Task { await webhook.run() }
        delivery.cancel()
        await delivery.value

        #expect(webhook.counts == WebhookCounts(abandoned: 5, attempts: webhook.counts.attempts))
    }

    @Test func signsAsRFC4231Says() {
        // RFC 4231 test case 2.
        let body = Array("what do ya want for nothing?".utf8)
        let signature = WebhookDelivery.signature(of: body, secret: Array("Jefe".utf8))
        #expect(signature == "5bdcc146bf60754e6a042426089575c75a003f089d2739839dec58b964ec3843")
        #expect(WebhookDelivery.isValidSignature("sha256=" + signature, of: body, secret: Array("Jefe".utf8)))
        #expect(!WebhookDelivery.isValidSignature(signature, of: body, secret: Array("Jefe".utf8)))
        #expect(!WebhookDelivery.isValidSignature("sha256=5bdc", of: body, secret: Array("Jefe".utf8)))
    }

    @Test func refusesAnUnusableConfigurationAndNeverShowsTheSecret() {
        #expect(throws: WebhookConfigurationError.self) { try WebhookDelivery(WebhookConfiguration(url: "ftp://host/", secret: [1])) }
        #expect(throws: WebhookConfigurationError.self) { try WebhookDelivery(WebhookConfiguration(url: "http://host/", secret: [])) }
        var configuration = WebhookConfiguration(url: "https://user:token@hooks.example.com:8443/salvo?key=token",
                                                 secret: Array("s3cr3t".utf8))
        configuration.attempts = 0
        #expect(throws: WebhookConfigurationError.self) { try WebhookDelivery(configuration) }
        #expect(configuration.description == "https://hooks.example.com:8443/salvo")
        var dump = ""
        Swift.dump(configuration, to: &dump)
        #expect(!dump.contains("s3cr3t") && !dump.contains("token"))
    }
}

// MARK: Helpers

/// Runs `webhook` while `body` does, then finishes it (bounded) and waits for `run()` to end.
/// The receiver has seen every POST `body` waits for, but a starved client may not have read
/// the answers yet: the drain's limit must not cut that short (it ends once nothing is held).
private func running<T>(_ webhook: WebhookDelivery, _ body: () async throws -> T) async throws -> T {
    let delivery = Task { await webhook.run() }
    let result: T
    do { result = try await body() } catch {
        delivery.cancel()
        await delivery.value
        throw error
    }
    await webhook.finish(within: WebhookDeliveryTests.patience)
    await delivery.value
    return result
}

private func hex(_ bytes: some Sequence<UInt8>) -> String {
    bytes.map { String(format: "%02x", $0) }.joined()
}

/// One POST the receiver took, and the status it answered.
struct ReceivedPost: Sendable {
    var body: [UInt8]
    var payload: WebhookPayload
    var signature: String?
    var contentType: String?
    var userAgent: String?
    var status: Int
}

struct ReceiverTimedOut: Error, CustomStringConvertible {
    var description: String
}

/// A webhook receiver on 127.0.0.1 (Hummingbird), as the tests see it.
struct Receiver {
    enum Seen: Sendable { case listening(port: Int), post(ReceivedPost), timedOut }

    let url: String
    fileprivate var seen: AsyncStream<Seen>.Iterator
    fileprivate let count: RequestCount

    /// How many POSTs it has answered.
    var requests: Int { count.value.withLock { $0 } }

    /// The POSTs that arrive until `done` holds of all of them so far.
    ///
    /// - Throws: `ReceiverTimedOut` once the receiver's time limit has passed.
    mutating func posts(until done: ([ReceivedPost]) -> Bool) async throws -> [ReceivedPost] {
        var posts: [ReceivedPost] = []
        while !done(posts) {
            switch await seen.next() {
            case .post(let post): posts.append(post)
            case .listening: continue
            case .timedOut, nil: throw ReceiverTimedOut(description: "timed out after \(posts.count) posts")
            }
        }
        return posts
    }
}

final class RequestCount: Sendable {
    let value = Mutex(0)
}

/// Runs a receiver answering its n-th POST (from 1) with `answer(n)`, for `body`. Every wait
/// on it is bounded by `limit`, after which `posts(until:)` throws.
func withReceiver(within limit: Duration = .seconds(60),
                  answering answer: @escaping @Sendable (Int) -> HTTPResponse.Status = { _ in .ok },
                  _ body: (inout Receiver) async throws -> Void) async throws {
    let (seen, note) = AsyncStream.makeStream(of: Receiver.Seen.self)
    let count = RequestCount()
    let router = Router()
    router.post("hook") { request, _ -> Response in
        let bytes = Array(buffer: try await request.body.collect(upTo: 16 << 20))
        let status = answer(count.value.withLock { $0 += 1; return $0 })
        let payload = try JSONDecoder().decode(WebhookPayload.self, from: Data(bytes))
        note.yield(.post(ReceivedPost(body: bytes, payload: payload,
                                      signature: request.headers.first { $0.name.canonicalName == "x-salvo-signature" }?.value,
                                      contentType: request.headers[.contentType], userAgent: request.headers[.userAgent],
                                      status: status.code)))
        return Response(status: status)
    }
    var quiet = Application(router: router, configuration: .init(address: .hostname("127.0.0.1", port: 0)),
                            onServerRunning: { note.yield(.listening(port: $0.localAddress?.port ?? 0)) })
    // Stopping by cancellation is how these tests end a receiver, not an error to show.
    quiet.logger.logLevel = .critical
    let app = quiet
    try await withThrowingTaskGroup(of: Void.self) { group in
        group.addTask { try await app.run() }
        group.addTask {
            try await Task.sleep(for: limit)
            note.yield(.timedOut)
        }
        defer { group.cancelAll() }
        var seen = seen.makeAsyncIterator()
        guard case .listening(let port) = await seen.next() else { throw ReceiverTimedOut(description: "the receiver did not start") }
        var receiver = Receiver(url: "http://127.0.0.1:\(port)/hook", seen: seen, count: count)
        try await body(&receiver)
    }
}
