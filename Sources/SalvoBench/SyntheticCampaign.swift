import SalvoEngine
import SalvoWire

/// A made-up campaign for demos and benchmarks: notification `n` (from 1) goes to the
/// token `5a5a…5a` followed by `n` as 8 big-endian bytes, all with one payload. Made on
/// the fly from `n`, so reading it again costs nothing and it holds no memory per
/// notification.
package struct SyntheticCampaign: NotificationSource {
    package let count: Int
    package let payload: [UInt8]
    package var priority: UInt8?

    package init(count: Int, payload: [UInt8], priority: UInt8? = nil) {
        self.count = count
        self.payload = payload
        self.priority = priority
    }

    package func makeReader() -> Reader { Reader(self) }

    package final class Reader: NotificationReader {
        private let campaign: SyntheticCampaign
        private let payload: UnsafeMutableRawBufferPointer
        private var tokenBytes = [UInt8](repeating: 0x5A, count: DeviceToken.byteCount)
        private var upcoming = 1

        init(_ campaign: SyntheticCampaign) {
            self.campaign = campaign
            payload = .allocate(byteCount: campaign.payload.count, alignment: 1)
            payload.copyBytes(from: campaign.payload)
        }

        deinit { payload.deallocate() }

        package func next() -> SourceNotification? {
            guard upcoming <= campaign.count else { return nil }
            defer { upcoming += 1 }
            return SourceNotification(token: Self.token(upcoming, into: &tokenBytes), payload: UnsafeRawBufferPointer(payload),
                                      priority: campaign.priority,
                                      position: SourcePosition(offset: UInt64(upcoming), sequence: UInt64(upcoming)))
        }

        package func seek(to position: SourcePosition) { upcoming = Int(position.offset) }

        static func token(_ n: Int, into bytes: inout [UInt8]) -> DeviceToken {
            withUnsafeBytes(of: UInt64(n).bigEndian) { bytes.replaceSubrange(24..<32, with: $0) }
            return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
        }
    }
}
