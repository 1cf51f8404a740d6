import Foundation

/// Writes a run's files: `<date>-<sha>.json` always; `README.md` and `throughput.svg` too
/// unless only the JSON was asked for (`--json-only`, what scripts/compare.sh uses).
enum BenchOutput {
    static let plotFile = "throughput.svg"

    /// Returns the paths written.
    static func write(_ results: BenchResults, to directory: String, jsonOnly: Bool) throws -> [String] {
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        var written: [String] = []
        let json = "\(directory)/\(results.fileName)"
        try results.encoded().write(to: URL(fileURLWithPath: json))
        written.append(json)
        guard !jsonOnly else { return written }

        let svg = "\(directory)/\(plotFile)"
        try Data(results.throughputPlot().render().utf8).write(to: URL(fileURLWithPath: svg))
        written.append(svg)
        let readme = "\(directory)/README.md"
        let previous = try? String(contentsOfFile: readme, encoding: .utf8)
        try Data(BenchReadme.render(results, plotFile: plotFile, previous: previous).utf8).write(to: URL(fileURLWithPath: readme))
        written.append(readme)
        return written
    }
}
