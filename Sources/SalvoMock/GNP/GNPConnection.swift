import DequeModule
import SalvoIO
import SalvoWire

/// One client connection of the mock NOC: parses requests as they arrive, answers them in
/// order (HTTP/1.1 has no other), holds answers back as the plan says, and closes silently
/// when the plan drops one.
///
/// Requests are judged when they are read and answered when their turn comes; a notify
/// counts as accepted when its 100 OK is written, so an answer the client never got (it
/// left during a held-back answer) is not counted.
final class GNPConnection: ServerConnection {
    private let counters: GNPCounters
    private let state: GNPState
    private var parser: HTTP1RequestParser
    /// Answers decided and not yet written, oldest first.
    private var queue: Deque<Pending> = []
    private var output: [UInt8] = []
    private var outputOffset = 0
    private var heldAnswer: TimerID?

    private struct Pending {
        var due: Instant
        var answer: GNPAnswer
        /// What a 100 to a notify counts as: nil for checkToken and errors.
        var acceptedDigest: UInt64?
        var isNotify: Bool
        var closeAfter: Bool
        /// A malformed request's status and reason: answered, then the connection closes.
        var badRequest: HTTP1ParseError?
    }

    init(stream: TLSStream, loop: ServerRuntime.Loop, counters: GNPCounters, state: GNPState) {
        self.counters = counters
        self.state = state
        parser = HTTP1RequestParser(maximumBodyLength: max(state.plan.maximumPayloadBytes, 1 << 16))
        super.init(stream: stream, loop: loop)
    }

    override func didEstablish() { readAvailable() }

    override func connectionEvents(_ events: IOEvents) {
        if events.contains(.write) { flushOutput() }
        readAvailable()
    }

    private func readAvailable() {
        while phase == .established {
            guard let result = readClient() else { return close() }
            switch result {
            case .bytes(let count):
                parser.append(UnsafeRawBufferPointer(rebasing: buffer[0..<count]))
                parseRequests()
            case .wouldBlock:
                return
            case .closed:
                // HTTP/1.1 clients close when they are done reading: answers still held
                // back are dropped, and so not counted.
                return close()
            }
        }
    }

    private func parseRequests() {
        while queue.last?.badRequest == nil && queue.last?.closeAfter != true {
            let request: HTTP1Request
            do throws(HTTP1ParseError) {
                guard let next = try parser.next() else { break }
                request = next
            } catch {
                queue.append(Pending(due: loop.now, answer: .status(error.status), acceptedDigest: nil, isNotify: false,
                                     closeAfter: true, badRequest: error))
                break
            }
            queue.append(judge(request))
        }
        answerDue()
    }

    private func judge(_ request: HTTP1Request) -> Pending {
        let due = loop.now + state.plan.responseDelay
        let token = request.header(GNP.tokenHeader)
        switch (request.method, request.target) {
        case ("POST", GNP.notifyTarget):
            guard let token else {
                return Pending(due: due, answer: .status(400), acceptedDigest: nil, isNotify: false,
                               closeAfter: request.closeAfter, badRequest: .malformed("no \(GNP.tokenHeader) header"))
            }
            let answer = state.judgeNotify(token: token, payloadLength: request.body.count)
            let digest = state.recordAccepted && answer == .code(.ok)
                ? GNPStatistics.digest(token: token, payload: request.body) : nil
            return Pending(due: due, answer: answer, acceptedDigest: digest, isNotify: true,
                           closeAfter: request.closeAfter, badRequest: nil)
        case ("GET", GNP.checkTokenTarget):
            let dead = token.map { $0.isEmpty || (!state.plan.invalidTokenSuffix.isEmpty && $0.hasSuffix(state.plan.invalidTokenSuffix)) } ?? true
            return Pending(due: due, answer: .code(dead ? .invalidToken : .ok), acceptedDigest: nil, isNotify: false,
                           closeAfter: request.closeAfter, badRequest: nil)
        default:
            return Pending(due: due, answer: .status(404), acceptedDigest: nil, isNotify: false,
                           closeAfter: request.closeAfter, badRequest: nil)
        }
    }

    /// Writes every answer that is due, in order; waits for the first that is not.
    private func answerDue() {
        while let first = queue.first, phase == .established {
            if first.due > loop.now {
                if heldAnswer == nil {
                    heldAnswer = loop.schedule(at: first.due) { [weak self] in
                        self?.heldAnswer = nil
                        self?.answerDue()
                    }
                }
                return
            }
            queue.removeFirst()
            if first.answer == .drop {
                counters.dropped.wrappingAdd(1, ordering: .relaxed)
                return closeSilently()
            }
            let bytes = Self.response(first.answer, closing: first.closeAfter, reason: first.badRequest?.description)
            if first.badRequest != nil { counters.badRequests.wrappingAdd(1, ordering: .relaxed) } else { count(first) }
            if first.closeAfter { return respondAndClose(Array(output[outputOffset...]) + bytes) }
            output.append(contentsOf: bytes)
        }
        flushOutput()
    }

    private func count(_ answered: Pending) {
        guard answered.isNotify else {
            if case .code = answered.answer { counters.checkedTokens.wrappingAdd(1, ordering: .relaxed) }
            return
        }
        switch answered.answer {
        case .code(.ok):
            counters.accepted.wrappingAdd(1, ordering: .relaxed)
            if let digest = answered.acceptedDigest { state.accepted.insert([digest]) }
        case .code(.invalidToken): counters.rejected.wrappingAdd(1, ordering: .relaxed)
        default: counters.otherAnswers.wrappingAdd(1, ordering: .relaxed)
        }
    }

    private func flushOutput() {
        guard phase == .established else { return }
        while outputOffset < output.count {
            let result = output.withUnsafeBytes { bytes in
                Result { () throws(TLSError) in try stream.write(UnsafeRawBufferPointer(rebasing: bytes[outputOffset...])) }
            }
            switch result {
            case .success(.wrote(let n)): outputOffset += n
            case .success(.wouldBlock):
                watch([.read, .write])
                return
            case .failure:
                return close()
            }
        }
        output.removeAll(keepingCapacity: true)
        outputOffset = 0
        watch(.read)
    }

    /// The bytes of an answer: HTTP 200 with the code header, or a bare status.
    static func response(_ answer: GNPAnswer, closing: Bool, reason: String? = nil) -> [UInt8] {
        var head: String
        var body = ""
        switch answer {
        case .code(let code):
            head = "HTTP/1.1 200 OK\r\n\(GNP.codeHeader): \(code)\r\nContent-Type: text/plain\r\n"
        case .status(let status):
            head = "HTTP/1.1 \(status) \(reasonPhrase(status))\r\nContent-Type: text/plain\r\n"
            body = reason ?? ""
        case .drop:
            return []
        }
        head += "Content-Length: \(body.utf8.count)\r\n"
        if closing { head += "Connection: close\r\n" }
        return Array((head + "\r\n" + body).utf8)
    }

    private static func reasonPhrase(_ status: Int) -> String {
        switch status {
        case 400: "Bad Request"
        case 404: "Not Found"
        case 413: "Payload Too Large"
        case 431: "Request Header Fields Too Large"
        case 500: "Internal Server Error"
        case 501: "Not Implemented"
        case 503: "Service Unavailable"
        default: "Error"
        }
    }
}
