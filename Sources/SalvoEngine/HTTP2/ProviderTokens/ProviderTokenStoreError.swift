

/// A token store could not be used. `description` names the store and says what to do.
public struct ProviderTokenStoreError: Error, Sendable, Hashable, CustomStringConvertible {
    /// The store (``ProviderTokenStore/description``).
    public var store: String
    /// What is wrong, and what to do about it.
    public var problem: String

    /// The error for `store`.
    public init(store: String, problem: String) {
        self.store = store
        self.problem = problem
    }

    /// `<store>: <problem>`.
    public var description: String { "\(store): \(problem)" }
}
