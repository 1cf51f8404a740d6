import Foundation
import Testing
@testable import SalvoWire

extension PayloadBuilder {
    /// The payload as text (tests only).
    func json(maximumLength: Int = PayloadBuilder.http2MaximumLength) throws -> String {
        let bytes: [UInt8] = try build(maximumLength: maximumLength)
        return String(decoding: bytes, as: UTF8.self)
    }
}

@Suite("PayloadBuilder")
struct PayloadBuilderTests {
    // MARK: exact output, Pushy parity

    @Test func emptyBuilderWritesEmptyAps() throws {
        #expect(try PayloadBuilder().json() == #"{"aps":{}}"#)
    }

    @Test func bodyOnlyIsAPlainString() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "Hello, \"world\"!"
        #expect(try builder.json() == #"{"aps":{"alert":"Hello, \"world\"!"}}"#)
    }

    @Test func bodyOnlyAsDictionaryWhenAsked() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "Hello"
        builder.alwaysUseAlertDictionary = true
        #expect(try builder.json() == #"{"aps":{"alert":{"body":"Hello"}}}"#)
    }

    @Test func localizedAlertKeyAndArguments() throws {
        var builder = PayloadBuilder()
        builder.localizedAlertKey = "GAME_PLAY_REQUEST_FORMAT"
        builder.localizedAlertArguments = ["Jenna", "Frank"]
        #expect(try builder.json()
            == #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT","loc-args":["Jenna","Frank"]}}}"#)

        builder.localizedAlertArguments = []
        #expect(try builder.json() == #"{"aps":{"alert":{"loc-key":"GAME_PLAY_REQUEST_FORMAT"}}}"#)
    }

    @Test func actionButtonKeyAndLaunchImage() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "Game on"
        builder.localizedActionButtonKey = "PLAY"
        builder.launchImage = "launch.png"
        #expect(try builder.json()
            == #"{"aps":{"alert":{"body":"Game on","action-loc-key":"PLAY","launch-image":"launch.png"}}}"#)
    }

    @Test func hiddenActionButtonForcesDictionaryWithNullActionKey() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "Hi"
        builder.showActionButton = false
        #expect(try builder.json() == #"{"aps":{"alert":{"body":"Hi","action-loc-key":null}}}"#)

        builder.localizedActionButtonKey = "IGNORED"
        #expect(try builder.json() == #"{"aps":{"alert":{"body":"Hi","action-loc-key":null}}}"#)

        var noBody = PayloadBuilder()
        noBody.showActionButton = false
        #expect(try noBody.json() == #"{"aps":{"alert":{"action-loc-key":null}}}"#)
    }

    @Test func badgeZeroClearsAndNilIsAbsent() throws {
        var builder = PayloadBuilder()
        builder.badge = 0
        #expect(try builder.json() == #"{"aps":{"badge":0}}"#)
        builder.badge = 42
        #expect(try builder.json() == #"{"aps":{"badge":42}}"#)
        builder.badge = nil
        #expect(try builder.json() == #"{"aps":{}}"#)
    }

    @Test func defaultSound() throws {
        var builder = PayloadBuilder()
        builder.sound = .named(PayloadBuilder.defaultSound)
        #expect(try builder.json() == #"{"aps":{"sound":"default"}}"#)
        builder.sound = .default
        #expect(try builder.json() == #"{"aps":{"sound":"default"}}"#)
        builder.sound = "chime.aiff"
        #expect(try builder.json() == #"{"aps":{"sound":"chime.aiff"}}"#)
    }

    @Test func bodyBadgeSoundTogetherInDocumentedOrder() throws {
        var builder = PayloadBuilder()
        builder.sound = .default
        builder.badge = 3
        builder.alertBody = "You have mail"
        #expect(try builder.json() == #"{"aps":{"alert":"You have mail","badge":3,"sound":"default"}}"#)
    }

    @Test func customPropertiesOfEveryKindFollowApsInInsertionOrder() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "x"
        try builder.setCustomProperty("s", "str \"q\"")
        try builder.setCustomProperty("i", .int(Int64.min))
        try builder.setCustomProperty("d", 0.5)
        try builder.setCustomProperty("b", true)
        try builder.setCustomProperty("n", nil)
        try builder.setCustomProperty("arr", [1, "two", [3, [:]], false])
        try builder.setCustomProperty("obj", ["k": ["deep": [nil, 1e300]], "e": []])
        try builder.setCustomProperty("ключ\n", "unicode key")
        let expected = #"{"aps":{"alert":"x"},"s":"str \"q\"","i":-9223372036854775808,"d":0.5,"b":true,"n":null,"#
            + #""arr":[1,"two",[3,{}],false],"obj":{"k":{"deep":[null,1e+300]},"e":[]},"ключ\n":"unicode key"}"#
        #expect(try builder.json() == expected)
        _ = try parseWithFoundation(expected)
    }

    @Test func replacingACustomPropertyKeepsItsPosition() throws {
        var builder = PayloadBuilder()
        try builder.setCustomProperty("a", 1)
        try builder.setCustomProperty("b", 2)
        try builder.setCustomProperty("a", 3)
        #expect(try builder.json() == #"{"aps":{},"a":3,"b":2}"#)
        builder.removeCustomProperty("a")
        #expect(try builder.json() == #"{"aps":{},"b":2}"#)
        builder.removeAllCustomProperties()
        #expect(try builder.json() == #"{"aps":{}}"#)
    }

    @Test func customPropertyErrors() {
        var builder = PayloadBuilder()
        #expect(throws: PayloadError.reservedKey("aps")) { try builder.setCustomProperty("aps", 1) }
        #expect(throws: PayloadError.nonFiniteNumber(key: "x.list[1]")) {
            try builder.setCustomProperty("x", ["list": [1.0, .double(.nan)]])
        }
        #expect(builder.customProperties.isEmpty)
    }

    // MARK: modern keys

    @Test func modernAlertKeys() throws {
        var builder = PayloadBuilder()
        builder.alertTitle = "Title"
        builder.alertSubtitle = "Sub"
        builder.alertBody = "Body"
        builder.localizedTitleKey = "T_KEY"
        builder.localizedTitleArguments = ["t1"]
        builder.localizedSubtitleKey = "S_KEY"
        builder.localizedSubtitleArguments = ["s1", "s2"]
        builder.localizedAlertKey = "B_KEY"
        builder.localizedAlertArguments = ["b1"]
        builder.localizedActionButtonKey = "ACT"
        builder.launchImage = "img"
        let expected = #"{"aps":{"alert":{"title":"Title","subtitle":"Sub","body":"Body","#
            + #""title-loc-key":"T_KEY","title-loc-args":["t1"],"subtitle-loc-key":"S_KEY","#
            + #""subtitle-loc-args":["s1","s2"],"loc-key":"B_KEY","loc-args":["b1"],"#
            + #""action-loc-key":"ACT","launch-image":"img"}}}"#
        #expect(try builder.json() == expected)
    }

    @Test func modernApsKeys() throws {
        var builder = PayloadBuilder()
        builder.alertTitle = "Heads up"
        builder.badge = 1
        builder.sound = .critical(name: "alarm.caf", volume: 0.75)
        builder.contentAvailable = true
        builder.mutableContent = true
        builder.category = "MEETING"
        builder.threadID = "thread-7"
        builder.targetContentID = "window-2"
        builder.interruptionLevel = .timeSensitive
        builder.relevanceScore = 0.25
        let expected = #"{"aps":{"alert":{"title":"Heads up"},"badge":1,"#
            + #""sound":{"critical":1,"name":"alarm.caf","volume":0.75},"content-available":1,"#
            + #""mutable-content":1,"category":"MEETING","thread-id":"thread-7","#
            + #""target-content-id":"window-2","interruption-level":"time-sensitive","relevance-score":0.25}}"#
        #expect(try builder.json() == expected)
    }

    @Test func backgroundOnlyPayload() throws {
        var builder = PayloadBuilder()
        builder.contentAvailable = true
        #expect(try builder.json() == #"{"aps":{"content-available":1}}"#)
    }

    @Test(arguments: PayloadBuilder.InterruptionLevel.allCases)
    func interruptionLevels(_ level: PayloadBuilder.InterruptionLevel) throws {
        var builder = PayloadBuilder()
        builder.interruptionLevel = level
        let names: [PayloadBuilder.InterruptionLevel: String] = [
            .passive: "passive", .active: "active", .timeSensitive: "time-sensitive", .critical: "critical",
        ]
        #expect(try builder.json() == #"{"aps":{"interruption-level":"\#(names[level]!)"}}"#)
    }

    @Test func unusableNumbersAreRejected() {
        var builder = PayloadBuilder()
        builder.relevanceScore = .nan
        #expect(throws: PayloadError.nonFiniteNumber(key: "relevance-score")) { try builder.json() }
        builder.relevanceScore = .infinity
        #expect(throws: PayloadError.nonFiniteNumber(key: "relevance-score")) { try builder.json() }
        builder.relevanceScore = 1
        builder.sound = .critical(name: "a", volume: .nan)
        #expect(throws: PayloadError.nonFiniteNumber(key: "sound.volume")) { try builder.json() }
        builder.sound = .critical(name: "a", volume: 1.5)
        #expect(throws: PayloadError.criticalVolumeOutOfRange(1.5)) { try builder.json() }
        builder.sound = .critical(name: "a", volume: 1)
        #expect(throws: Never.self) { try builder.json() }
    }

    @Test func everyOutputParsesWithFoundation() throws {
        var builder = PayloadBuilder()
        builder.alertBody = "b"
        builder.alertTitle = "t"
        builder.showActionButton = false
        builder.sound = .critical(name: "n", volume: 0)
        builder.relevanceScore = 1e-9
        try builder.setCustomProperty("c", ["x": [1, 2.5, "s", nil, true]])
        let object = try #require(try parseWithFoundation(try builder.json()) as? [String: Any])
        let aps = try #require(object["aps"] as? [String: Any])
        let alert = try #require(aps["alert"] as? [String: Any])
        #expect(alert["body"] as? String == "b")
        #expect(alert["action-loc-key"] is NSNull)
    }

    // MARK: buffer reuse

    @Test func reusingBuilderAndBufferGivesTheSameBytes() throws {
        let buffer = PayloadBuffer(capacity: 4096)
        var builder = PayloadBuilder()
        builder.alertBody = String(repeating: "long body ", count: 30)
        try builder.setCustomProperty("id", 7)
        let long = try builder.build(into: buffer, maximumLength: 2048)
        let longBytes = buffer.bytes
        #expect(long == longBytes.count)

        builder.alertBody = "short"
        let short = try builder.build(into: buffer, maximumLength: 2048)
        #expect(short == buffer.count)
        #expect(String(decoding: buffer.bytes, as: UTF8.self) == #"{"aps":{"alert":"short"},"id":7}"#)

        builder.alertBody = String(repeating: "long body ", count: 30)
        #expect(try builder.build(into: buffer, maximumLength: 2048) == long)
        #expect(buffer.bytes == longBytes)
        buffer.withUnsafeBytes { #expect($0.count == long) }
    }

    @Test func failedBuildLeavesAnEmptyBuffer() throws {
        let buffer = PayloadBuffer(capacity: 64)
        var builder = PayloadBuilder()
        builder.alertBody = "ok"
        _ = try builder.build(into: buffer, maximumLength: 64)
        #expect(buffer.count > 0)
        builder.category = String(repeating: "c", count: 100)
        #expect(throws: PayloadError.self) { try builder.build(into: buffer, maximumLength: 64) }
        #expect(buffer.count == 0)
    }
}
