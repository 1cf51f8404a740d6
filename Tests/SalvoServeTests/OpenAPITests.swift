import AsyncHTTPClient
import Crypto
import Foundation
import NIOCore
import NIOHTTP1
import SalvoMock
@testable import SalvoServe
import SalvoTestSupport
import Testing

/// `Sources/SalvoServe/openapi.yaml` says what the server does: it is a valid OpenAPI 3.1
/// document, and the answers of a running server (every status it gives, their headers and
/// bodies), the bodies it is sent and the webhook's body are what it describes. Its schemas
/// close their objects, so a member the server adds without documenting it fails too.
///
/// Both checks are Python's (openapi-spec-validator; jsonschema with PyYAML): from the
/// virtualenv `scripts/openapi-python.sh` makes under .build/ (`make test` runs it), else the
/// first python3 on PATH that has them. Without them a test is skipped, its reason printed.
@Suite(.serialized, .timeLimit(.minutes(5)), .ownThread("openapi-tests")) struct OpenAPITests {
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()
    static let document = root.appendingPathComponent("Sources/SalvoServe/openapi.yaml").path

    /// A Python that imports `modules` (`import` syntax), or nil.
    static func python(importing modules: String) async -> String? {
        let path = ProcessInfo.processInfo.environment["PATH"] ?? ""
        let candidates = [root.appendingPathComponent(".build/openapi-python/venv/bin/python").path]
            + path.split(separator: ":").map { "\($0)/python3" } + ["/usr/bin/python3"]
        for python in candidates {
            guard FileManager.default.isExecutableFile(atPath: python),
                  let process = try? ChildProcess(python, ["-c", "import \(modules)"]) else { continue }
            if (try? await process.exitStatus(within: .seconds(180))) == 0 { return python }
        }
        return nil
    }

    /// Looked for once, by the first test to ask (its trait's condition).
    static let validator = Task { await python(importing: "openapi_spec_validator, yaml") }
    static let schemaChecker = Task { await python(importing: "jsonschema, referencing, yaml") }

    @Test(.enabled("openapi-spec-validator is not installed (scripts/openapi-python.sh installs it)") {
        await OpenAPITests.validator.value != nil
    })
    func theDocumentIsValidOpenAPI31() async throws {
        let process = try ChildProcess(try #require(await Self.validator.value), ["-c", """
            import sys, yaml
            from openapi_spec_validator import validate
            from openapi_spec_validator.validation import OpenAPIV31SpecValidator
            document = yaml.safe_load(open(sys.argv[1]))
            assert document["openapi"].startswith("3.1"), document["openapi"]
            validate(document, cls=OpenAPIV31SpecValidator)
            print("valid")
            """, Self.document])
        #expect(try await process.exitStatus(within: .seconds(240)) == 0, "\(process.errors)")
        #expect(process.output.contains("valid"))
    }

    @Test(.enabled("python3 lacks jsonschema or PyYAML (scripts/openapi-python.sh installs them)") {
        await OpenAPITests.schemaChecker.value != nil
    })
    func theServersRealAnswersAreWhatTheDocumentSays() async throws {
        var samples: [Sample] = []
        try await Self.answersOfAPlainServer(into: &samples)
        try await Self.answersOfABoundedServer(into: &samples)
        try await Self.answersOfAServerWithKeys(into: &samples)
        // Every status the document gives for the POST, but for 503 (the sender gave up, or
        // the journal is down: other suites' rigs), is met at least once.
        let posted = Set(samples.filter { $0.path == "/v1/notifications" && $0.kind == "response" }.map(\.status))
        #expect(posted == [200, 202, 400, 401, 409, 413, 429], "POST statuses met: \(posted.sorted())")

        let file = NSTemporaryDirectory() + "salvo-openapi-samples-\(UUID().uuidString).json"
        defer { try? FileManager.default.removeItem(atPath: file) }
        try JSONSerialization.data(withJSONObject: samples.map(\.json)).write(to: URL(fileURLWithPath: file))
        let process = try ChildProcess(try #require(await Self.schemaChecker.value), ["-c", Self.checker, Self.document, file])
        #expect(try await process.exitStatus(within: .seconds(240)) == 0, "\(process.output)\(process.errors)")
        #expect(process.output.contains("\(samples.count) samples"), "\(process.output)")
    }

    // MARK: Samples

    /// An answer of the server (or a body sent to it, or the webhook's), to be checked
    /// against the document at `where`/`path`/`method`.
    struct Sample {
        var kind: String  // response, request, webhook
        var path: String
        var method = "post"
        var status = 0
        var headers: [String: String] = [:]
        var contentType = "application/json"
        var body: String
        /// For a request: whether the document must take it.
        var valid = true

        var json: [String: Any] {
            ["kind": kind, "path": path, "method": method, "status": status, "headers": headers, "content_type": contentType,
             "body": body, "valid": valid]
        }
    }

    /// A request to the rig's server, its answer as a sample of `template` (the path as the
    /// document names it).
    static func sample(_ rig: ServeRig, _ path: String, method: HTTPMethod = .POST, template: String? = nil,
                       body: String? = nil, headers: [(String, String)] = []) async throws -> Sample {
        try await sample(Server(client: rig.client, url: rig.url), path, method: method, template: template, body: body, headers: headers)
    }

    /// What requests need of a rig, to be sent from concurrent tasks (the rig is no Sendable).
    struct Server: Sendable {
        let client: HTTPClient
        let url: String
    }

    static func sample(_ rig: Server, _ path: String, method: HTTPMethod = .POST, template: String? = nil,
                       body: String? = nil, headers: [(String, String)] = []) async throws -> Sample {
        var request = HTTPClientRequest(url: rig.url + path)
        request.method = method
        for (name, value) in headers { request.headers.add(name: name, value: value) }
        if let body {
            request.headers.add(name: "Content-Type", value: "application/json")
            request.body = .bytes(ByteBuffer(string: body))
        }
        let response = try await rig.client.execute(request, timeout: .seconds(60))
        let text = String(buffer: try await response.body.collect(upTo: 16 << 20))
        var fields: [String: String] = [:]
        for header in response.headers { fields[header.name.lowercased()] = header.value }
        let pathOnly = String(path.prefix { $0 != "?" })
        return Sample(kind: "response", path: template ?? pathOnly, method: method.rawValue.lowercased(), status: Int(response.status.code),
                      headers: fields, contentType: fields["content-type"] ?? "", body: text)
    }

    /// A GET's answer, as a sample.
    static func get(_ rig: ServeRig, _ path: String, template: String? = nil) async throws -> Sample {
        try await sample(rig, path, method: .GET, template: template)
    }

    static func answersOfAPlainServer(into samples: inout [Sample]) async throws {
        let rig = try await ServeRig()
        let dead = H2LoopbackRig.deadToken(3)
        let every = ServeRig.notification(4, extra: #","push_type":"alert","topic":"com.example.app","priority":10,"#
            + #""expiration":1900000000,"collapse_id":"c-1","apns_id":"5E0C2E6B-4C9B-4E1A-9A41-0E0F7C6D5B4A","id":{"order":42}"#)
        let batch = ServeRig.batch([ServeRig.notification(1), ServeRig.notification(2, token: dead), #"{"token":"zz","payload":{}}"#,
                                    "17", every])
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.notification(0)))
        let waited = try await sample(rig, "/v1/notifications?wait=30", body: batch)
        samples.append(waited)
        samples.append(try await sample(rig, "/v1/notifications?wait=30", body: every))  // a duplicate
        samples.append(try await sample(rig, "/v1/notifications?wait=30", body: ServeRig.notification(5),
                                        headers: [("Idempotency-Key", "k-1")]))
        samples.append(try await sample(rig, "/v1/notifications?wait=30", body: ServeRig.notification(5),
                                        headers: [("Idempotency-Key", "k-1")]))  // replayed
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.batch([#"{"token":"ab","payload":{}}"#])))
        samples.append(try await sample(rig, "/v1/notifications", body: #"{"token": "ab"#))
        samples.append(try await sample(rig, "/v1/notifications?wait=soon", body: ServeRig.notification(6)))
        samples.append(try await get(rig, "/v1/notifications/5E0C2E6B-4C9B-4E1A-9A41-0E0F7C6D5B4A",
                                        template: "/v1/notifications/{id}"))
        samples.append(try await get(rig, "/v1/notifications/nope", template: "/v1/notifications/{id}"))
        samples.append(try await get(rig, "/v1/notifications/00000000-0000-4000-8000-000000000000",
                                        template: "/v1/notifications/{id}"))
        samples.append(try await get(rig, "/health"))
        samples.append(try await get(rig, "/ready"))
        try await rig.stop()

        // The webhook's body, from the statuses the server kept of the rejected one.
        let answer = try JSONSerialization.jsonObject(with: Data(waited.body.utf8)) as? [String: Any] ?? [:]
        let rejected = answer.notifications.filter { $0["state"] as? String == "rejected" }.compactMap { $0["id"] as? String }
        let events = rejected.compactMap { rig.server.status(of: $0) }
        #expect(events.count == 1 && events.first?.timestamp != nil, "rejected: \(rejected)")
        let payload = try JSONEncoder().encode(WebhookPayload(events: events, sentAt: 1_700_000_000_000))
        samples.append(Sample(kind: "webhook", path: "notificationsRefused", body: String(decoding: payload, as: UTF8.self)))

        // What callers send: the bodies above the server took, and one it must not.
        for body in [ServeRig.notification(0), every, ServeRig.batch([every, ServeRig.notification(1)]),
                     #"{"channel_id":"dHN1b3NkZmxqc2RsZmtqc2Rsa2Zq","payload":{"aps":{"event":"update"}}}"#] {
            samples.append(Sample(kind: "request", path: "/v1/notifications", body: body))
        }
        samples.append(Sample(kind: "request", path: "/v1/notifications", body: #"{"token":"\#(dead.hex)"}"#, valid: false))
    }

    /// Small bounds, answers held 10 s (however slowly a full run goes, the queue is still
    /// full when the last requests come): 409, 413 (both kinds), 429 and /ready's 503.
    static func answersOfABoundedServer(into samples: inout [Sample]) async throws {
        let rig = try await ServeRig(mockPlan: H2FailurePlan(responseDelay: .seconds(10))) { configuration in
            configuration.bodyLimit = 4096
            configuration.batchLimit = 3
            configuration.queueLimit = 3
        }
        // The same key twice at once: whichever comes second finds the first unanswered
        // (its notification is held 10 s), and gets 409.
        let server = Server(client: rig.client, url: rig.url)
        async let first = sample(server, "/v1/notifications?wait=30", body: ServeRig.notification(1), headers: [("Idempotency-Key", "k-2")])
        async let second = sample(server, "/v1/notifications?wait=30", body: ServeRig.notification(1), headers: [("Idempotency-Key", "k-2")])
        let pair = try await [first, second]
        #expect(pair.map(\.status).sorted() == [200, 409], "\(pair.map(\.status))")
        samples += pair
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.batch((0..<4).map { ServeRig.notification($0) })))
        samples.append(try await sample(rig, "/v1/notifications", body: String(repeating: " ", count: 5000) + ServeRig.notification(1)))
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.batch((0..<3).map { ServeRig.notification($0) })))
        samples.append(try await get(rig, "/ready"))  // the queue is full for 10 s
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.notification(9)))
        try await rig.stop()
        #expect(samples.suffix(2).map(\.status) == [503, 429], "the queue was full: \(samples.suffix(2).map(\.status))")
    }

    static func answersOfAServerWithKeys(into samples: inout [Sample]) async throws {
        let key = "openapi-test-key"
        let hash = SHA256.hash(data: Array(key.utf8)).map { String(format: "%02x", $0) }.joined()
        let keys = try APIKeys(text: "tests \(hash)\n", path: "keys")
        let rig = try await ServeRig { configuration in
            configuration.apiKeys = keys
            configuration.callerRate = 1
        }
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.notification(1)))
        samples.append(try await get(rig, "/v1/notifications/5E0C2E6B-4C9B-4E1A-9A41-0E0F7C6D5B4A",
                                        template: "/v1/notifications/{id}"))
        let bearer = [("Authorization", "Bearer \(key)")]
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.notification(1), headers: bearer))
        samples.append(try await sample(rig, "/v1/notifications", body: ServeRig.batch([ServeRig.notification(2), ServeRig.notification(3)]),
                                        headers: bearer))  // over the rate: 429
        try await rig.stop()
    }

    /// Checks each sample (argv[2], JSON) against the document (argv[1]): its status is one
    /// the document gives, the headers it marks required are there, the content type is
    /// its, and the body matches its schema (`$ref`s resolved in the document).
    static let checker = """
        import json, sys, yaml
        import jsonschema
        from referencing import Registry
        from referencing.jsonschema import DRAFT202012

        document = yaml.safe_load(open(sys.argv[1]))
        samples = json.load(open(sys.argv[2]))
        base = "urn:salvo-openapi"
        registry = Registry().with_resource(base, DRAFT202012.create_resource(document))

        def pointer(*parts):
            return "/" + "/".join(str(part).replace("~", "~0").replace("/", "~1") for part in parts)

        def resolve(node):
            while isinstance(node, dict) and "$ref" in node:
                node = registry.resolver(base).lookup(base + node["$ref"]).contents
            return node

        problems = []
        def check(sample, schema_pointer):
            validator = jsonschema.Draft202012Validator({"$ref": base + "#" + schema_pointer}, registry=registry)
            try:
                body = json.loads(sample["body"])
            except ValueError:
                problems.append("%s: the body is no JSON: %r" % (where, sample["body"][:200]))
                return
            errors = sorted(validator.iter_errors(body), key=lambda e: list(e.path))
            if sample["valid"] and errors:
                problems.append("%s: %s (at %s) in %s" % (where, errors[0].message, list(errors[0].absolute_path), sample["body"][:300]))
            if not sample["valid"] and not errors:
                problems.append("%s: the document takes a body it must refuse: %s" % (where, sample["body"][:300]))

        for sample in samples:
            where = "%s %s %s %s" % (sample["kind"], sample["method"].upper(), sample["path"], sample["status"] or "")
            if sample["kind"] == "webhook":
                check(sample, pointer("webhooks", sample["path"], "post", "requestBody", "content", "application/json", "schema"))
                continue
            operation = document["paths"].get(sample["path"], {}).get(sample["method"])
            if operation is None:
                problems.append("%s: no such operation in the document" % where)
                continue
            if sample["kind"] == "request":
                check(sample, pointer("paths", sample["path"], sample["method"], "requestBody", "content", "application/json", "schema"))
                continue
            status = str(sample["status"])
            response = operation["responses"].get(status)
            if response is None:
                problems.append("%s: the document gives no %s here (it gives %s)" % (where, status, sorted(operation["responses"])))
                continue
            response_pointer = pointer("paths", sample["path"], sample["method"], "responses", status)
            if "$ref" in response:
                response_pointer = response["$ref"][1:]
                response = resolve(response)
            for name, header in response.get("headers", {}).items():
                if resolve(header).get("required") and name.lower() not in sample["headers"]:
                    problems.append("%s: no %s header (%s)" % (where, name, sorted(sample["headers"])))
            media = sample["content_type"].split(";")[0].strip()
            if media not in response.get("content", {}):
                problems.append("%s: content type %s, the document says %s" % (where, media, sorted(response.get("content", {}))))
                continue
            if media == "application/json":
                check(sample, response_pointer + pointer("content", media, "schema"))

        for problem in problems:
            print(problem)
        print("%d samples, %d problems" % (len(samples), len(problems)))
        sys.exit(1 if problems else 0)
        """
}
