

/// A provider token as a store keeps it. Its description never shows the token.
public struct StoredProviderToken: Sendable, Hashable, CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    /// Whose token it is.
    public var key: ProviderTokenKey
    /// When it was signed (its `iat`), UNIX seconds.
    public var issuedAt: Int64
    /// The compact JWT: a credential for an hour.
    public var text: String

    /// A token of `key` signed at `issuedAt`.
    public init(key: ProviderTokenKey, issuedAt: Int64, text: String) {
        self.key = key
        self.issuedAt = issuedAt
        self.text = text
    }

    /// Whether a process holding `key` may send this token at `now`: signed by that key,
    /// and younger than `maximumAge`. A token from the future (the clock went back, or the
    /// store came from elsewhere) is not: its age cannot be told.
    public func isReusable(by key: ProviderTokenKey, at now: Int64, maximumAge: Int64) -> Bool {
        self.key == key && issuedAt <= now && now - issuedAt < maximumAge
    }

    /// The team, the key id and the time; never the token.
    public var description: String { "provider token of team \(key.teamID), key id \(key.keyID), issued at \(issuedAt)" }
    /// `description`: the JWT stays out of debug output too.
    public var debugDescription: String { description }
    /// Only the key and the time: `dump` and the like must not reach the JWT.
    public var customMirror: Mirror { Mirror(self, children: ["key": key, "issuedAt": issuedAt], displayStyle: .struct) }
}
