import SalvoIO
import SalvoWire

/// Apple's HTTP/2 provider API as a connection's transport, on its shard's thread: turns
/// staged request records into streams (through the `ClientSession` of its open
/// `SessionLink`), settles each notification by its stream's answer (`AnswerPolicy`), and
/// sends again, one at a time, what must be tried again (refused streams, 429, 500/503,
/// drops, an expired provider token).
///
/// In flight per connection: at most the gateway's SETTINGS_MAX_CONCURRENT_STREAMS (one
/// until APNs has seen a valid provider token) and `HTTP2Options.maximumConcurrentStreams`.
/// A connection that must go (GOAWAY, a 503) retires: it opens no new streams, its open
/// ones are still answered, and a new link takes the connection's work meanwhile. The
/// sockets themselves (connect, close, stalls of the TCP stream, backoff, giving up) and
/// the effects of settling are the `Connection`'s; how the window settles is `StreamWindow`'s.
final class HTTP2Transport: ConnectionTransport, ClientSessionDelegate {
    // Not counted: the connection owns its transport and sets this (`Connection.init`).
    unowned(unsafe) var connection: Connection<HTTP2Transport>!
    let window: StreamWindow
    private let requests: RequestRecordBuilder
    private let options: HTTP2Options
    private let policy: AnswerPolicy
    /// The link new streams open on.
    private var current: SessionLink?
    /// Retired links, until their streams are answered.
    private var retired: [SessionLink] = []
    // Per-request state (the fields marked below) skips exclusivity checks, which cost the hot
    // path (see the Performance notes article): loop thread only, and no access to these
    // fields spans a call that could come back to them.
    @exclusivity(unchecked) private var headers: RequestHeaders
    /// Bodies the flow-control windows held back, until the session takes them.
    @exclusivity(unchecked) private var keptBodies: BodyArena
    /// Per stream entry (`StreamWindow`'s): its answer's status (0: none yet), and when it
    /// opened (loop nanoseconds).
    @exclusivity(unchecked) private var statuses: [UInt16] = []
    @exclusivity(unchecked) private var openedAt: [UInt64] = []
    /// Error answers' bodies, by stream entry, while their streams are open: the few that
    /// have one.
    private var errorBodies: [Int32: ErrorBody] = [:]
    /// Answers so far: every `SenderInstruments.responseLatencySampling`th is timed.
    @exclusivity(unchecked) private var answered: UInt64 = 0
    /// What the answers of one read decided, applied once the read is done.
    @exclusivity(unchecked) private var settlement = Settlement()
    /// Set inside the session's callbacks, acted on once it has returned (closing a
    /// connection inside a callback would free the session under it).
    @exclusivity(unchecked) private var pending = PendingActions()
    /// When the bytes being read were read (loop nanoseconds): the time of their answers.
    @exclusivity(unchecked) private var readAt: UInt64 = 0
    /// The link whose bytes are being read, while they are.
    private var reading: SessionLink?
    /// A notification read again from its source, encoded as a record.
    private let rebuilt: UnsafeMutableRawBufferPointer
    /// The generation of the provider token in `headers.authorization`.
    private var tokenGeneration: UInt32 = 0
    private var random: SplitMix64
    private lazy var saturation = SaturationReport(shard: shard, streamLimit: options.maximumConcurrentStreams)
    /// Links in a row that stalled without being answered.
    private var stallsInARow = 0
    private var flushTimer: TimerID?
    private var pingTimer: TimerID?
    /// Checks the open link for answers that do not come (`answerCheckFired`).
    private var answerTimer: TimerID?
    private var retryTimer: TimerID?
    private var retryDeadline: UInt64 = .max

    private struct PendingActions {
        /// Why the link read retires (the gateway's GOAWAY, or a 503), if it does.
        var retirement: String?
        var credentialsFault: String?
    }

    /// The most bytes of frames gathered before they are written: a few TLS records.
    private static let outputBatch = 4 * TLSStream.recordPayloadLimit
    /// The session's output: a batch and the request that crosses its end (the largest
    /// payload APNs takes, with its frames' headers), so that a full batch never grows it.
    /// Taken from the shard's `outputBuffers` while frames wait, given back once written.
    private static let outputCapacity = outputBatch + (8 << 10)
    /// How long a partial record may wait for more requests.
    private static let coalescingDelay: Duration = .milliseconds(1)
    /// Reads per readiness event before the loop's other connections get a turn.
    private static let readBudget = 16
    /// Links in a row that stall without an answer before the connection gives up: each costs
    /// `HTTP2Options.answerTimeout`, so a gateway that answers nothing ends a run within a
    /// minute (the connect attempts' limit would take several).
    private static let maximumStalls = 3
    /// How long a request refused for an expired token waits for the token store's renewal.
    private static let storeRenewalWait: Duration = .seconds(1)
    /// Bodies held back by flow control: a connection window's worth and more.
    private static let keptBodiesCapacity = 64 << 10

