internal import CNghttp2
import SalvoIO
import SalvoWire
#if canImport(Glibc)
import Glibc
#endif

/// One client of the HTTP/2 mock: an nghttp2 server session fed from the TLS stream and
/// drained into it. nghttp2 does the protocol; this class does the APNs part, in nghttp2's
/// callbacks: each request stream gets a slot (`RequestValidation` and a digest, reused),
/// each finished request a verdict and a response, submitted at once or, with the plan's
/// response or error delay, held until one loop timer, armed for the earliest, releases
/// it: as the bytes nghttp2 made of it (`HeldOutput`) when answers fall due in the order
/// they came, else as an open stream (`HeldAnswers`).
///
/// Output is batched: the frames nghttp2 produces for one read (or one release of held
/// answers) are gathered and written with few `SSL_write`s. Counts are published before
/// the answers they count go out.
///
/// The same machinery serves the channel management port (`Role.management`): its
/// requests go to `ChannelRequest` instead of the push path.
final class H2Connection: ServerConnection {
    /// Which of the gateway's ports the connection came in on.
    enum Role {
        /// Device notifications and broadcasts, with the failure plan.
        case push
        /// Channel management (`ChannelRequest`), answered at once; the plan does not apply.
        case management
    }

    /// One request stream's state, in a reused array; nghttp2's stream user data is the
    /// slot's index + 1.
    struct Slot {
        var streamID: Int32
        var validation = RequestValidation()
        var digest = NotificationDigest()
        /// The error reason being sent as the body, if any.
        var answer: APNsReason?
        /// For 410: since when the token is gone (UNIX ms).
        var timestamp: Int64 = 0
        /// How much of the body was handed to nghttp2.
        var bodyOffset = 0
        var judged = false
        /// Judged, its answer waiting in `held`.
        var isHeld = false
        /// Answered, its frames held in `heldOutput` as nghttp2 makes them.
        var framesHeld = false
        /// `endlessAnswer`: its body's first bytes went out; the rest never comes.
        var isEndless = false
        /// A broadcast's registered channel, by the registry's number; -1: none.
        var channel: Int32 = -1
        var inUse = true

        init(streamID: Int32) {
            self.streamID = streamID
        }
    }

    /// Per-connection tallies, published to the loop's counters after each read.
    struct Tally {
        var accepted = 0
        var requests = 0
        var streams = 0
        var resetStreams = 0
        var rejections = [Int](repeating: 0, count: APNsReason.allCases.count)
        var rejected = false
        var digests: [UInt64] = []
        var recorded: [H2RecordedRequest] = []
        var unsentAnswers = 0
        var broadcasts = BroadcastCounts()
    }

    /// Reads per readiness event before yielding to the loop's other connections.
    private static let readBudget = 16
    /// Output gathered before it is written (about one TLS record).
    private static let writeBatch = 16384
    /// Output waiting for a slow reader beyond which the connection stops reading.
    private static let outputLimit = 1 << 20

    private let state: H2GatewayState
    private let counters: H2LoopCounters
    private let ordinal: Int
    private let role: Role
    /// The plan's protocol fault; never on the management port.
    private let misbehaviour: H2Misbehaviour?
    private var session: OpaquePointer?
    // Per-request state, touched from nghttp2's callbacks (so are the fields marked below):
    // exclusivity checks cost the hot path (see the Performance notes article), and no access
    // spans a call into nghttp2 (loop thread only; callbacks come from inside `mem_recv`/`mem_send`).
    @exclusivity(unchecked) private var slots: [Slot] = []
    /// With `recordRequests` only, beside `slots` (so that slots stay plain values): each
    /// stream's token and headers, kept if the request is accepted.
    private var recordings: [H2RecordedRequest?] = []
    @exclusivity(unchecked) private var freeSlots: [Int32] = []
    /// The slot `slotIndex` found last, and its stream. nghttp2 reports a request one header
    /// field or frame per callback, so a lookup mostly repeats the one before; this answers
    /// it without a search of nghttp2's stream map.
    private var lastSlot: (streamID: Int32, index: Int) = (0, 0)
    @exclusivity(unchecked) private var output = OutputBuffer(capacity: 1 << 16)
    @exclusivity(unchecked) private var tally = Tally()
    /// Valid requests on this connection, for the per-connection rules.
    private var validRequests = 0
    private var streamLimitRaised: Bool
    /// The last token seen here, and what it was worth: clients send the same token for
    /// many requests, so it is verified once.
    private var lastToken: [UInt8] = []
    private var lastAuthorization = RequestValidation.Authorization.absent
    private var lastIssuedAt: Int64 = 0
    /// The team of the last valid token seen here (`H2RecordedRequest.team`).
    private var lastTeam: String?
    /// The client presented a certificate: its requests are the certificate's, no token needed.
    private var isCertificateAuthenticated = false
    /// UNIX seconds at the current read.
    private var now: Int64 = 0
    /// When the current read returned: what a held answer's delay counts from. Not the
    /// loop's `now`, which dates from before the reads of this wake-up, so that requests
    /// arriving while the loop works would be held short.
    private var readAt = Instant(nanoseconds: 0)
    private var isStalled = false
    /// TLS needs to write before it can read again (a read returned WANT_WRITE).
    private var readWantsWrite = false
    private var isGoingAway = false
    /// The last stream our GOAWAY lets through: later ones are refused, never processed.
    private var goAwayLastStreamID = Int32.max
    /// Set by the drop rule inside a callback; the connection closes once nghttp2 returns.
    private var isDropping = false
    /// The client sent GOAWAY and the plan says to answer nothing more.
    private var isSilent = false
    /// `noSettings`: no session; the client's bytes are read and ignored.
    private var isMute = false
    /// `continuationFlood`: the flood was sent (once per connection).
    private var flooded = false
    // Unchecked exclusivity below, as for `slots`: touched per answer, loop thread only.
    /// Answers waiting for their time, and the timer armed for the earliest of them:
    /// as bytes when they keep their order (`HeldOutput`), else as open streams.
    @exclusivity(unchecked) private var held = HeldAnswers()
    @exclusivity(unchecked) private var heldOutput = HeldOutput()
    /// Streams still open in nghttp2 whose answers `heldOutput` holds (and counts).
    private var openWithFramesHeld = 0
    /// Streams with answers held as bytes that nghttp2 closed in the `mem_send` under way:
    /// it closes a stream when it packs the stream's last frame, before handing it out.
    @exclusivity(unchecked) private var closedWithFramesHeld: [Int32] = []
    private var releaseTimer: (id: TimerID, due: Instant)?
    /// What the timer runs: made once, so that arming it allocates nothing.
    private lazy var releaseAction = TimerAction { [weak self] in self?.releaseDueAnswers() }
    /// Management port only: each stream's request and, once judged, its answer, by slot.
    /// The bundle id of the connection's last broadcast, with the registry's number for it.
    private var lastBundle: (bytes: [UInt8], number: Int32)?
    private var channelRequests: [ChannelRequest] = []
    private var channelResponses: [ChannelResponse?] = []

