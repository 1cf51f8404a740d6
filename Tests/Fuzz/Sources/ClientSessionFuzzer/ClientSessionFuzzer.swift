// What a gateway may send an HTTP/2 client: arbitrary bytes, after its SETTINGS, to a
// ClientSession with four requests open (one body larger than the windows, so it waits).
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - the session reports the same events, ends with the same error (or none) and has the
//   same wish to write whether the bytes come whole, byte by byte or in random splits;
// - a stream is reported only while it is open, and closed at most once; a body is never
//   asked for more than its length, nor after its release; every kept body is released
//   exactly once, at the latest when the session lets go of the bodies still waiting.

import FuzzSupport
@_spi(Fuzzing) import SalvoEngine

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    let whole = run(input, .whole)
    for feeding in [Feeding.byteByByte, .randomSplits] {
        let other = run(input, feeding)
        require(other == whole, "fed \(feeding), the session did \(other); fed whole, \(whole)")
    }
}

/// What the session did with the gateway's bytes.
struct Outcome: Equatable {
    var events: [Event] = []
    var error: String?
    var wantsToWrite = false
}

enum Event: Equatable {
    case status(entry: Int32, value: [UInt8])
    case body(entry: Int32, chunk: [UInt8])
    case bodyTaken(entry: Int32, count: Int)
    case bodyKept(entry: Int32, count: Int)
    case bodyReleased(entry: Int32)
    case closed(entry: Int32, refused: Bool, errorCode: UInt32)
    case notSent(entry: Int32)
    case goAway(lastStreamID: Int32, errorCode: UInt32, debugData: [UInt8])
    case pingAcknowledged
    case settings(streamLimit: Int)
}

/// The gateway's first frame: an empty SETTINGS, so that inputs start past the handshake.
let settings: [UInt8] = [0, 0, 0, 4, 0, 0, 0, 0, 0]
let bodyLengths = [10, 100, 70_000, 5]

func run(_ input: UnsafeRawBufferPointer, _ feeding: Feeding) -> Outcome {
    let recorder = Recorder()
    let session = try! ClientSession(delegate: recorder)
    do {
        try settings.withUnsafeBytes { try session.receive($0) }
        var fields = HeaderFields(capacity: 4)
        for (entry, length) in bodyLengths.enumerated() {
            fields.removeAll()
            fields.add(":method", "POST")
            fields.add(":path", "/3/device/00")
            let body = [UInt8](repeating: UInt8(truncatingIfNeeded: entry), count: length)
            try body.withUnsafeBytes { try session.submit(fields, body: $0, entry: Int32(entry)) }
        }
        for piece in feeding.pieces(of: input) {
            try session.receive(UnsafeRawBufferPointer(rebasing: input[piece]))
        }
    } catch {
        recorder.outcome.error = "\(error)"
    }
    recorder.outcome.wantsToWrite = session.wantsToWrite
    session.releaseWaitingBodies()
    require(recorder.kept == recorder.released, "kept bodies \(recorder.kept.sorted()), released \(recorder.released.sorted())")
    return recorder.outcome
}

final class Recorder: ClientSessionDelegate {
    var outcome = Outcome()
    private var open = Set(0..<Int32(bodyLengths.count))
    private var taken = [Int](repeating: 0, count: bodyLengths.count)
    private(set) var kept: Set<Int32> = []
    private(set) var released: Set<Int32> = []

    private func requireOpen(_ entry: Int32, _ what: String) {
        require(open.contains(entry), "\(what) for entry \(entry), which is not open")
    }

    func responseStatus(entry: Int32, value: UnsafeRawBufferPointer) {
        requireOpen(entry, "a response status")
        outcome.events.append(.status(entry: entry, value: Array(value)))
    }

    func responseBody(entry: Int32, chunk: UnsafeRawBufferPointer) {
        requireOpen(entry, "a response body")
        outcome.events.append(.body(entry: entry, chunk: Array(chunk)))
    }

    func streamClosed(entry: Int32, refused: Bool, errorCode: UInt32) {
        requireOpen(entry, "a close")
        open.remove(entry)
        outcome.events.append(.closed(entry: entry, refused: refused, errorCode: errorCode))
    }

    func requestNotSent(entry: Int32) { outcome.events.append(.notSent(entry: entry)) }

    /// What the windows held back of a body: what went with the request counts as taken.
    /// A body's number is its entry.
    func keepBody(entry: Int32, _ rest: UnsafeRawBufferPointer) -> UInt64 {
        requireOpen(entry, "a kept body")
        kept.insert(entry)
        let length = bodyLengths[Int(entry)]
        require(rest.count > 0 && rest.count <= length, "entry \(entry) kept \(rest.count) of its \(length) bytes")
        taken[Int(entry)] = length - rest.count
        outcome.events.append(.bodyKept(entry: entry, count: rest.count))
        return UInt64(entry)
    }

    func requestBody(_ body: UInt64, into destination: UnsafeMutableRawBufferPointer) -> (count: Int, isLast: Bool) {
        let entry = Int32(body)
        requireOpen(entry, "a request body")
        require(kept.contains(entry) && !released.contains(entry), "body \(entry) asked for, kept \(kept), released \(released)")
        let length = bodyLengths[Int(entry)]
        let count = min(destination.count, length - taken[Int(entry)])
        require(count > 0, "entry \(entry)'s body was asked for more than its \(length) bytes")
        destination.initializeMemory(as: UInt8.self, repeating: UInt8(truncatingIfNeeded: entry))
        taken[Int(entry)] += count
        outcome.events.append(.bodyTaken(entry: entry, count: count))
        return (count, taken[Int(entry)] == length)
    }

    func releaseBody(_ body: UInt64) {
        let entry = Int32(body)
        require(kept.contains(entry) && !released.contains(entry), "body \(entry) released, kept \(kept), released \(released)")
        released.insert(entry)
        outcome.events.append(.bodyReleased(entry: entry))
    }

    func goAway(lastStreamID: Int32, errorCode: UInt32, debugData: UnsafeRawBufferPointer) {
        outcome.events.append(.goAway(lastStreamID: lastStreamID, errorCode: errorCode, debugData: Array(debugData)))
    }

    func pingAcknowledged() { outcome.events.append(.pingAcknowledged) }

    func settingsReceived(streamLimit: Int) { outcome.events.append(.settings(streamLimit: streamLimit)) }
}