    /// - Parameter position: the connection's place among the sender's (growth uses the
    ///   first `growth.count`).
    init(configuration: SenderConfiguration, options: HTTP2Options, requests: RequestRecordBuilder, seed: UInt64,
         shard: Shard, lane: Lane, position: Int) {
        self.shard = shard
        self.lane = lane
        sharedStaging = shard.staging!
        growth = shard.growth
        self.position = position
        self.requests = requests
        self.options = options
        policy = AnswerPolicy(throttleRetries: options.throttleRetries, serverErrorRetries: options.serverErrorRetries)
        window = StreamWindow()
        keptBodies = BodyArena(capacity: max(Self.keptBodiesCapacity, 4 * requests.maximumLength))
        rebuilt = .allocate(byteCount: requests.maximumLength, alignment: 16)
        headers = RequestHeaders(authority: configuration.serverName ?? configuration.host, topic: options.topic,
                                 idSeed: configuration.seed ^ UInt64.random(in: 0...UInt64.max))
        random = SplitMix64(seed: seed &+ 0x4832)
    }

    deinit { rebuilt.deallocate() }

    // Its connection's shard and lane, which outlive it, held here rather than read through
    // the connection: unowned(unsafe), these reads on the hot path cost no reference counting.
    private unowned(unsafe) let shard: Shard
    private unowned(unsafe) let lane: Lane
    /// The shard's staging ring, and its growth: read for every wake-up of the shard.
    private unowned(unsafe) let sharedStaging: StagingRing
    private unowned(unsafe) let growth: ConnectionGrowth
    private let position: Int
    private var ledger: DeliveryLedger { shard.ledger }

    /// Whether anything waits that the connection can write now: what is its own (sent one
    /// at a time, or to try again), or, while growth uses it and it has a stream free, what
    /// waits in its shard's ring. (Without that condition every wake-up of the shard would
    /// pump each of its connections, up to 128, most of them with every stream open.)
    var hasWork: Bool {
        lane.staging.hasUnwritten || window.hasRetries
            || (drawsFromShard && hasStreamFree && sharedStaging.hasUnwritten)
    }

    /// Whether notifications wait for this connection's streams, free or not.
    private var hasWaiting: Bool {
        lane.staging.hasUnwritten || window.hasRetries || (sharedStaging.hasUnwritten && drawsFromShard)
    }

    /// Whether growth uses this connection: only then does it take from its shard's ring.
    private var drawsFromShard: Bool { position < growth.count }

    /// Whether a new stream could open now; not connected: whether `pump` would connect.
    private var hasStreamFree: Bool {
        guard let current else { return !connection.hasGivenUp }
        return window.openCount + window.waitingRetryCount < streamLimit(of: current.session)
    }

    // MARK: Connecting

    func handshakeProblem(_ link: Link) -> String? {
        let agreed = link.stream.negotiatedApplicationProtocol
        guard agreed != "h2" else { return nil }
        return "the gateway does not speak HTTP/2: ALPN offered h2, the gateway chose " + (agreed.map { "'\($0)'" } ?? "none")
    }

    func didActivate(_ link: Link) {
        do {
            let output = OutputBuffer(capacity: Self.outputCapacity, sharing: shard.outputBuffers)
            current = SessionLink(link: link, session: try ClientSession(delegate: self, output: output), at: shard.loop.now)
        } catch {
            connection.connectionLost(link, "\(error)", permanent: nil)
            return
        }
        // The network's round trip, beside which growth tells answers the gateway held.
        if let roundTrip = link.stream.socket.smoothedRoundTrip, roundTrip > .zero {
            shard.growth.connected(roundTrip: roundTrip.nanosecondsClamped)
        }
        pending = PendingActions()
        // The per-stream tables, sized once for the stream limit. Here, not at `init`: a
        // sender makes a transport for every connection growth may use, and most never connect.
        window.reserveStreams(options.maximumConcurrentStreams)
        statuses.reserveCapacity(options.maximumConcurrentStreams)
        openedAt.reserveCapacity(options.maximumConcurrentStreams)
        saturation.connectionOpened()
        if pingTimer == nil { pingTimer = shard.loop.schedule(at: shard.loop.now + options.pingInterval, pingAction) }
        // A gateway opens the connection with its SETTINGS: one that has not within
        // `settingsTimeout` of the handshake is as good as a failed connect.
        let timeout = options.settingsTimeout
        shard.loop.schedule(after: timeout) { [unowned self, weak link] in
            guard let link, let current, current.link === link, !current.session.peerSettingsSeen else { return }
            connection.connectionLost(link, "the gateway sent no SETTINGS within \(timeout) of the TLS handshake",
                                      permanent: nil, unanswered: true)
        }
        if answerTimer == nil { answerTimer = shard.loop.schedule(at: shard.loop.now + answerCheckInterval, answerAction) }
    }