    init(stream: TLSStream, ordinal: Int, loop: ServerRuntime.Loop, counters: H2LoopCounters, state: H2GatewayState,
         role: Role = .push) {
        self.state = state
        self.counters = counters
        self.ordinal = ordinal
        self.role = role
        misbehaviour = role == .push ? state.plan.misbehaviour : nil
        streamLimitRaised = state.verifier == nil
        super.init(stream: stream, loop: loop)
    }

    deinit {
        if let session { nghttp2_session_del(session) }
    }

    /// Whether requests here must carry a provider token.
    private var asksForTokens: Bool { state.verifier != nil && !isCertificateAuthenticated }

    // MARK: Connection events

    override func didEstablish() {
        // ALPN: a client whose list lacks h2 already failed the handshake. One that sent no
        // list speaks HTTP/2 by prior knowledge, which Apple takes (aioapns' default TLS
        // setup offers none): its connection preface tells, and nghttp2 checks it.
        if stream.negotiatedApplicationProtocol == nil { state.count { $0.withoutALPN += 1 } }
        if state.verifier != nil, stream.peerCertificateSubject != nil {
            isCertificateAuthenticated = true
            streamLimitRaised = true
        }
        // A gateway that says nothing after the handshake reads and ignores the client.
        if misbehaviour == .noSettings {
            isMute = true
            readAvailable()
            return
        }
        var session: OpaquePointer?
        let callbacks = SessionCallbacks.shared
        guard nghttp2_session_server_new(&session, callbacks.callbacks,
                                         Unmanaged.passUnretained(self).toOpaque()) == 0 else {
            close()
            return
        }
        self.session = session
        // Apple's SETTINGS: one stream until a valid token (with token authentication),
        // and a header list of at most 8000 bytes; the rest are the protocol's defaults.
        let settings = [
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                                   value: misbehaviour == .zeroStreams ? 0
                                       : streamLimitRaised ? state.maximumConcurrentStreams : 1),
            nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_HEADER_LIST_SIZE.rawValue), value: 8000),
        ]
        nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), settings, settings.count)
        // The server's preface goes out before anything is read, as Apple's does: a client
        // that speaks something else (the binary protocol) sees the SETTINGS frame before
        // the close its first bytes earn.
        produce()
        switch misbehaviour {
        case .garbage?:
            Self.garbage.withUnsafeBytes { output.append($0) }
        case .hugeFrame?:
            // DATA on stream 1, 16,777,215 bytes announced (the client allowed 16,384).
            Self.hugeFrameHeader.withUnsafeBytes { output.append($0) }
        default:
            break
        }
        guard flush() else { return }
        readAvailable()
    }

    /// What `garbage` writes: an HTTP/1.1 answer, which read as a frame header announces
    /// a 4.7 MB frame of type 0x2F.
    private static let garbage = Array("HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n".utf8)
    /// What `hugeFrame` writes: DATA on stream 1 announcing 16,777,215 bytes.
    private static let hugeFrameHeader: [UInt8] = [0xFF, 0xFF, 0xFF, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01]

    override func connectionEvents(_ events: IOEvents) {
        readWantsWrite = false
        if events.contains(.write), !flush() { return }
        readAvailable()
    }

    private func readAvailable() {
        var reads = 0
        reading: while phase == .established && !isStalled && output.count < Self.outputLimit {
            guard let result = readClient() else { return clientWentAway() }
            switch result {
            case .bytes(let count):
                if isMute { continue }
                now = Int64(time(nil))
                if state.holdsAnswers { readAt = .now() }
                let consumed = nghttp2_session_mem_recv(session, buffer.baseAddress!.assumingMemoryBound(to: UInt8.self), count)
                if isDropping {
                    drop()
                    return
                }
                guard consumed >= 0 else {
                    // A fatal error (bad preface, flooding): what nghttp2 queued, then close.
                    if consumed == Int(NGHTTP2_ERR_BAD_CLIENT_MAGIC.rawValue) { state.count { $0.refusedWithoutPreface += 1 } }
                    finish()
                    return
                }
                if misbehaviour == .pingFlood { flood(pings: 100) }
                produce()
                reads += 1
                // Level-triggered epoll brings us back for bytes still in the socket, but
                // not for bytes OpenSSL already holds: drain those first.
                if reads >= Self.readBudget && !stream.hasBufferedBytes { break reading }
            case .wouldBlock(let progress):
                readWantsWrite = progress == .wantWrite
                break reading
            case .closed:
                clientWentAway()
                return
            }
        }
        sendAndWatch()
    }

    /// Writes what is due, then decides what to wait for, or closes once the session is done
    /// (after a GOAWAY either way, with no stream left).
    private func sendAndWatch() {
        guard phase == .established else { return }
        if isMute { return watch(.read) }
        produce()
        guard flush() else { return }
        if nghttp2_session_want_read(session) == 0 && nghttp2_session_want_write(session) == 0 && heldOutput.isEmpty {
            finish()
            return
        }
        var interest: IOEvents = []
        if !isStalled && output.count < Self.outputLimit { interest.insert(.read) }
        if !output.isEmpty || readWantsWrite { interest.insert(.write) }
        watch(interest)
    }

    /// Moves nghttp2's pending frames into `output`, writing whenever a batch is full.
    private func produce() {
        while output.count < Self.outputLimit {
            var data: UnsafePointer<UInt8>?
            let length = nghttp2_session_mem_send(session, &data)
            guard length > 0, let data else { break }
            let frame = UnsafeRawBufferPointer(start: data, count: length)
            let isHeld = isHeldAnswerFrame(frame)
            closedWithFramesHeld.removeAll(keepingCapacity: true)
            if isHeld {
                heldOutput.holdFrame(frame)
                continue
            }
            output.append(frame)
            if output.count >= Self.writeBatch && !flush() { break }
        }
    }

    /// Publishes the counts, then writes `output` until it is empty (true) or the socket is
    /// full (false; write interest is armed) or failed (false; closed).
    @discardableResult
    private func flush() -> Bool {
        publish()
        while !output.isEmpty {
            let result: TLSWriteResult
            do { result = try stream.write(output.readable) } catch {
                clientWentAway()
                return false
            }
            switch result {
            case .wrote(let n): output.consume(n)
            case .wouldBlock:
                watch(isStalled ? .write : [.read, .write])
                return false
            }
        }
        return true
    }

    /// Ends the connection in order: what is due, TLS close_notify, FIN.
    private func finish() {
        publish()
        respondAndClose(output.takeAll())
    }

    /// The drop rule: the answers already sent, then a FIN without GOAWAY or close_notify;
    /// those still held are never sent.
    private func drop() {
        produce()
        tally.unsentAnswers += discardHeldAnswers()
        publish()
        state.count { $0.droppedConnections += 1 }
        respondAndClose(output.takeAll(), closeNotify: false)
    }

    /// How many answers are still held, of both kinds (they are never sent now); forgets
    /// those held as bytes.
    private func discardHeldAnswers() -> Int {
        slots.count(where: { $0.inUse && $0.isHeld }) + heldOutput.discard()
    }

    /// The client closed (or its stream failed): its open streams are abandoned.
    private func clientWentAway() {
        tally.resetStreams += slots.count(where: { $0.inUse && !$0.judged })
        tally.unsentAnswers += discardHeldAnswers()
        publish()
        close()
    }

    private func publish() {
        if tally.streams != 0 { counters.streams.wrappingAdd(tally.streams, ordering: .relaxed) }
        if tally.requests != 0 { counters.requests.wrappingAdd(tally.requests, ordering: .relaxed) }
        if tally.accepted != 0 { counters.accepted.wrappingAdd(tally.accepted, ordering: .relaxed) }
        if tally.resetStreams != 0 { counters.resetStreams.wrappingAdd(tally.resetStreams, ordering: .relaxed) }
        if tally.rejected {
            counters.rejections.withLock { counts in
                for index in counts.indices { counts[index] += tally.rejections[index] }
            }
            for index in tally.rejections.indices { tally.rejections[index] = 0 }
            tally.rejected = false
        }
        if !tally.digests.isEmpty {
            state.accepted.insert(tally.digests)
            tally.digests.removeAll(keepingCapacity: true)
        }
        if !tally.recorded.isEmpty {
            state.record(tally.recorded)
            tally.recorded.removeAll(keepingCapacity: true)
        }
        if tally.unsentAnswers != 0 {
            state.count { [unsent = tally.unsentAnswers] in $0.unsentAnswers += unsent }
            tally.unsentAnswers = 0
        }
        if !tally.broadcasts.isEmpty { state.countBroadcasts(&tally.broadcasts) }
        tally.streams = 0
        tally.requests = 0
        tally.accepted = 0
        tally.resetStreams = 0
    }

    // MARK: The plan's timing rules

    private func stall() {
        isStalled = true
        state.count { $0.flowControlStalls += 1 }
        loop.schedule(after: state.plan.stallDuration) { [weak self] in
            guard let self else { return }
            isStalled = false
            guard phase == .established else { return }
            // OpenSSL may hold decrypted bytes that epoll cannot announce.
            readAvailable()
        }
    }

    private func goAway() {
        isGoingAway = true
        state.count { $0.goaways += 1 }
        let reason = APNsReason.shutdown.body
        goAwayLastStreamID = nghttp2_session_get_last_proc_stream_id(session)
        nghttp2_submit_goaway(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), goAwayLastStreamID,
                              NGHTTP2_NO_ERROR.rawValue, reason, reason.count)
    }

    // MARK: Misbehaviours

    private func flood(pings count: Int) {
        for ping in 0..<count {
            withUnsafeBytes(of: UInt64(ping).bigEndian) { opaque in
                _ = nghttp2_submit_ping(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), opaque.baseAddress!.assumingMemoryBound(to: UInt8.self))
            }
        }
    }

    /// The answer to `streamID` as a header block that never ends, written past nghttp2
    /// (which keeps the stream open, waiting for a response that is never submitted).
    private func floodContinuations(_ streamID: Int32) {
        flooded = true
        produce()
        let frameLength = 16384
        func header(type: UInt8) -> [UInt8] {
            [UInt8(frameLength >> 16), UInt8(frameLength >> 8 & 0xFF), UInt8(frameLength & 0xFF), type, 0,
             UInt8(streamID >> 24 & 0x7F), UInt8(streamID >> 16 & 0xFF), UInt8(streamID >> 8 & 0xFF), UInt8(streamID & 0xFF)]
        }
        // A literal header field without indexing, its name and value 0x7F-prefixed lengths:
        // any bytes will do, the client must give up before it decodes them.
        let fragment = [UInt8](repeating: 0x00, count: frameLength)
        for frame in 0..<(4 << 20) / frameLength {
            (header(type: frame == 0 ? 0x1 : 0x9) + fragment).withUnsafeBytes { output.append($0) }
        }
    }

    // MARK: nghttp2 callbacks: a request goes to its port's path

    fileprivate func requestBegan(streamID: Int32) {
        if role == .push { beginRequest(streamID: streamID) } else { beginChannelRequest(streamID: streamID) }
    }

    fileprivate func requestHeader(streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        if role == .push {
            header(streamID: streamID, name: name, value: value)
        } else {
            channelHeader(streamID: streamID, name: name, value: value)
        }
    }

    fileprivate func requestData(streamID: Int32, chunk: UnsafeRawBufferPointer) {
        if role == .push { data(streamID: streamID, chunk: chunk) } else { channelData(streamID: streamID, chunk: chunk) }
    }

    fileprivate func requestEnded(streamID: Int32) {
        if role == .push { requestComplete(streamID: streamID) } else { channelRequestComplete(streamID: streamID) }
    }

    private func beginRequest(streamID: Int32) {
        guard !isDropping else { return }
        // Streams whose answers wait as bytes are closed in nghttp2 but open for the client:
        // nghttp2 cannot count them against the limit, so they are counted here.
        if heldOutput.count > 0 {
            let limit = streamLimitRaised ? Int(state.maximumConcurrentStreams) : 1
            let open = slots.count - freeSlots.count - openWithFramesHeld
            if open + heldOutput.count >= limit {
                nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_REFUSED_STREAM.rawValue)
                return
            }
        }
        let index: Int
        let slot = Slot(streamID: streamID)
        if let free = freeSlots.popLast() {
            index = Int(free)
            slots[index] = slot
        } else {
            index = slots.count
            slots.append(slot)
        }
        if state.recordRequests {
            if recordings.count <= index { recordings.append(contentsOf: repeatElement(nil, count: index + 1 - recordings.count)) }
            recordings[index] = H2RecordedRequest(token: "")
        }
        nghttp2_session_set_stream_user_data(session, streamID, UnsafeMutableRawPointer(bitPattern: index + 1))
        tally.streams += 1
    }

    private func header(streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        guard let index = slotIndex(streamID), let header = APNsRequestHeader(name: name) else { return }
        if header == .authorization, let verifier = state.verifier {
            slots[index].validation.authorization = authorize(value, verifier)
            if state.recordRequests { recordings[index]?.team = lastTeam }
        }
        slots[index].validation.header(header, value, allowedTopics: state.allowedTopics)
        if state.recordRequests { recordings[index]?.take(header, value) }
        switch header {
        case .path:
            if slots[index].validation.isBroadcast {
                // The registry's number for the bundle id, so that the channel's lookup at
                // the end compares numbers (the path's bytes are gone by then).
                if let bundleID = RequestValidation.broadcastBundleID(value) {
                    slots[index].validation.bundle = bundleNumber(bundleID)
                }
            } else if state.recordAccepted, let token = slots[index].validation.token {
                token.withUnsafeBytes { slots[index].digest.add($0) }
            }
        case .channelId:
            // A broadcast's digest: the channel id as sent, then the payload.
            if state.recordAccepted && slots[index].validation.isBroadcast { slots[index].digest.add(value) }
        default:
            break
        }
    }

    private func data(streamID: Int32, chunk: UnsafeRawBufferPointer) {
        guard let index = slotIndex(streamID) else { return }
        slots[index].validation.body(chunk)
        if state.recordAccepted { slots[index].digest.add(chunk) }
    }

    /// The request's last frame arrived: judge it, then answer it or hold the answer.
    private func requestComplete(streamID: Int32) {
        guard !isDropping, let index = slotIndex(streamID), !slots[index].judged else { return }
        // nghttp2 goes on reading the streams that came after our GOAWAY was queued; the
        // GOAWAY told the client they were not processed, so they must not be.
        guard streamID <= goAwayLastStreamID else {
            nghttp2_submit_rst_stream(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), streamID, NGHTTP2_REFUSED_STREAM.rawValue)
            return
        }
        slots[index].judged = true
        tally.requests += 1
        if slots[index].validation.isBroadcast { lookUpChannel(index) }
        var decision = PlanDecision(reason: slots[index].validation.verdict(tokenAuthentication: asksForTokens))
        let isValid = decision.reason == nil
        if isValid {
            validRequests += 1
            decision = state.decision(onConnection: validRequests, token: slots[index].validation.token)
            if decision.drop {
                isDropping = true
                return
            }
        }
        switch misbehaviour {
        case .endlessAnswer?:
            slots[index].isEndless = true
            submitResponse(streamID, status: "200", slots[index].validation.messageID, hasBody: true)
            return
        case .continuationFlood?:
            if !flooded { floodContinuations(streamID) }
            return
        default:
            break
        }
        decide(streamID, index, decision.reason)
        if decision.goAway && !isGoingAway { goAway() }
        if isValid, let every = state.plan.stallEvery, validRequests % every == 0 { stall() }
    }

    /// The registry's number for `bundleID`, remembered for the connection's next
    /// broadcasts once it has one (a bundle id keeps its number for good).
    private func bundleNumber(_ bundleID: UnsafeRawBufferPointer) -> Int32 {
        if let known = lastBundle, !bundleID.isEmpty, known.bytes.count == bundleID.count,
           known.bytes.withUnsafeBytes({ memcmp($0.baseAddress!, bundleID.baseAddress!, bundleID.count) == 0 }) {
            return known.number
        }
        let number = state.channels.bundleNumber(bundleID)
        if number >= 0 { lastBundle = (Array(bundleID), number) }
        return number
    }

    /// Tells a broadcast's validation whether its channel is registered, and its policy.
    private func lookUpChannel(_ index: Int) {
        guard state.broadcastsEnabled else {
            slots[index].validation.registration = .featureNotEnabled
            return
        }
        guard case .id(let id)? = slots[index].validation.channel else { return }
        let channel = state.channels.lookUp(id, bundle: slots[index].validation.bundle)
        let registration: RequestValidation.Registration = switch channel?.policy {
        case nil: .notRegistered
        case .noStorage?: .noStorage
        case .mostRecent?: .mostRecent
        }
        slots[index].validation.registration = registration
        slots[index].channel = channel?.number ?? -1
    }

    /// The client sent GOAWAY: with `silentAfterClientGoAway`, nothing more is answered.
    fileprivate func clientSaidGoAway() {
        guard role == .push, state.plan.silentAfterClientGoAway, !isSilent else { return }
        isSilent = true
        tally.unsentAnswers += discardHeldAnswers()
        // Counted now: their streams' ends must not count them again.
        for index in slots.indices where slots[index].isHeld { slots[index].isHeld = false }
    }

    /// The client reset the stream. An answer held as bytes is found in `heldOutput`: its
    /// stream may be closed in nghttp2 already (closed as its frames were made).
    fileprivate func streamReset(streamID: Int32) {
        if heldOutput.reset(streamID: streamID) { tally.unsentAnswers += 1 }
    }

    fileprivate func streamClosed(streamID: Int32) {
        guard let index = slotIndex(streamID) else { return }
        if !slots[index].judged && !isDropping { tally.resetStreams += 1 }
        // Reset by the client while its answer was held: the answer has nowhere to go.
        if slots[index].isHeld { tally.unsentAnswers += 1 }
        if slots[index].framesHeld {
            openWithFramesHeld -= 1
            closedWithFramesHeld.append(streamID)
        }
        slots[index].isHeld = false
        slots[index].inUse = false
        freeSlots.append(Int32(index))
    }

    /// Writes the error body of the stream's answer into nghttp2's buffer.
    fileprivate func body(streamID: Int32, into destination: UnsafeMutableRawBufferPointer, flags: UnsafeMutablePointer<UInt32>) -> Int {
        if let index = slotIndex(streamID), slots[index].isEndless {
            // Some bytes once, then the body is deferred for good: the stream never ends.
            guard slots[index].bodyOffset == 0, destination.count >= 8 else { return Int(NGHTTP2_ERR_DEFERRED.rawValue) }
            slots[index].bodyOffset = 8
            destination.copyBytes(from: Array(#"{"aps":"#.utf8))
            return 8
        }
        guard let index = slotIndex(streamID), let reason = slots[index].answer else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        return withUnsafeTemporaryAllocation(byteCount: ResponseBody.maximumLength, alignment: 1) { scratch in
            let length = ResponseBody.write(reason, timestamp: slots[index].timestamp, into: scratch)
            let offset = slots[index].bodyOffset
            let count = min(length - offset, destination.count)
            destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: scratch[offset..<offset + count]))
            slots[index].bodyOffset += count
            if slots[index].bodyOffset == length { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
            return count
        }
    }

    // MARK: Answers

    private func slotIndex(_ streamID: Int32) -> Int? {
        // Stream ids are never reused: a slot still in use with this id is the stream's.
        let last = lastSlot
        if last.streamID == streamID, slots[last.index].inUse, slots[last.index].streamID == streamID { return last.index }
        guard let pointer = nghttp2_session_get_stream_user_data(session, streamID) else { return nil }
        let index = Int(bitPattern: pointer) - 1
        lastSlot = (streamID, index)
        return index
    }

    /// Settles the stream's answer (nil: 200), and sends it now or holds it for the plan's
    /// delay.
    private func decide(_ streamID: Int32, _ index: Int, _ reason: APNsReason?) {
        guard !isSilent else {
            tally.unsentAnswers += 1
            return
        }
        slots[index].answer = reason
        // A 410 says since when the token is gone: since it was judged.
        if reason?.status == 410 { slots[index].timestamp = now * 1000 }
        let holdTime = state.holdsAnswers ? state.holdTime(isError: reason != nil, connection: ordinal, stream: streamID) : 0
        guard holdTime > 0 else {
            answer(streamID, index)
            return
        }
        let due = Instant(nanoseconds: readAt.nanoseconds &+ holdTime)
        if heldOutput.keepsOrder(due) && !state.recordRequests {
            heldOutput.hold(HeldOutput.Answer(due: due, digest: slots[index].digest.value, streamID: streamID, reason: reason,
                                              channel: slots[index].channel))
            slots[index].framesHeld = true
            openWithFramesHeld += 1
            submitAnswer(streamID, index)
        } else {
            slots[index].isHeld = true
            held.insert(due: due, streamID: streamID, slot: Int32(index))
        }
        // Answers held for a fixed time fall due after the one the timer waits for.
        if releaseTimer.map({ due < $0.due }) ?? true { armReleaseTimer() }
    }

    /// Counts the stream's answer and submits it.
    private func answer(_ streamID: Int32, _ index: Int) {
        slots[index].isHeld = false
        if let reason = slots[index].answer {
            count(rejection: reason)
        } else {
            count(acceptedWithDigest: slots[index].digest.value)
            if slots[index].channel >= 0 { tally.broadcasts.add(slots[index].channel) }
            if state.recordRequests, var recorded = recordings[index] {
                recorded.token = slots[index].validation.token?.hex ?? ""
                tally.recorded.append(recorded)
            }
        }
        submitAnswer(streamID, index)
    }

    private func count(rejection reason: APNsReason) {
        tally.rejections[Int(reason.rawValue)] += 1
        tally.rejected = true
    }

    private func count(acceptedWithDigest digest: UInt64) {
        tally.accepted += 1
        if state.recordAccepted { tally.digests.append(digest) }
    }

    /// Submits the stream's answer, counted or to be counted.
    private func submitAnswer(_ streamID: Int32, _ index: Int) {
        if slots[index].validation.isBroadcast {
            let requestID = slots[index].validation.requestID
            if let reason = slots[index].answer {
                submitResponse(streamID, status: ResponseBody.statusText(reason.status), requestID, hasBody: true, broadcast: true)
            } else {
                submitResponse(streamID, status: "200", requestID, hasBody: false, broadcast: true)
            }
            return
        }
        let messageID = slots[index].validation.messageID
        if let reason = slots[index].answer {
            submitResponse(streamID, status: ResponseBody.statusText(reason.status), messageID, hasBody: true)
        } else {
            submitResponse(streamID, status: "200", messageID, hasBody: false)
        }
    }

    /// Whether `frame`, as nghttp2 made it, is part of an answer held as bytes: a HEADERS,
    /// CONTINUATION or DATA frame of a stream whose answer is. nghttp2 hands out one whole
    /// frame at a time; anything else goes out as it comes.
    private func isHeldAnswerFrame(_ frame: UnsafeRawBufferPointer) -> Bool {
        guard !heldOutput.isEmpty, frame.count >= 9 else { return false }
        let length = Int(frame[0]) << 16 | Int(frame[1]) << 8 | Int(frame[2])
        let type = frame[3]
        guard frame.count == 9 + length, type == 0 || type == 1 || type == 9 else { return false }
        let streamID = Int32(bitPattern: UInt32(frame[5] & 0x7F) << 24 | UInt32(frame[6]) << 16 | UInt32(frame[7]) << 8 | UInt32(frame[8]))
        guard let index = slotIndex(streamID) else { return closedWithFramesHeld.contains(streamID) }
        return slots[index].framesHeld
    }

    // MARK: Held answers

    /// Arms the timer for the earliest held answer, unless it is armed for that already.
    private func armReleaseTimer() {
        guard let earliest = earlier(held.earliest, heldOutput.earliest) else { return }
        if let releaseTimer {
            guard earliest < releaseTimer.due else { return }
            loop.cancel(releaseTimer.id)
        }
        releaseTimer = (loop.schedule(at: earliest, releaseAction), earliest)
    }

    /// Sends the answers whose time has come, then waits for the next.
    private func releaseDueAnswers() {
        releaseTimer = nil
        guard phase == .established, !isDropping, !isSilent else { return }
        let now = loop.now
        while let entry = held.popDue(by: now) {
            let index = Int(entry.slot)
            // The stream may have been reset meanwhile, and its slot taken by another.
            guard slots[index].inUse, slots[index].isHeld, slots[index].streamID == entry.streamID else { continue }
            answer(entry.streamID, index)
        }
        while let due = heldOutput.popDueAnswer(by: now) {
            // A reset stream's answer was counted as unsent when the client reset it.
            guard !due.isReset else { continue }
            if let reason = due.reason {
                count(rejection: reason)
            } else {
                count(acceptedWithDigest: due.digest)
                if due.channel >= 0 { tally.broadcasts.add(due.channel) }
            }
        }
        heldOutput.releaseBytes(by: now, into: &output)
        armReleaseTimer()
        sendAndWatch()
    }

    /// Submits the response headers (`:status`, `apns-id`, and `apns-unique-id` for a
    /// development 200) and, for errors, the JSON body. A broadcast's answer names it by
    /// `apns-request-id` instead, and a 200 always has `apns-unique-id`, as Apple's does.
    private func submitResponse(_ streamID: Int32, status: StaticString, _ requestID: MessageID?, hasBody: Bool,
                                broadcast: Bool = false) {
        let messageID = requestID ?? madeUpID(streamID)
        let key = UInt64(truncatingIfNeeded: ordinal) << 32 | UInt64(UInt32(bitPattern: streamID))
        let seed = state.plan.seed
        let uniqueID: MessageID? = (state.development || broadcast) && !hasBody
            ? MessageID(random: SplitMix64.draw(seed: seed ^ 0xA5E1, key: key), SplitMix64.draw(seed: seed ^ 0x7E57, key: key))
            : nil
        withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: 3) { headers in
            messageID.withText { id in
                (uniqueID ?? messageID).withText { unique in
                    headers[0] = .constant(":status", status)
                    headers[1] = .unique(broadcast ? APNsRequestHeader.requestId.name : APNsRequestHeader.responseID, id)
                    headers[2] = .unique(APNsRequestHeader.responseUniqueID, unique)
                    let count = uniqueID == nil ? 2 : 3
                    if hasBody {
                        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil),
                                                             read_callback: SessionCallbacks.readBody)
                        nghttp2_submit_response(session, streamID, headers.baseAddress, count, &provider)
                    } else {
                        nghttp2_submit_response(session, streamID, headers.baseAddress, count, nil)
                    }
                }
            }
        }
    }

    /// The id an answer carries when its request sent none: seeded by the plan, the
    /// connection and the stream, so the same run makes the same ids.
    private func madeUpID(_ streamID: Int32) -> MessageID {
        let key = UInt64(truncatingIfNeeded: ordinal) << 32 | UInt64(UInt32(bitPattern: streamID))
        let seed = state.plan.seed
        return MessageID(random: SplitMix64.draw(seed: seed, key: key), SplitMix64.draw(seed: seed ^ 0x5A17, key: key))
    }

    // MARK: Channel management (the management port)

    private func beginChannelRequest(streamID: Int32) {
        beginRequest(streamID: streamID)
        guard let index = slotIndex(streamID) else { return }
        if channelRequests.count <= index {
            channelRequests.append(contentsOf: repeatElement(ChannelRequest(), count: index + 1 - channelRequests.count))
            channelResponses.append(contentsOf: repeatElement(nil, count: index + 1 - channelResponses.count))
        }
        channelRequests[index] = ChannelRequest()
        channelResponses[index] = nil
    }

    private func channelHeader(streamID: Int32, name: UnsafeRawBufferPointer, value: UnsafeRawBufferPointer) {
        guard let index = slotIndex(streamID), let header = APNsRequestHeader(name: name) else { return }
        if header == .authorization, let verifier = state.verifier {
            channelRequests[index].authorization = authorize(value, verifier)
        }
        channelRequests[index].header(header, value)
    }

    private func channelData(streamID: Int32, chunk: UnsafeRawBufferPointer) {
        guard let index = slotIndex(streamID) else { return }
        channelRequests[index].body(chunk)
    }

    /// A management request is complete: act on it and answer at once (the failure plan
    /// is the push port's), counting what it did.
    private func channelRequestComplete(streamID: Int32) {
        guard let index = slotIndex(streamID), !slots[index].judged else { return }
        slots[index].judged = true
        let response = state.nextManagementFailure().map { ChannelResponse.refused($0) }
            ?? channelRequests[index].respond(registry: state.channels, tokenAuthentication: asksForTokens,
                                              allowedTopics: state.allowedTopics, broadcastsEnabled: state.broadcastsEnabled)
        channelResponses[index] = response
        state.count { statistics in
            if let operation = response.operation { statistics.channelOperations[operation.rawValue, default: 0] += 1 }
            if let reason = response.reason { statistics.rejectedChannelOperations[reason.name, default: 0] += 1 }
        }
        let requestID = channelRequests[index].requestID ?? madeUpID(streamID)
        var channelID = response.channelID ?? ""
        requestID.withText { id in
            channelID.withUTF8 { channel in
                withUnsafeTemporaryAllocation(of: nghttp2_nv.self, capacity: 4) { headers in
                    headers[0] = .constant(":status", ResponseBody.statusText(response.status))
                    headers[1] = .unique(APNsRequestHeader.requestId.name, id)
                    var count = 2
                    if response.channelID != nil {
                        headers[count] = .unique(APNsRequestHeader.channelId.name, UnsafeRawBufferPointer(channel))
                        count += 1
                    }
                    if response.body.isEmpty {
                        nghttp2_submit_response(session, streamID, headers.baseAddress, count, nil)
                    } else {
                        headers[count] = .constant("content-type", "application/json")
                        count += 1
                        var provider = nghttp2_data_provider(source: nghttp2_data_source(ptr: nil),
                                                             read_callback: SessionCallbacks.readChannelBody)
                        nghttp2_submit_response(session, streamID, headers.baseAddress, count, &provider)
                    }
                }
            }
        }
    }

    /// Writes the management answer's body into nghttp2's buffer.
    fileprivate func channelBody(streamID: Int32, into destination: UnsafeMutableRawBufferPointer,
                                 flags: UnsafeMutablePointer<UInt32>) -> Int {
        guard let index = slotIndex(streamID), let body = channelResponses[index]?.body else {
            flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue
            return 0
        }
        let offset = slots[index].bodyOffset
        let count = min(body.count - offset, destination.count)
        body.withUnsafeBytes { destination.copyMemory(from: UnsafeRawBufferPointer(rebasing: $0[offset..<offset + count])) }
        slots[index].bodyOffset += count
        if slots[index].bodyOffset == body.count { flags.pointee |= NGHTTP2_DATA_FLAG_EOF.rawValue }
        return count
    }

    /// `authorization` → what the token is worth, from the cache when it is the last one
    /// seen on this connection. A first valid token lifts the stream limit.
    private func authorize(_ value: UnsafeRawBufferPointer, _ verifier: ProviderTokenVerifiers) -> RequestValidation.Authorization {
        let scheme: StaticString = "bearer "
        let schemeLength = scheme.utf8CodeUnitCount
        guard value.count > schemeLength,
              (0..<schemeLength).allSatisfy({ value[$0] | 0x20 == scheme.utf8Start[$0] }) else { return .invalid }
        let token = UnsafeRawBufferPointer(rebasing: value[schemeLength...])
        // The same token request after request: a byte compare (the generic one costs more
        // than the rest of the request's checks).
        let isLastToken = lastToken.count == token.count
            && lastToken.withUnsafeBytes { memcmp($0.baseAddress!, token.baseAddress!, token.count) == 0 }
        if !isLastToken {
            lastToken = Array(token)
            let (outcome, team) = verifier.verify(token, now: now)
            lastTeam = nil
            switch outcome {
            case .valid(let issuedAt):
                lastIssuedAt = issuedAt
                lastTeam = team
                lastAuthorization = state.adoptToken(team: team ?? "", issuedAt: issuedAt) ? .valid : .tooManyUpdates
            case .invalid: lastAuthorization = .invalid
            case .expired: lastAuthorization = .expired
            }
        }
        if lastAuthorization == .valid && now - lastIssuedAt > ProviderToken.lifetime {
            lastAuthorization = .expired
        }
        if lastAuthorization == .valid && !streamLimitRaised && misbehaviour != .zeroStreams {
            streamLimitRaised = true
            var limit = nghttp2_settings_entry(settings_id: Int32(NGHTTP2_SETTINGS_MAX_CONCURRENT_STREAMS.rawValue),
                                               value: state.maximumConcurrentStreams)
            nghttp2_submit_settings(session, UInt8(NGHTTP2_FLAG_NONE.rawValue), &limit, 1)
        }
        return lastAuthorization
    }
}

