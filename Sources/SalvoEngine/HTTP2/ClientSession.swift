import DequeModule
import SalvoIO
import SalvoWire

/// What a `ClientSession` reports while it submits requests and reads the gateway's
/// frames. Streams are named by the entry the connection gave them when it submitted them
/// (their number in `StreamWindow`'s table). Public for the fuzz target only (`Tests/Fuzz`).
@_spi(Fuzzing) public protocol ClientSessionDelegate: AnyObject {
    /// A stream's `:status`, as sent: the one response header the sender reads (a
    /// notification is named by its stream, not by the `apns-id` echoed back).
    func responseStatus(entry: Int32, value: UnsafeRawBufferPointer)
    /// A piece of a response body.
    func responseBody(entry: Int32, chunk: UnsafeRawBufferPointer)
    /// The stream ended: answered (its response is complete), reset by the gateway, or
    /// refused (`refused`: REFUSED_STREAM, or above a GOAWAY's last stream id: never processed).
    func streamClosed(entry: Int32, refused: Bool, errorCode: UInt32)
    /// A request the session could not send (it is not opened: never processed).
    func requestNotSent(entry: Int32)
    /// The flow-control windows let only part of a body go with its request (or none):
    /// keep `rest` until `requestBody` asks for it; returns the delegate's number for it.
    func keepBody(entry: Int32, _ rest: UnsafeRawBufferPointer) -> UInt64
    /// Copies the next bytes of kept body `body` into `destination`; returns how many, and
    /// whether the body ends with them.
    func requestBody(_ body: UInt64, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool)
    /// The session needs kept body `body` no more: all of it was sent, or its stream ended
    /// first, or the session did (`releaseWaitingBodies`). Called once for every kept body.
    func releaseBody(_ body: UInt64)
    /// GOAWAY: streams up to `lastStreamID` are answered; later ones were refused.
    func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer)
    /// The answer to our PING.
    func pingAcknowledged()
    /// The gateway's SETTINGS arrived (and apply): it allows `streamLimit` open streams.
    func settingsReceived(streamLimit: Int)
}

/// A stream's body that waits for window: how much of it is not sent yet, and the
/// delegate's number for it (`ClientSessionDelegate.keepBody`).
struct WaitingBody {
    var id: Int32
    var left: Int32
    var body: UInt64
}

/// Why the HTTP/2 session cannot go on.
@_spi(Fuzzing) public struct HTTP2SessionError: Error, CustomStringConvertible {
    /// What went wrong, for the user.
    public var description: String
}

/// A request's header fields, gathered for one `ClientSession.submit`: the names are static
/// text, the values need to live only until the request is submitted (it is encoded
/// then). Reused request after request.
@_spi(Fuzzing) public struct HeaderFields: ~Copyable {
    fileprivate struct Field {
        var name: UnsafeRawBufferPointer
        var value: UnsafeRawBufferPointer
        var indexing: HPACKIndexing
    }

    /// Fields `first..<end` repeat together under `key` (see `HPACKEncoder.encodeRun`).
    fileprivate struct Run {
        var first: Int
        var end: Int
        var slot: Int
        var key: UInt64
    }

    private let fields: UnsafeMutablePointer<Field>
    fileprivate private(set) var count = 0
    /// The most bytes the fields take encoded.
    fileprivate private(set) var encodedLength = 0
    let capacity: Int
    private let runStorage: UnsafeMutablePointer<Run>
    private var runCount = 0

    /// Room for `capacity` fields, made once.
    public init(capacity: Int) {
        fields = .allocate(capacity: capacity)
        runStorage = .allocate(capacity: HPACKEncoder.runSlots)
        self.capacity = capacity
    }

    deinit {
        fields.deallocate()
        runStorage.deallocate()
    }

    fileprivate var list: UnsafeBufferPointer<Field> { UnsafeBufferPointer(start: fields, count: count) }
    fileprivate var runs: UnsafeBufferPointer<Run> { UnsafeBufferPointer(start: runStorage, count: runCount) }

    /// Empties the list for the next request.
    public mutating func removeAll() {
        count = 0
        encodedLength = 0
        runCount = 0
    }

