import SalvoIO

/// The broadcast channels an `H2MockGateway` knows: per bundle id, each channel's id and
/// storage policy, as Apple's channel management service keeps them for one environment.
///
/// Shared by the gateway's push connections (a broadcast names a channel) and its channel
/// management connections (which create, read, delete and list them), on any loop thread,
/// behind one lock. Tests create channels here directly (`gateway.channels.create(…)`),
/// without the management port.
///
/// As Apple's: ids are chosen here, never by the caller: 16 random bytes in standard
/// base64 with padding (24 characters); a deleted id is never issued again; at most
/// `limit` channels per bundle id exist at once (`MockChannelRegistry.LimitReached`,
/// answered 400 CannotCreateChannelConfig).
public final class MockChannelRegistry: Sendable {
    /// What APNs keeps of a channel's broadcasts (`message-storage-policy`); fixed when the
    /// channel is created.
    public enum StoragePolicy: Int, Sendable, Hashable, Codable, CaseIterable {
        /// 0: nothing is stored; broadcasts must carry `apns-expiration: 0`.
        case noStorage = 0
        /// 1: the most recent broadcast is stored (for up to eight hours).
        case mostRecent = 1
    }

    /// A create past `limit` channels for one bundle id.
    public struct LimitReached: Error, Sendable, Hashable, CustomStringConvertible {
        /// The bundle id that has `limit` channels.
        public var bundleID: String
        /// The limit it reached.
        public var limit: Int
        /// What happened, with Apple's reason for it.
        public var description: String { "\(bundleID) already has \(limit) channels (CannotCreateChannelConfig)" }
    }

    /// Apple's limit: channels per app and environment.
    public static let defaultLimit = 10_000

    /// The most channels one bundle id may have at once.
    public let limit: Int

    private struct Entry {
        var bundle: Int32
        var policy: StoragePolicy
        /// The channel's place in `Table.ids`.
        var number: Int32
    }

    private struct Table {
        /// Bundle ids as bytes, by bundle number (their index): broadcasts find theirs by
        /// the bytes of their path, without making a `String`.
        var bundles: [[UInt8]] = []
        var channels: [ChannelID: Entry] = [:]
        /// Each bundle's live channels, in the order they were created.
        var byBundle: [[ChannelID]] = []
        /// Every id ever issued, deleted ones too: never issued again.
        var issued: Set<ChannelID> = []
        /// Every channel ever created, deleted ones too, by number: what a connection counts
        /// broadcasts by (an array index, not a hash of the id).
        var ids: [ChannelID] = []

        mutating func add(_ id: ChannelID, bundle: Int32, policy: StoragePolicy) {
            channels[id] = Entry(bundle: bundle, policy: policy, number: Int32(ids.count))
            byBundle[Int(bundle)].append(id)
            ids.append(id)
        }

        mutating func bundleNumber(creating bundleID: String) -> Int32 {
            let bytes = Array(bundleID.utf8)
            if let index = bundles.firstIndex(of: bytes) { return Int32(index) }
            bundles.append(bytes)
            byBundle.append([])
            return Int32(bundles.count - 1)
        }

        func bundleNumber(of bundleID: String) -> Int32? {
            bundles.firstIndex(of: Array(bundleID.utf8)).map(Int32.init)
        }
    }

    private let table = Locked(Table())

    /// An empty registry allowing `limit` channels per bundle id (Apple's 10,000 by default).
    public init(limit: Int = defaultLimit) {
        self.limit = max(0, limit)
    }

    /// Creates a channel for `bundleID` and returns its new id (base64, as Apple's).
    ///
    /// - Throws: `LimitReached` when the bundle id already has `limit` channels.
    @discardableResult
    public func create(bundleID: String, policy: StoragePolicy) throws(LimitReached) -> String {
        var random = SystemRandomNumberGenerator()
        let id = try table.withLock { table throws(LimitReached) -> ChannelID in
            let bundle = table.bundleNumber(creating: bundleID)
            guard table.byBundle[Int(bundle)].count < limit else { throw LimitReached(bundleID: bundleID, limit: limit) }
            var id = ChannelID(high: random.next(), low: random.next())
            while !table.issued.insert(id).inserted { id = ChannelID(high: random.next(), low: random.next()) }
            table.add(id, bundle: bundle, policy: policy)
            return id
        }
        return id.base64
    }

