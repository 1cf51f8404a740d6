// ahc-apns: sends COUNT APNs-shaped POSTs over HTTP/2 with AsyncHTTPClient, the way an
// APNSwift-style sender does (one request, one awaited response), and prints the statuses.
//
//   ahc-apns --url https://127.0.0.1:PORT/3/device/<64-hex token> --jwt JWT --topic TOPIC
//            --payload FILE --ca CA.pem [--count 20000] [--connections 4] [--streams 100]
//
// One HTTPClient per connection: AsyncHTTPClient keeps one HTTP/2 connection per host and
// pool, so separate clients are how a user gets several connections. Each client has
// `streams` workers, each with one request in flight, so at most connections × streams
// requests are outstanding. One fixed device token, as h2load sends (the mock accepts any
// well-formed token). Output, one line:
//   requests=N seconds=S rate=R loop_cpu_us=U status200=A [statusXXX=B ...]

import AsyncHTTPClient
import Foundation
import NIOCore
import NIOSSL

func usage() -> Never {
    print("usage: ahc-apns --url URL --jwt JWT --topic TOPIC --payload FILE --ca CA.pem "
          + "[--count N] [--connections K] [--streams C]")
    exit(2)
}

var options: [String: String] = [:]
var arguments = CommandLine.arguments.dropFirst()
while let name = arguments.popFirst() {
    guard name.hasPrefix("--"), let value = arguments.popFirst() else { usage() }
    options[String(name.dropFirst(2))] = value
}
guard let url = options["url"], let jwt = options["jwt"], let topic = options["topic"],
      let payloadPath = options["payload"], let ca = options["ca"] else { usage() }
let count = Int(options["count"] ?? "20000") ?? 20000
let connections = Int(options["connections"] ?? "4") ?? 4
let streams = Int(options["streams"] ?? "100") ?? 100

guard let payloadData = FileManager.default.contents(atPath: payloadPath) else { usage() }
let payload = ByteBuffer(bytes: payloadData)

var tls = TLSConfiguration.makeClientConfiguration()
tls.trustRoots = .file(ca)
var configuration = HTTPClient.Configuration(tlsConfiguration: tls)
configuration.httpVersion = .automatic  // ALPN picks h2: the mock speaks nothing else

let clients = (0..<connections).map { _ in
    HTTPClient(eventLoopGroup: HTTPClient.defaultEventLoopGroup, configuration: configuration)
}

// The same request every time, built once: method, path, headers, a shared body buffer.
var request = HTTPClientRequest(url: url)
request.method = .POST
request.headers.add(name: "authorization", value: "bearer \(jwt)")
request.headers.add(name: "apns-topic", value: topic)
request.headers.add(name: "apns-push-type", value: "alert")
request.headers.add(name: "content-type", value: "application/json")
request.body = .bytes(payload)
let template = request

// Worker w sends its share of COUNT; shares differ by at most one.
let workers = connections * streams
// CPU of this process over the sending (getrusage), printed as loop_cpu_us per request.
func cpuSeconds() -> Double {
    var usage = rusage()
    getrusage(RUSAGE_SELF.rawValue, &usage)
    return Double(usage.ru_utime.tv_sec + usage.ru_stime.tv_sec)
        + Double(usage.ru_utime.tv_usec + usage.ru_stime.tv_usec) / 1e6
}
let cpuStart = cpuSeconds()
let clock = ContinuousClock()
let start = clock.now
let statuses = await withTaskGroup(of: [UInt: Int].self) { group in
    for w in 0..<workers {
        let share = count / workers + (w < count % workers ? 1 : 0)
        let client = clients[w % connections]
        group.addTask {
            var seen: [UInt: Int] = [:]
            for _ in 0..<share {
                do {
                    let response = try await client.execute(template, timeout: .seconds(30))
                    // Read the body (APNs's error JSON, or nothing) so the stream completes.
                    _ = try await response.body.collect(upTo: 64 * 1024)
                    seen[response.status.code, default: 0] += 1
                } catch {
                    seen[0, default: 0] += 1  // 0: the request failed without a status
                }
            }
            return seen
        }
    }
    var all: [UInt: Int] = [:]
    for await seen in group { all.merge(seen, uniquingKeysWith: +) }
    return all
}
let elapsed = clock.now - start
let loopMicros = (cpuSeconds() - cpuStart) / Double(count) * 1e6
let seconds = Double(elapsed.components.seconds) + Double(elapsed.components.attoseconds) / 1e18
for client in clients { try await client.shutdown() }

var line = "requests=\(count) seconds=\(String(format: "%.3f", seconds)) rate=\(Int(Double(count) / seconds))"
    + " loop_cpu_us=\(String(format: "%.1f", loopMicros))"
for (status, n) in statuses.sorted(by: { $0.key < $1.key }) { line += " status\(status)=\(n)" }
print(line)
