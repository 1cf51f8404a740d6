import Logging
import SalvoIO
import SalvoTelemetry
import SalvoWire
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Makes a team's provider token (an ES256 JWT) and renews it: one token for every
/// connection of every shard, as APNs wants (it counts renewals per team).
///
/// The hot path is a connection asking, per request, whether the token it cached is still
/// the current one: `generation`, one relaxed atomic load. Only when that changed does it
/// call `token()` (under the lock) and cache the new bytes. Relaxed is enough: a connection
/// that sees a new generation late sends the previous token a little longer, and that one
/// is still good, since tokens are renewed at 50 minutes and live 60.
///
/// Renewal is decided by time, by whichever connection finds it due first:
///
///     generation     1                  2                  3
///     issued at      t                  t + 50 min         t + 100 min
///     gateway's end  t + 60 min         t + 110 min        …
///
/// `refreshIfDue()` (once per write turn) renews when the current token is `refreshAge`
/// old; while it is not, it costs one atomic load and one clock read. A 403
/// ExpiredProviderToken goes to `expired(generation:)`, which renews early when that is
/// allowed and otherwise calls it what it is, a clock fault. Either way a team's tokens
/// are never renewed within `ProviderToken.minimumRefreshInterval` of each other (faster
/// earns 429 TooManyProviderTokenUpdates), and only one renewal runs when several find it
/// due. Any thread.
///
/// With a `ProviderTokenStore`, the other processes of the team are asked first: the first
/// token and each renewal are the store's (a token another process signed, while it is
/// younger than `refreshAge`, or one signed here and stored for them). The store is asked
/// off the loops, in a task: until the first token arrives the generation is 0 and
/// connections open no streams; the waker set with `setWaker` tells them when it came.
package final class ProviderTokenSigner: Sendable {
    /// A signed token, as connections cache it.
    package struct Token: Sendable {
        /// The compact JWT.
        package let text: String
        /// `bearer <JWT>`: the `authorization` header's value, as written.
        package let authorization: [UInt8]
        /// Which token this is: 1 for the first, one more for each renewal (never 0, so
        /// that a connection may start with 0 cached).
        package let generation: UInt32
        /// When it was signed (its `iat`), UNIX seconds.
        package let issuedAt: Int64
    }

    /// How old a token gets before `refreshIfDue` renews it: 50 minutes, ten before the
    /// gateway refuses it, a margin for clocks that disagree by a few minutes.
    package static let refreshAge: Int64 = 3000
    /// After a store could not renew the token, how long before it is asked again (the
    /// current token stays good meanwhile).
    static let storeRetryDelay: Int64 = 30

    /// The key and ids tokens are signed with.
    package let credentials: ProviderCredentials
    /// Where the team's token is shared with other processes, if anywhere.
    package let store: (any ProviderTokenStore)?
    private let key: ProviderTokenKey
    private let clock: @Sendable () -> Int64
    /// The current token's generation (0: none yet): published after the token, read
    /// without the lock.
    private let currentGeneration: Atomic<UInt32>
    /// When `refreshIfDue` next has work, UNIX seconds: the one value its fast path reads.
    private let nextRenewal: Atomic<Int64>
    private let current: Locked<Token?>
    /// A renewal through the store is under way.
    private let isRenewing = Atomic<Bool>(false)
    /// Why the store could not give a first token, once it failed to.
    private let storeFailure = Locked<String?>(nil)
    /// Tells the connections a token came from the store (they wait for the first one).
    private let waker = Locked<(@Sendable () -> Void)?>(nil)
    private let logger: Logger
    private let renewalCount = Atomic<Int>(0)

    /// The time as tokens count it: UNIX seconds, from the real-time clock.
    package static let systemClock: @Sendable () -> Int64 = { Int64(time(nil)) }

    /// A signer for `credentials`. Without a store it signs its first token now; with one,
    /// the first `refreshIfDue` asks the store for it.
    ///
    /// - Parameters:
    ///   - clock: UNIX seconds; tests pass a clock they move.
    ///   - logger: where renewals are logged (their generation and time, never the token).
    ///   - store: where the team's processes share their token; nil: this process only.
    /// - Throws: `ProviderTokenSigningError` if swift-crypto cannot sign (not seen in
    ///   practice: the key was checked when the credentials were made).
    package init(credentials: ProviderCredentials,
                 clock: @escaping @Sendable () -> Int64 = ProviderTokenSigner.systemClock,
                 logger: Logger = .disabled, store: (any ProviderTokenStore)? = nil) throws(ProviderTokenSigningError) {
        self.credentials = credentials
        self.store = store
        self.clock = clock
        self.logger = logger
        key = ProviderTokenKey(credentials)
        if store != nil {
            currentGeneration = Atomic(0)
            nextRenewal = Atomic(.min)
            current = Locked(nil)
        } else {
            let first = try Self.sign(credentials, at: clock(), generation: 1)
            currentGeneration = Atomic(first.generation)
            nextRenewal = Atomic(first.issuedAt + Self.refreshAge)
            current = Locked(first)
        }
    }

    /// The current token's generation, 0 while there is none yet; when it differs from the
    /// one a connection cached, the connection takes `token()`. One relaxed atomic load.
    package var generation: UInt32 { currentGeneration.load(ordering: .relaxed) }

    /// How many times the token was renewed (the first one not counted).
    package var renewals: Int { renewalCount.load(ordering: .relaxed) }

    /// The current token, nil until the store gave the first (its generation may be newer
    /// than the last `generation` read).
    package func token() -> Token? {
        current.withLock { $0 }
    }

    /// Why there is no token: the store could not give the first one. Nil while one may come.
    package var failure: String? {
        storeFailure.withLock { $0 }
    }

    /// Sets what is called when a token arrives from the store (nil: nothing; the sender
    /// clears it before its shards stop). Called under a lock, so that clearing it waits
    /// for a call under way.
    package func setWaker(_ wake: (@Sendable () -> Void)?) {
        waker.withLock { $0 = wake }
    }

    /// Renews the token if it is `refreshAge` old (with a store: asks the store, in a task).
    /// Cheap when it is not: connections call this once per write turn.
    ///
    /// - Throws: `ProviderTokenSigningError` when signing failed; the current token stays,
    ///   and the next call tries again.
    package func refreshIfDue() throws(ProviderTokenSigningError) {
        let now = clock()
        guard now >= nextRenewal.load(ordering: .relaxed) else { return }
        guard store == nil else { return renewThroughStore(replacing: nil) }
        try current.withLock { (token: inout Token?) throws(ProviderTokenSigningError) in
            // Another thread may have renewed it since the load: decide again, under the lock.
            guard let old = token, now - old.issuedAt >= Self.refreshAge else { return }
            try renew(&token, at: now)
        }
    }

    /// The gateway answered 403 ExpiredProviderToken to a request sent with token
    /// `generation`: what to do with that request.
    ///
    /// A newer token than the one refused: resend with it. The refused one is current and
    /// at least `minimumRefreshInterval` old: renew now and resend (with a store, once the
    /// store's renewal is done: `.retryWhenRenewed`). Current and younger: renewing would
    /// earn 429 TooManyProviderTokenUpdates, and the gateway calling a young token expired
    /// means its clock and this machine's disagree, so `.clockSkew`. A skewed clock thus
    /// costs at most one early renewal before the verdict: the renewed token is young when
    /// it too is refused.
    ///
    /// - Throws: `ProviderTokenSigningError` when renewing failed.
    package func expired(generation: UInt32) throws(ProviderTokenSigningError) -> ExpiredTokenVerdict {
        let now = clock()
        let verdict = try current.withLock { (token: inout Token?) throws(ProviderTokenSigningError) -> ExpiredTokenVerdict in
            guard let refused = token, generation == refused.generation else { return .retry }
            let age = now - refused.issuedAt
            guard age >= ProviderToken.minimumRefreshInterval else { return .clockSkew(age: age) }
            guard store == nil else { return .retryWhenRenewed }
            try renew(&token, at: now)
            return .retry
        }
        if verdict == .retryWhenRenewed { renewThroughStore(replacing: generation) }
        return verdict
    }

    /// Replaces `token` (under the lock) and publishes the new one.
    private func renew(_ token: inout Token?, at now: Int64) throws(ProviderTokenSigningError) {
        let renewed = try Self.sign(credentials, at: now, generation: (token?.generation ?? 0) &+ 1)
        publish(renewed, into: &token, signedHere: true)
    }

    /// Publishes `new` as the current token (under the lock).
    private func publish(_ new: Token, into token: inout Token?, signedHere: Bool) {
        let isFirst = token == nil
        token = new
        nextRenewal.store(new.issuedAt + Self.refreshAge, ordering: .relaxed)
        // After the token: whoever sees the new generation and asks for the token gets it
        // (the lock orders the rest).
        currentGeneration.store(new.generation, ordering: .releasing)
        if !isFirst { renewalCount.add(1, ordering: .relaxed) }
        // The key id and team name the credentials; the token itself is never logged.
        logger.info(isFirst ? "provider token taken" : "provider token renewed", metadata: [
            "generation": "\(new.generation)", "issued_at": "\(new.issuedAt)", "key_id": "\(credentials.keyID)",
            "team_id": "\(credentials.teamID)", "signed": "\(signedHere ? "here" : "by another process")",
            "store": "\(store.map { $0.description } ?? "none")",
        ])
    }

    // MARK: Through a store

    /// Asks the store for the token to use next, in a task, unless a request is under way:
    /// the first token (`replacing` nil and none yet), a renewal by time, or (`replacing`
    /// a generation) a renewal of the token the gateway called expired, which the store
    /// must not hand back.
    private func renewThroughStore(replacing refused: UInt32?) {
        guard let store, isRenewing.compareExchange(expected: false, desired: true, ordering: .acquiring).exchanged else { return }
        let key = key, credentials = credentials
        let previous = token()
        let refusedText = refused == previous?.generation ? previous?.text : nil
        Task.detached { [self] in
            defer { isRenewing.store(false, ordering: .releasing) }
            do {
                var signedHere = false
                let chosen = try await store.exchange(key, now: clock()) { stored, now in
                    if let stored, stored.text != refusedText, stored.isReusable(by: key, at: now, maximumAge: Self.refreshAge) {
                        return stored
                    }
                    signedHere = true
                    let token = try Self.sign(credentials, at: now, generation: 0)
                    return StoredProviderToken(key: key, issuedAt: token.issuedAt, text: token.text)
                }
                current.withLock { token in
                    guard token?.text != chosen.text else {
                        // By the store's clock ours is not due yet: ask again later.
                        nextRenewal.store(clock() + Self.storeRetryDelay, ordering: .relaxed)
                        return
                    }
                    let generation = (token?.generation ?? 0) &+ 1
                    publish(Token(text: chosen.text, authorization: Array("bearer \(chosen.text)".utf8),
                                  generation: generation, issuedAt: chosen.issuedAt), into: &token, signedHere: signedHere)
                }
                storeFailure.withLock { $0 = nil }
            } catch {
                let reason = "cannot take the provider token of team \(credentials.teamID) (key id \(credentials.keyID)) "
                    + "from the token store: \(error)"
                logger.warning("provider token not renewed", metadata: ["reason": "\(reason)"])
                nextRenewal.store(clock() + Self.storeRetryDelay, ordering: .relaxed)
                // Without a first token nothing can be sent: the connections stop on it.
                if previous == nil { storeFailure.withLock { $0 = reason } }
            }
            waker.withLock { $0?() }
        }
    }

    private static func sign(_ credentials: ProviderCredentials, at now: Int64,
                             generation: UInt32) throws(ProviderTokenSigningError) -> Token {
        let claims = ProviderToken(keyID: credentials.keyID, teamID: credentials.teamID, issuedAt: now)
        let signature: [UInt8]
        do {
            signature = try credentials.key.signature(for: Array(claims.signingInput.utf8))
        } catch {
            throw ProviderTokenSigningError(credentials: credentials, reason: "\(error)")
        }
        let text = claims.compact(signature: signature)
        return Token(text: text, authorization: Array("bearer \(text)".utf8), generation: generation, issuedAt: now)
    }
}

