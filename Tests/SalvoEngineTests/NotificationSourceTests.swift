import Foundation
import SalvoWire
import Testing
@testable import SalvoCampaignFiles
@testable import SalvoEngine

/// Sources read again from any position they reported: what a resend needs.
@Suite struct NotificationSourceTests {
    let directory: CampaignScratchDirectory

    init() throws { directory = try CampaignScratchDirectory() }

    /// Every notification a reader yields: (sequence, position offset, token hex, payload).
    static func drain(_ reader: some NotificationReader) throws -> [(UInt64, UInt64, String, String)] {
        var all: [(UInt64, UInt64, String, String)] = []
        while let notification = try reader.next() {
            all.append((notification.position.sequence, notification.position.offset, notification.token.hex,
                        String(decoding: notification.payload, as: UTF8.self)))
        }
        return all
    }

    /// The send path copies each notification a few times between the reader and the ring.
    /// At 127 bytes (the HTTP/2 fields inline) those copies cost the binary bench's reader
    /// thread 15% more CPU than at 72; the fields now sit behind a pointer.
    @Test func aNotificationStaysSmallForTheCopiesOfTheSendPath() {
        #expect(MemoryLayout<SourceNotification>.size <= 80)
        #expect(MemoryLayout<SourceNotification?>.size <= 80)
    }

    @Test func aCampaignFileYieldsTheSameLinesAgainFromAnyPositionItReported() throws {
        // A byte order mark, CRLF endings, a blank line and a bad line skipped in between.
        var text = "\u{FEFF}"
        for n in 1...1500 {
            if n == 7 { text += "\r\n"; continue }
            if n == 150 { text += "{broken\r\n"; continue }
            text += #"{"token":"\#(campaignToken(n))","payload":{"aps":{"alert":"line \#(n)"}}}"# + "\r\n"
        }
        let path = try directory.write("campaign.jsonl", text)
        // About 120 KiB: a reader holds at most 64 KiB read ahead, so seeks land both inside
        // what it has read and outside it.
        let file = CampaignFile(.jsonl(path), onBadLine: .skip)
        let first = try Self.drain(file.makeReader())
        #expect(first.count == 1498 && first.first?.0 == 1 && first.last?.0 == 1500)

        let reader = try file.makeReader()
        for start in [0, 5, 149, 6, 1497, 1000, 1001, 400, 0] {
            try reader.seek(to: SourcePosition(offset: first[start].1, sequence: first[start].0))
            let again = try Self.drain(reader)
            #expect(again.map(\.0) == first[start...].map(\.0), "from \(start)")
            #expect(again.map(\.3) == first[start...].map(\.3))
        }
    }

