/// Why a sender could not start.
public struct SenderError: Error, Sendable, CustomStringConvertible {
    /// What is wrong with the configuration or the credentials, said for the user.
    public var description: String
}
