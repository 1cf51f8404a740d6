import SalvoIO
import SalvoWire
import Synchronization

/// Notifications sent one at a time (`Sender.send(token:payload:)`) have no source to be
/// read again from, so a lane keeps their token and payload here until they are final:
/// the expensive path. Memory holds rate × error wait of them, and a full store is
/// backpressure; `Sender.send(contentsOf:)` costs nothing of the kind.
///
/// It is source 0 of every lane: positions are entry indices, consecutive per lane.
/// Producers append under `lock`; the loop reads entries again to resend them and hands
/// space back as the window makes them final, oldest first.
///
/// Thread rule: producers on any thread, holding `lock`; `release` and readers on the lane's loop (debug builds check appends and releases).
final class RetainedStore: @unchecked Sendable {
    static let sourceID: SourceID = 0

    /// sequence:u64 expiry:u32 priority:u8 flags:u8 payloadLength:u16 token:32
    private static let headerLength = 48
    private static let hasExpiry: UInt8 = 1, hasPriority: UInt8 = 2

    let byteCapacity: Int
    private let entryCapacity: Int
    private let bytes: UnsafeMutableRawPointer
    /// Virtual byte offset of each entry, by entry index modulo `entryCapacity`.
    private let offsets: UnsafeMutablePointer<UInt64>

    /// Producers append under this lock (and publish the frame to the staging ring while holding it).
    let lock = Locked<Void>(())
    private var nextEntry: UInt64 = 0
    private var writeOffset: UInt64 = 0
    /// Entries before this are final; set by the loop.
    private let finalEntry = Atomic<UInt64>(0)
    /// Set by a producer that found the store full; the loop then releases without waiting
    /// for the retention.
    let isUnderPressure = Atomic<Bool>(false)
    /// Debug builds: stop a second thread on either side while one is there (a producer
    /// without `lock`, two loops).
    private let producerSide = OneThreadAtATime()
    private let loopSide = OneThreadAtATime()

    init(byteCapacity: Int, maximumPayloadLength: Int) {
        precondition(byteCapacity >= 2 * (Self.headerLength + maximumPayloadLength), "the store must hold two entries")
        self.byteCapacity = byteCapacity
        entryCapacity = max(16, byteCapacity / (Self.headerLength + 16))
        bytes = .allocate(byteCount: byteCapacity, alignment: 16)
        offsets = .allocate(capacity: entryCapacity)
    }

    deinit {
        bytes.deallocate()
        offsets.deallocate()
    }

    // MARK: Producer side (holding `lock`)

    /// Copies a notification in; returns its position, or nil when the store is full.
    func append(token: DeviceToken, payload: UnsafeRawBufferPointer, expiry: UInt32?, priority: UInt8?,
                sequence: UInt64) -> SourcePosition? {
        let entered = producerSide.enter()
        defer { producerSide.leave(entered) }
        let length = Self.headerLength + payload.count
        let released = finalEntry.load(ordering: .acquiring)
        guard nextEntry - released < UInt64(entryCapacity) else { return full() }
        let freeFrom = released < nextEntry ? offsets[Int(released % UInt64(entryCapacity))] : writeOffset
        // Entries never wrap: one that would cross the end starts at the beginning instead.
        var start = writeOffset
        let physical = Int(start % UInt64(byteCapacity))
        if physical + length > byteCapacity { start += UInt64(byteCapacity - physical) }
        guard start + UInt64(length) - freeFrom <= UInt64(byteCapacity) else { return full() }

        let base = bytes + Int(start % UInt64(byteCapacity))
        base.storeBytes(of: sequence, as: UInt64.self)
        base.storeBytes(of: expiry ?? 0, toByteOffset: 8, as: UInt32.self)
        base.storeBytes(of: priority ?? 0, toByteOffset: 12, as: UInt8.self)
        base.storeBytes(of: (expiry != nil ? Self.hasExpiry : 0) | (priority != nil ? Self.hasPriority : 0),
                        toByteOffset: 13, as: UInt8.self)
        base.storeBytes(of: UInt16(payload.count), toByteOffset: 14, as: UInt16.self)
        token.copyBytes(to: base + 16)
        if payload.count > 0 { (base + Self.headerLength).copyMemory(from: payload.baseAddress!, byteCount: payload.count) }
        offsets[Int(nextEntry % UInt64(entryCapacity))] = start
        defer { nextEntry += 1 }
        writeOffset = start + UInt64(length)
        return SourcePosition(offset: nextEntry, sequence: sequence)
    }

    /// Takes back the entry `append` just made (its frame did not fit the staging ring).
    func removeLast() {
        let entered = producerSide.enter()
        defer { producerSide.leave(entered) }
        nextEntry -= 1
        writeOffset = offsets[Int(nextEntry % UInt64(entryCapacity))]
    }

    private func full() -> SourcePosition? {
        isUnderPressure.store(true, ordering: .relaxed)
        return nil
    }

    // MARK: Loop side

    /// Entries before `entry` are final: their space is free again.
    func release(before entry: UInt64) {
        let entered = loopSide.enter()
        defer { loopSide.leave(entered) }
        guard entry > finalEntry.load(ordering: .relaxed) else { return }
        finalEntry.store(entry, ordering: .releasing)
        isUnderPressure.store(false, ordering: .relaxed)
    }

    /// Reads the store's entries again, from any position.
    final class Reader: NotificationReader {
        private let store: RetainedStore
        private var entry: UInt64 = 0

        init(_ store: RetainedStore) { self.store = store }

        func next() -> SourceNotification? {
            let start = store.offsets[Int(entry % UInt64(store.entryCapacity))]
            let base = UnsafeRawPointer(store.bytes + Int(start % UInt64(store.byteCapacity)))
            let flags = base.load(fromByteOffset: 13, as: UInt8.self)
            let payloadLength = Int(base.loadUnaligned(fromByteOffset: 14, as: UInt16.self))
            guard let token = try? DeviceToken(bytes: UnsafeRawBufferPointer(start: base + 16, count: DeviceToken.byteCount))
            else { return nil }
            defer { entry += 1 }
            return SourceNotification(
                token: token, payload: UnsafeRawBufferPointer(start: base + Self.headerLength, count: payloadLength),
                expiry: flags & RetainedStore.hasExpiry != 0 ? base.loadUnaligned(fromByteOffset: 8, as: UInt32.self) : nil,
                priority: flags & RetainedStore.hasPriority != 0 ? base.load(fromByteOffset: 12, as: UInt8.self) : nil,
                position: SourcePosition(offset: entry, sequence: base.loadUnaligned(as: UInt64.self)))
        }

        func seek(to position: SourcePosition) { entry = position.offset }

        private static var headerLength: Int { RetainedStore.headerLength }
    }
}
