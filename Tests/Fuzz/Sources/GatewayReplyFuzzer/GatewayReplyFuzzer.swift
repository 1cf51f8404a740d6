// What a gateway may send back, on arbitrary bytes: the error response the sender reads,
// and the feedback service's tuples.
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - ErrorResponse.decode on every prefix: nothing before the first byte, an error as soon as
//   the first byte is not 8 (an HTTP/2 frame only from 6 bytes that start with 0 and name
//   SETTINGS or GOAWAY), nothing more until 6 bytes, then the response whose bytes are
//   exactly those 6, whatever follows them;
// - FeedbackDecoder gives the same tuples, the same error and the same pending bytes whether
//   the bytes come whole, byte by byte or in random splits; it never holds a whole tuple;
//   each tuple re-encodes to the 38 bytes it came from; a bad token length is reported at
//   the first tuple that has one, and again on every later call.

import FuzzSupport
import SalvoWire

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    checkErrorResponse(input)
    let whole = decodeFeedback(input, .whole)
    for feeding in [Feeding.byteByByte, .randomSplits] {
        let other = decodeFeedback(input, feeding)
        require(other == whole, "fed \(feeding), the feedback decoder gave \(other); fed whole, \(whole)")
    }
    checkFeedback(whole, input)
}

func checkErrorResponse(_ input: UnsafeRawBufferPointer) {
    for length in 0...Swift.min(input.count, ErrorResponse.byteCount + 2) {
        let prefix = UnsafeRawBufferPointer(rebasing: input[..<length])
        let result = Result { () throws(ErrorResponseDecodingError) in try ErrorResponse.decode(prefix) }
        require(result == Result { () throws(ErrorResponseDecodingError) in try ErrorResponse.decode(Array(prefix)) },
                "the array and buffer forms of ErrorResponse.decode disagree on \(Array(prefix))")
        switch result {
        case .failure(.unexpectedCommand(let byte)):
            require(length > 0 && input[0] != ErrorResponse.command && byte == input[0],
                    "ErrorResponse.decode refused \(Array(prefix)) naming byte \(byte)")
        case .failure(.http2Frame(let type)):
            require(length >= ErrorResponse.byteCount && input[0] == 0 && type == input[3] && [4, 7].contains(type),
                    "ErrorResponse.decode called \(Array(prefix)) an HTTP/2 frame of type \(type)")
        case .success(nil):
            require(length < ErrorResponse.byteCount && (length == 0 || input[0] == ErrorResponse.command),
                    "ErrorResponse.decode asked for more than \(Array(prefix))")
        case .success(let response?):
            require(length >= ErrorResponse.byteCount && response.bytes == Array(input[..<ErrorResponse.byteCount]),
                    "ErrorResponse.decode read \(response) from \(Array(prefix))")
            _ = response.description
        }
    }
}

/// Everything the feedback decoder said about a stream.
struct FeedbackOutcome: Equatable {
    var tuples: [FeedbackTuple] = []
    var error: FeedbackDecodingError?
    var pendingByteCount = 0
}

func decodeFeedback(_ input: UnsafeRawBufferPointer, _ feeding: Feeding) -> FeedbackOutcome {
    var decoder = FeedbackDecoder()
    var outcome = FeedbackOutcome()
    for piece in feeding.pieces(of: input) {
        let before = outcome.tuples.count
        do {
            try decoder.decode(UnsafeRawBufferPointer(rebasing: input[piece])) { outcome.tuples.append($0) }
            require(outcome.error == nil, "the decoder accepted input after failing with \(outcome.error!)")
        } catch {
            require(outcome.error == nil || (outcome.error == error && outcome.tuples.count == before),
                    "after failing with \(outcome.error!), the decoder failed with \(error) or yielded tuples")
            outcome.error = error
        }
        require(decoder.pendingByteCount < FeedbackTuple.byteCount,
                "the feedback decoder holds \(decoder.pendingByteCount) bytes, a whole tuple or more")
    }
    outcome.pendingByteCount = decoder.pendingByteCount
    return outcome
}

func checkFeedback(_ outcome: FeedbackOutcome, _ input: UnsafeRawBufferPointer) {
    for (index, tuple) in outcome.tuples.enumerated() {
        let start = index * FeedbackTuple.byteCount
        require(tuple.bytes == Array(input[start..<(start + FeedbackTuple.byteCount)]),
                "tuple \(index) (\(tuple)) does not re-encode to its bytes")
    }
    let end = outcome.tuples.count * FeedbackTuple.byteCount
    let rest = input.count - end
    if let error = outcome.error {
        let declared = rest >= 6 ? Int(input[end + 4]) << 8 | Int(input[end + 5]) : nil
        require(declared != nil && declared != 32 && error == .invalidTokenLength(declared!) && outcome.pendingByteCount == 0,
                "the decoder failed with \(error) after \(outcome.tuples.count) tuples, at a header declaring \(String(describing: declared))")
    } else {
        require(rest < FeedbackTuple.byteCount && outcome.pendingByteCount == rest,
                "\(outcome.tuples.count) tuples and \(outcome.pendingByteCount) pending bytes from \(input.count) bytes")
        if rest >= 6 {
            require(input[end + 4] == 0 && input[end + 5] == 32, "a partial tuple with a bad token length was not refused")
        }
    }
}