    /// Creates channels `presetID(0)` to `presetID(count - 1)` for `bundleID`: ids known in
    /// advance, for a benchmark whose sender runs in another process than the mock. Ids
    /// already issued are skipped.
    ///
    /// - Throws: `LimitReached` when they would take the bundle id past `limit`.
    public func createPresets(bundleID: String, count: Int, policy: StoragePolicy) throws(LimitReached) {
        try table.withLock { table throws(LimitReached) in
            let bundle = table.bundleNumber(creating: bundleID)
            for n in 0..<count {
                let id = Self.presetChannel(n)
                guard table.issued.insert(id).inserted else { continue }
                guard table.byBundle[Int(bundle)].count < limit else { throw LimitReached(bundleID: bundleID, limit: limit) }
                table.add(id, bundle: bundle, policy: policy)
            }
        }
    }

    /// The id of preset channel `n` (see `createPresets`).
    public static func presetID(_ n: Int) -> String { presetChannel(n).base64 }

    /// "SALVO" and the number: never a random id's (those have version bits of no kind, but
    /// 2^-88 of colliding is as good as never).
    private static func presetChannel(_ n: Int) -> ChannelID {
        ChannelID(high: 0x5341_4C56_4F00_0000, low: UInt64(n))
    }

    /// The storage policy of channel `channelID` of `bundleID`; nil when there is no such
    /// channel (never created, deleted, malformed, or another bundle id's).
    public func policy(of channelID: String, bundleID: String) -> StoragePolicy? {
        guard let id = ChannelID(base64: channelID) else { return nil }
        return table.withLock { table in
            guard let bundle = table.bundleNumber(of: bundleID), let entry = table.channels[id], entry.bundle == bundle else {
                return nil
            }
            return entry.policy
        }
    }

    /// Deletes channel `channelID` of `bundleID`; false when there is no such channel.
    @discardableResult
    public func delete(_ channelID: String, bundleID: String) -> Bool {
        guard let id = ChannelID(base64: channelID) else { return false }
        return table.withLock { table in
            guard let bundle = table.bundleNumber(of: bundleID), let entry = table.channels[id], entry.bundle == bundle else {
                return false
            }
            table.channels[id] = nil
            table.byBundle[Int(bundle)].removeAll { $0 == id }
            return true
        }
    }

    /// The ids of `bundleID`'s channels, oldest first.
    public func list(bundleID: String) -> [String] {
        let ids = table.withLock { table in table.bundleNumber(of: bundleID).map { table.byBundle[Int($0)] } ?? [] }
        return ids.map(\.base64)
    }

    /// How many channels exist, over all bundle ids.
    public var count: Int { table.withLock { $0.channels.count } }

    // MARK: For broadcasts (no allocation)

    /// The number of the bundle id spelled by `bytes`, or -1 when no channel was ever
    /// created for it. Linear in the number of bundle ids (a handful), without allocating.
    func bundleNumber(_ bytes: UnsafeRawBufferPointer) -> Int32 {
        table.withLock { table in
            for (index, bundle) in table.bundles.enumerated() where bundle.elementsEqual(bytes) { return Int32(index) }
            return -1
        }
    }

    /// The policy and number of channel `id` when it belongs to bundle number `bundle`.
    func lookUp(_ id: ChannelID, bundle: Int32) -> (policy: StoragePolicy, number: Int32)? {
        guard bundle >= 0 else { return nil }
        return table.withLock { table in
            guard let entry = table.channels[id], entry.bundle == bundle else { return nil }
            return (entry.policy, entry.number)
        }
    }

    /// Every channel ever created, by number (see `lookUp`).
    func idsByNumber() -> [ChannelID] { table.withLock { $0.ids } }
}

/// A channel id as the mock issues them: 16 bytes, written as standard base64 with padding
/// (24 characters, the last two `==`), as Apple's look. Kept as two words, so that a
/// broadcast's channel is found without allocating.
struct ChannelID: Hashable, Sendable {
    var high: UInt64
    var low: UInt64

    /// What an `apns-channel-id` value is.
    enum Parsed: Equatable {
        /// A 16-byte id, possibly one the mock issued.
        case id(ChannelID)
        /// Well-formed base64 of another length (or with stray bits): no id the mock issues,
        /// so never registered (Apple says not to assume an id's length).
        case foreign
        /// Not base64: BadChannelId.
        case malformed
    }