// MARK: - Response bodies

/// The JSON bodies and status texts of answers, made without Foundation.
enum ResponseBody {
    static let maximumLength = 96
    private static let bodies: [[UInt8]] = APNsReason.allCases.map(\.body)

    /// `{"reason":"…"}`, or for 410 `{"reason":"Unregistered","timestamp":MS}`; returns the length.
    static func write(_ reason: APNsReason, timestamp: Int64, into destination: UnsafeMutableRawBufferPointer) -> Int {
        let body = bodies[Int(reason.rawValue)]
        guard reason.status == 410 else {
            destination.copyBytes(from: body)
            return body.count
        }
        var length = body.count - 1  // without the closing brace
        destination.copyBytes(from: body[..<length])
        for byte in #","timestamp":"#.utf8 {
            destination[length] = byte
            length += 1
        }
        let digits = withUnsafeTemporaryAllocation(of: UInt8.self, capacity: 20) { scratch in
            var value = max(timestamp, 0)
            var count = 0
            repeat {
                scratch[count] = UInt8(ascii: "0") + UInt8(value % 10)
                value /= 10
                count += 1
            } while value > 0
            for offset in 0..<count {
                destination[length + offset] = scratch[count - 1 - offset]
            }
            return count
        }
        length += digits
        destination[length] = UInt8(ascii: "}")
        return length + 1
    }

    /// The `:status` text for a status code the mock sends.
    static func statusText(_ status: Int) -> StaticString {
        switch status {
        case 200: "200"
        case 201: "201"
        case 204: "204"
        case 400: "400"
        case 403: "403"
        case 404: "404"
        case 405: "405"
        case 410: "410"
        case 413: "413"
        case 429: "429"
        case 500: "500"
        default: "503"
        }
    }
}

