// The mock gateway's parser of everything a client may send, on arbitrary bytes.
//
// Properties, for two payload limits (the binary interface's 2048, and 40 so that short
// inputs reach the size checks):
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - the same notifications and the same stop, whether the bytes come whole, byte by byte or
//   in random splits, and after a stop every later call returns it again without yielding;
// - the decoder never holds more than it reads whole (FrameDecoder.readLimit: a frame
//   with the largest payload length an item can state, so that an oversized payload is
//   still answered with its identifier) between calls;
// - every notification re-encodes (FrameEncoder) to bytes that decode to it again, and for
//   commands 0 and 1, whose layout is fixed, to exactly the bytes it came from.

import FuzzSupport
import SalvoWire

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    for maximumPayloadLength in [2048, 40] {
        let whole = decode(input, .whole, maximumPayloadLength: maximumPayloadLength)
        for feeding in [Feeding.byteByByte, .randomSplits] {
            let other = decode(input, feeding, maximumPayloadLength: maximumPayloadLength)
            require(other == whole, "fed \(feeding), the decoder gave \(other); fed whole, \(whole)")
        }
        checkRoundTrip(whole, input, maximumPayloadLength: maximumPayloadLength)
    }
}

/// A decoded notification, copied out of the decoder's views.
struct Notification: Equatable {
    var format: FrameFormat
    var identifier: UInt32
    var expiry: UInt32?
    var priority: UInt8?
    var token: [UInt8]
    var payload: [UInt8]

    init(_ decoded: DecodedNotification) {
        format = decoded.format
        identifier = decoded.identifier
        expiry = decoded.expiry
        priority = decoded.priority
        token = Array(decoded.token)
        payload = Array(decoded.payload)
    }
}

/// Everything the decoder said about a stream.
struct Outcome: Equatable {
    var notifications: [Notification] = []
    var stop: DecodeStop?
    var pendingByteCount = 0
}

func decode(_ input: UnsafeRawBufferPointer, _ feeding: Feeding, maximumPayloadLength: Int) -> Outcome {
    var decoder = FrameDecoder(maximumPayloadLength: maximumPayloadLength)
    let carryLimit = FrameDecoder.readLimit
    var outcome = Outcome()
    for piece in feeding.pieces(of: input) {
        let chunk = UnsafeRawBufferPointer(rebasing: input[piece])
        let before = outcome.notifications.count
        let stop = decoder.decode(chunk) { notification in
            outcome.notifications.append(Notification(notification))
            return true
        }
        require(decoder.pendingByteCount <= carryLimit,
                "the decoder holds \(decoder.pendingByteCount) bytes, more than its read limit (\(carryLimit))")
        if let earlier = outcome.stop {
            require(stop == earlier && outcome.notifications.count == before,
                    "after stopping with \(earlier), a later call returned \(String(describing: stop)) or yielded notifications")
        }
        outcome.stop = stop
        require(stop == decoder.finished, "decode returned \(String(describing: stop)) but finished is \(String(describing: decoder.finished))")
    }
    outcome.pendingByteCount = decoder.pendingByteCount
    return outcome
}

func checkRoundTrip(_ outcome: Outcome, _ input: UnsafeRawBufferPointer, maximumPayloadLength: Int) {
    var offset = 0
    var frame = [UInt8](repeating: 0, count: FrameDecoder.largestFrameLength(maximumPayloadLength))
    for notification in outcome.notifications {
        let encoder = FrameEncoder(format: notification.format, maximumPayloadLength: maximumPayloadLength)
        let token = notification.token.withUnsafeBytes { try! DeviceToken(bytes: $0) }
        let result = notification.payload.withUnsafeBytes { payload in
            frame.withUnsafeMutableBytes { buffer in
                try! encoder.encode(
                    token: token, payload: payload, identifier: notification.identifier,
                    expiry: notification.expiry, priority: notification.priority, into: buffer)
            }
        }
        guard case .written(let length) = result else {
            require(false, "a decoded notification does not fit the largest legal frame: \(result)")
            return
        }
        let again = frame.withUnsafeBytes { decode(UnsafeRawBufferPointer(rebasing: $0[..<length]), .whole,
                                                   maximumPayloadLength: maximumPayloadLength) }
        require(again.notifications == [notification] && again.stop == nil && again.pendingByteCount == 0,
                "\(notification) re-encoded decodes to \(again)")
        if notification.format != .frame {
            // Fixed layout: the frame must be the very bytes the notification came from.
            let original = Array(input[offset..<(offset + length)])
            require(original == Array(frame[..<length]), "re-encoding \(notification) changed its bytes")
        }
        offset += notification.format == .frame
            ? 5 + Int(input[offset + 1]) << 24 + Int(input[offset + 2]) << 16 + Int(input[offset + 3]) << 8 + Int(input[offset + 4])
            : length
    }
}
