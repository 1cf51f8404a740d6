import Foundation

/// Writes a run's files: `<date>-<sha>.json` always (`<date>-<sha>-2.json` and on when a run
/// of the same commit and day is there already: every run's JSON is kept); the summary
/// (`binary.md` or `h2.md`) and the plot too unless only the JSON was asked for
/// (`--json-only`, what scripts/compare.sh uses).
package enum BenchOutput {
    static let plotFile = "throughput.svg"
    /// HTTP/2 runs write their own summary and plot, beside the binary ones.
    static let http2Summary = "h2.md", http2PlotFile = "h2-throughput.svg"
    /// The binary bench's summary (results/README.md is the folder's index).
    static let binarySummary = "binary.md"

    /// Returns the paths written.
    package static func write(_ results: BenchResults, to directory: String, jsonOnly: Bool) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let json = try writeNew(results.encoded(), in: directory, names: results.fileNames)
        return jsonOnly ? [json] : [json] + (try writeSummary(results, to: directory))
    }

    /// Writes the summary (`binary.md` or `h2.md`, above its notes marker) and the plot;
    /// returns the paths written.
    package static func writeSummary(_ results: BenchResults, to directory: String) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        let h2 = results.cells.first?.wireProtocol == .h2
        let plot = h2 ? http2PlotFile : plotFile
        let svg = "\(directory)/\(plot)"
        try Data(results.throughputPlot().render().utf8).write(to: URL(fileURLWithPath: svg))
        let readme = "\(directory)/\(h2 ? http2Summary : binarySummary)"
        let previous = try? String(contentsOfFile: readme, encoding: .utf8)
        let text = h2 ? BenchReadme.renderHTTP2(results, plotFile: plot, previous: previous)
            : BenchReadme.render(results, plotFile: plot, previous: previous)
        try Data(text.utf8).write(to: URL(fileURLWithPath: readme))
        return [svg, readme]
    }

    /// Writes `data` to the first of `names` that does not exist yet, never over a file
    /// (`.withoutOverwriting`: O_EXCL, so two runs at once cannot take the same name).
    private static func writeNew(_ data: Data, in directory: String, names: some Sequence<String>) throws -> String {
        for name in names {
            let path = "\(directory)/\(name)"
            do {
                try data.write(to: URL(fileURLWithPath: path), options: .withoutOverwriting)
                return path
            } catch CocoaError.fileWriteFileExists {
                continue
            }
        }
        preconditionFailure("an unbounded sequence of names ended")
    }
}
