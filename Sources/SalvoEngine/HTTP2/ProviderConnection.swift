import SalvoIO
import SalvoWire

/// One connection slot to Apple's HTTP/2 provider API, on its shard's thread: turns staged
/// request records into streams (HEADERS and DATA, through its `ClientSession`),
/// settles each notification by its stream's answer, and sends again, one at a time, what
/// must be tried again (refused streams, 429, 500/503, drops, an expired provider token).
///
/// In flight per connection: at most the gateway's SETTINGS_MAX_CONCURRENT_STREAMS (one
/// until APNs has seen a valid provider token) and `HTTP2Options.maximumConcurrentStreams`.
/// A connection that must go (GOAWAY, a 503) retires: it opens no new streams, its open
/// ones are still answered, and a new connection takes the slot's work meanwhile.
/// The slot's connections themselves (connect, close, stalls, backoff, giving up) and the
/// effects of settling are `SlotConnection`'s; how the window settles is `StreamWindow`'s.
final class ProviderConnection: SlotConnection<StreamWindow>, ClientSessionDelegate {
    private let requests: RequestRecordBuilder
    private let options: HTTP2Options
    /// The session of the connection new streams open on.
    private var current: ProviderSession?
    /// Retired connections' sessions, until their streams are answered.
    private var retired: [ProviderSession] = []
    // Its per-request state (the fields marked below) skips Swift's dynamic exclusivity
    // checks: the connection lives on its loop's thread, and no access to those fields spans a
    // call that could come back to them. With the checks, they were 16% of the HTTP/2
    // sender's CPU (results/h2-codec-2026-11-25.md).
    @exclusivity(unchecked) private var bodies: BodyArena
    @exclusivity(unchecked) private var headers: RequestHeaders
    /// Per stream slot (`StreamWindow`'s): the answer so far, and its body in the arena.
    @exclusivity(unchecked) private var answers: [StreamAnswer] = []
    @exclusivity(unchecked) private var bodyNumbers: [UInt64] = []
    /// Per stream slot: when it was opened (loop nanoseconds).
    @exclusivity(unchecked) private var openedAt: [UInt64] = []
    /// The shortest wait of a stream for its answer since `ConnectionGrowth` was last told
    /// (nanoseconds; `.max`: none answered since). The shortest, not an average: on a new
    /// connection TCP's slow start holds most of the first thousand streams for a few round
    /// trips, while the first ones are answered in one; only a gateway's queue delays them all.
    @exclusivity(unchecked) private var shortestAnswer: UInt64 = .max
    /// Answers so far: every `SenderInstruments.responseLatencySampling`th is timed.
    @exclusivity(unchecked) private var answered: UInt64 = 0
    /// What the answers of one read decided, applied once the read is done.
    @exclusivity(unchecked) private var settlement = Settlement()
    /// Set inside the session's callbacks, acted on once it has returned (closing a
    /// connection inside a callback would free the session under it).
    @exclusivity(unchecked) private var pending = PendingActions()
    private let readBuffer: UnsafeMutableRawBufferPointer
    /// A notification read again from its source, encoded as a record.
    private let rebuilt: UnsafeMutableRawBufferPointer
    /// The generation of the provider token in `headers.authorization`.
    private var tokenGeneration: UInt32 = 0
    private var random: SplitMix64
    private var lastStreamLimit = 0
    /// When the bytes being read were read (loop nanoseconds): the time of their answers.
    @exclusivity(unchecked) private var readAt: UInt64 = 0
    /// The connection whose bytes are being read, while they are.
    private var reading: ProviderSession?
    private var flushTimer: TimerID?
    private var pingTimer: TimerID?
    /// Checks the current connection for answers that do not come (`answerCheckFired`).
    private var answerTimer: TimerID?
    private var retryTimer: TimerID?
    private var retryDeadline: UInt64 = .max
    /// Whether `ConnectionGrowth` counts this connection as saturated: every stream the
    /// gateway allows open, and more waiting.
    private var isSaturated = false
    private var lastGrowthCheck: UInt64 = 0
    /// Asks again while saturated: a connection waiting for its answers hears nothing.
    private var growthTimer: TimerID?
    /// Connections in a row that stalled without being answered.
    private var stallsInARow = 0