    func willClose(_ link: Link, notifying: Bool) {
        if let current, current.link === link {
            saturation.note(false)
            // The window settled the open streams already (the machine's connection-lost),
            // or none were open; what the session still held goes with it, and the arena
            // gets back the bodies that waited for its windows.
            current.session.releaseWaitingBodies()
            self.current = nil
        } else if let place = retired.firstIndex(where: { $0.link === link }) {
            let retiring = retired.remove(at: place)
            if let timer = retiring.retirementTimer { shard.loop.cancel(timer) }
            retiring.session.releaseWaitingBodies()
            // Every stream answered: now the gateway may hear that no more are coming.
            if notifying {
                retiring.session.goAway()
                _ = try? writeOutput(retiring)
            }
        }
        lane.openStreams.store(window.openOnAllConnections, ordering: .relaxed)
    }

    func finishWriting(on link: Link) {}
    func finishWritingIfDone() {}
    func armSettleTimer(again: Bool = false) { armRetryTimer() }

    // MARK: Writing

    /// Opens streams for what waits (retries first, then new notifications from the
    /// staging ring), as many as the stream limit and the kept-body arena allow, and writes
    /// whatever the session has to send (requests, SETTINGS and PING answers, WINDOW_UPDATEs).
    func pump(flush: Bool = false) {
        shard.loop.assertInLoop()
        if let failing = connection.machine.givenUpFailure {
            connection.failUnwritten(failing)
            return
        }
        // Until the first token: a token store that could not give one stops the run.
        if tokenGeneration == 0, let failure = shard.providerTokens?.failure {
            connection.perform(connection.machine.credentialsRefused(failure))
            return
        }
        guard let current, let link = connection.machine.openTransport, link === current.link else {
            if hasWork { connection.perform(connection.machine.start()) }
            return
        }
        let session = current.session
        do {
            while true {
                try openStreams(on: session, flush: flush)
                guard session.wantsToWrite else { break }
                guard try writeOutput(current) else { return }
            }
            connection.setInterest(link, .read)
            saturation.note(hasWaiting && window.openCount + window.waitingRetryCount >= streamLimit(of: session))
            lane.openStreams.store(window.openOnAllConnections, ordering: .relaxed)
            armRetryTimer()
            // A request the session could not send is settled as it found out.
            applySettlement()
        } catch {
            connection.connectionLost(link, "\(error)", permanent: connection.isPermanent(error) ? "\(error)" : nil)
        }
    }

    /// Submits requests while streams and arena space are free and the output holds less
    /// than a batch.
    private func openStreams(on session: ClientSession<HTTP2Transport>, flush: Bool) throws {
        guard refreshProviderToken() else { return }
        var budget = streamLimit(of: session) - window.openCount
        let now = shard.loop.now.nanoseconds
        let bodyRoom = requests.maximumLength
        while budget > 0, session.output.count < Self.outputBatch, keptBodies.hasRoom(for: bodyRoom),
              let retry = window.nextRetry(now: now) {
            try resubmit(retry, at: now, on: session)
            budget -= 1
        }
        // Retries not yet due keep their streams' places: nothing new while they wait.
        budget -= window.waitingRetryCount
        // Notifications sent one at a time first, then, while growth uses this connection,
        // those its shard's producers staged.
        let drawsFromShard = drawsFromShard
        // A partial record waits (at most `coalescingDelay`) for more requests.
        let staged = lane.staging.unwrittenBytes + (drawsFromShard ? sharedStaging.unwrittenBytes : 0)
        if !flush && staged > 0 && staged < TLSStream.recordPayloadLimit && budget > 0 && !session.wantsToWrite {
            if flushTimer == nil { flushTimer = shard.loop.schedule(at: shard.loop.now + Self.coalescingDelay, flushAction) }
            return
        }
        try openStreams(takingFrom: lane.staging, budget: &budget, at: now, on: session)
        if drawsFromShard { try openStreams(takingFrom: sharedStaging, budget: &budget, at: now, on: session) }
    }

