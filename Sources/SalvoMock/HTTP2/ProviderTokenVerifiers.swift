import SalvoWire

/// The keys of every team a gateway plays: each token is judged by the verifier of the key
/// it names (`kid`), as APNs looks a token's key up by its id.
struct ProviderTokenVerifiers: Sendable {
    private let verifiers: [ProviderTokenVerifier]

    init(_ verifiers: [ProviderTokenVerifier]) { self.verifiers = verifiers }

    /// What `token` is worth at UNIX time `now`, and the team of the key it names (nil: no
    /// key of that id, an invalid token).
    func verify(_ token: UnsafeRawBufferPointer, now: Int64) -> (ProviderTokenVerifier.Outcome, team: String?) {
        guard let keyID = try? ProviderToken.parse(token).token.keyID,
              let verifier = verifiers.first(where: { $0.keyID == keyID }) else { return (.invalid, nil) }
        return (verifier.verify(token, now: now), verifier.teamID)
    }
}