    init(high: UInt64, low: UInt64) {
        self.high = high
        self.low = low
    }

    /// The id `text` spells in canonical form; nil for anything else.
    init?(base64 text: String) {
        var text = text
        let parsed = text.withUTF8 { Self.parse(UnsafeRawBufferPointer($0)) }
        guard case .id(let id) = parsed else { return nil }
        self = id
    }

    /// Standard base64 (RFC 4648 §4): a nonzero multiple of four characters of the
    /// alphabet, with at most two `=` at the end only. By table, without a branch or a
    /// bounds check per character: every broadcast's id is parsed.
    static func parse(_ text: UnsafeRawBufferPointer) -> Parsed {
        guard !text.isEmpty, text.count % 4 == 0 else { return .malformed }
        let padding = text[text.count - 1] == UInt8(ascii: "=") ? (text[text.count - 2] == UInt8(ascii: "=") ? 2 : 1) : 0
        let sextets = Self.sextets, bytes = text.baseAddress!.assumingMemoryBound(to: UInt8.self)
        // A digit's value is below 64 and `invalid` is not: or'ed together, one shows.
        var seen: UInt8 = 0
        for offset in 0 ..< text.count - padding { seen |= sextets[Int(bytes[offset])] }
        guard seen < 64 else { return .malformed }
        guard text.count == 24 && padding == 2 else { return .foreign }
        // 22 sextets: 128 bits, then four that must be zero.
        var high: UInt64 = 0, low: UInt64 = 0
        for offset in 0 ..< 10 { high = high << 6 | UInt64(sextets[Int(bytes[offset])]) }
        let straddling = UInt64(sextets[Int(bytes[10])]), last = UInt64(sextets[Int(bytes[21])])
        high = high << 4 | straddling >> 2
        low = straddling & 0x3
        for offset in 11 ..< 21 { low = low << 6 | UInt64(sextets[Int(bytes[offset])]) }
        // The last sextet's low four bits are beyond the 128: nonzero, it is another id.
        guard last & 0xF == 0 else { return .foreign }
        low = low << 2 | last >> 4
        return .id(ChannelID(high: high, low: low))
    }

    /// Not a base64 digit, in `sextets`.
    private static let invalid: UInt8 = 0xFF
    /// Each byte's base64 value, or `invalid`: made once and never freed (read without
    /// bounds checks).
    nonisolated(unsafe) private static let sextets: UnsafePointer<UInt8> = {
        let table = UnsafeMutablePointer<UInt8>.allocate(capacity: 256)
        for byte in 0 ..< 256 {
            table[byte] = switch UInt8(byte) {
            case UInt8(ascii: "A")...UInt8(ascii: "Z"): UInt8(byte) - UInt8(ascii: "A")
            case UInt8(ascii: "a")...UInt8(ascii: "z"): UInt8(byte) - UInt8(ascii: "a") + 26
            case UInt8(ascii: "0")...UInt8(ascii: "9"): UInt8(byte) - UInt8(ascii: "0") + 52
            case UInt8(ascii: "+"): 62
            case UInt8(ascii: "/"): 63
            default: invalid
            }
        }
        return UnsafePointer(table)
    }()

    /// One word into the hasher instead of two: the ids are random, so their halves mix.
    func hash(into hasher: inout Hasher) { hasher.combine(high ^ low.byteSwapped) }

    private static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)

    /// The 24 characters.
    var base64: String {
        var bytes: [UInt8] = []
        bytes.reserveCapacity(24)
        for shift in stride(from: 58, through: 4, by: -6) { bytes.append(Self.alphabet[Int(high >> UInt64(shift) & 0x3F)]) }
        bytes.append(Self.alphabet[Int((high & 0xF) << 2 | low >> 62)])
        for shift in stride(from: 56, through: 2, by: -6) { bytes.append(Self.alphabet[Int(low >> UInt64(shift) & 0x3F)]) }
        bytes.append(Self.alphabet[Int((low & 0x3) << 4)])
        bytes.append(contentsOf: [UInt8(ascii: "="), UInt8(ascii: "=")])
        return String(decoding: bytes, as: UTF8.self)
    }
}