extension nghttp2_nv {
    /// A header whose name and value are static: nghttp2 need not copy them.
    static func constant(_ name: StaticString, _ value: StaticString) -> nghttp2_nv {
        nghttp2_nv(name: UnsafeMutablePointer(mutating: name.utf8Start), value: UnsafeMutablePointer(mutating: value.utf8Start),
                   namelen: name.utf8CodeUnitCount, valuelen: value.utf8CodeUnitCount,
                   flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_COPY_VALUE.rawValue))
    }

    /// A header with a static name and a value that is new each time (an identifier):
    /// nghttp2 copies it and keeps it out of the HPACK dynamic table, where it would only
    /// push out entries that repeat.
    static func unique(_ name: StaticString, _ value: UnsafeRawBufferPointer) -> nghttp2_nv {
        nghttp2_nv(name: UnsafeMutablePointer(mutating: name.utf8Start),
                   value: UnsafeMutablePointer(mutating: value.baseAddress!.assumingMemoryBound(to: UInt8.self)),
                   namelen: name.utf8CodeUnitCount, valuelen: value.count,
                   flags: UInt8(NGHTTP2_NV_FLAG_NO_COPY_NAME.rawValue | NGHTTP2_NV_FLAG_NO_INDEX.rawValue))
    }
}

