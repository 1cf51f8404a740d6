import SalvoEngine
import SalvoIO
import Synchronization

/// The team's provider token for channel requests: the engine's `ProviderTokenSigner`, so
/// that a channel client takes the token `salvo send` and every other process of the team
/// uses (through the same token store), renews it on the same schedule, and never signs
/// one APNs would refuse as too soon (429 TooManyProviderTokenUpdates).
///
/// The signer serves event loops that poll it; this gives async callers a token to await:
/// with a store, the first token (and a renewal after 403 ExpiredProviderToken) arrives
/// from a task, and its waker resumes whoever waits.
final class ChannelTokens: Sendable {
    let signer: ProviderTokenSigner
    private let waiters = Mutex<[UInt64: CheckedContinuation<Void, Never>]>([:])
    private let nextWaiter = Atomic<UInt64>(0)

    init(credentials: ProviderCredentials, store: (any ProviderTokenStore)?) throws(ProviderTokenSigningError) {
        signer = try ProviderTokenSigner(credentials: credentials, store: store)
        // Weak: the signer holds its waker, and this holds the signer.
        signer.setWaker { [weak self] in self?.wakeAll() }
    }

    private func wakeAll() {
        let woken = waiters.withLock { waiting in
            defer { waiting.removeAll() }
            return Array(waiting.values)
        }
        for waiter in woken { waiter.resume() }
    }

    /// The current token (renewed first if it is due), waiting for the store's when there
    /// is none yet.
    ///
    /// - Throws: the reason, when the store cannot give one or signing fails.
    func current() async throws(ChannelTokenProblem) -> ProviderTokenSigner.Token {
        do { try signer.refreshIfDue() } catch { throw ChannelTokenProblem(description: error.description) }
        // A wake-up says the store answered; the answer is a token or a failure. Three
        // rounds cover a renewal under way when this one was asked for.
        for _ in 0..<3 {
            if let token = signer.token() { return token }
            if let failure = signer.failure { throw ChannelTokenProblem(description: failure) }
            await wake { self.signer.token() != nil || self.signer.failure != nil }
            do { try signer.refreshIfDue() } catch { throw ChannelTokenProblem(description: error.description) }
        }
        if let token = signer.token() { return token }
        throw ChannelTokenProblem(description: signer.failure ?? "the token store gave no provider token")
    }

    /// The token to send again with, after APNs answered 403 ExpiredProviderToken to
    /// `refused`: a newer one, renewed now if the refused one is old enough.
    ///
    /// - Throws: when renewing would be too soon (APNs and this machine disagree about the
    ///   time: `ExpiredTokenVerdict.clockSkew` says so) or failed.
    func renewal(refusing refused: ProviderTokenSigner.Token) async throws(ChannelTokenProblem) -> ProviderTokenSigner.Token {
        let verdict: ExpiredTokenVerdict
        do { verdict = try signer.expired(generation: refused.generation) } catch {
            throw ChannelTokenProblem(description: error.description)
        }
        switch verdict {
        case .retry: break
        case .retryWhenRenewed: await wake { self.signer.generation != refused.generation }
        case .clockSkew: throw ChannelTokenProblem(description: verdict.description)
        }
        guard let token = signer.token(), token.generation != refused.generation else {
            throw ChannelTokenProblem(description: "the provider token APNs called expired could not be renewed through "
                                      + "\(signer.store?.description ?? "the signer")")
        }
        return token
    }

    /// Returns when the signer's waker runs, or at once when `ready` already holds (checked
    /// after registering, so that a wake-up in between is not missed).
    private func wake(unless ready: @escaping @Sendable () -> Bool) async {
        let id = nextWaiter.add(1, ordering: .relaxed).newValue
        await withCheckedContinuation { (continuation: CheckedContinuation<Void, Never>) in
            waiters.withLock { $0[id] = continuation }
            if ready(), let waiter = waiters.withLock({ $0.removeValue(forKey: id) }) { waiter.resume() }
        }
    }
}

/// Why no provider token could be had; `description` says what and where, never the token.
struct ChannelTokenProblem: Error, Sendable, CustomStringConvertible {
    var description: String
}