    /// The fields added from here to `endRun()` repeat from request to request: `key`
    /// stands for them (the same key in the same `slot`, the same fields), so that the
    /// encoder writes them again as it wrote them last, without looking each one up.
    public mutating func beginRun(slot: Int, key: UInt64) {
        precondition(runCount < HPACKEncoder.runSlots, "more runs than HeaderFields holds")
        runStorage[runCount] = Run(first: count, end: count, slot: slot, key: key)
    }

    /// Ends the run `beginRun` began.
    public mutating func endRun() {
        runStorage[runCount].end = count
        runCount += 1
    }

    /// A field whose value repeats from request to request: HPACK indexes it, so after the
    /// first request it costs a byte or two.
    public mutating func add(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        append(name, value, .indexed)
    }

    /// A field whose value is new every time (`:path`, `apns-id`) or may be: kept out of
    /// the HPACK table, where it would only push out the fields that repeat (its name is
    /// indexed: see `HPACKIndexing.neverIndexed`).
    public mutating func addUnique(_ name: StaticString, _ value: UnsafeRawBufferPointer) {
        append(name, value, .neverIndexed)
    }

    /// A field whose name and value are static text (indexed).
    public mutating func add(_ name: StaticString, _ value: StaticString) {
        append(name, UnsafeRawBufferPointer(start: value.utf8Start, count: value.utf8CodeUnitCount), .indexed)
    }

    private mutating func append(_ name: StaticString, _ value: UnsafeRawBufferPointer, _ indexing: HPACKIndexing) {
        precondition(count < capacity, "more header fields than HeaderFields holds")
        fields[count] = Field(name: UnsafeRawBufferPointer(start: name.utf8Start, count: name.utf8CodeUnitCount),
                              value: value, indexing: indexing)
        count += 1
        encodedLength += HPACKEncoder.maximumEncodedLength(nameCount: name.utf8CodeUnitCount, valueCount: value.count)
    }
}

/// One HTTP/2 client session on a TLS connection (RFC 9113), written for a sender of many
/// small POSTs. A request is encoded into the output as it is submitted: HEADERS through
/// the connection's `HPACKEncoder` (what repeats is indexed once), then its body as DATA
/// when the flow-control windows allow, else later, in stream order, as WINDOW_UPDATEs
/// reopen them. What the gateway sends is cut into frames by `HTTP2FrameParser`; response
/// header blocks are decoded by `HPACKDecoder`, whose table lives in storage made once.
/// Nothing is allocated per request once the output, the stream table and the body queue
/// have grown to the connection's stream limit.
///
/// Loop thread only. Public (as SPI) for the fuzz target only.
@_spi(Fuzzing) public final class ClientSession<Delegate: ClientSessionDelegate> {
    /// Not reference counted (called for every answer): the delegate, the connection, owns
    /// the session and lets go of it before it goes itself. Called through `Unmanaged`:
    /// an `unowned(unsafe)` reference still took a retain and a release around each call
    /// (see the Performance notes article).
    private let delegateReference: Unmanaged<Delegate>
    // Per-request state (the fields marked below) skips exclusivity checks, which cost the hot
    // path (see the Performance notes article): loop thread only, and no access to these
    // fields spans a call that could come back to them.
    @exclusivity(unchecked) private var encoder = HPACKEncoder()
    @exclusivity(unchecked) private var parser = HTTP2FrameParser()
    @exclusivity(unchecked) private var decoder = HPACKDecoder()
    /// The fragments of a header block that spans frames, until its last: rare (an answer
    /// fits in one frame), and the decoder takes whole blocks.
    private var pendingBlock: [UInt8] = []
    /// Frames waiting for the socket: the connection writes them from here (`output`,
    /// `consumeOutput`), so that each frame is encoded once, where it is sent from.
    @exclusivity(unchecked) private var queued: OutputBuffer
    @exclusivity(unchecked) private var streams = ClientStreams()
    /// Streams whose body waits for window, oldest (lowest id) first: what is left of each
    /// body, and the delegate's number for it. Kept here, not per stream: few streams have one.
    @exclusivity(unchecked) private var waitingBodies: Deque<WaitingBody> = []
    @exclusivity(unchecked) private var nextStreamID: Int32 = 1
    /// Until the gateway's first SETTINGS, one stream at a time (APNs allows one until it
    /// has seen a valid provider token); after, unlimited unless they say otherwise.
    /// Read per request and per frame: unchecked exclusivity (see above), as the next two.
    @exclusivity(unchecked) public private(set) var remoteStreamLimit = 1
    /// Whether the gateway's first SETTINGS arrived (it must open the connection with them).
    @exclusivity(unchecked) public private(set) var peerSettingsSeen = false
    private var peerInitialWindow = HTTP2.defaultWindowSize
    private var peerMaxFrameSize = HTTP2.defaultMaxFrameSize
    // Flow-control counts, touched per frame: unchecked exclusivity too (see above).
    @exclusivity(unchecked) private var connectionSendWindow = HTTP2.defaultWindowSize
    /// DATA bytes received since our last connection WINDOW_UPDATE.
    @exclusivity(unchecked) private var receivedSinceUpdate = 0
    /// The stream whose header block CONTINUATION frames go on, and whether the stream
    /// ends with the block.
    @exclusivity(unchecked) private var headerBlock: (streamID: Int32, endStream: Bool)?
    /// GOAWAY sent or received: no new streams.
    private var isClosing = false
    /// The protocol error that ended the session.
    private var failure: HTTP2SessionError?

