import SalvoEngine
import SalvoWire

/// A made-up campaign for demos and benchmarks: notification `n` (from 1) goes to the
/// token `5a5a…5a` followed by `n` as 8 big-endian bytes, all with one payload; or, with
/// `channels`, is a broadcast to channel `n % channels.count`. Made on the fly from `n`, so
/// reading it again costs nothing and it holds no memory per notification.
package struct SyntheticCampaign: NotificationSource {
    package let count: Int
    package let payload: [UInt8]
    package var priority: UInt8?
    /// Broadcast channel ids; empty: pushes to devices.
    package var channels: [String]

    package init(count: Int, payload: [UInt8], priority: UInt8? = nil, channels: [String] = []) {
        self.count = count
        self.payload = payload
        self.priority = priority
        self.channels = channels
    }

    package func makeReader() -> Reader { Reader(self) }

    package final class Reader: NotificationReader {
        private let campaign: SyntheticCampaign
        private let payload: UnsafeMutableRawBufferPointer
        private var tokenBytes = [UInt8](repeating: 0x5A, count: DeviceToken.byteCount)
        private var upcoming = 1
        /// The channel ids' bytes, and a broadcast's request fields (pointing into them).
        private let channelIDs: [UnsafeMutableRawBufferPointer]
        private let request: UnsafeMutablePointer<RequestFields>

        init(_ campaign: SyntheticCampaign) {
            self.campaign = campaign
            payload = .allocate(byteCount: campaign.payload.count, alignment: 1)
            payload.copyBytes(from: campaign.payload)
            channelIDs = campaign.channels.map { id in
                let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: id.utf8.count, alignment: 1)
                bytes.copyBytes(from: id.utf8)
                return bytes
            }
            request = .allocate(capacity: 1)
            request.initialize(to: RequestFields())
        }

        deinit {
            payload.deallocate()
            for id in channelIDs { id.deallocate() }
            request.deallocate()
        }

        package func next() -> SourceNotification? {
            guard upcoming <= campaign.count else { return nil }
            defer { upcoming += 1 }
            var fields: UnsafePointer<RequestFields>?
            if !channelIDs.isEmpty {
                request.pointee.channelID = UnsafeRawBufferPointer(channelIDs[upcoming % channelIDs.count])
                fields = UnsafePointer(request)
            }
            return SourceNotification(token: Self.token(upcoming, into: &tokenBytes), payload: UnsafeRawBufferPointer(payload),
                                      priority: campaign.priority,
                                      position: SourcePosition(offset: UInt64(upcoming), sequence: UInt64(upcoming)),
                                      request: fields)
        }

        package func seek(to position: SourcePosition) { upcoming = Int(position.offset) }

        static func token(_ n: Int, into bytes: inout [UInt8]) -> DeviceToken {
            withUnsafeBytes(of: UInt64(n).bigEndian) { bytes.replaceSubrange(24..<32, with: $0) }
            return bytes.withUnsafeBytes { try! DeviceToken(bytes: $0) }
        }
    }
}