    /// Opens streams for new notifications staged in `ring`, while `budget` lasts and the
    /// output, the window and the kept-body arena have room; then wakes producers waiting
    /// for room in it, if it has some (told of a ring still full, they would only go back
    /// to sleep).
    private func openStreams(takingFrom ring: StagingRing, budget: inout Int, at now: UInt64,
                             on session: ClientSession<HTTP2Transport>) throws {
        var opened = 0
        let bodyRoom = requests.maximumLength
        while budget > 0, session.output.count < Self.outputBatch, !window.isFull, keptBodies.hasRoom(for: bodyRoom) {
            guard let slice = ring.nextSlice(limit: .max, frames: 1) else {
                // Producers wake the loop for the next one (unless it came meanwhile).
                if ring.loopWentIdle() { break }
                continue
            }
            // The record is the producer's hand-off: encoded on its thread, read here once,
            // its payload copied into the request's DATA as the session writes it.
            var failure: HTTP2SessionError?
            ring.markWritten(slice.count) { _, origin, _ in
                let wasEmpty = window.isEmpty
                let index = window.recordNew(origin)
                if wasEmpty { connection.publishOldestSequence() }
                do throws(HTTP2SessionError) {
                    try submit(RequestRecord(slice), index: index, source: origin.source, position: origin.position,
                               attempts: Attempts(), at: now, on: session)
                } catch {
                    failure = error
                }
            }
            if let failure { throw failure }
            budget -= 1
            opened += 1
        }
        if opened > 0 && ring.hasRoomForProducers { shard.notifyProgress() }
    }

    /// The most streams this connection may have open: the gateway's limit and ours.
    private func streamLimit(of session: ClientSession<HTTP2Transport>) -> Int {
        min(options.maximumConcurrentStreams, session.remoteStreamLimit)
    }

    /// Reads a notification to try again from its source and submits it.
    private func resubmit(_ retry: Retry, at now: UInt64, on session: ClientSession<HTTP2Transport>) throws {
        var length = 0
        do {
            try shard.replayer.read(retry.run, items: 0..<1, retained: lane.retained) { notification throws(ReplayError) in
                do {
                    length = requests.length(of: notification)
                    try requests.encode(notification, into: rebuilt)
                } catch {
                    throw ReplayError(description: "it no longer encodes: \(error)")
                }
                return false
            }
        } catch {
            var unreadable = Settlement()
            window.failed(retry, .sourceUnreadable, into: &unreadable)
            connection.apply(unreadable, unreadable: "\(error)")
            return
        }
        try submit(RequestRecord(UnsafeRawBufferPointer(rebasing: rebuilt[..<length])), index: retry.index,
                   source: retry.source, position: retry.position, attempts: retry.attempts, at: now, on: session)
    }

    /// Opens a stream for `record`: its header fields, its body. `now` is the loop's time,
    /// read once per batch (reading it per request retained the loop each time).
    private func submit(_ record: RequestRecord, index: UInt64, source: SourceID, position: SourcePosition,
                        attempts: Attempts, at now: UInt64, on session: ClientSession<HTTP2Transport>) throws(HTTP2SessionError) {
        let entry = window.open(OpenStream(index: index, token: record.token,
                                          isBroadcast: record.isBroadcast, attempts: attempts,
                                          tokenGeneration: tokenGeneration))
        prepareEntry(entry)
        statuses[Int(entry)] = 0
        openedAt[Int(entry)] = now
        headers.make(for: record, position: position, source: source)
        try session.submit(headers.fields, body: record.payload, entry: entry)
    }

    /// Writes what `link`'s session produced; false when the socket is full (write interest armed).
    private func writeOutput(_ link: SessionLink) throws -> Bool {
        let session = link.session
        while session.wantsToWrite {
            let chunk = UnsafeRawBufferPointer(rebasing: session.output.prefix(TLSStream.recordPayloadLimit))
            switch try link.link.stream.write(chunk) {
            case .wrote(let count):
                ledger.instruments.writeBatch.record(count)
                session.consumeOutput(count)
                ledger.noteWrite(at: shard.loop.now.nanoseconds)
            case .wouldBlock:
                connection.setInterest(link.link, [.read, .write])
                return false
            }
        }
        return true
    }

    /// Writes what a retired link's session has to say (SETTINGS and PING answers,
    /// WINDOW_UPDATEs): it sends no requests, but must stay a good peer while it is answered.
    private func flushRetired(_ link: SessionLink) {
        do {
            if try writeOutput(link) { connection.setInterest(link.link, .read) }
        } catch {
            connection.perform(connection.machine.retiredConnectionLost(link.link, "\(error)"))
        }
    }

    private func prepareEntry(_ entry: Int32) {
        while statuses.count <= Int(entry) {
            statuses.append(0)
            openedAt.append(0)
        }
    }

    /// With token authentication: the team's current token, refreshed when it is due.
    /// False while there is none yet (a token store is being asked for the first).
    private func refreshProviderToken() -> Bool {
        guard let tokens = shard.providerTokens else { return true }
        // A renewal that could not be signed keeps the current token (good for ten more
        // minutes); the next turn tries again.
        try? tokens.refreshIfDue()
        guard tokens.generation != tokenGeneration, let current = tokens.token() else { return tokenGeneration != 0 }
        headers.authorization = current.authorization
        tokenGeneration = current.generation
        return true
    }

