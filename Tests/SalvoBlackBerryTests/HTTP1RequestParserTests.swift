import SalvoWire
import Testing

/// The mock NOC's request parser, without sockets.
@Suite struct HTTP1RequestParserTests {
    static func notify(token: String, body: String, extra: String = "") -> [UInt8] {
        Array(("POST /GNP1.0?method=notify HTTP/1.1\r\nHost: noc\r\nX-Good-GNP-Token: \(token)\r\n"
            + "Content-Type: text/plain; charset=utf-8\r\nContent-Length: \(body.utf8.count)\r\n\(extra)\r\n" + body).utf8)
    }

    @Test func twoKeepAliveRequestsInOneReadComeOutInOrder() throws {
        var parser = HTTP1RequestParser()
        parser.append(Self.notify(token: "a", body: "one") + Self.notify(token: "b", body: "two"))
        let first = try #require(try parser.next())
        let second = try #require(try parser.next())
        #expect(first.header("x-good-gnp-token") == "a" && first.body == Array("one".utf8))
        #expect(second.header("X-Good-GNP-Token") == "b" && second.body == Array("two".utf8))
        #expect(try parser.next() == nil)
        #expect(parser.bufferedByteCount == 0)
    }

    @Test func aRequestFedOneByteAtATimeAppearsOnlyWhenWhole() throws {
        var parser = HTTP1RequestParser()
        let bytes = Self.notify(token: "t", body: "héllo ✓")
        for (index, byte) in bytes.enumerated() {
            parser.append([byte])
            let request = try parser.next()
            #expect((request != nil) == (index == bytes.count - 1), "byte \(index)")
        }
    }

    @Test func contentLengthCountsBytesNotCharacters() throws {
        var parser = HTTP1RequestParser()
        parser.append(Self.notify(token: "t", body: "✓✓"))
        #expect(try parser.next()?.body.count == 6)
    }

    @Test func aGetWithoutABodyAndConnectionClose() throws {
        var parser = HTTP1RequestParser()
        parser.append(Array("GET /GNP1.0?method=checkToken HTTP/1.1\r\nX-Good-GNP-Token: t\r\nConnection: close\r\n\r\n".utf8))
        let request = try #require(try parser.next())
        #expect(request.method == "GET" && request.body.isEmpty && request.closeAfter)
    }

    static let refused: [(String, Int)] = [
        ("POST / HTTP/1.1\nHost: x\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 1\r\nContent-Length: 1\r\n\r\nx", 400),
        ("POST / HTTP/1.1\r\nContent-Length: -1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 1x\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 501),
        ("POST / HTTP/1.0\r\n\r\n", 501),
        ("POST / HTTP/1.1\r\nA: b\r\n folded\r\n\r\n", 400),
        ("POST  / HTTP/1.1\r\n\r\n", 400),
        ("post / HTTP/1.1\r\n\r\n", 400),
        ("POST / HTTP/1.1\r\nContent-Length: 99999999\r\n\r\n", 413),
    ]

    @Test(arguments: refused)
    func strictAboutWhatItCannotCountExactly(request: String, status: Int) throws {
        var parser = HTTP1RequestParser()
        parser.append(Array(request.utf8))
        #expect(throws: HTTP1ParseError.self) { try parser.next() }
        do { _ = try parser.next() } catch { #expect(error.status == 400, "and stays failed") }
        var fresh = HTTP1RequestParser()
        fresh.append(Array(request.utf8))
        do {
            _ = try fresh.next()
            Issue.record("accepted: \(request.debugDescription)")
        } catch {
            #expect(error.status == status, "\(request.debugDescription): \(error)")
        }
    }

    @Test func anEndlessHeadIsRefusedAtTheLimit() {
        var parser = HTTP1RequestParser(maximumHeadLength: 64)
        parser.append(Array("GET / HTTP/1.1\r\nX: ".utf8) + [UInt8](repeating: 0x61, count: 100))
        #expect(throws: HTTP1ParseError.headTooLarge(limit: 64)) { try parser.next() }
    }
}

/// The result codes and what a sender makes of them.
@Suite struct GNPCodeTests {
    @Test func theCodeHeaderParses() {
        #expect(GNPCode(headerValue: "402 Invalid Token") == .invalidToken)
        #expect(GNPCode(headerValue: " 100 OK ") == .ok)
        #expect(GNPCode(headerValue: "100")?.text == "")
        #expect(GNPCode(headerValue: "OK") == nil)
        #expect(GNPCode(headerValue: "") == nil)
    }

    @Test func verdicts() {
        #expect(GNPVerdict.of(status: 200, code: .ok) == .accepted)
        #expect(GNPVerdict.of(status: 200, code: .invalidToken) == .rejected(.invalidToken))
        #expect(GNPVerdict.of(status: 200, code: .serviceUnavailable) == .retry(reason: "gnp_503"))
        #expect(GNPVerdict.of(status: 503, code: nil) == .retry(reason: "http_503"))
        #expect(GNPVerdict.of(status: 500, code: .ok) == .retry(reason: "http_500"), "the status wins over a code")
        #expect(GNPVerdict.of(status: 200, code: GNPCode(409, "Conflict")) == .failed(reason: "unknown_gnp_code_409"))
        #expect(GNPVerdict.of(status: 200, code: .messageTooLarge) == .failed(reason: "payload_too_large"))
        #expect(GNPVerdict.of(status: 200, code: nil) == .failed(reason: "missing_gnp_code"))
        #expect(GNPVerdict.of(status: 404, code: nil) == .failed(reason: "http_404"))
    }
}