    /// Our receive window, per stream and for the connection: answers are a few hundred
    /// bytes, so the gateway is never held back by it.
    private static var receiveWindow: Int { 1 << 30 }

    /// Calls the delegate without retaining it (see `delegateReference`).
    @inline(__always)
    private func withDelegate<Result>(_ body: (Delegate) -> Result) -> Result {
        delegateReference._withUnsafeGuaranteedRef(body)
    }

    /// Starts a session and queues the connection preface with our SETTINGS (no server
    /// push, our receive window, no header table) and the connection's window to match.
    ///
    /// No header table (SETTINGS_HEADER_TABLE_SIZE 0), because an answer repeats nothing
    /// worth indexing: its `apns-id` differs every time. With a table, the gateway indexes
    /// each one, and we must decode (Huffman) and store each to keep our copy of the table
    /// in step (measured: the Performance notes article). Without, the gateway sends it
    /// unindexed, and the decoder steps over what we do not read. The decoder still takes
    /// a table up to the protocol's default: the gateway may use one until it has our SETTINGS.
    package init(delegate: Delegate, output: consuming OutputBuffer) throws(HTTP2SessionError) {
        delegateReference = Unmanaged.passUnretained(delegate)
        queued = output
        write(upTo: 64) { writer in
            let preface = HTTP2.clientPreface
            writer.write(UnsafeRawBufferPointer(start: preface.utf8Start, count: preface.utf8CodeUnitCount))
            HTTP2FrameWriter.settings([(HTTP2Setting.headerTableSize, 0), (HTTP2Setting.enablePush, 0),
                                       (HTTP2Setting.initialWindowSize, UInt32(Self.receiveWindow))],
                                      into: &writer)
            HTTP2FrameWriter.windowUpdate(stream: 0, increment: UInt32(Self.receiveWindow - HTTP2.defaultWindowSize),
                                          into: &writer)
        }
    }

    /// A session with an output buffer of its own, `outputCapacity` bytes to start with.
    public convenience init(delegate: Delegate, outputCapacity: Int = 1 << 16) throws(HTTP2SessionError) {
        try self.init(delegate: delegate, output: OutputBuffer(capacity: outputCapacity))
    }

    // MARK: Requests