    // MARK: Reading

    func linkEvents(_ events: IOEvents, on link: Link) {
        guard let sessionLink = current?.link === link ? current : retired.first(where: { $0.link === link }) else { return }
        if events.contains(.read) || events.contains(.hangup) { readAnswers(sessionLink) }
        // Retired (maybe by this read) and not yet closed: it still writes its own frames.
        if sessionLink.retirement != nil, retired.contains(where: { $0 === sessionLink }) { flushRetired(sessionLink) }
        pump()
    }

    /// Feeds what the gateway sent on `link` to its session and settles its answers.
    private func readAnswers(_ link: SessionLink) {
        let stream = link.link.stream
        let session = link.session
        let buffer = shard.readBuffer
        let answeredBefore = answered
        var reads = 0
        var ended: String?
        var protocolError = false
        reading: while true {
            let result: TLSReadResult
            do {
                result = try stream.read(into: buffer)
            } catch {
                ended = "\(error)"
                break
            }
            switch result {
            case .bytes(let count):
                link.ping.heard(at: shard.loop.now)
                readAt = link.ping.lastHeard.nanoseconds
                reading = link
                defer { reading = nil }
                do {
                    // The buffer is the shard's: the session keeps what it needs of it.
                    try session.receive(UnsafeRawBufferPointer(rebasing: buffer[..<count]))
                } catch {
                    ended = "\(error)"
                    protocolError = true
                    break reading
                }
                reads += 1
                // Level-triggered epoll brings us back for bytes still in the socket, but not
                // for bytes OpenSSL already holds: drain those first.
                if reads >= Self.readBudget && !stream.hasBufferedBytes { break reading }
            case .wouldBlock:
                break reading
            case .closed(let clean):
                ended = "the gateway closed the connection" + (clean ? "" : " (no TLS close_notify)")
                break reading
            }
        }
        if answered != answeredBefore {
            link.isAnswered = true
            stallsInARow = 0
        }
        settleAnswers(link)
        guard let ended else { return }
        if link === current, connection.machine.activeTransport === link.link {
            // Not one answer, though it was asked or broke the protocol: it proved nothing.
            let unanswered = !link.isAnswered && (session.hasOpenedStreams || protocolError)
            connection.connectionLost(link.link, ended + " with \(window.openCount) stream(s) unanswered", permanent: nil,
                                      unanswered: unanswered)
        } else {
            shard.noteConnectionLost(ended)
            connection.perform(connection.machine.retiredConnectionLost(link.link, ended + " while it retired"))
        }
    }

    private func applySettlement() {
        guard !settlement.isEmpty else { return }
        connection.apply(settlement)
        settlement.reset()
    }

    /// Applies what the answers of a read on `link` decided, then what they asked of it.
    private func settleAnswers(_ link: SessionLink) {
        applySettlement()
        let actions = pending
        pending = PendingActions()
        if let fault = actions.credentialsFault {
            connection.perform(connection.machine.credentialsRefused(fault))
            return
        }
        if let reason = actions.retirement, link === current { retire(link, reason) }
        if let reason = link.retirement {
            connection.perform(connection.machine.retiredStreamsAnswered(link.link, reason))
        }
        lane.openStreams.store(window.openOnAllConnections, ordering: .relaxed)
    }

    /// The open link retires (see `ConnectionMachine.retire`); its streams get
    /// `HTTP2Options.answerTimeout` to be answered, then it is dropped.
    private func retire(_ link: SessionLink, _ reason: String) {
        saturation.note(false)
        current = nil
        link.retirement = reason
        retired.append(link)
        let timeout = options.answerTimeout
        link.retirementTimer = shard.loop.schedule(after: timeout) { [unowned self, unowned link] in
            link.retirementTimer = nil
            connection.perform(connection.machine.retiredConnectionLost(link.link, "\(reason), and no answer within \(timeout)"))
        }
        connection.perform(connection.machine.retire(link.link, reason))
    }

    // MARK: Session callbacks (inside `ClientSession.receive` and `submit`)

    func responseStatus(entry: Int32, value: UnsafeRawBufferPointer) {
        guard value.count == 3 else { return }
        var code: UInt16 = 0
        for digit in value {
            guard digit &- UInt8(ascii: "0") < 10 else { return }
            code = code * 10 + UInt16(digit &- UInt8(ascii: "0"))
        }
        statuses[Int(entry)] = code
    }

    func responseBody(entry: Int32, chunk: UnsafeRawBufferPointer) {
        // Only an error answer's body is read (for its reason).
        guard statuses[Int(entry)] != 200 else { return }
        errorBodies[entry, default: ErrorBody()].append(chunk)
    }

