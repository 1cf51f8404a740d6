// The mock NOC's HTTP/1.1 request parser, on arbitrary bytes from a connection.
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - however the bytes are split across calls (whole, byte by byte, random pieces), the
//   parser hands out the same requests, then the same error or the same number of bytes
//   held for a request still incomplete: what the mock NOC counts does not depend on how
//   TCP cut the stream;
// - every request handed out holds exactly its Content-Length of body.

import FuzzSupport
import SalvoWire

/// What parsing a connection's bytes came to.
struct Outcome: Equatable {
    var requests: [HTTP1Request] = []
    var error: HTTP1ParseError?
    /// Bytes held for an incomplete request (when there was no error).
    var held = 0
}

func parse(_ input: UnsafeRawBufferPointer, _ feeding: Feeding) -> Outcome {
    var parser = HTTP1RequestParser(maximumHeadLength: 1024, maximumBodyLength: 2048)
    var outcome = Outcome()
    pieces: for piece in feeding.pieces(of: input) {
        parser.append(UnsafeRawBufferPointer(rebasing: input[piece]))
        while true {
            do throws(HTTP1ParseError) {
                guard let request = try parser.next() else { break }
                let length = request.header("Content-Length").flatMap { Int($0) } ?? 0
                require(request.body.count == length, "a body of \(request.body.count) bytes for Content-Length \(length)")
                outcome.requests.append(request)
            } catch {
                outcome.error = error
                break pieces
            }
        }
    }
    if outcome.error == nil { outcome.held = parser.bufferedByteCount }
    return outcome
}

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    let whole = parse(input, .whole)
    for feeding in [Feeding.byteByByte, .randomSplits] {
        let split = parse(input, feeding)
        require(split == whole, "fed \(feeding): \(split.requests.count) requests, then \(String(describing: split.error)), "
                    + "\(split.held) bytes held; whole: \(whole.requests.count), \(String(describing: whole.error)), \(whole.held)")
    }
}
