// The checkpoint file parser, on arbitrary file contents.
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - the parser accepts a checkpoint exactly as Salvo writes it and nothing else: whatever
//   it reads back as a point is that point's text, byte for byte;
// - Checkpoint.load, which reads the file, gives the parser's answer: the same point, or
//   the same reason as a corrupt checkpoint, never an I/O error.
//
// The target calls the parser and the loader only, so that it follows the file format as
// it changes.

import FuzzSupport
import SalvoCampaignFiles
import SalvoEngine

let file = ScratchFile("checkpoint")

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    let bytes = Array(input)
    let parsed = Result { () throws(CheckpointFormatError) in try ResumePoint.parse(bytes) }
    if case .success(let point) = parsed {
        require(Array(point.text.utf8) == bytes, "\(show(bytes)) read as \(point), whose text is \(show(Array(point.text.utf8)))")
    }
    file.write(input)
    let loaded = Result { () throws(CheckpointError) in try Checkpoint(path: file.path).load() }
    switch (parsed, loaded) {
    case (.success(let point), .success(let same?)):
        require(point == same, "the file loads as \(same), its bytes parse as \(point)")
    case (.failure(let error), .failure(.corrupt(_, let reason))):
        require(error.reason == reason && !reason.isEmpty, "the file is corrupt because \(reason), its bytes because \(error.reason)")
    default:
        require(false, "the file loads as \(loaded), its bytes parse as \(parsed)")
    }
}