    private struct PendingActions {
        /// Why the connection read retires (the gateway's GOAWAY, or a 503), if it does.
        var retirement: String?
        var credentialsFault: String?
    }

    /// The most bytes of frames gathered before they are written: a few TLS records.
    private static let outputBatch = 4 * GatewayConnection.recordSize
    /// How long a partial record may wait for more requests.
    private static let coalescingDelay: Duration = .milliseconds(1)
    /// How often a saturated connection asks `ConnectionGrowth` to add connections.
    private static let growthCheckInterval: UInt64 = 10_000_000
    /// Reads per readiness event before the loop's other connections get a turn.
    private static let readBudget = 16
    /// Connections in a row that stall without an answer before the slot gives up: each
    /// costs `HTTP2Options.answerTimeout`, so a gateway that answers nothing ends a run
    /// within a minute (the connect attempts' limit would take several).
    private static let maximumStalls = 3
    /// How long a request refused for an expired token waits for the token store's renewal.
    private static let storeRenewalWait: UInt64 = 1_000_000_000

    init(shard: Shard, index: Int, lane: Lane, requests: RequestRecordBuilder) {
        let configuration = shard.configuration
        guard let options = configuration.http2 else { preconditionFailure("an HTTP/2 slot needs HTTP/2 options") }
        self.requests = requests
        self.options = options
        bodies = BodyArena(capacity: max(256 << 10, 4 * requests.maximumLength))
        readBuffer = .allocate(byteCount: 4 * GatewayConnection.recordSize, alignment: 64)
        rebuilt = .allocate(byteCount: requests.maximumLength, alignment: 16)
        headers = RequestHeaders(authority: configuration.serverName ?? configuration.host, topic: options.topic,
                                 idSeed: configuration.seed ^ UInt64.random(in: 0...UInt64.max))
        random = SplitMix64(seed: configuration.seed &+ UInt64(shard.index * 1000 + index) &+ 0x4832)
        super.init(shard: shard, index: index, lane: lane,
                   window: StreamWindow(limits: .init(throttled: options.throttleRetries,
                                                      serverErrors: options.serverErrorRetries)),
                   usesStandby: false)
    }

    deinit {
        readBuffer.deallocate()
        rebuilt.deallocate()
    }

    override var hasWork: Bool { lane.staging.hasUnwritten || window.hasRetries }

    // MARK: Connecting

    override func handshakeProblem(_ link: Link) -> String? {
        let agreed = link.stream.negotiatedApplicationProtocol
        guard agreed != "h2" else { return nil }
        return "the gateway does not speak HTTP/2: ALPN offered h2, the gateway chose " + (agreed.map { "'\($0)'" } ?? "none")
    }

    override func didActivate(_ link: Link) {
        do {
            current = ProviderSession(link: link, session: try ClientSession(delegate: self), at: shard.loop.now)
        } catch {
            connectionLost(link, "\(error)", permanent: nil)
            return
        }
        // The network's round trip, beside which growth tells answers the gateway held.
        if let roundTrip = link.stream.socket.smoothedRoundTrip, roundTrip > .zero {
            shard.growth.connected(roundTrip: roundTrip.nanosecondsClamped)
        }
        pending = PendingActions()
        lastStreamLimit = 0
        if pingTimer == nil { pingTimer = shard.loop.schedule(at: shard.loop.now + options.pingInterval, pingAction) }
        // A gateway opens the connection with its SETTINGS: one that has not within
        // `settingsTimeout` of the handshake is as good as a failed connect.
        let timeout = options.settingsTimeout
        shard.loop.schedule(after: timeout) { [unowned self, weak link] in
            guard let link, let current, current.link === link, !current.session.peerSettingsSeen else { return }
            connectionLost(link, "the gateway sent no SETTINGS within \(timeout) of the TLS handshake", permanent: nil,
                           unanswered: true)
        }
        if answerTimer == nil { answerTimer = shard.loop.schedule(at: shard.loop.now + answerCheckInterval, answerAction) }
    }