    func keepBody(entry: Int32, _ rest: UnsafeRawBufferPointer) -> UInt64 {
        // The arena has room: `openStreams` checked.
        keptBodies.store(rest)!
    }

    func requestBody(_ body: UInt64, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool) {
        keptBodies.take(body, into: destination)
    }

    func releaseBody(_ body: UInt64) { keptBodies.done(body) }

    func requestNotSent(entry: Int32) {
        window.retry(entry, .refused, now: shard.loop.now.nanoseconds, into: &settlement)
    }

    func streamClosed(entry: Int32, refused: Bool, errorCode: UInt32) {
        guard let stream = window.stream(entry) else { return }
        // Streams close only inside `session.receive`, so this is when the answer was read
        // (and not `shard.loop.now`, which retained the loop on every answer).
        let now = readAt
        let status = Int(statuses[Int(entry)])
        guard status != 0 else {
            // No answer: never processed (refused), or reset midway with its fate unknown.
            window.retry(entry, refused ? .refused : .dropped(connection.machine.dropPolicy), now: now, into: &settlement)
            return
        }
        let waited = now &- openedAt[Int(entry)]
        saturation.answered(after: waited)
        answered &+= 1
        if answered & (SenderInstruments.responseLatencySampling - 1) == 0 {
            ledger.instruments.responseLatency.recordNanoseconds(Int64(clamping: waited))
        }
        let (reason, timestamp) = status == 200 ? ("", nil) : errorBodies.removeValue(forKey: entry)?.reasonAndTimestamp() ?? ("", nil)
        let anyAccepted = settlement.accepted > 0 || ledger.accepted.load(ordering: .relaxed) > 0
        switch policy.decide(status: status, reason: reason, timestamp: timestamp, attempts: stream.attempts,
                             anyAccepted: anyAccepted) {
        case .accept:
            window.accepted(entry, into: &settlement)
        case .reject(let rejection):
            window.rejected(entry, rejection, into: &settlement)
        case .retryAfterBackoff(let attempt):
            let delay = options.throttleBackoff.delay(attempt: attempt, random: &random)
            window.retry(entry, .throttled(after: delay.nanosecondsClamped), now: now, into: &settlement)
        case .retryNow:
            window.retry(entry, .serverError, now: now, into: &settlement)
        case .retryElsewhere(let rejection):
            window.retry(entry, .unavailable, now: now, into: &settlement)
            pending.retirement = pending.retirement ?? "retired after \(rejection)"
        case .renewToken:
            expiredProviderToken(entry, generation: stream.tokenGeneration, now: now)
        case .fail(let reason):
            window.failed(entry, reason, into: &settlement)
        case .credentialsFault(let fault):
            // Left open: giving up fails it with everything else not final.
            pending.credentialsFault = pending.credentialsFault ?? describe(fault)
        }
    }

    func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {
        let reason = ErrorBody(debugData).reason
        pending.retirement = "the gateway sent GOAWAY (last stream \(lastStreamID), error \(errorCode)"
            + (reason.isEmpty ? ")" : ", \(reason))")
    }

    func pingAcknowledged() { reading?.ping.acknowledged() }

    func settingsReceived(streamLimit: Int) {
        if let reading {
            reading.noStreamsSince = streamLimit > 0 ? nil : reading.noStreamsSince ?? Instant(nanoseconds: readAt)
        }
        if saturation.streamLimitChanged(to: streamLimit) {
            shard.emit(.streamLimit(shard: shard.index, connection: connection.index, limit: streamLimit))
        }
    }

    /// 403 ExpiredProviderToken for a request sent with the token of `generation`.
    private func expiredProviderToken(_ entry: Int32, generation: UInt32, now: UInt64) {
        guard let tokens = shard.providerTokens else {
            pending.credentialsFault = "the gateway answered 403 ExpiredProviderToken, but this sender authenticates with a "
                + "certificate and sends no provider token"
            return
        }
        do {
            let verdict = try tokens.expired(generation: generation)
            switch verdict {
            case .retry:
                window.retry(entry, .expiredToken(after: 0), now: now, into: &settlement)
            case .retryWhenRenewed:
                window.retry(entry, .expiredToken(after: Self.storeRenewalWait.nanosecondsClamped), now: now, into: &settlement)
            case .clockSkew:
                pending.credentialsFault = "\(verdict) (key id \(tokens.credentials.keyID), team \(tokens.credentials.teamID))"
            }
        } catch {
            pending.credentialsFault = error.description
        }
    }