extension ProviderTokenSigner.Token: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Which token and when it was signed; never the token, which is a credential for an
    /// hour.
    package var description: String { "provider token #\(generation) issued at \(issuedAt)" }
    /// `description`: the JWT stays out of debug output too.
    package var debugDescription: String { description }
    /// Only the generation and the time: `dump` and the like must not reach the JWT.
    package var customMirror: Mirror {
        Mirror(self, children: ["generation": generation, "issuedAt": issuedAt], displayStyle: .struct)
    }
}

/// What to do with a request the gateway answered 403 ExpiredProviderToken.
package enum ExpiredTokenVerdict: Sendable, Hashable, CustomStringConvertible {
    /// Resend it with the current token (`ProviderTokenSigner.token()`).
    case retry
    /// Resend it once the token store has given a newer token (it is being asked).
    case retryWhenRenewed
    /// The refused token is the current one, signed `age` seconds ago (by this machine's
    /// clock), too young to renew: a configuration fault the sender stops on.
    case clockSkew(age: Int64)

    /// What the verdict means, for the user; a clock fault says how old the token was.
    package var description: String {
        switch self {
        case .retry:
            return "a newer provider token is current: resend with it"
        case .retryWhenRenewed:
            return "a newer provider token is being taken from the token store: resend with it"
        case .clockSkew(let age) where age < 0:
            return "the gateway says a provider token has expired, and this machine's clock went back "
                + "\(-age) seconds since signing it: is this machine's clock right?"
        case .clockSkew(let age):
            let ago = age < 120 ? "\(age) seconds" : "\(age / 60) minutes"
            return "the gateway says a provider token signed \(ago) ago has expired (they live "
                + "\(ProviderToken.lifetime / 60) minutes): is this machine's clock right?"
        }
    }
}

/// swift-crypto could not sign a provider token.
package struct ProviderTokenSigningError: Error, Sendable, CustomStringConvertible {
    /// The key id and team, the signing key's source.
    package var credentials: String
    /// swift-crypto's error.
    package var reason: String

    init(credentials: ProviderCredentials, reason: String) {
        self.credentials = credentials.description
        self.reason = reason
    }

    /// Which key failed and swift-crypto's reason (never the key).
    package var description: String { "cannot sign a provider token with \(credentials): \(reason)" }
}