// MARK: - Callbacks

/// nghttp2's callback table, built once. Each callback finds its `H2Connection` in the
/// session's user data; the connection hands a request to the path of its port.
///
/// Thread rule: any thread; the table is filled in `init` and only read after (nghttp2 copies it into each session).
final class SessionCallbacks: @unchecked Sendable {
    static let shared = SessionCallbacks()
    let callbacks: OpaquePointer

    private init() {
        var table: OpaquePointer?
        precondition(nghttp2_session_callbacks_new(&table) == 0, "nghttp2: out of memory")
        callbacks = table!
        nghttp2_session_callbacks_set_on_begin_headers_callback(callbacks) { _, frame, user in
            if let frame, SessionCallbacks.isRequest(frame) {
                connection(user) { $0.requestBegan(streamID: frame.pointee.hd.stream_id) }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_header_callback(callbacks) { _, frame, name, nameLength, value, valueLength, _, user in
            if let frame, SessionCallbacks.isRequest(frame) {
                connection(user) {
                    $0.requestHeader(streamID: frame.pointee.hd.stream_id, name: UnsafeRawBufferPointer(start: name, count: nameLength),
                                     value: UnsafeRawBufferPointer(start: value, count: valueLength))
                }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_data_chunk_recv_callback(callbacks) { _, _, streamID, data, length, user in
            connection(user) { $0.requestData(streamID: streamID, chunk: UnsafeRawBufferPointer(start: data, count: length)) }
            return 0
        }
        nghttp2_session_callbacks_set_on_frame_recv_callback(callbacks) { _, frame, user in
            guard let frame else { return 0 }
            let header = frame.pointee.hd
            let endsStream = header.flags & UInt8(NGHTTP2_FLAG_END_STREAM.rawValue) != 0
            if endsStream && (header.type == UInt8(NGHTTP2_HEADERS.rawValue) || header.type == UInt8(NGHTTP2_DATA.rawValue)) {
                connection(user) { $0.requestEnded(streamID: header.stream_id) }
            } else if header.type == UInt8(NGHTTP2_RST_STREAM.rawValue) {
                // Called for a stream nghttp2 has closed too (not for an idle one).
                connection(user) { $0.streamReset(streamID: header.stream_id) }
            } else if header.type == UInt8(NGHTTP2_GOAWAY.rawValue) {
                connection(user) { $0.clientSaidGoAway() }
            }
            return 0
        }
        nghttp2_session_callbacks_set_on_stream_close_callback(callbacks) { _, streamID, _, user in
            connection(user) { $0.streamClosed(streamID: streamID) }
            return 0
        }
    }

    /// The error body's source (see `H2Connection.body`).
    static let readBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, user in
        connection(user) {
            $0.body(streamID: streamID, into: UnsafeMutableRawBufferPointer(start: buffer, count: length), flags: flags!)
        }
    }

    /// A management answer's body source (see `H2Connection.channelBody`).
    static let readChannelBody: nghttp2_data_source_read_callback = { _, streamID, buffer, length, flags, _, user in
        connection(user) {
            $0.channelBody(streamID: streamID, into: UnsafeMutableRawBufferPointer(start: buffer, count: length), flags: flags!)
        }
    }

    fileprivate static func isRequest(_ frame: UnsafePointer<nghttp2_frame>) -> Bool {
        frame.pointee.hd.type == UInt8(NGHTTP2_HEADERS.rawValue) && frame.pointee.headers.cat == NGHTTP2_HCAT_REQUEST
    }
}

/// The connection a session's user data points to. The session belongs to the connection,
/// so the connection outlives every callback: no retain is needed for the call.
private func connection<R>(_ user: UnsafeMutableRawPointer?, _ body: (H2Connection) -> R) -> R {
    Unmanaged<H2Connection>.fromOpaque(user!)._withUnsafeGuaranteedRef(body)
}