    /// Writes a POST with `fields` and, as far as the windows allow, its `body`, copied from
    /// where the caller holds it; the rest is handed to `ClientSessionDelegate.keepBody`
    /// and pulled through `requestBody` as WINDOW_UPDATEs reopen the windows. The caller
    /// keeps within `remoteStreamLimit`. After GOAWAY, the request is not sent
    /// (`requestNotSent`).
    public func submit(_ fields: borrowing HeaderFields, body: UnsafeRawBufferPointer, entry: Int32) throws(HTTP2SessionError) {
        if let failure { throw failure }
        guard !isClosing else {
            withDelegate { $0.requestNotSent(entry: entry) }
            return
        }
        // Stream ids end at 2^31 - 1: a connection that used them up must be replaced.
        guard nextStreamID > 0 else { throw HTTP2SessionError(description: "the connection has used all its stream ids") }
        let id = nextStreamID
        nextStreamID &+= 2
        let list = fields.list
        // A block is a few hundred bytes: far below any peer's largest frame, so no CONTINUATION.
        let blockLength = HPACKEncoder.maximumBlockPrefixLength + fields.encodedLength
        precondition(blockLength <= peerMaxFrameSize, "a request's header fields fill more than a frame")
        write(upTo: HTTP2FrameHeader.byteCount + blockLength) { writer in
            HTTP2FrameWriter.headers(stream: id, endStream: body.isEmpty, into: &writer) { writer in
                encoder.beginBlock(into: &writer)
                var next = 0
                for run in fields.runs {
                    Self.encode(list[next..<run.first], with: &encoder, into: &writer)
                    encoder.encodeRun(slot: run.slot, key: run.key, into: &writer) { encoder, writer in
                        Self.encode(list[run.first..<run.end], with: &encoder, into: &writer)
                    }
                    next = run.end
                }
                Self.encode(list[next...], with: &encoder, into: &writer)
            }
        }
        let place = streams.insert(ClientStream(id: id, entry: entry, sendWindow: Int32(peerInitialWindow)))
        guard !body.isEmpty else { return }
        // Bodies go in stream order: behind others that wait, this one waits whole.
        let sent = waitingBodies.isEmpty ? sendBody(body, at: place) : 0
        if sent < body.count {
            let kept = withDelegate { $0.keepBody(entry: entry, UnsafeRawBufferPointer(rebasing: body[sent...])) }
            waitingBodies.append(WaitingBody(id: id, left: Int32(body.count - sent), body: kept))
        }
    }

    private static func encode(_ fields: Slice<UnsafeBufferPointer<HeaderFields.Field>>, with encoder: inout HPACKEncoder,
                               into writer: inout ByteWriter) {
        for field in fields { encoder.encode(name: field.name, value: field.value, field.indexing, into: &writer) }
    }

    /// Writes DATA for the stream at `place` from `body` while the windows allow; returns
    /// how much of it went.
    private func sendBody(_ body: UnsafeRawBufferPointer, at place: Int) -> Int {
        var stream = streams[place]
        defer { streams[place] = stream }
        var sent = 0
        while sent < body.count {
            let room = min(body.count - sent, connectionSendWindow, Int(stream.sendWindow), peerMaxFrameSize)
            guard room > 0 else { break }
            let isLast = sent + room == body.count
            write(upTo: HTTP2FrameHeader.byteCount + room) { writer in
                HTTP2FrameHeader(length: room, type: .data, flags: isLast ? HTTP2Flags.endStream : 0, streamID: stream.id)
                    .write(to: writer.reserve(HTTP2FrameHeader.byteCount))
                writer.write(UnsafeRawBufferPointer(rebasing: body[sent..<sent + room]))
            }
            connectionSendWindow -= room
            stream.sendWindow -= Int32(room)
            sent += room
        }
        return sent
    }

    /// Writes DATA for the stream at `place` from its kept body while the windows allow;
    /// returns whether its body is all sent.
    private func sendKeptBody(at place: Int, _ waiting: inout WaitingBody) -> Bool {
        var stream = streams[place]
        defer { streams[place] = stream }
        while waiting.left > 0 {
            let room = min(Int(waiting.left), connectionSendWindow, Int(stream.sendWindow), peerMaxFrameSize)
            guard room > 0 else { return false }
            var taken = (count: 0, isLast: false)
            write(upTo: HTTP2FrameHeader.byteCount + room) { writer in
                let header = writer.reserve(HTTP2FrameHeader.byteCount)
                let destination = UnsafeMutableRawBufferPointer(rebasing: writer.freeSpace[..<room])
                taken = withDelegate { $0.requestBody(waiting.body, into: destination) }
                writer.advance(by: taken.count)
                HTTP2FrameHeader(length: taken.count, type: .data, flags: taken.isLast ? HTTP2Flags.endStream : 0,
                                 streamID: stream.id).write(to: header)
            }
            precondition(taken.count > 0 || taken.isLast, "a request body ended before its length")
            connectionSendWindow -= taken.count
            stream.sendWindow -= Int32(taken.count)
            waiting.left = taken.isLast ? 0 : waiting.left - Int32(taken.count)
        }
        return true
    }

