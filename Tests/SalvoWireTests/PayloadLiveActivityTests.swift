import Testing
@testable import SalvoWire

@Suite("PayloadBuilder Live Activity")
struct PayloadLiveActivityTests {
    typealias LiveActivity = PayloadBuilder.LiveActivity

    static let score: JSONValue = .object([(key: "home", value: .int(1)), (key: "away", value: .int(0))])
    static let match: JSONValue = .object([(key: "teams", value: .array([.string("A"), .string("B")]))])

    static func start() -> LiveActivity {
        var activity = LiveActivity(event: .start, timestamp: 1_767_225_600)
        activity.contentState = score
        activity.attributesType = "MatchAttributes"
        activity.attributes = match
        return activity
    }

    @Test func aStartCarriesItsAttributesAfterTheAlert() throws {
        var builder = PayloadBuilder()
        builder.alertTitle = "Kick-off"
        builder.alertBody = "A vs B"
        var activity = Self.start()
        activity.staleDate = 1_767_229_200
        activity.inputPushToken = true
        builder.liveActivity = activity
        #expect(try builder.json() == #"{"aps":{"alert":{"title":"Kick-off","body":"A vs B"},"timestamp":1767225600,"#
            + #""event":"start","content-state":{"home":1,"away":0},"stale-date":1767229200,"#
            + #""attributes-type":"MatchAttributes","attributes":{"teams":["A","B"]},"input-push-token":1}}"#)
    }

    @Test func aStartCanListenOnABroadcastChannel() throws {
        var builder = PayloadBuilder()
        var activity = Self.start()
        activity.inputPushChannel = "dHN0LXNyaw=="
        builder.liveActivity = activity
        #expect(try builder.json() == #"{"aps":{"timestamp":1767225600,"event":"start","content-state":{"home":1,"away":0},"#
            + #""attributes-type":"MatchAttributes","attributes":{"teams":["A","B"]},"input-push-channel":"dHN0LXNyaw=="}}"#)
    }

    @Test func anUpdateCarriesItsContentStateAndRelevance() throws {
        var builder = PayloadBuilder()
        builder.relevanceScore = 0.75
        var activity = LiveActivity(event: .update, timestamp: 1_767_226_000)
        activity.contentState = Self.score
        activity.staleDate = 1_767_229_200
        builder.liveActivity = activity
        #expect(try builder.json() == #"{"aps":{"relevance-score":0.75,"timestamp":1767226000,"event":"update","#
            + #""content-state":{"home":1,"away":0},"stale-date":1767229200}}"#)
    }

    @Test func anEndMayLeaveTheContentAndSetsWhenItIsDismissed() throws {
        var builder = PayloadBuilder()
        var activity = LiveActivity(event: .end, timestamp: 1_767_232_800)
        activity.dismissalDate = 1_767_236_400
        builder.liveActivity = activity
        #expect(try builder.json() == #"{"aps":{"timestamp":1767232800,"event":"end","dismissal-date":1767236400}}"#)

        activity.contentState = Self.score
        builder.liveActivity = activity
        #expect(try builder.json()
            == #"{"aps":{"timestamp":1767232800,"event":"end","content-state":{"home":1,"away":0},"dismissal-date":1767236400}}"#)
    }

    /// A rule break, the error it raises, and that error's message.
    struct Breach: Sendable, CustomStringConvertible {
        let description: String
        let change: @Sendable (inout LiveActivity) -> Void
        let error: PayloadError
        let message: String
    }