    override func willClose(_ link: Link, notifying: Bool) {
        if let current, current.link === link {
            noteSaturation(false)
            // The window settled the open streams already (the machine's connection-lost),
            // or none were open; what the session still held goes with it.
            self.current = nil
        } else if let place = retired.firstIndex(where: { $0.link === link }) {
            let session = retired.remove(at: place)
            if let timer = session.retirementTimer { shard.loop.cancel(timer) }
            // Every stream answered: now the gateway may hear that no more are coming.
            if notifying {
                session.session.goAway()
                _ = try? writeOutput(session)
            }
        }
        lane.openStreams.store(window.openOnAllConnections, ordering: .relaxed)
    }

    // MARK: Writing

    /// Opens streams for what waits (retries first, then new notifications from the
    /// staging ring), as many as the stream limit and the body arena allow, and writes
    /// whatever the session has to send (requests, SETTINGS and PING answers, WINDOW_UPDATEs).
    override func pump(flush: Bool = false) {
        shard.loop.assertInLoop()
        if let failing = machine.givenUpFailure {
            failUnwritten(failing)
            return
        }
        // Until the first token: a token store that could not give one stops the run.
        if tokenGeneration == 0, let failure = shard.tokens?.failure {
            perform(machine.credentialsRefused(failure))
            return
        }
        guard let current, let link = machine.openTransport, link === current.link else {
            if hasWork { perform(machine.start()) }
            return
        }
        let session = current.session
        var written = 0
        defer { if written > 0 && lane.staging.hasRoomForProducers { shard.notifyProgress() } }
        do {
            while true {
                written += try openStreams(on: session, flush: flush)
                session.send(into: &current.output, limit: Self.outputBatch)
                guard !current.output.isEmpty else { break }
                guard try writeOutput(current) else { return }
            }
            setInterest(link, .read)
            noteSaturation(hasWork && window.openCount + window.waitingRetryCount >= streamLimit(of: session))
            lane.openStreams.store(window.openOnAllConnections, ordering: .relaxed)
            armRetryTimer()
            // A request the session could not send is settled as it found out.
            if !settlement.isEmpty {
                apply(settlement)
                settlement.reset()
            }
        } catch {
            connectionLost(link, "\(error)", permanent: isPermanent(error) ? "\(error)" : nil)
        }
    }