    /// Sends the bodies that wait, in order, as far as the windows now allow.
    private func sendWaitingBodies() {
        // A waiting body's stream is open: one that ends takes its body out of the queue.
        while var waiting = waitingBodies.first {
            guard sendKeptBody(at: streams.find(waiting.id)!, &waiting) else {
                waitingBodies[0] = waiting
                return
            }
            waitingBodies.removeFirst()
            withDelegate { $0.releaseBody(waiting.body) }
        }
    }

    /// Takes stream `id`'s body out of the waiting ones, if it waits, and releases it;
    /// returns whether it did. The waiting bodies are in id order and are the newest
    /// streams' (a body waits behind any that wait), so most streams that end are older
    /// than the first, and the search is for the rest.
    private func releaseWaitingBody(of id: Int32) -> Bool {
        guard let first = waitingBodies.first, first.id <= id, let last = waitingBodies.last, id <= last.id else {
            return false
        }
        var low = 0
        var high = waitingBodies.count
        while low < high {
            let middle = (low + high) / 2
            if waitingBodies[middle].id < id { low = middle + 1 } else { high = middle }
        }
        guard waitingBodies[low].id == id else { return false }
        let body = waitingBodies.remove(at: low).body
        withDelegate { $0.releaseBody(body) }
        return true
    }

    /// Releases every body that waits: the session ends (its connection closed or was lost).
    public func releaseWaitingBodies() {
        while let waiting = waitingBodies.popFirst() { withDelegate { $0.releaseBody(waiting.body) } }
    }

    /// Queues a PING.
    public func ping() {
        write(upTo: 17) { HTTP2FrameWriter.ping(0, ack: false, into: &$0) }
    }

    /// Queues GOAWAY (no error): we open no more streams on this connection. The gateway
    /// opens none (no push), so the last stream we processed is 0.
    public func goAway() {
        isClosing = true
        write(upTo: 17) { HTTP2FrameWriter.goAway(lastStreamID: 0, errorCode: HTTP2ErrorCode.noError, into: &$0) }
    }

    // MARK: Output

    /// The frames waiting for the socket.
    public var output: UnsafeRawBufferPointer { queued.readable }

    /// The socket took the first `count` bytes of `output`.
    public func consumeOutput(_ count: Int) { queued.consume(count) }

    /// Whether frames wait for the socket.
    public var wantsToWrite: Bool { !queued.isEmpty }

    /// Whether a request was ever submitted on this session.
    public var hasOpenedStreams: Bool { nextStreamID > 1 }

    /// Lets `body` write at most `maximum` bytes of frames at the end of the queue.
    private func write(upTo maximum: Int, _ body: (inout ByteWriter) -> Void) {
        queued.append(upTo: maximum) { space in
            var writer = ByteWriter(space)
            body(&writer)
            return writer.count
        }
    }

    // MARK: Input

    /// Feeds what the socket read; the delegate hears of every answer in it. A protocol
    /// error queues GOAWAY with its code and ends the session: this and later calls throw.
    public func receive(_ bytes: UnsafeRawBufferPointer) throws(HTTP2SessionError) {
        if let failure { throw failure }
        do {
            try parser.parse(bytes) { header, payload throws(HTTP2ConnectionError) in try frame(header, payload) }
        } catch {
            isClosing = true
            write(upTo: 17) { HTTP2FrameWriter.goAway(lastStreamID: 0, errorCode: error.code, into: &$0) }
            let failure = HTTP2SessionError(description: "the gateway broke the HTTP/2 protocol: \(error.description)")
            self.failure = failure
            throw failure
        }
    }

    private func frame(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        if let block = headerBlock, header.type != .continuation || header.streamID != block.streamID {
            throw protocolError("a \(name(header.type)) frame inside the header block of stream \(block.streamID)")
        }
        guard peerSettingsSeen || header.type == .settings else {
            throw protocolError("the gateway's first frame is \(name(header.type)), not SETTINGS")
        }
        switch header.type {
        case .data: try data(header, payload)
        case .headers: try headers(header, payload)
        case .continuation:
            guard headerBlock != nil else { throw protocolError("CONTINUATION outside a header block") }
            try decodeHeaderBlock(payload, isLast: header.flags & HTTP2Flags.endHeaders != 0)
        case .rstStream: try rstStream(header, payload)
        case .settings: try settings(header, payload)
        case .ping: try ping(header, payload)
        case .goAway: try goAway(header, payload)
        case .windowUpdate: try windowUpdate(header, payload)
        case .pushPromise: throw protocolError("PUSH_PROMISE, though our SETTINGS disable push")
        default: break  // PRIORITY and unknown types: nothing for a client to do.
        }
    }

