import Foundation
import Glibc
import SalvoIO
import SystemPackage
import SalvoTestSupport
import SalvoWire

/// A TLS gateway for tests that misbehaves on purpose. It reads notifications as a gateway
/// does and, on the connections it picks, does one thing a broken or malicious gateway
/// does; every other connection is honest (it takes every notification and never answers).
///
/// Plain threads and blocking I/O, one thread per connection; `stop()` wakes every wait
/// through a pipe, so nothing polls on a timer.
final class HostileGateway: Sendable {
    enum Misbehaviour: Sendable, CustomStringConvertible {
        /// Bytes that are no error response (an HTTP status line), then a close.
        case junk
        /// The first 3 of the 6 bytes of an error response, then a close.
        case truncatedErrorResponse
        /// A well-formed error response with this status for the triggering notification.
        case errorResponse(status: UInt8)
        /// An error response naming an identifier the connection never carried.
        case errorNamingUnsentIdentifier
        /// A well-formed error response, then at once a TCP FIN without TLS close_notify.
        case errorResponseThenFINWithoutCloseNotify
        /// A TCP FIN without TLS close_notify and without an error response: a silent drop.
        case finWithoutCloseNotify
        /// A TCP reset (SO_LINGER 0, close) while the client is writing.
        case reset
        /// Completes the handshake, then never reads.
        case neverRead
        /// Accepts the TCP connection and never answers the ClientHello.
        case neverHandshake

        var description: String {
            switch self {
            case .junk: "junk"
            case .truncatedErrorResponse: "3 of 6 error-response bytes"
            case .errorResponse(let status): "error response with status \(status)"
            case .errorNamingUnsentIdentifier: "error naming an unsent identifier"
            case .errorResponseThenFINWithoutCloseNotify: "error response, FIN without close_notify"
            case .finWithoutCloseNotify: "FIN without close_notify"
            case .reset: "TCP reset"
            case .neverRead: "never reads"
            case .neverHandshake: "never handshakes"
            }
        }
    }

    /// What an error response names when the gateway means no notification it was sent.
    static let unsentIdentifierOffset: UInt32 = 1_000_000
    /// What `.junk` writes instead of an error response.
    static let junk = Array("HTTP/1.1 400 Bad Request\r\n\r\n".utf8)

    let port: Int
    let misbehaviour: Misbehaviour
    private let listener: Socket
    private let context: TLSContext
    /// After how many notifications on a connection it misbehaves (handshake-level
    /// misbehaviours ignore it).
    private let after: Int
    private let state: Locked<State>
    /// Closing its write end (`stop`) makes the read end readable: every wait ends.
    private let stopPipe: (read: Int32, write: Int32)
    private let threads = DispatchGroup()

    private struct State {
        var misbehavioursLeft: Int
        var connections = 0
        var misbehaved = 0
        /// The identifiers its error responses named.
        var named: [UInt32] = []
        /// The sequences it processed (read before it misbehaved, or on an honest
        /// connection), with how often.
        var processed: [UInt64: Int] = [:]
    }

    /// - Parameters:
    ///   - times: on how many connections it misbehaves (the first ones to reach `after`).
    ///   - receiveBuffer: SO_RCVBUF of the accepted sockets (a small one makes the client's
    ///     writes block early when the gateway does not read).
    init(_ misbehaviour: Misbehaviour, after notifications: Int = 0, times: Int = .max, receiveBuffer: Int? = nil) throws {
        self.misbehaviour = misbehaviour
        after = notifications
        state = Locked(State(misbehavioursLeft: times))
        let pki = LoopbackRig.pki
        context = try TLSContext(.server(certificateChain: pki.server.certificate, privateKey: pki.server.privateKey,
                                         clientCertificateRoots: .certificates(pki.authority.certificate)), role: .server)
        listener = try Socket.listen(host: "127.0.0.1", port: 0)
        // Accepted sockets inherit it, and it is in force before any SYN arrives.
        if let receiveBuffer { listener.setBufferSizes(send: nil, receive: receiveBuffer) }
        port = listener.localAddress!.port
        var fds: [Int32] = [0, 0]
        try syscallOrThrow("pipe") { pipe(&fds) }
        stopPipe = (fds[0], fds[1])
        threads.enter()
        Thread { [self] in
            defer { threads.leave() }
            acceptLoop()
        }.start()
    }

    /// Connections accepted so far.
    var connections: Int { state.withLock { $0.connections } }
    /// Connections it misbehaved on so far.
    var misbehaved: Int { state.withLock { $0.misbehaved } }
    /// The identifiers its error responses named, in order.
    var named: [UInt32] { state.withLock { $0.named } }
    /// The sequence numbers (`LoopbackRig.token(n)`) it processed, with how many times each.
    var processed: [UInt64: Int] { state.withLock { $0.processed } }

    /// Ends every connection and joins the threads.
    func stop() {
        close(stopPipe.write)
        _ = threads.wait(timeout: .now() + 10)
        close(stopPipe.read)
    }

    // MARK: Connections

    private func acceptLoop() {
        while wait(for: listener.fd, events: POLLIN) {
            guard let accepted = try? listener.accept() else { continue }
            state.withLock { $0.connections += 1 }
            threads.enter()
            Thread { [self] in
                defer { threads.leave() }
                serve(accepted)
            }.start()
        }
    }