    /// Submits requests while streams and arena space are free; returns how many.
    private func openStreams(on session: ClientSession<ProviderConnection>, flush: Bool) throws -> Int {
        guard refreshProviderToken() else { return 0 }
        var budget = streamLimit(of: session) - window.openCount
        var opened = 0
        let now = shard.loop.now.nanoseconds
        while budget > 0, bodies.hasRoom(for: requests.maximumLength), let retry = window.nextRetry(now: now) {
            try resubmit(retry, at: now, on: session)
            budget -= 1
            opened += 1
        }
        // Retries not yet due keep their streams' places: nothing new while they wait.
        budget -= window.waitingRetryCount
        // A partial record waits (at most `coalescingDelay`) for more requests.
        if !flush && lane.staging.unwrittenBytes < GatewayConnection.recordSize && lane.staging.hasUnwritten
            && budget > 0 && current?.output.isEmpty != false {
            if flushTimer == nil { flushTimer = shard.loop.schedule(at: shard.loop.now + Self.coalescingDelay, flushAction) }
            return opened
        }
        while budget > 0, !window.isFull, bodies.hasRoom(for: requests.maximumLength) {
            guard let slice = lane.staging.nextSlice(limit: .max, frames: 1) else {
                // Producers wake the loop for the next one (unless it came meanwhile).
                if lane.staging.loopWentIdle() { break }
                continue
            }
            var failure: (any Error)?
            lane.staging.markWritten(slice.count) { index, origin, _ in
                let wasEmpty = window.isEmpty
                window.recordNew(index: index, origin: origin)
                if wasEmpty { publishOldestSequence() }
                do {
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
        return opened
    }

    /// The most streams this connection may have open: the gateway's limit and ours.
    private func streamLimit(of session: ClientSession<ProviderConnection>) -> Int {
        min(options.maximumConcurrentStreams, session.remoteStreamLimit)
    }

    /// Tells `ConnectionGrowth` when this connection starts or stops being saturated, and
    /// while it stays so, asks it every `growthCheckInterval` whether to add connections
    /// (on a timer too: before the first answers come back, nothing else happens). A
    /// limit of one stream does not count: APNs allows one until it has seen a valid
    /// provider token, and raises it a moment later.
    private func noteSaturation(_ saturated: Bool) {
        let saturated = saturated && lastStreamLimit > 1
        if saturated != isSaturated {
            isSaturated = saturated
            shard.growth.saturationChanged(saturated)
            lastGrowthCheck = 0
        }
        guard saturated else { return }
        if growthTimer == nil {
            growthTimer = shard.loop.schedule(at: shard.loop.now + .nanoseconds(Int64(Self.growthCheckInterval)), growthAction)
        }
        let now = shard.loop.now.nanoseconds
        guard now &- lastGrowthCheck >= Self.growthCheckInterval else { return }
        lastGrowthCheck = now
        // Producers waiting for room find it in the new connections; nothing else would
        // wake them before an answer frees a stream.
        let answerTime = shortestAnswer == .max ? 0 : shortestAnswer
        shortestAnswer = .max
        // The rate a step brought is read off the ledger's count, which every settlement
        // already adds to: nothing more per answer.
        let accepted = ledger.accepted.load(ordering: .relaxed)
        let streams = min(options.maximumConcurrentStreams, lastStreamLimit)
        if shard.growth.considerGrowing(answerTime: answerTime, accepted: accepted, streams: streams, at: now) {
            shard.notifyProgress()
        }
    }

    /// Reads a notification to try again from its source and submits it.
    private func resubmit(_ retry: Retry, at now: UInt64, on session: ClientSession<ProviderConnection>) throws {
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
            settlement.reset()
            window.failed(retry, .sourceUnreadable, into: &settlement)
            apply(settlement, unreadable: "\(error)")
            settlement.reset()
            return
        }
        try submit(RequestRecord(UnsafeRawBufferPointer(rebasing: rebuilt[..<length])), index: retry.index,
                   source: retry.source, position: retry.position, attempts: retry.attempts, at: now, on: session)
    }

    /// Opens a stream for `record`: its header fields, its body in the arena. `now` is the
    /// loop's time, read once per batch (reading it per request retained the loop each time).
    private func submit(_ record: RequestRecord, index: UInt64, source: SourceID, position: SourcePosition,
                        attempts: Attempts, at now: UInt64, on session: ClientSession<ProviderConnection>) throws(HTTP2SessionError) {
        let token = record.token
        let slot = window.open(OpenStream(index: index, source: source, position: position, token: token,
                                          attempts: attempts, tokenGeneration: tokenGeneration))
        prepareSlot(slot)
        // The arena has room: the caller checked.
        bodyNumbers[Int(slot)] = bodies.store(record.payload)!
        answers[Int(slot)] = StreamAnswer()
        openedAt[Int(slot)] = now
        headers.make(for: record, position: position, source: source)
        _ = try session.submit(headers.fields, bodyLength: record.payload.count, slot: slot)
    }

    /// Writes what `connection`'s session produced; false when the socket is full (write
    /// interest armed).
    private func writeOutput(_ connection: ProviderSession) throws -> Bool {
        while !connection.output.isEmpty {
            let chunk = UnsafeRawBufferPointer(rebasing: connection.output.readable.prefix(GatewayConnection.recordSize))
            switch try connection.link.stream.write(chunk) {
            case .wrote(let count):
                ledger.instruments.writeBatch.record(count)
                connection.output.consume(count)
                ledger.noteWrite(at: shard.loop.now.nanoseconds)
            case .wouldBlock:
                setInterest(connection.link, [.read, .write])
                return false
            }
        }
        return true
    }

    /// Writes what a retired connection's session has to say (SETTINGS and PING answers,
    /// WINDOW_UPDATEs): it sends no requests, but must stay a good peer while it is answered.
    private func flushRetired(_ connection: ProviderSession) {
        do {
            repeat {
                connection.session.send(into: &connection.output, limit: Self.outputBatch)
                guard !connection.output.isEmpty else { break }
            } while try writeOutput(connection)
            if connection.output.isEmpty { setInterest(connection.link, .read) }
        } catch {
            perform(machine.retiredConnectionLost(connection.link, "\(error)"))
        }
    }

    private func prepareSlot(_ slot: Int32) {
        while answers.count <= Int(slot) {
            answers.append(StreamAnswer())
            bodyNumbers.append(0)
            openedAt.append(0)
        }
    }

    /// With token authentication: the team's current token, refreshed when it is due.
    /// False while there is none yet (a token store is being asked for the first).
    private func refreshProviderToken() -> Bool {
        guard let tokens = shard.tokens else { return true }
        // A renewal that could not be signed keeps the current token (good for ten more
        // minutes); the next turn tries again.
        try? tokens.refreshIfDue()
        guard tokens.generation != tokenGeneration, let current = tokens.token() else { return tokenGeneration != 0 }
        headers.authorization = current.authorization
        tokenGeneration = current.generation
        return true
    }

    // MARK: Reading

    override func linkEvents(_ events: IOEvents, on link: Link) {
        guard let connection = current?.link === link ? current : retired.first(where: { $0.link === link }) else { return }
        if events.contains(.read) || events.contains(.hangup) { readAnswers(connection) }
        // Retired (maybe by this read) and not yet closed: it still writes its own frames.
        if connection.retirement != nil, retired.contains(where: { $0 === connection }) { flushRetired(connection) }
        pump()
    }

    /// Feeds what the gateway sent on `connection` to its session and settles its answers.
    private func readAnswers(_ connection: ProviderSession) {
        let link = connection.link
        let session = connection.session
        let answeredBefore = answered
        var reads = 0
        var ended: String?
        var protocolError = false
        reading: while true {
            let result: TLSReadResult
            do {
                result = try link.stream.read(into: readBuffer)
            } catch {
                ended = "\(error)"
                break
            }
            switch result {
            case .bytes(let count):
                connection.lastHeard = shard.loop.now
                readAt = connection.lastHeard.nanoseconds
                reading = connection
                defer { reading = nil }
                do {
                    try session.receive(UnsafeRawBufferPointer(rebasing: readBuffer[..<count]))
                } catch {
                    ended = "\(error)"
                    protocolError = true
                    break reading
                }
                reads += 1
                // Level-triggered epoll brings us back for bytes still in the socket, but not
                // for bytes OpenSSL already holds: drain those first.
                if reads >= Self.readBudget && !link.stream.hasBufferedBytes { break reading }
            case .wouldBlock:
                break reading
            case .closed(let clean):
                ended = "the gateway closed the connection" + (clean ? "" : " (no TLS close_notify)")
                break reading
            }
        }
        if answered != answeredBefore {
            connection.isAnswered = true
            stallsInARow = 0
        }
        settleAnswers(connection)
        guard let ended else { return }
        if connection === current, machine.activeTransport === link {
            // Not one answer, though it was asked or broke the protocol: it proved nothing.
            let unanswered = !connection.isAnswered && (session.hasOpenedStreams || protocolError)
            connectionLost(link, ended + " with \(window.openCount) stream(s) unanswered", permanent: nil, unanswered: unanswered)
        } else {
            shard.noteConnectionLost(ended)
            perform(machine.retiredConnectionLost(link, ended + " while it retired"))
        }
    }

    /// Applies what the answers of a read on `connection` decided, then what they asked of
    /// the connection.
    private func settleAnswers(_ connection: ProviderSession) {
        if !settlement.isEmpty {
            apply(settlement)
            settlement.reset()
        }
        let actions = pending
        pending = PendingActions()
        if let fault = actions.credentialsFault {
            perform(machine.credentialsRefused(fault))
            return
        }
        if let reason = actions.retirement, connection === current { retire(connection, reason) }
        if let reason = connection.retirement {
            perform(machine.retiredStreamsAnswered(connection.link, reason))
        }
        lane.openStreams.store(window.openOnAllConnections, ordering: .relaxed)
    }

    /// The open connection retires (see `ConnectionMachine.retire`); its streams get
    /// `HTTP2Options.answerTimeout` to be answered, then it is dropped.
    private func retire(_ connection: ProviderSession, _ reason: String) {
        noteSaturation(false)
        current = nil
        connection.retirement = reason
        retired.append(connection)
        let timeout = options.answerTimeout
        connection.retirementTimer = shard.loop.schedule(after: timeout) { [unowned self, unowned connection] in
            connection.retirementTimer = nil
            perform(machine.retiredConnectionLost(connection.link, "\(reason), and no answer within \(timeout)"))
        }
        perform(machine.retire(connection.link, reason))
    }

    // MARK: Session callbacks (inside `ClientSession.receive` and `submit`)

    func responseStatus(slot: Int32, value: UnsafeRawBufferPointer) {
        answers[Int(slot)].status(value)
    }

    func responseBody(slot: Int32, chunk: UnsafeRawBufferPointer) {
        answers[Int(slot)].body(chunk)
    }

    func requestBody(slot: Int32, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool) {
        let taken = bodies.take(bodyNumbers[Int(slot)], into: destination)
        if taken.isLast { bodies.done(bodyNumbers[Int(slot)]) }
        return taken
    }

    func requestNotSent(slot: Int32) {
        bodies.done(bodyNumbers[Int(slot)])
        window.retry(slot, .refused, now: shard.loop.now.nanoseconds, into: &settlement)
    }

    func streamClosed(slot: Int32, refused: Bool, errorCode: UInt32) {
        guard window.stream(slot) != nil else { return }
        bodies.done(bodyNumbers[Int(slot)])
        // Streams close only inside `session.receive`, so this is when the answer was read
        // (and not `shard.loop.now`, which retained the loop on every answer).
        let now = readAt
        let answer = answers[Int(slot)]
        guard answer.status != 0 else {
            // No answer: never processed (refused), or reset midway with its fate unknown.
            window.retry(slot, refused ? .refused : .dropped(machine.dropPolicy), now: now, into: &settlement)
            return
        }
        let waited = now &- openedAt[Int(slot)]
        shortestAnswer = min(shortestAnswer, waited)
        answered &+= 1
        if answered & (SenderInstruments.responseLatencySampling - 1) == 0 {
            ledger.instruments.responseLatency.recordNanoseconds(Int64(clamping: waited))
        }
        switch answer.verdict {
        case .accepted:
            window.accepted(slot, into: &settlement)
        case .rejected(let rejection):
            window.rejected(slot, rejection, into: &settlement)
        case .throttled:
            throttled(slot, now: now)
        case .tokenUpdateRefused:
            // Before anything was accepted the gateway never took this run's token: another
            // process holds the team's, and retrying would only wait out its 20 minutes.
            // Later, ours was taken and then replaced: a few retries may see it back.
            let anyAccepted = settlement.accepted > 0 || ledger.accepted.load(ordering: .relaxed) > 0
            guard anyAccepted, Int(window.stream(slot)!.attempts.throttled) < options.throttleRetries else {
                // Left open: giving up fails it with everything else not final.
                pending.credentialsFault = pending.credentialsFault ?? tokenUpdatesFault(beforeAnyAcceptance: !anyAccepted)
                return
            }
            throttled(slot, now: now)
        case .serverError:
            // A 500 is the request's: the connection stays.
            window.retry(slot, .serverError, now: now, into: &settlement)
        case .unavailable(let rejection):
            // The server behind this connection is overloaded or shutting down: try another.
            window.retry(slot, .unavailable, now: now, into: &settlement)
            pending.retirement = pending.retirement ?? "retired after \(rejection)"
        case .expiredProviderToken:
            expiredProviderToken(slot, now: now)
        case .credentialsRefused(let rejection):
            // Left open: giving up fails it with everything else not final.
            pending.credentialsFault = pending.credentialsFault ?? credentialsFault(rejection)
        }
    }

    func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {
        var answer = StreamAnswer()
        answer.body(debugData)
        let reason = answer.reason
        pending.retirement = "the gateway sent GOAWAY (last stream \(lastStreamID), error \(errorCode)"
            + (reason.isEmpty ? ")" : ", \(reason))")
    }

    func pingAcknowledged() { current?.pingOutstanding = false }

    func settingsReceived(streamLimit: Int) {
        if let reading {
            reading.noStreamsSince = streamLimit > 0 ? nil : reading.noStreamsSince ?? Instant(nanoseconds: readAt)
        }
        guard streamLimit != lastStreamLimit else { return }
        lastStreamLimit = streamLimit
        shard.emit(.streamLimit(shard: shard.index, connection: index, limit: streamLimit))
    }

    /// Sends `slot`'s notification again after the throttle backoff of its next attempt.
    private func throttled(_ slot: Int32, now: UInt64) {
        let attempt = Int(window.stream(slot)!.attempts.throttled) + 1
        let delay = options.throttleBackoff.delay(attempt: attempt, random: &random)
        window.retry(slot, .throttled(after: delay.nanosecondsClamped), now: now, into: &settlement)
    }

    /// 403 ExpiredProviderToken for a request sent with the token of `generation`.
    private func expiredProviderToken(_ slot: Int32, now: UInt64) {
        guard let tokens = shard.tokens, let stream = window.stream(slot) else {
            pending.credentialsFault = "the gateway answered 403 ExpiredProviderToken, but this sender authenticates with a "
                + "certificate and sends no provider token"
            return
        }
        do {
            let verdict = try tokens.expired(generation: stream.tokenGeneration)
            switch verdict {
            case .retry:
                window.retry(slot, .expiredToken(after: 0), now: now, into: &settlement)
            case .retryWhenRenewed:
                window.retry(slot, .expiredToken(after: Self.storeRenewalWait), now: now, into: &settlement)
            case .clockSkew:
                pending.credentialsFault = "\(verdict) (key id \(tokens.credentials.keyID), team \(tokens.credentials.teamID))"
            }
        } catch {
            pending.credentialsFault = error.description
        }
    }

    /// APNs refuses our provider token as an update that came too soon: another sender (or
    /// an earlier run) signed one for the same team less than 20 minutes before.
    private func tokenUpdatesFault(beforeAnyAcceptance: Bool) -> String {
        guard let tokens = shard.tokens else { return "the gateway answered 429 TooManyProviderTokenUpdates" }
        let team = "team \(tokens.credentials.teamID) (key id \(tokens.credentials.keyID))"
        let store = tokens.store.map { "the \($0) did not have it" } ?? "no token store was used (--no-token-cache)"
        let refused = beforeAnyAcceptance
            ? "the gateway refused this run's provider token before accepting anything"
            : "the gateway kept refusing this run's provider token (\(options.throttleRetries + 1) times for one notification)"
        return refused + " (429 TooManyProviderTokenUpdates): another process signed a token for \(team) less than "
            + "20 minutes ago, and \(store). Let every sender of the team share one token (the same --token-cache "
            + "on one machine, --token-store postgres://… across machines), or send again in 20 minutes"
    }

    /// What the user reads when the gateway refuses the credentials.
    private func credentialsFault(_ rejection: Rejection) -> String {
        if let tokens = shard.tokens {
            return "the gateway refused the provider token (\(rejection)) for key id \(tokens.credentials.keyID), "
                + "team \(tokens.credentials.teamID): check the .p8 key, --key-id and --team-id"
        }
        return "the gateway refused this sender's credentials (\(rejection)): check the client certificate "
            + "and its environment (production or sandbox)"
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

    /// How often the current connection is checked for answers that do not come: a stall
    /// is found at most a tenth of the timeout late.
    private var answerCheckInterval: Duration { options.answerTimeout / 10 }

    /// Every `answerCheckInterval`: a connection whose oldest open stream has waited
    /// `answerTimeout` for its answer (none, or one begun and not finished), or on which the
    /// gateway has allowed no stream for that long while work waits, has stalled: it is
    /// dropped (its streams follow the drop policy) and counts as a failed attempt.
    private func answerCheckFired() {
        answerTimer = nil
        guard let current, machine.activeTransport === current.link else { return }  // the next connection arms it again
        let now = shard.loop.now
        if let stall = stall(of: current, at: now) {
            stallsInARow = current.isAnswered ? 0 : stallsInARow + 1
            let giveUp = stallsInARow >= Self.maximumStalls
                ? "\(stall) (gave up after \(stallsInARow) connections in a row without an answer)" : nil
            connectionLost(current.link, stall, permanent: giveUp, stalled: true, unanswered: !current.isAnswered)
            return
        }
        answerTimer = shard.loop.schedule(at: now + answerCheckInterval, answerAction)
    }

    /// What `connection` has been waiting for longer than `answerTimeout`, if anything.
    private func stall(of connection: ProviderSession, at now: Instant) -> String? {
        let timeout = options.answerTimeout
        let limit = now.nanoseconds &- timeout.nanosecondsClamped
        if hasWork, let since = connection.noStreamsSince, since.nanoseconds <= limit {
            return "the gateway allowed no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0) for \(timeout) while notifications waited"
        }
        let open = window.openSlots(on: window.connection)
        guard let oldest = open.min(by: { openedAt[Int($0)] < openedAt[Int($1)] }), openedAt[Int(oldest)] <= limit else { return nil }
        let begun = open.count(where: { answers[Int($0)].status != 0 })
        return begun > 0
            ? "\(begun) of \(open.count) open stream(s) had an answer begun and not finished after \(timeout)"
            : "no answer in \(timeout) (\(open.count) stream(s) open)"
    }

    private lazy var growthAction = TimerAction { [unowned self] in
        self.growthTimer = nil
        if self.isSaturated { self.noteSaturation(true) }
    }

    /// Every `pingInterval`: a connection the gateway said nothing on for that long gets a
    /// PING; one that did not answer the last PING within the interval is dropped.
    private func pingTimerFired() {
        pingTimer = nil
        guard let current, machine.activeTransport === current.link else { return }
        let now = shard.loop.now
        let quiet = now.since(current.lastHeard)
        if current.pingOutstanding && quiet >= options.pingInterval {
            connectionLost(current.link, "no answer to PING for \(options.pingInterval)", permanent: nil)
            return
        }
        if quiet >= options.pingInterval {
            current.session.ping()
            current.pingOutstanding = true
            pump(flush: true)
        }
        pingTimer = shard.loop.schedule(at: now + options.pingInterval, pingAction)
    }

    /// Wakes the slot when the earliest throttled notification is due.
    private func armRetryTimer() {
        guard let due = window.nextRetryTime(now: shard.loop.now.nanoseconds), due < retryDeadline else { return }
        if let retryTimer { shard.loop.cancel(retryTimer) }
        retryDeadline = due
        retryTimer = shard.loop.schedule(at: Instant(nanoseconds: due), retryAction)
    }

    override func armSettleTimer(again: Bool = false) { armRetryTimer() }
}

/// One HTTP/2 connection of a slot: the link it runs on, its session, and the frames
/// waiting for the socket. The slot's open connection has one, and so has each retired
/// connection until its streams are answered.
final class ProviderSession {
    let link: Link
    let session: ClientSession<ProviderConnection>
    /// Frames the session produced, waiting for `SSL_write`.
    @exclusivity(unchecked) var output = OutputBuffer(capacity: 1 << 16)
    /// When the gateway's bytes were last read: for the idle PING.
    var lastHeard: Instant
    var pingOutstanding = false
    /// Why it retired, once it has.
    var retirement: String?
    /// Drops it if its streams are not answered in time, once it has retired.
    var retirementTimer: TimerID?
    /// Whether any of its streams was answered.
    var isAnswered = false
    /// Since when the gateway has allowed no stream (SETTINGS_MAX_CONCURRENT_STREAMS 0).
    var noStreamsSince: Instant?

    init(link: Link, session: ClientSession<ProviderConnection>, at now: Instant) {
        self.link = link
        self.session = session
        lastHeard = now
    }
}