    private func data(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        try requireOurs(header)
        // Flow control counts the whole frame, padding included.
        receivedSinceUpdate += header.length
        guard receivedSinceUpdate <= Self.receiveWindow else {
            throw HTTP2ConnectionError(HTTP2ErrorCode.flowControlError, "DATA beyond the connection's receive window")
        }
        if receivedSinceUpdate >= Self.receiveWindow / 2 {
            let increment = UInt32(receivedSinceUpdate)
            write(upTo: 13) { HTTP2FrameWriter.windowUpdate(stream: 0, increment: increment, into: &$0) }
            receivedSinceUpdate = 0
        }
        let body = try unpadded(header, payload)
        // A stream closed meanwhile (we reset it): its DATA only counts for the connection.
        guard let place = streams.find(header.streamID) else { return }
        if !body.isEmpty { withDelegate { $0.responseBody(entry: streams[place].entry, chunk: body) } }
        if header.flags & HTTP2Flags.endStream != 0 { close(at: place, errorCode: HTTP2ErrorCode.noError) }
    }

    private func headers(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        try requireOurs(header)
        var fragment = try unpadded(header, payload)
        if header.flags & HTTP2Flags.priority != 0 {
            guard fragment.count >= 5 else { throw protocolError("HEADERS too short for its priority fields") }
            fragment = UnsafeRawBufferPointer(rebasing: fragment[5...])
        }
        headerBlock = (header.streamID, header.flags & HTTP2Flags.endStream != 0)
        try decodeHeaderBlock(fragment, isLast: header.flags & HTTP2Flags.endHeaders != 0)
    }

    /// The most a header block spanning frames may hold: answers are a few hundred bytes.
    private static var maximumHeaderBlock: Int { 1 << 20 }

    /// Takes a piece of the current header block (HEADERS, then CONTINUATIONs) and, with
    /// its last, decodes the block and hands its fields to the delegate. Blocks of closed
    /// streams are decoded all the same: they change the HPACK table.
    private func decodeHeaderBlock(_ fragment: UnsafeRawBufferPointer, isLast: Bool) throws(HTTP2ConnectionError) {
        guard let block = headerBlock else { return }
        guard isLast else {
            guard pendingBlock.count + fragment.count <= Self.maximumHeaderBlock else {
                throw protocolError("a header block of more than \(Self.maximumHeaderBlock) bytes")
            }
            pendingBlock.append(contentsOf: fragment)
            return
        }
        let place = streams.find(block.streamID)
        let failure: HPACKDecodingError?
        if pendingBlock.isEmpty {
            failure = decode(fragment, place: place)
        } else {
            pendingBlock.append(contentsOf: fragment)
            failure = pendingBlock.withUnsafeBytes { decode($0, place: place) }
            pendingBlock.removeAll(keepingCapacity: true)
        }
        if let failure {
            throw HTTP2ConnectionError(HTTP2ErrorCode.compressionError, "a header block HPACK cannot decode (\(failure))")
        }
        headerBlock = nil
        if block.endStream, let place { close(at: place, errorCode: HTTP2ErrorCode.noError) }
    }

    /// Decodes a whole block, handing its `:status` to the delegate if the stream is open.
    private func decode(_ block: UnsafeRawBufferPointer, place: Int?) -> HPACKDecodingError? {
        do throws(HPACKDecodingError) {
            try decoder.decode(block, reading: { (":status" as StaticString).isSpelled(by: $0) }) { _, value in
                if let place { withDelegate { $0.responseStatus(entry: streams[place].entry, value: value) } }
            }
            return nil
        } catch { return error }
    }

    private func rstStream(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        try requireLength(header, 4)
        try requireOurs(header)
        guard let place = streams.find(header.streamID) else { return }
        close(at: place, errorCode: payload.loadUnaligned(as: UInt32.self).bigEndian, resetByPeer: true)
    }

