import SalvoWire
import Testing
@testable import SalvoChannels

/// Answers judged from status, headers and body alone: success forms, Apple's error body,
/// and which refusals are retried, renewed or final.
@Suite struct ChannelAnswerTests {
    static let requestID = "0f0e0d0c-0b0a-4908-8706-050403020100"

    static func verdict(_ operation: ChannelOperation, _ status: Int, channelID: String? = nil, body: String = "") -> ChannelVerdict {
        ChannelAnswer.verdict(operation, status: status, channelIDHeader: channelID, requestID: requestID, body: Array(body.utf8))
    }

    @Test func createTakesTheNewIDFromTheHeaderNotTheBody() {
        #expect(Self.verdict(.create(.mostRecent), 201, channelID: "bmV3LWNoYW5uZWw=")
                == .success(.channel(BroadcastChannel(id: "bmV3LWNoYW5uZWw=", storagePolicy: .mostRecent, requestID: Self.requestID))))
        guard case .unexpected(let why) = Self.verdict(.create(.noStorage), 201, body: #"{"channel-id":"x"}"#) else {
            Issue.record("a 201 without apns-channel-id is not a channel")
            return
        }
        #expect(why.contains("apns-channel-id"))
    }

    @Test func readParsesTheStoragePolicy() {
        #expect(Self.verdict(.read(channelID: "abc="), 200, body: #"{"message-storage-policy": 1, "push-type": "LiveActivity"}"#)
                == .success(.channel(BroadcastChannel(id: "abc=", storagePolicy: .mostRecent, requestID: Self.requestID))))
        guard case .unexpected = Self.verdict(.read(channelID: "abc="), 200, body: #"{"message-storage-policy": 7}"#) else {
            Issue.record("policy 7 is not a policy")
            return
        }
        guard case .unexpected = Self.verdict(.read(channelID: "abc="), 200, body: "<html>") else {
            Issue.record("a web page is not a channel")
            return
        }
    }

    @Test func deleteIsDoneOn204AndListToleratesAnEmptyBody() {
        #expect(Self.verdict(.delete(channelID: "abc="), 204) == .success(.deleted))
        #expect(Self.verdict(.list, 200, body: #"{"channels": ["a=", "b="]}"#) == .success(.channels(["a=", "b="])))
        #expect(Self.verdict(.list, 200, body: #"{"channels": []}"#) == .success(.channels([])))
        #expect(Self.verdict(.list, 200) == .success(.channels([])), "one passage of Apple's page says the body is empty")
        #expect(Self.verdict(.list, 200, body: " \n") == .success(.channels([])))
    }

    @Test func refusalsCarryApplesReasonOrItsText() {
        #expect(Self.verdict(.read(channelID: "abc="), 400, body: #"{"reason":"ChannelNotRegistered"}"#)
                == .refused(status: 400, reason: .apns(.channelNotRegistered)))
        #expect(Self.verdict(.create(.noStorage), 400, body: #"{"reason":"CannotCreateChannelConfig"}"#)
                == .refused(status: 400, reason: .apns(.cannotCreateChannelConfig)))
        #expect(Self.verdict(.list, 403, body: #"{"reason":"TopicMismatch"}"#) == .refused(status: 403, reason: .apns(.topicMismatch)))
        #expect(Self.verdict(.list, 400, body: #"{"reason":"SomethingNew"}"#) == .refused(status: 400, reason: .other("SomethingNew")))
        guard case .refused(404, .other(let text)) = Self.verdict(.list, 404) else {
            Issue.record("a 404 without a body is a refusal")
            return
        }
        #expect(text.contains("404") && text.contains("empty body"))
    }

    @Test func throttlingAndServerErrorsAreRetriedAndAnExpiredTokenRenewed() {
        #expect(Self.verdict(.list, 429, body: #"{"reason":"TooManyRequests"}"#) == .retry(status: 429, reason: .apns(.tooManyRequests)))
        #expect(Self.verdict(.list, 500, body: #"{"reason":"InternalServerError"}"#)
                == .retry(status: 500, reason: .apns(.internalServerError)))
        #expect(Self.verdict(.list, 503, body: #"{"reason":"ServiceUnavailable"}"#)
                == .retry(status: 503, reason: .apns(.serviceUnavailable)))
        #expect(Self.verdict(.list, 403, body: #"{"reason":"ExpiredProviderToken"}"#) == .expiredToken)
        // A pause does not cure a team whose token changes too often.
        #expect(Self.verdict(.list, 429, body: #"{"reason":"TooManyProviderTokenUpdates"}"#)
                == .refused(status: 429, reason: .apns(.tooManyProviderTokenUpdates)))
    }

    @Test func anErrorSaysWhatWhereWhyAndTheRequestID() {
        let error = BroadcastChannelError(.refused(status: 400, reason: .apns(.channelNotRegistered)), operation: "read", channelID: "abc=",
                                 gateway: "api-manage-broadcast.push.apple.com:2196", requestID: Self.requestID)
        #expect(error.description == "channel read of abc= at api-manage-broadcast.push.apple.com:2196: refused, 400 "
                + "ChannelNotRegistered: no such channel for this app in this environment (deleted, or made in the other "
                + "environment) (apns-request-id \(Self.requestID))")
        #expect(error.reason == .channelNotRegistered)
        let unreachable = BroadcastChannelError(.transport("cannot connect (connection refused)"), operation: "list", gateway: "127.0.0.1:1",
                                       requestID: Self.requestID)
        #expect(unreachable.description.hasPrefix("channel list at 127.0.0.1:1: no answer: cannot connect"))
        #expect(unreachable.reason == nil)
    }
}