    @Test func aTokenListSeeksByLineToo() throws {
        let path = try directory.write("tokens.txt", (1...50).map { campaignToken($0) }.joined(separator: "\n") + "\n")
        let file = CampaignFile(.tokens(path, payload: Array(#"{"aps":{"badge":1}}"#.utf8)))
        let all = try Self.drain(file.makeReader())
        let reader = try file.makeReader()
        try reader.seek(to: SourcePosition(offset: all[20].1, sequence: all[20].0))
        #expect(try reader.next()?.token.hex == campaignToken(21))
        #expect(all[20].0 == 21 && all[20].1 == 20 * 65)
    }

    @Test func aNotificationListIsReadByIndex() throws {
        let tokens = (0..<5).map { try! DeviceToken(hex: campaignToken($0)) }
        let shared = NotificationList(tokens: tokens, payload: Array(#"{"a":1}"#.utf8), priority: 5)
        let reader = shared.makeReader()
        reader.seek(to: SourcePosition(offset: 3, sequence: 3))
        let third = try #require(reader.next())
        #expect(third.token == tokens[3] && third.priority == 5 && String(decoding: third.payload, as: UTF8.self) == #"{"a":1}"#)

        let items = NotificationList(tokens.enumerated().map { NotificationList.Item(token: $1, payload: Array("{\"n\":\($0)}".utf8)) })
        let all = try Self.drain(items.makeReader())
        #expect(all.map(\.3) == (0..<5).map { "{\"n\":\($0)}" } && all.map(\.0) == [0, 1, 2, 3, 4])
    }

    // MARK: The replayer

    static func run(source: SourceID, at position: SourcePosition, count: Int, skip: Int = 0) -> SourceRun {
        SourceRun(first: 0, count: count, source: source, skip: skip, position: position)
    }

    /// A file of 40 tokens (65 bytes a line), registered as a source, and a replayer for it.
    func replayingFortyTokens() throws -> (SourceRegistry, SourceRegistry.Entry, Replayer, RetainedStore) {
        let path = try directory.write("tokens.txt", (1...40).map { campaignToken($0) }.joined(separator: "\n") + "\n")
        let sources = SourceRegistry()
        let entry = sources.register(CampaignFile(.tokens(path, payload: Array(#"{"a":1}"#.utf8))))
        return (sources, entry, Replayer(sources: sources), RetainedStore(byteCapacity: 8192, maximumPayloadLength: 256))
    }

    @Test func theReplayerReadsARunAgainAndNamesOneOfItsNotifications() throws {
        let (_, entry, replayer, retained) = try replayingFortyTokens()
        let run = Self.run(source: entry.id, at: SourcePosition(offset: 10 * 65, sequence: 11), count: 10, skip: 2)

        var sequences: [UInt64] = []
        try replayer.read(run, items: 2..<12, retained: retained) { sequences.append($0.position.sequence); return true }
        #expect(sequences == Array(13...22))
        let (target, sequence) = try replayer.name(run, item: 5, retained: retained)
        #expect(target.token?.hex == campaignToken(16) && sequence == 16)
    }

    /// Finals are counted per source; a source is complete once it was read to its end and
    /// every notification published from it is final, and whoever waits for it is resumed
    /// then (its `Submission`), by the thread that completed it.
    @Test func aSourceCompletesWhenEveryNotificationPublishedIsFinal() async {
        let sources = SourceRegistry()
        let entry = sources.register(NotificationList(tokens: [], payload: Array(#"{"a":1}"#.utf8)))
        sources.noteFinals([(entry.id, 3)])
        #expect(!entry.isComplete, "still being read")
        entry.exhausted(after: 5)
        #expect(!entry.isComplete, "two still in flight")
        sources.noteFinals([(RetainedStore.sourceID, 5)])
        sources.noteFinals([])
        #expect(!entry.isComplete, "the retained store's finals are not the source's")
        let completing = Thread { sources.noteFinals([(entry.id, 2)]) }
        completing.start()
        await entry.untilComplete()
        #expect(entry.isComplete && entry.finalCount.load(ordering: .relaxed) == 5)
    }

    @Test func aSourceThatChangedIsAClearErrorNotAWrongResend() throws {
        let (sources, entry, replayer, retained) = try replayingFortyTokens()
        // The file now holds other lines at that offset: a comment line shifts everything.
        try directory.write("tokens.txt", "# edited\n" + (1...40).map { campaignToken($0) }.joined(separator: "\n") + "\n")
        let run = Self.run(source: entry.id, at: SourcePosition(offset: 10 * 65, sequence: 11), count: 3)
        #expect(throws: ReplayError.self) {
            try replayer.read(run, items: 0..<3, retained: retained) { _ in true }
        }
        // Truncated: the run's end is gone.
        try directory.write("tokens.txt", (1...12).map { campaignToken($0) }.joined(separator: "\n") + "\n")
        let cut = Self.run(source: entry.id, at: SourcePosition(offset: 10 * 65, sequence: 11), count: 5)
        #expect(throws: ReplayError.self) {
            try replayer.read(cut, items: 0..<5, retained: retained) { _ in true }
        }
        // A source no longer registered.
        sources.unregister(entry)
        replayer.forget(entry.id)
        #expect(throws: ReplayError.self) {
            try replayer.read(run, items: 0..<1, retained: retained) { _ in true }
        }
    }
}
