import Foundation
import SalvoWire

/// What a channel request came back with, on success.
package enum ChannelResult: Sendable, Hashable {
    /// create and read: the channel.
    case channel(BroadcastChannel)
    /// delete.
    case deleted
    /// list: the ids.
    case channels([String])
}

/// What to do with an answer: judged from its status, headers and body alone, so that the
/// mapping is tested without a server.
package enum ChannelVerdict: Sendable, Hashable {
    /// Done.
    case success(ChannelResult)
    /// 403 ExpiredProviderToken: renew the token and send again (once).
    case expiredToken
    /// 429, 500 or 503: send again after a pause, a bounded number of times.
    case retry(status: Int, reason: BroadcastChannelError.Reason)
    /// Refused for good.
    case refused(status: Int, reason: BroadcastChannelError.Reason)
    /// A success status in a form the protocol does not allow.
    case unexpected(String)
}

package enum ChannelAnswer {
    /// The longest body read: answers are a few hundred bytes, except list's, whose 10,000
    /// ids of about 30 characters fit well within this.
    package static let maximumBodyBytes = 4 << 20

    /// Judges the answer to `operation`, whose request went with `requestID`.
    ///
    /// - Parameters:
    ///   - channelIDHeader: the response's `apns-channel-id` (create's new id).
    ///   - requestID: the response's `apns-request-id`, or the request's when APNs sent none.
    package static func verdict(_ operation: ChannelOperation, status: Int, channelIDHeader: String?,
                                requestID: String, body: [UInt8]) -> ChannelVerdict {
        guard (200...299).contains(status) else {
            let reason = Self.reason(status: status, body: body)
            switch (status, reason) {
            case (403, .apns(.expiredProviderToken)): return .expiredToken
            // TooManyProviderTokenUpdates is a 429 a pause does not cure: the team's token
            // changes too often.
            case (429, .apns(.tooManyProviderTokenUpdates)): return .refused(status: status, reason: reason)
            case (429, _), (500, _), (503, _): return .retry(status: status, reason: reason)
            default: return .refused(status: status, reason: reason)
            }
        }
        switch operation {
        case .create(let policy):
            guard let id = channelIDHeader, !id.isEmpty else {
                return .unexpected("\(status) without the new channel's id in apns-channel-id")
            }
            return .success(.channel(BroadcastChannel(id: id, storagePolicy: policy, requestID: requestID)))
        case .read(let id):
            guard let settings = try? JSONDecoder().decode(ChannelSettings.self, from: Data(body)) else {
                return .unexpected("\(status) with a body that is not {\"message-storage-policy\": 0 or 1, …}: \(excerpt(body))")
            }
            guard let policy = MessageStoragePolicy(rawValue: settings.storagePolicy) else {
                return .unexpected("message-storage-policy \(settings.storagePolicy), neither 0 nor 1")
            }
            return .success(.channel(BroadcastChannel(id: id, storagePolicy: policy, requestID: requestID)))
        case .delete:
            return .success(.deleted)
        case .list:
            // One passage of Apple's page says list answers with an empty body: no channels.
            guard body.contains(where: { !isWhitespace($0) }) else { return .success(.channels([])) }
            guard let list = try? JSONDecoder().decode(ChannelList.self, from: Data(body)) else {
                return .unexpected("\(status) with a body that is not {\"channels\": [...]}: \(excerpt(body))")
            }
            return .success(.channels(list.channels ?? []))
        }
    }

    /// The body's `reason`: one of Apple's, or its text, or what the body was instead.
    package static func reason(status: Int, body: [UInt8]) -> BroadcastChannelError.Reason {
        guard let error = try? JSONDecoder().decode(ErrorBody.self, from: Data(body)), let text = error.reason else {
            let kind = body.isEmpty ? "an empty body" : "a body without a reason: \(excerpt(body))"
            return .other("(HTTP \(status), \(kind))")
        }
        return APNsReason(name: text).map(BroadcastChannelError.Reason.apns) ?? .other(text)
    }

    /// At most 200 bytes of `body`, for a message (a misrouted request can get a web page back).
    private static func excerpt(_ body: [UInt8]) -> String {
        let text = String(decoding: body.prefix(200), as: UTF8.self)
        return body.count > 200 ? text + "…" : text
    }

    private static func isWhitespace(_ byte: UInt8) -> Bool { byte == 0x20 || byte == 0x09 || byte == 0x0A || byte == 0x0D }

    private struct ChannelSettings: Decodable {
        var storagePolicy: Int
        enum CodingKeys: String, CodingKey { case storagePolicy = "message-storage-policy" }
    }

    private struct ChannelList: Decodable {
        var channels: [String]?
    }

    private struct ErrorBody: Decodable {
        var reason: String?
    }
}