    private func serve(_ socket: Socket) {
        if case .neverHandshake = misbehaviour, takeMisbehaviour() {
            hold(socket)
            return
        }
        guard let stream = try? TLSStream(context: context, socket: socket), handshake(stream) else { return }
        if case .neverRead = misbehaviour, takeMisbehaviour() {
            hold(socket)
            return
        }
        var decoder = FrameDecoder()
        var seen = 0
        var trigger: UInt32?
        let buffer = UnsafeMutableRawBufferPointer.allocate(byteCount: 65536, alignment: 16)
        defer { buffer.deallocate() }
        while trigger == nil {
            switch try? stream.read(into: buffer) {
            case .bytes(let count):
                var sequences: [UInt64] = []
                _ = decoder.decode(UnsafeRawBufferPointer(rebasing: buffer[0..<count])) { notification in
                    seen += 1
                    if seen > after, takeMisbehaviour() {
                        trigger = notification.identifier
                        return false
                    }
                    sequences.append(Self.sequence(of: notification.token))
                    return true
                }
                state.withLock { state in sequences.forEach { state.processed[$0, default: 0] += 1 } }
            case .wouldBlock(let progress):
                guard wait(for: socket.fd, events: progress == .wantWrite ? POLLOUT : POLLIN) else { return }
            case .closed, nil:
                return
            }
        }
        misbehave(on: stream, naming: trigger!)
    }

    private func misbehave(on stream: TLSStream, naming identifier: UInt32) {
        func errorResponse(_ status: UInt8, _ identifier: UInt32) -> [UInt8] {
            state.withLock { $0.named.append(identifier) }
            return ErrorResponse(status: Status(rawValue: status), identifier: identifier).bytes
        }
        switch misbehaviour {
        case .junk:
            answerAndClose(stream, Self.junk)
        case .truncatedErrorResponse:
            answerAndClose(stream, Array(errorResponse(Status.invalidToken.rawValue, identifier).prefix(3)))
        case .errorResponse(let status):
            answerAndClose(stream, errorResponse(status, identifier))
        case .errorNamingUnsentIdentifier:
            answerAndClose(stream, errorResponse(Status.invalidToken.rawValue, identifier &+ Self.unsentIdentifierOffset))
        case .errorResponseThenFINWithoutCloseNotify:
            write(errorResponse(Status.invalidToken.rawValue, identifier), to: stream)
            stream.socket.shutdownWrite()
            drain(stream)
        case .finWithoutCloseNotify:
            stream.socket.shutdownWrite()
            drain(stream)
        case .reset:
            var linger = Glibc.linger(l_onoff: 1, l_linger: 0)
            _ = setsockopt(stream.socket.fd.rawValue, SOL_SOCKET, SO_LINGER, &linger, socklen_t(MemoryLayout<Glibc.linger>.size))
            // Returning releases the stream and its socket: close(2) with linger 0 sends RST.
        case .neverRead, .neverHandshake:
            preconditionFailure("misbehaves before reading")
        }
    }

    /// Writes `bytes`, close_notify and a FIN, then reads until the client closes (a close
    /// with unread bytes would be a reset, which is another behaviour).
    private func answerAndClose(_ stream: TLSStream, _ bytes: [UInt8]) {
        write(bytes, to: stream)
        stream.shutdown()
        stream.socket.shutdownWrite()
        drain(stream)
    }

    private func write(_ bytes: [UInt8], to stream: TLSStream) {
        try? bytes.withUnsafeBytes { try stream.writeAll($0, timeout: .seconds(5)) }
    }

    private func drain(_ stream: TLSStream) {
        var scratch = [UInt8](repeating: 0, count: 16384)
        while true {
            let result = scratch.withUnsafeMutableBytes { try? stream.socket.read(into: $0) }
            switch result {
            case .processed(let count) where count > 0: continue
            case .wouldBlock: guard wait(for: stream.socket.fd, events: POLLIN) else { return }
            default: return
            }
        }
    }

    private func handshake(_ stream: TLSStream) -> Bool {
        while true {
            switch try? stream.handshake() {
            case .complete: return true
            case .wantRead: guard wait(for: stream.socket.fd, events: POLLIN) else { return false }
            case .wantWrite: guard wait(for: stream.socket.fd, events: POLLOUT) else { return false }
            case nil: return false
            }
        }
    }

    /// Keeps the connection open, doing nothing, until the gateway stops.
    private func hold(_ socket: Socket) {
        withExtendedLifetime(socket) { _ = wait(for: FileDescriptor(rawValue: -1), events: 0) }
    }

    /// Whether this connection misbehaves now (counted when it does).
    private func takeMisbehaviour() -> Bool {
        state.withLock { state in
            guard state.misbehavioursLeft > 0 else { return false }
            state.misbehavioursLeft -= 1
            state.misbehaved += 1
            return true
        }
    }

    /// Waits until `fd` is ready for `events` (true), or the gateway stops (false).
    private func wait(for descriptor: FileDescriptor, events: Int32) -> Bool {
        var fds = [pollfd(fd: stopPipe.read, events: Int16(POLLIN), revents: 0),
                   pollfd(fd: descriptor.rawValue, events: Int16(events), revents: 0)]
        let ready = (try? syscallOrThrow("poll") { poll(&fds, nfds_t(fds.count), -1) }) ?? -1
        return ready > 0 && fds[0].revents == 0
    }

    /// The `n` of `LoopbackRig.token(n)`.
    static func sequence(of token: UnsafeRawBufferPointer) -> UInt64 {
        token[24..<32].reduce(0) { $0 << 8 | UInt64($1) }
    }
}
