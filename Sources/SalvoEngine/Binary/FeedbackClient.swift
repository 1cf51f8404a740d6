import SalvoIO
import SalvoWire

/// Reads the feedback service: the tokens APNs found unusable since the last read.
///
/// The service sends its whole list and closes; reading it clears the list on the server.
/// So on an error the tuples decoded before it are handed back in the error: store them,
/// they will not be sent again.
public enum FeedbackClient {
    /// Connects to `host:port`, reads until the server closes, and returns the tuples in
    /// the order received.
    ///
    /// - Parameters:
    ///   - host: the feedback service's host name or address.
    ///   - port: its port (2196 for Apple's).
    ///   - context: a client context with the provider certificate (Apple's service
    ///     requires one).
    ///   - timeout: for the whole exchange: connect, handshake and read.
    ///   - proxy: the HTTP or SOCKS5 proxy to tunnel through, or nil to connect directly.
    /// - Throws: `FeedbackError` naming the endpoint and the stage that failed, with any
    ///   tuples received before the failure.
    public static func fetch(
        host: String, port: Int, context: TLSContext, timeout: Duration = .seconds(30), proxy: ProxyConfiguration? = nil
    ) throws(FeedbackError) -> [FeedbackTuple] {
        let endpoint = Endpoint(host: host, port: port)
        let deadline = Instant.now() + timeout
        let stream: TLSStream
        do {
            stream = try TLSStream.connect(host: host, port: port, context: context, timeout: timeout, proxy: proxy)
        } catch {
            throw FeedbackError(endpoint: endpoint, problem: .connect(error.description))
        }
        defer { stream.shutdown() }

        var tuples: [FeedbackTuple] = []
        var decoder = FeedbackDecoder()
        let chunk = UnsafeMutableRawBufferPointer.allocate(byteCount: 16384, alignment: 16)
        defer { chunk.deallocate() }
        // Decoding as bytes arrive keeps memory at the tuples themselves, however long the list.
        while true {
            let result: TLSReadResult
            do {
                result = try stream.readSome(into: chunk, timeout: deadline.since(.now()))
            } catch {
                throw FeedbackError(endpoint: endpoint, problem: .read(error.description), received: tuples)
            }
            switch result {
            case .bytes(let count):
                do {
                    try decoder.decode(UnsafeRawBufferPointer(rebasing: chunk[..<count])) { tuples.append($0) }
                } catch {
                    throw FeedbackError(endpoint: endpoint, problem: .corrupt(error.description), received: tuples)
                }
            case .closed:
                guard decoder.pendingByteCount == 0 else {
                    throw FeedbackError(
                        endpoint: endpoint, problem: .truncated(pendingBytes: decoder.pendingByteCount), received: tuples)
                }
                return tuples
            case .wouldBlock:
                throw FeedbackError(endpoint: endpoint, problem: .timedOut(timeout), received: tuples)
            }
        }
    }
}

/// Why reading the feedback service failed.
public struct FeedbackError: Error, Sendable, CustomStringConvertible {
    /// What went wrong.
    public enum Problem: Sendable, Hashable {
        /// The connection or TLS handshake failed (the reason says which, with OpenSSL's words).
        case connect(String)
        /// Reading failed mid-stream.
        case read(String)
        /// The server sent something that is not feedback tuples.
        case corrupt(String)
        /// The server closed in the middle of a tuple; this many bytes of it had arrived.
        case truncated(pendingBytes: Int)
        /// The server did not close within the timeout.
        case timedOut(Duration)
    }

    /// The feedback service that was asked.
    public var endpoint: Endpoint
    /// What went wrong.
    public var problem: Problem
    /// The tuples decoded before the failure. The service has already forgotten them.
    public var received: [FeedbackTuple]

    /// `problem` at `endpoint`, after the tuples `received`.
    public init(endpoint: Endpoint, problem: Problem, received: [FeedbackTuple] = []) {
        self.endpoint = endpoint
        self.problem = problem
        self.received = received
    }

    /// The endpoint and the problem, for error messages.
    public var description: String {
        let what: String
        switch problem {
        case .connect(let reason): what = "cannot connect: \(reason)"
        case .read(let reason): what = "reading failed: \(reason)"
        case .corrupt(let reason): what = reason
        case .truncated(let pending):
            what = "the server closed in the middle of a tuple (\(pending) of \(FeedbackTuple.byteCount) bytes)"
        case .timedOut(let timeout): what = "the server did not finish sending within \(timeout)"
        }
        let kept = received.isEmpty ? "" : "; \(received.count) tuple\(received.count == 1 ? " was" : "s were") received before that"
        return "feedback service \(endpoint): \(what)\(kept)"
    }
}
