import SalvoIO
import SalvoWire

/// How a `Sender` connects and sends. The defaults suit Apple's gateway; tests and the
/// loopback mock shorten `errorWait` and `reconnectBackoff`.
public struct SenderConfiguration: Sendable {
    /// The gateway's host (name or IP) and port.
    public var host: String
    /// The gateway's TCP port: 443 (or 2197) for the HTTP/2 API, 2195 for a binary gateway.
    public var port: Int
    /// The name expected in the gateway's certificate; the host by default.
    public var serverName: String?
    /// Client certificate, key and trust. Verification is on unless `tls.verifyPeer` is false.
    public var tls: TLSConfiguration
    /// The HTTP (`CONNECT`) or SOCKS5 proxy every gateway connection goes through, or nil
    /// (the default) to connect directly. Each connection opens its own tunnel before its TLS
    /// handshake, which stays with the gateway: SNI, certificate and host name are the
    /// gateway's (`host`, `serverName`), ALPN as without a proxy. A proxy that cannot be
    /// reached or refuses the tunnel fails the connection attempt like a gateway that
    /// cannot be reached (407, 403, a refused SOCKS5 user and password: at once), with a
    /// message naming the proxy and its answer, never its credentials. The sender does not
    /// read the environment; `ProxyConfiguration.fromEnvironment(_:for:)` does, as curl.
    public var proxy: ProxyConfiguration?
    /// Event-loop threads. Default: one per core.
    public var shards: Int = availableCores
    /// Gateway connections per shard at the start.
    public var connectionsPerShard: Int = 1
    /// The most connections per shard. While every connection is full (the gateway, the
    /// path, or a connection restarting after an error response cannot take more), the
    /// sender opens one more, at most one per `connectionGrowthInterval`, up to this. Over
    /// a long path a connection the gateway closed after an error restarts TCP's slow
    /// start, about eight round trips, and more connections carry on meanwhile. Over
    /// HTTP/2 a connection's rate is its streams ÷ the answer time (1000 streams answered
    /// in 200 ms: 5000/s), so while every connection has all its streams open with work
    /// waiting, the sender multiplies them, and gives a step back when it did not raise
    /// the rate (`ConnectionGrowth`). Set it to `connectionsPerShard` for a fixed number.
    /// Default: 2 for the binary protocol, 128 for HTTP/2 (none is opened unless the answers
    /// are slow; what each costs in memory is in the Architecture article), or
    /// `connectionsPerShard` if more. The default follows `transport`.
    public var maximumConnectionsPerShard: Int {
        get { maximumConnectionsSetting ?? max(connectionsPerShard, http2 == nil ? 2 : 128) }
        set { maximumConnectionsSetting = newValue }
    }
    private var maximumConnectionsSetting: Int?
    /// At most one connection is added per this long, so the last one shows its effect first.
    public var connectionGrowthInterval: Duration = .milliseconds(250)
    /// Bytes of staging ring per connection: frames encoded and waiting for `SSL_write`.
    /// Written frames leave it at once (resends are read again from their source), so it
    /// only absorbs the producer's bursts. Default: 2 MiB for the binary protocol. Over
    /// HTTP/2 it holds only notifications sent one at a time (`Sender.trySend`): those read
    /// from a source wait in their shard's staging ring (`sharedStagingCapacity`); default
    /// 256 KiB, untouched unless used. The default follows `transport`.
    public var ringCapacity: Int {
        get { ringCapacitySetting ?? (http2 == nil ? 2 << 20 : 256 << 10) }
        set { ringCapacitySetting = newValue }
    }
    private var ringCapacitySetting: Int?
    /// HTTP/2: bytes of each shard's staging ring, which holds the notifications read from
    /// a source (`Sender.send(contentsOf:)`), encoded, until one of the shard's connections
    /// has a stream free for them. Shared by the connections, so that memory follows what is
    /// about to be sent rather than the number of connections: answers held long free a
    /// stream limit of streams at once on one connection, and the ring only has to hold the
    /// few such bursts that come before the producer refills it. It holds at most two stream
    /// limits of records per connection in use on the shard, so that what a slow gateway has
    /// not taken when a run stops drains in seconds. Default: 1 MiB (about 8,000 small
    /// notifications).
    public var sharedStagingCapacity: Int = 1 << 20
    /// Bytes per connection for notifications sent one at a time (`Sender.send(token:payload:)`),
    /// which are kept until final: it bounds that path's rate to about this ÷ (error wait
    /// × notification size). `send(contentsOf:)` does not use it.
    public var retainedCapacity: Int = 4 << 20
    /// How long after a notification is written (and acknowledged by the gateway's TCP)
    /// an error response can still name it: then it is presumed accepted. Apple answers
    /// within about a second. Raised for the rest of the run when an error arrives later.
    public var errorWait: Duration = .seconds(1)
    /// How long presumed-accepted notifications keep their records, so that a late error
    /// still rejects exactly what it names and resends what follows: they count as
    /// accepted when released. At least twice the error wait; released sooner once nothing
    /// more will be sent (or memory runs short). A checkpoint lags by about this much.
    public var recordRetention: Duration = .seconds(5)
    /// Delay between reconnect attempts.
    public var reconnectBackoff = Backoff()
    /// Keep a second, idle link per connection, connected and handshaken, to take over
    /// when the gateway closes the active one after an error response: an error then costs
    /// no connection setup (two round trips over a network). Doubles the connections.
    public var usesStandbyConnections = true
    /// How long a connection attempt may take, TCP connect and TLS handshake, before it
    /// counts as failed: a gateway that accepts and never answers, a SYN that is lost.
    public var connectTimeout: Duration = .seconds(10)
    /// How long the gateway may take none of the bytes written to it while some wait
    /// before the connection is dropped as stalled (noticed within twice this): a gateway
    /// that stopped reading, a path that went dark. What was in flight is then handled as
    /// after any drop, and the connection counts as a failed attempt.
    public var stallTimeout: Duration = .seconds(30)
    /// Consecutive failed connection attempts (refused, timed out, stalled, or dropped
    /// without an error response) after which a connection gives up.
    public var connectAttempts = 8
    /// After a graceful shutdown (SIGTERM, when run as a `Service`), how long what is in
    /// flight may take to become final; then what is still open fails (as
    /// `deliveryUnknown` under at-most-once, else as `cancelled`, to be sent again by a
    /// resume), and the sender finishes. Cancelling the service ends it at once.
    public var drainTimeout: Duration = .seconds(30)
    /// How many silent drops a notification may be in flight for before it fails.
    public var retryBudget = 3
    /// At-least-once (resend) or at-most-once (report) after a silent drop.
    public var dropPolicy: DropPolicy = .atLeastOnce
    /// The protocol: HTTP/2 (with its topic, push type and authentication), or binary (with
    /// its frame format: command 2, 1 or 0; command 0 has no identifiers, see `Sender`).
    public var transport: Transport
    /// Expiry written when a notification gives none (nil: none for command 2, 0 for command 1).
    public var defaultExpiry: UInt32?
    /// Priority written when a notification gives none (nil: the gateway assumes 10).
    public var defaultPriority: UInt8?
    /// The largest payload the binary protocol accepts (2048 bytes). HTTP/2 takes each push
    /// type's limit (4096 bytes, 5120 for VoIP).
    public var maximumPayloadLength = 2048
    /// The kernel send buffer of each gateway connection, in bytes, or nil for the kernel's
    /// autotuning (up to several MiB), the default: over a long path the buffer must hold a
    /// round trip's worth of bytes, and a fixed size caps a connection at that much per
    /// round trip. Whatever sits in it when the gateway rejects a notification must be
    /// resent, so while error responses come the connection shrinks it (halved per error,
    /// doubled back without), whatever this says; this is the most it grows back to.
    public var socketSendBuffer: Int?
    /// Pin each shard's thread to a core.
    public var pinThreads = true
    /// Seed for backoff jitter, so runs can be reproduced.
    public var seed: UInt64 = 0x5A1F0

    /// A sender for the gateway at `host:port` speaking `transport` (by default the binary
    /// protocol in command 2).
    public init(host: String, port: Int, tls: TLSConfiguration, transport: Transport = .binary(.frame)) {
        self.host = host
        self.port = port
        self.tls = tls
        self.transport = transport
    }

    /// A sender for `gateway` (`.production`, `.sandbox`: the HTTP/2 provider API, or any
    /// host and port) speaking `transport`.
    public init(gateway: Endpoint, tls: TLSConfiguration, transport: Transport) {
        self.init(host: gateway.host, port: gateway.port, tls: tls, transport: transport)
    }

    /// The HTTP/2 options, when the sender speaks HTTP/2.
    /// The clock provider tokens are signed and renewed by (UNIX seconds); nil: the
    /// system's. Tests move their own.
    package var tokenClock: (@Sendable () -> Int64)?

    package var http2: HTTP2Options? {
        if case .http2(let options) = transport { return options }
        return nil
    }

    /// The largest payload of a notification that sets nothing for itself.
    var payloadLimit: Int { http2?.pushType.payloadLimit ?? maximumPayloadLength }
}
