import Foundation

/// `--ceiling`: the ingest probe (`salvo mock --ingest-probe`) in a child process: pre-encoded
/// 161-byte command-2 frames in 16 KiB `SSL_write`s over one TLS connection to a gateway loop
/// that only decrypts, decodes and counts. Its two threads are left to the scheduler, so it
/// uses both cores, as the sender and the mock do together.
package enum BenchCeiling {
    static let frameBytes = 161

    static func measure(executable: String, frames: Int, runs: Int) throws -> BenchResults.Ceiling {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = ["mock", "--ingest-probe", String(frames), "--probe-runs", String(runs)]
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        try process.run()
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        let text = String(decoding: data, as: UTF8.self)
        guard process.terminationStatus == 0 else {
            throw BenchError("the ingest probe failed (status \(process.terminationStatus)): \(text.suffix(400))")
        }
        let rates = parse(text)
        guard rates.count == runs else { throw BenchError("cannot read the ingest probe's output: \(text.suffix(400))") }
        return .init(frameBytes: frameBytes, framesPerRun: frames, framesPerSecond: rates)
    }

    /// Frames per second from lines like `run 1: 10000000 frames of 161 bytes in 0.571 s: 17.52 M frames/s, ...`:
    /// the count over the seconds (more digits than the rounded rate).
    package static func parse(_ text: String) -> [Double] {
        text.split(separator: "\n").compactMap { line -> Double? in
            guard line.hasPrefix("run ") else { return nil }
            let words = line.split(separator: " ")
            guard let framesIndex = words.firstIndex(of: "frames"), framesIndex > 0,
                  let frames = Double(words[framesIndex - 1]),
                  let inIndex = words.firstIndex(of: "in"), inIndex + 1 < words.count,
                  let seconds = Double(words[inIndex + 1]), seconds > 0 else { return nil }
            return frames / seconds
        }
    }
}