    private func settings(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        guard header.streamID == 0 else { throw protocolError("SETTINGS on stream \(header.streamID)") }
        // The answer to ours: nothing to do.
        if header.flags & HTTP2Flags.ack != 0 { return try requireLength(header, 0) }
        guard payload.count % 6 == 0 else {
            throw HTTP2ConnectionError(HTTP2ErrorCode.frameSizeError, "SETTINGS of \(payload.count) bytes, not a multiple of 6")
        }
        if !peerSettingsSeen {
            peerSettingsSeen = true
            remoteStreamLimit = Int(UInt32.max)
        }
        for offset in stride(from: 0, to: payload.count, by: 6) {
            let identifier = payload.loadUnaligned(fromByteOffset: offset, as: UInt16.self).bigEndian
            let value = Int(payload.loadUnaligned(fromByteOffset: offset + 2, as: UInt32.self).bigEndian)
            switch identifier {
            case HTTP2Setting.headerTableSize:
                encoder.setPeerTableSize(value)
            case HTTP2Setting.enablePush:
                guard value <= 1 else { throw protocolError("SETTINGS_ENABLE_PUSH \(value)") }
            case HTTP2Setting.maxConcurrentStreams:
                remoteStreamLimit = value
            case HTTP2Setting.initialWindowSize:
                guard value <= HTTP2.maximumWindowSize else {
                    throw HTTP2ConnectionError(HTTP2ErrorCode.flowControlError, "SETTINGS_INITIAL_WINDOW_SIZE \(value)")
                }
                // Open streams' windows move by the difference (RFC 9113 §6.9.2).
                let delta = value - peerInitialWindow
                peerInitialWindow = value
                var overflow = false
                streams.update { stream in
                    let window = Int(stream.sendWindow) + delta
                    overflow = overflow || window > HTTP2.maximumWindowSize
                    stream.sendWindow = Int32(clamping: window)
                }
                guard !overflow else {
                    throw HTTP2ConnectionError(HTTP2ErrorCode.flowControlError, "a stream's window over 2^31 - 1")
                }
            case HTTP2Setting.maxFrameSize:
                guard (HTTP2.defaultMaxFrameSize...HTTP2.maximumMaxFrameSize).contains(value) else {
                    throw protocolError("SETTINGS_MAX_FRAME_SIZE \(value)")
                }
                peerMaxFrameSize = value
            default:
                break  // Unknown settings are ignored (RFC 9113 §6.5.2).
            }
        }
        write(upTo: 9) { HTTP2FrameWriter.settings([], ack: true, into: &$0) }
        sendWaitingBodies()
        withDelegate { $0.settingsReceived(streamLimit: remoteStreamLimit) }
    }

    private func ping(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        try requireLength(header, 8)
        guard header.streamID == 0 else { throw protocolError("PING on stream \(header.streamID)") }
        if header.flags & HTTP2Flags.ack != 0 {
            withDelegate { $0.pingAcknowledged() }
        } else {
            let opaque = payload.loadUnaligned(as: UInt64.self).bigEndian
            write(upTo: 17) { HTTP2FrameWriter.ping(opaque, ack: true, into: &$0) }
        }
    }

