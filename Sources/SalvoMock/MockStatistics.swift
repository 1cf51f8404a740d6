import SalvoWire

/// A snapshot of what a `MockGateway` saw, summed over all its loops.
///
/// Accounting: every well-formed notification the gateway decodes is counted once in
/// `framesByCommand` (the *received* count) and ends as exactly one of: accepted, rejected
/// by the failure plan (counted in `rejectedByStatus`), or the one notification discarded
/// by each silent drop (`droppedConnections`). Malformed frames are answered with an error
/// response (a malformed command 0, which has none, with a bare close) and appear in
/// `rejectedByStatus` (under e.g. `protocol_error`) but not in `framesByCommand`. Status 10
/// (shutdown) is not a rejection: it is counted in `shutdowns`.
public struct MockStatistics: Sendable, Hashable, Codable {
    /// Well-formed notifications received, by the command they arrived in.
    public struct Commands: Sendable, Hashable, Codable {
        /// Command 0.
        public var simple: Int
        /// Command 1.
        public var enhanced: Int
        /// Command 2.
        public var frame: Int

        public init(simple: Int = 0, enhanced: Int = 0, frame: Int = 0) {
            self.simple = simple
            self.enhanced = enhanced
            self.frame = frame
        }

        /// All three.
        public var total: Int { simple + enhanced + frame }
    }

    /// Notifications accepted (the gateway stayed silent about them).
    public var accepted: Int
    /// Notifications refused, rejected by the plan or malformed: each answered with an error
    /// response (status 10 excluded), or, a malformed command 0, with a bare close.
    public var rejected: Int
    /// `rejected`, by `Status.name` (`"invalid_token"`, `"protocol_error"`, …).
    public var rejectedByStatus: [String: Int]
    /// Well-formed notifications received, by command.
    public var framesByCommand: Commands
    /// TCP connections accepted (handshake failures included).
    public var connections: Int
    /// Connections whose TLS handshake failed (e.g. no client certificate when one is required).
    public var handshakeFailures: Int
    /// Decrypted bytes read from clients (the notification stream).
    public var bytesReceived: Int
    /// Connections closed silently by `FailurePlan.dropEvery`.
    public var droppedConnections: Int
    /// Status-10 responses written by `FailurePlan.shutdownEvery`.
    public var shutdowns: Int
    /// Read stalls started by `FailurePlan.stallEvery`.
    public var stalls: Int
    /// Error responses (rejections, shutdowns, answers to malformed frames) held back by
    /// `FailurePlan.errorDelay`, counted when held, whether or not the client stayed to read them.
    public var delayedResponses: Int
    /// Accepted notifications whose token and payload had been accepted before. Tracked only
    /// with `recordAccepted` (0 otherwise).
    public var duplicates: Int
    /// With `recordAccepted`: the distinct `digest(token:payload:)` values of accepted
    /// notifications, sorted. Nil otherwise.
    public var acceptedDigests: [UInt64]?

    /// An all-zero snapshot.
    public init() {
        accepted = 0
        rejected = 0
        rejectedByStatus = [:]
        framesByCommand = Commands()
        connections = 0
        handshakeFailures = 0
        bytesReceived = 0
        droppedConnections = 0
        shutdowns = 0
        stalls = 0
        delayedResponses = 0
        duplicates = 0
        acceptedDigests = nil
    }

    /// Well-formed notifications received (`framesByCommand.total`).
    public var received: Int { framesByCommand.total }

    /// Rejections with `status`.
    public func rejected(_ status: Status) -> Int { rejectedByStatus[status.name] ?? 0 }

    // MARK: Digest

    /// The identity of a notification for comparing what was sent with what was accepted:
    /// `NotificationDigest` over the 32 token bytes followed by the payload bytes.
    /// Identifiers are left out on purpose: a resent notification may carry a new one and
    /// is still the same notification.
    @inlinable
    public static func digest(token: UnsafeRawBufferPointer, payload: UnsafeRawBufferPointer) -> UInt64 {
        var digest = NotificationDigest()
        digest.add(token)
        digest.add(payload)
        return digest.value
    }

    /// `digest(token:payload:)` for a token value and payload bytes.
    public static func digest(token: DeviceToken, payload: some Sequence<UInt8>) -> UInt64 {
        let bytes = Array(payload)
        return token.withUnsafeBytes { tokenBytes in
            bytes.withUnsafeBytes { digest(token: tokenBytes, payload: $0) }
        }
    }
}

/// 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime 0x100000001b3), fed in pieces, so
/// a payload that arrives in several reads needs no copy.
public struct NotificationDigest: Sendable {
    /// The digest of everything added so far.
    public var value: UInt64 = 0xcbf2_9ce4_8422_2325

    @inlinable
    public init() {}

    /// Continues the digest over `bytes`.
    @inlinable
    public mutating func add(_ bytes: UnsafeRawBufferPointer) {
        var hash = value
        for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 }
        value = hash
    }
}
