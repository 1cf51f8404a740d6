import SalvoIO
import SalvoWire

/// What a sender does with notifications in flight when a connection drops without an
/// error response (their fate is unknown).
public enum DropPolicy: String, Sendable, Hashable, CaseIterable {
    /// Resend them on a new connection and count them as possible duplicates. The default:
    /// a duplicate push is better than a lost one for most campaigns.
    case atLeastOnce = "resend"
    /// Report them as failed with `deliveryUnknown`: never a duplicate, possibly a loss.
    case atMostOnce = "report"
}

/// How a `Sender` connects and sends. The defaults suit Apple's gateway; tests and the
/// loopback mock shorten `errorWait` and `reconnectBackoff`.
public struct SenderConfiguration: Sendable {
    /// The gateway's host (name or IP) and port.
    public var host: String
    public var port: Int
    /// The name expected in the gateway's certificate; the host by default.
    public var serverName: String?
    /// Client certificate, key and trust. Verification is on unless `tls.verifyPeer` is false.
    public var tls: TLSConfiguration
    /// Event-loop threads. Default: one per core.
    public var shards: Int = availableCores
    /// Gateway connections per shard.
    public var connectionsPerShard: Int = 1
    /// Bytes of send ring per connection: the most that can be queued or in flight on it.
    public var ringCapacity: Int = 4 << 20
    /// How long after a frame is written an error response can still name it. A frame is
    /// settled as accepted once this has passed with no error. Apple: about 1 s.
    public var errorWait: Duration = .seconds(1)
    /// Delay between reconnect attempts.
    public var reconnectBackoff = Backoff()
    /// Consecutive failed connection attempts after which a connection gives up.
    public var connectAttempts = 8
    /// How many silent drops a notification may be in flight for before it fails.
    public var retryBudget = 3
    /// At-least-once (resend) or at-most-once (report) after a silent drop.
    public var dropPolicy: DropPolicy = .atLeastOnce
    /// Command 2 (default), 1 or 0. Command 0 has no identifiers: see `Sender`.
    public var format: FrameFormat = .frame
    /// Expiry written when a notification gives none (nil: none for command 2, 0 for command 1).
    public var defaultExpiry: UInt32?
    /// Priority written when a notification gives none (nil: the gateway assumes 10).
    public var defaultPriority: UInt8?
    /// The largest payload accepted (2048 bytes for the binary interface).
    public var maximumPayloadLength = 2048
    /// The kernel send buffer of each gateway connection, in bytes (nil: the kernel's
    /// autotuning, up to several MiB). Whatever sits in it when the gateway rejects a
    /// notification must be resent, and it hides how far behind the gateway is; a small
    /// buffer keeps frames in the ring instead, where they cost nothing to hold back. Too
    /// small a buffer limits throughput on long round trips (it must hold a round trip's
    /// worth of bytes).
    public var socketSendBuffer: Int? = 256 << 10
    /// Pin each shard's thread to a core.
    public var pinThreads = true
    /// Seed for backoff jitter, so runs can be reproduced.
    public var seed: UInt64 = 0x5A1F0

    public init(host: String, port: Int, tls: TLSConfiguration) {
        self.host = host
        self.port = port
        self.tls = tls
    }

    /// A configuration for `gateway` (`.production`, `.sandbox`, or any host and port).
    public init(gateway: Endpoint, tls: TLSConfiguration) {
        self.init(host: gateway.host, port: gateway.port, tls: tls)
    }
}