    /// What the user reads when the gateway refuses the credentials.
    private func describe(_ fault: AnswerPolicy.CredentialsFault) -> String {
        switch fault {
        case .refused(let rejection):
            if let tokens = shard.providerTokens {
                return "the gateway refused the provider token (\(rejection)) for key id \(tokens.credentials.keyID), "
                    + "team \(tokens.credentials.teamID): check the .p8 key, --key-id and --team-id"
            }
            return "the gateway refused this sender's credentials (\(rejection)): check the client certificate "
                + "and its environment (production or sandbox)"
        case .tokenUpdatesRefused(let beforeAnyAcceptance):
            // Another sender (or an earlier run) signed a token for the team less than 20
            // minutes before ours.
            guard let tokens = shard.providerTokens else { return "the gateway answered 429 TooManyProviderTokenUpdates" }
            let team = "team \(tokens.credentials.teamID) (key id \(tokens.credentials.keyID))"
            let store = tokens.store.map { "the \($0) did not have it" } ?? "no token store was used (--no-token-cache)"
            let refused = beforeAnyAcceptance
                ? "the gateway refused this run's provider token before accepting anything"
                : "the gateway kept refusing this run's provider token (\(options.throttleRetries + 1) times for one notification)"
            return refused + " (429 TooManyProviderTokenUpdates): another process signed a token for \(team) less than "
                + "20 minutes ago, and \(store). Let every sender of the team share one token (the same --token-cache "
                + "on one machine, --token-store postgres://… across machines), or send again in 20 minutes"
        }
    }

    // MARK: Timers

    private lazy var flushAction = TimerAction { [unowned self] in
        self.flushTimer = nil
        self.pump(flush: true)
    }

    private lazy var retryAction = TimerAction { [unowned self] in
        self.retryTimer = nil
        self.retryDeadline = .max
        self.pump()
    }

    private lazy var pingAction = TimerAction { [unowned self] in self.pingTimerFired() }

    private lazy var answerAction = TimerAction { [unowned self] in self.answerCheckFired() }

    /// How often the open link is checked for answers that do not come: a stall is found
    /// at most a tenth of the timeout late.
    private var answerCheckInterval: Duration { options.answerTimeout / 10 }

    /// Every `answerCheckInterval`: a link whose oldest open stream has waited
    /// `answerTimeout` for its answer (none, or one begun and not finished), or on which the
    /// gateway has allowed no stream for that long while work waits, has stalled: it is
    /// dropped (its streams follow the drop policy) and counts as a failed attempt.
    private func answerCheckFired() {
        answerTimer = nil
        guard let current, connection.machine.activeTransport === current.link else { return }  // the next link arms it again
        let now = shard.loop.now
        if let stall = stall(of: current, at: now) {
            stallsInARow = current.isAnswered ? 0 : stallsInARow + 1
            let giveUp = stallsInARow >= Self.maximumStalls
                ? "\(stall) (gave up after \(stallsInARow) connections in a row without an answer)" : nil
            connection.connectionLost(current.link, stall, permanent: giveUp, stalled: true, unanswered: !current.isAnswered)
            return
        }
        answerTimer = shard.loop.schedule(at: now + answerCheckInterval, answerAction)
    }

    /// What `link` has been waiting for longer than `answerTimeout`, if anything.
    private func stall(of link: SessionLink, at now: Instant) -> String? {
        let timeout = options.answerTimeout
        let limit = now.nanoseconds &- timeout.nanosecondsClamped
        if hasWaiting, let since = link.noStreamsSince, since.nanoseconds <= limit {
            return "the gateway allowed no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0) for \(timeout) while notifications waited"
        }
        let open = window.openEntries(on: window.connection)
        guard let oldest = open.min(by: { openedAt[Int($0)] < openedAt[Int($1)] }), openedAt[Int(oldest)] <= limit else { return nil }
        let begun = open.count(where: { statuses[Int($0)] != 0 })
        return begun > 0
            ? "\(begun) of \(open.count) open stream(s) had an answer begun and not finished after \(timeout)"
            : "no answer in \(timeout) (\(open.count) stream(s) open)"
    }

    /// Every `pingInterval`: see `IdlePing`.
    private func pingTimerFired() {
        pingTimer = nil
        guard let current, connection.machine.activeTransport === current.link else { return }
        let now = shard.loop.now
        switch current.ping.check(at: now, interval: options.pingInterval) {
        case .quiet:
            break
        case .ping:
            current.session.ping()
            pump(flush: true)
        case .unanswered:
            connection.connectionLost(current.link, "no answer to PING for \(options.pingInterval)", permanent: nil)
            return
        }
        pingTimer = shard.loop.schedule(at: now + options.pingInterval, pingAction)
    }

    /// Wakes the connection when the earliest throttled notification is due.
    private func armRetryTimer() {
        guard let due = window.nextRetryTime(now: shard.loop.now.nanoseconds), due < retryDeadline else { return }
        if let retryTimer { shard.loop.cancel(retryTimer) }
        retryDeadline = due
        retryTimer = shard.loop.schedule(at: Instant(nanoseconds: due), retryAction)
    }
}