    static let breaches: [Breach] = [
        Breach(description: "start without attributes-type", change: { $0.attributesType = nil },
               error: .liveActivityFieldMissing(key: "attributes-type", event: .start),
               message: "a Live Activity start needs attributes-type"),
        Breach(description: "start without attributes", change: { $0.attributes = nil },
               error: .liveActivityFieldMissing(key: "attributes", event: .start),
               message: "a Live Activity start needs attributes"),
        Breach(description: "start without content-state", change: { $0.contentState = nil },
               error: .liveActivityFieldMissing(key: "content-state", event: .start),
               message: "a Live Activity start needs content-state"),
        Breach(description: "update without content-state",
               change: { $0 = LiveActivity(event: .update, timestamp: 1) },
               error: .liveActivityFieldMissing(key: "content-state", event: .update),
               message: "a Live Activity update needs content-state"),
        Breach(description: "dismissal-date on an update",
               change: { $0 = LiveActivity(event: .update, timestamp: 1); $0.contentState = score; $0.dismissalDate = 2 },
               error: .liveActivityFieldNotAllowed(key: "dismissal-date", event: .update, allowedWith: .end),
               message: "dismissal-date goes only with a Live Activity end, not update"),
        Breach(description: "dismissal-date on a start", change: { $0.dismissalDate = 2 },
               error: .liveActivityFieldNotAllowed(key: "dismissal-date", event: .start, allowedWith: .end),
               message: "dismissal-date goes only with a Live Activity end, not start"),
        Breach(description: "attributes-type on an end",
               change: { $0 = LiveActivity(event: .end, timestamp: 1); $0.attributesType = "MatchAttributes" },
               error: .liveActivityFieldNotAllowed(key: "attributes-type", event: .end, allowedWith: .start),
               message: "attributes-type goes only with a Live Activity start, not end"),
        Breach(description: "attributes on an end",
               change: { $0 = LiveActivity(event: .end, timestamp: 1); $0.attributes = match },
               error: .liveActivityFieldNotAllowed(key: "attributes", event: .end, allowedWith: .start),
               message: "attributes goes only with a Live Activity start, not end"),
        Breach(description: "input-push-token on an end",
               change: { $0 = LiveActivity(event: .end, timestamp: 1); $0.inputPushToken = true },
               error: .liveActivityFieldNotAllowed(key: "input-push-token", event: .end, allowedWith: .start),
               message: "input-push-token goes only with a Live Activity start, not end"),
        Breach(description: "input-push-channel on an update",
               change: { $0 = LiveActivity(event: .update, timestamp: 1); $0.contentState = score; $0.inputPushChannel = "c" },
               error: .liveActivityFieldNotAllowed(key: "input-push-channel", event: .update, allowedWith: .start),
               message: "input-push-channel goes only with a Live Activity start, not update"),
        Breach(description: "content-state that is not an object", change: { $0.contentState = .array([.int(1)]) },
               error: .notAnObject(key: "content-state"), message: "content-state must be a JSON object"),
        Breach(description: "attributes that are not an object", change: { $0.attributes = .string("A") },
               error: .notAnObject(key: "attributes"), message: "attributes must be a JSON object"),
        Breach(description: "an infinite number in attributes",
               change: { $0.attributes = .object([(key: "odds", value: .double(.infinity))]) },
               error: .nonFiniteNumber(key: "attributes.odds"),
               message: "attributes.odds is NaN or infinite; JSON numbers must be finite"),
    ]

    @Test(arguments: breaches) func aRuleBreakIsRefusedByName(_ breach: Breach) throws {
        var activity = Self.start()
        breach.change(&activity)
        var builder = PayloadBuilder()
        builder.liveActivity = activity
        #expect(throws: breach.error) { try builder.validate() }
        #expect(breach.error.description == breach.message)

        let buffer = PayloadBuffer()
        #expect(throws: breach.error) { try builder.build(into: buffer) }
        #expect(buffer.count == 0)
    }

    @Test func theBodyIsShortenedAroundTheLiveActivityKeys() throws {
        var builder = PayloadBuilder()
        builder.alertBody = String(repeating: "a", count: 5000)
        builder.liveActivity = Self.start()
        let payload = try builder.json(maximumLength: APNsPushType.liveactivity.payloadLimit)
        #expect(payload.utf8.count == 4096)
        #expect(payload.hasPrefix(#"{"aps":{"alert":"aaa"#))
        #expect(payload.hasSuffix(#"a…","timestamp":1767225600,"event":"start","content-state":{"home":1,"away":0},"#
            + #""attributes-type":"MatchAttributes","attributes":{"teams":["A","B"]}}}"#))
    }
}