    private func goAway(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        guard header.streamID == 0 else { throw protocolError("GOAWAY on stream \(header.streamID)") }
        guard payload.count >= 8 else { throw HTTP2ConnectionError(HTTP2ErrorCode.frameSizeError, "GOAWAY of \(payload.count) bytes") }
        let lastStreamID = Int32(bitPattern: payload.loadUnaligned(as: UInt32.self).bigEndian & 0x7FFF_FFFF)
        isClosing = true
        let errorCode = payload.loadUnaligned(fromByteOffset: 4, as: UInt32.self).bigEndian
        withDelegate { $0.goAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: UnsafeRawBufferPointer(rebasing: payload[8...])) }
        // The gateway never processed the streams after its last one.
        streams.removeAll(where: { $0.id > lastStreamID }) { stream in
            _ = releaseWaitingBody(of: stream.id)
            withDelegate { $0.streamClosed(entry: stream.entry, refused: true, errorCode: HTTP2ErrorCode.refusedStream) }
        }
    }

    private func windowUpdate(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) {
        try requireLength(header, 4)
        let increment = Int(payload.loadUnaligned(as: UInt32.self).bigEndian & 0x7FFF_FFFF)
        if header.streamID == 0 {
            guard increment > 0 else { throw protocolError("a connection WINDOW_UPDATE of 0") }
            connectionSendWindow += increment
            guard connectionSendWindow <= HTTP2.maximumWindowSize else {
                throw HTTP2ConnectionError(HTTP2ErrorCode.flowControlError, "the connection's window over 2^31 - 1")
            }
        } else {
            guard let place = streams.find(header.streamID) else { return }
            // Read, changed and written back, not `streams[place].sendWindow += increment`:
            // Swift 6.3 under ThreadSanitizer emits an invalid bitcast for that modify
            // (`make test-tsan` stopped on it with a compiler crash).
            var stream = streams[place]
            let window = Int(stream.sendWindow) + increment
            stream.sendWindow = Int32(clamping: window)
            streams[place] = stream
            // Stream errors (RFC 9113 §6.9): only that stream ends.
            if increment == 0 { return reset(at: place, errorCode: HTTP2ErrorCode.protocolError) }
            if window > HTTP2.maximumWindowSize { return reset(at: place, errorCode: HTTP2ErrorCode.flowControlError) }
        }
        sendWaitingBodies()
    }

    // MARK: Streams

    /// The stream at `place` is over: its answer is complete (`noError`) or it was reset.
    /// A stream answered before its body was all sent is reset, so the rest is not expected.
    private func close(at place: Int, errorCode: UInt32, resetByPeer: Bool = false) {
        let stream = streams[place]
        streams.remove(at: place)
        if releaseWaitingBody(of: stream.id) && !resetByPeer {
            write(upTo: 13) { HTTP2FrameWriter.rstStream(stream.id, errorCode: HTTP2ErrorCode.cancel, into: &$0) }
        }
        withDelegate { $0.streamClosed(entry: stream.entry, refused: errorCode == HTTP2ErrorCode.refusedStream, errorCode: errorCode) }
    }

    /// A stream error: we reset the stream.
    private func reset(at place: Int, errorCode: UInt32) {
        let stream = streams[place]
        streams.remove(at: place)
        _ = releaseWaitingBody(of: stream.id)
        write(upTo: 13) { HTTP2FrameWriter.rstStream(stream.id, errorCode: errorCode, into: &$0) }
        withDelegate { $0.streamClosed(entry: stream.entry, refused: false, errorCode: errorCode) }
    }

    // MARK: Checks

    /// Frames on streams must be on ours (odd ids) that we opened.
    private func requireOurs(_ header: HTTP2FrameHeader) throws(HTTP2ConnectionError) {
        guard header.streamID & 1 == 1, UInt32(header.streamID) < UInt32(bitPattern: nextStreamID) else {
            throw protocolError("\(name(header.type)) on stream \(header.streamID), which we did not open")
        }
    }

    private func requireLength(_ header: HTTP2FrameHeader, _ length: Int) throws(HTTP2ConnectionError) {
        guard header.length == length else {
            throw HTTP2ConnectionError(HTTP2ErrorCode.frameSizeError, "\(name(header.type)) of \(header.length) bytes, not \(length)")
        }
    }

    /// The payload without its padding (RFC 9113 §6.1).
    private func unpadded(_ header: HTTP2FrameHeader, _ payload: UnsafeRawBufferPointer) throws(HTTP2ConnectionError) -> UnsafeRawBufferPointer {
        guard header.flags & HTTP2Flags.padded != 0 else { return payload }
        guard let padding = payload.first, Int(padding) < payload.count else {
            throw protocolError("\(name(header.type)) padded beyond its length")
        }
        return UnsafeRawBufferPointer(rebasing: payload[1..<payload.count - Int(padding)])
    }

    private func protocolError(_ description: String) -> HTTP2ConnectionError {
        HTTP2ConnectionError(HTTP2ErrorCode.protocolError, description)
    }

    private func name(_ type: HTTP2FrameType) -> String {
        let names = ["DATA", "HEADERS", "PRIORITY", "RST_STREAM", "SETTINGS", "PUSH_PROMISE", "PING", "GOAWAY",
                     "WINDOW_UPDATE", "CONTINUATION"]
        return Int(type.rawValue) < names.count ? names[Int(type.rawValue)] : "a frame of type \(type.rawValue)"
    }
}