/// One link of an HTTP/2 connection and the session on it. The connection's open link has
/// one, and so has each retired link until its streams are answered.
final class SessionLink {
    let link: Link
    let session: ClientSession<HTTP2Transport>
    var ping: IdlePing
    /// Why it retired, once it has.
    var retirement: String?
    /// Drops it if its streams are not answered in time, once it has retired.
    var retirementTimer: TimerID?
    /// Whether any of its streams was answered.
    var isAnswered = false
    /// Since when the gateway has allowed no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0).
    var noStreamsSince: Instant?

    init(link: Link, session: ClientSession<HTTP2Transport>, at now: Instant) {
        self.link = link
        self.session = session
        ping = IdlePing(lastHeard: now)
    }
}

/// When a link gets a PING: after `interval` without a frame from the gateway, so that a
/// dead path is noticed (and the link kept open through middleboxes); a PING unanswered
/// for another `interval` means the path is dead.
struct IdlePing {
    /// When the gateway's bytes were last read.
    private(set) var lastHeard: Instant
    private var isOutstanding = false

    init(lastHeard: Instant) { self.lastHeard = lastHeard }

    enum Check: Equatable {
        /// The gateway spoke within the interval.
        case quiet
        /// Send a PING (it is counted as outstanding).
        case ping
        /// The last PING was not answered: drop the link.
        case unanswered
    }

    mutating func heard(at now: Instant) { lastHeard = now }
    mutating func acknowledged() { isOutstanding = false }

    mutating func check(at now: Instant, interval: Duration) -> Check {
        guard now.since(lastHeard) >= interval else { return .quiet }
        if isOutstanding { return .unanswered }
        isOutstanding = true
        return .ping
    }
}

/// Tells `ConnectionGrowth` when a connection starts or stops being saturated (every
/// stream the gateway allows open, and more waiting), and while it stays so, asks it every
/// `checkInterval` whether to add connections (on a timer too: before the first answers
/// come back, nothing else happens). A limit of one stream does not count: APNs allows one
/// until it has seen a valid provider token, and raises it a moment later.
final class SaturationReport {
    /// The shard outlives its connections (see `Connection.shard`).
    private unowned(unsafe) let shard: Shard
    /// Our own limit on streams per connection.
    private let streamLimit: Int
    private var gatewayStreamLimit = 0
    private var isSaturated = false
    private var lastCheck: UInt64 = 0
    private var timer: TimerID?
    /// The shortest wait of a stream for its answer since growth was last told (ns; `.max`:
    /// none since). The shortest, not an average: on a new connection TCP's slow start holds
    /// most of the first thousand streams for a few round trips, while the first ones are
    /// answered in one; only a gateway's queue delays them all.
    private var shortestAnswer: UInt64 = .max
    private static let checkInterval: Duration = .milliseconds(10)

    init(shard: Shard, streamLimit: Int) {
        self.shard = shard
        self.streamLimit = streamLimit
    }

    func connectionOpened() { gatewayStreamLimit = 0 }

    /// The gateway's SETTINGS allow `limit` streams; true when that changed.
    func streamLimitChanged(to limit: Int) -> Bool {
        guard limit != gatewayStreamLimit else { return false }
        gatewayStreamLimit = limit
        return true
    }

    @inline(__always)
    func answered(after waited: UInt64) { shortestAnswer = min(shortestAnswer, waited) }

    func note(_ saturated: Bool) {
        let saturated = saturated && gatewayStreamLimit > 1
        if saturated != isSaturated {
            isSaturated = saturated
            shard.growth.saturationChanged(saturated)
            lastCheck = 0
        }
        guard saturated else { return }
        if timer == nil { timer = shard.loop.schedule(at: shard.loop.now + Self.checkInterval, action) }
        let now = shard.loop.now.nanoseconds
        guard now &- lastCheck >= Self.checkInterval.nanosecondsClamped else { return }
        lastCheck = now
        let answerTime = shortestAnswer == .max ? 0 : shortestAnswer
        shortestAnswer = .max
        // The rate a step brought is read off the ledger's count, which every settlement
        // already adds to: nothing more per answer.
        let accepted = shard.ledger.accepted.load(ordering: .relaxed)
        if shard.growth.considerGrowing(answerTime: answerTime, accepted: accepted,
                                        streams: min(streamLimit, gatewayStreamLimit), at: now) {
            // Producers waiting for room find it in the new connections; nothing else would
            // wake them before an answer frees a stream.
            shard.notifyProgress()
        }
    }

    /// Made once: arming it allocates nothing.
    private lazy var action = TimerAction { [unowned self] in
        timer = nil
        if isSaturated { note(true) }
    }
}
