// The checkpoint file parser, on arbitrary file contents.
//
// Properties:
// - no trap, and no out-of-bounds access (AddressSanitizer);
// - a file is either a checkpoint (a line number, never negative) or refused as corrupt
//   with a reason, never an I/O error, and reading it twice gives the same answer;
// - what a checkpoint says survives being saved and loaded again.
//
// The target goes through `load` and `save` only (loadCheckpoint and saveAndLoad below),
// so that it follows the file format as it changes.

import FuzzSupport
import SalvoEngine

let file = ScratchFile("checkpoint")
let resaved = ScratchFile("checkpoint-saved")

/// One input: libFuzzer's call, through runFuzzer in main.swift.
func fuzzOne(_ input: UnsafeRawBufferPointer) {
    file.write(input)
    let loaded = loadCheckpoint(file.path)
    require(loaded == loadCheckpoint(file.path), "the same checkpoint file read differently twice")
    switch loaded {
    case .success(let line?):
        require(line >= 0, "the checkpoint gave line \(line)")
        let again = saveAndLoad(line)
        require(again == .success(line), "line \(line), saved and loaded, became \(again)")
    case .success(nil):
        require(false, "an existing checkpoint file read as no checkpoint")
    case .failure(.corrupt(_, let reason)):
        require(!reason.isEmpty, "a checkpoint was refused without a reason")
    case .failure(let error):
        require(false, "reading a checkpoint file failed: \(error)")
    }
}

func loadCheckpoint(_ path: String) -> Result<Int?, CheckpointError> {
    Result { () throws(CheckpointError) in try Checkpoint(path: path).load() }
}

func saveAndLoad(_ line: Int) -> Result<Int?, CheckpointError> {
    let checkpoint = Checkpoint(path: resaved.path)
    return Result { () throws(CheckpointError) in
        try checkpoint.save(completedThroughLine: line)
        return try checkpoint.load()
    }
}
