import Foundation

/// A table of text cells rendered either aligned for a terminal or as Markdown.
package struct BenchTable: Sendable, Equatable {
    package enum Alignment: Sendable { case left, right }

    package var headers: [String]
    package var alignments: [Alignment]
    package var rows: [[String]] = []

    package init(_ columns: [(String, Alignment)]) {
        headers = columns.map(\.0)
        alignments = columns.map(\.1)
    }

    package mutating func append(_ row: [String]) {
        precondition(row.count == headers.count, "a row has \(row.count) cells, the table \(headers.count) columns")
        rows.append(row)
    }

    /// Columns padded to their widest cell and separated by two spaces; a rule under the header.
    package func plain() -> String {
        let widths = headers.indices.map { column in
            ([headers[column]] + rows.map { $0[column] }).map(\.count).max() ?? 0
        }
        func line(_ cells: [String]) -> String {
            cells.indices.map { column in
                let padding = String(repeating: " ", count: widths[column] - cells[column].count)
                return alignments[column] == .left ? cells[column] + padding : padding + cells[column]
            }.joined(separator: "  ").trimmingTrailingSpaces()
        }
        let rule = widths.map { String(repeating: "-", count: $0) }.joined(separator: "  ")
        return ([line(headers), rule] + rows.map(line)).joined(separator: "\n")
    }

    /// A GitHub-flavoured Markdown table (pipes in cells are escaped).
    package func markdown() -> String {
        func line(_ cells: [String]) -> String {
            "| " + cells.map { $0.replacingOccurrences(of: "|", with: "\\|") }.joined(separator: " | ") + " |"
        }
        let rule = "|" + alignments.map { $0 == .left ? "---|" : "---:|" }.joined()
        return ([line(headers), rule] + rows.map(line)).joined(separator: "\n")
    }
}

extension String {
    func trimmingTrailingSpaces() -> String {
        var text = self
        while text.last == " " { text.removeLast() }
        return text
    }
}

/// Number formats shared by the terminal table, the README and the plot.
package enum BenchFormat {
    /// 1234567.8 -> "1,234,568".
    package static func grouped(_ value: Double) -> String {
        guard value.isFinite else { return "-" }
        let digits = String(Int(value.rounded()).magnitude)
        var result = ""
        for (index, digit) in digits.enumerated() {
            if index > 0 && (digits.count - index) % 3 == 0 { result += "," }
            result.append(digit)
        }
        return (value < -0.5 ? "-" : "") + result
    }

    /// 0 -> "none", 0.001 -> "1/1,000", 0.0003 -> "0.0003".
    package static func errorRate(_ rate: Double) -> String {
        guard rate > 0 else { return "none" }
        let every = 1 / rate
        if abs(every - every.rounded()) < 1e-6 * every { return "1/" + grouped(every) }
        return String(format: "%g", rate)
    }

    /// 20 -> "20 ms", 1000 -> "1,000 ms".
    package static func milliseconds(_ value: Int) -> String { grouped(Double(value)) + " ms" }

    package static func fixed(_ value: Double, _ decimals: Int) -> String { String(format: "%.\(decimals)f", value) }

    package static func percent(_ value: Double) -> String { String(format: value < 10 ? "%.1f%%" : "%.0f%%", value) }
}

extension BenchResults {
    /// The per-cell table, as on the terminal and in results/binary.md: of all cells, or of
    /// the `cells` given.
    package func table(of cells: [Cell]? = nil) -> BenchTable {
        let cells = cells ?? self.cells
        // Over a delayed path, the reference is what the path carries, not the loopback ceiling.
        let reference = path == nil ? "% ceiling" : "% path"
        let h2 = cells.contains { $0.wireProtocol == .h2 }
        var table = BenchTable([
            ("conns", .right), ("errors", .right), (h2 ? "answers after" : "error wait", .right), ("payload B", .right),
            (h2 ? "wire B" : "frame B", .right), ("median /s", .right),
            ("min–max /s", .right), (reference, .right), ("CPU s/M", .right), ("ns/notif", .right),
            ("allocs/notif", .right), ("peak RSS MiB", .right), ("resent", .right), ("accounting", .left),
        ])
        for cell in cells {
            table.append([
                cell.connectionsLabel, BenchFormat.errorRate(cell.errorRate),
                BenchFormat.milliseconds(cell.condition), String(cell.payloadBytes), String(cell.frameBytes),
                BenchFormat.grouped(cell.rate.median),
                BenchFormat.grouped(cell.rate.minimum) + "–" + BenchFormat.grouped(cell.rate.maximum),
                (path == nil ? cell.percentOfCeiling : cell.percentOfPath).map(BenchFormat.percent) ?? "-",
                BenchFormat.fixed(cell.cpuSecondsPerMillion, 3),
                BenchFormat.fixed(cell.cpuSecondsPerMillion * 1000, 0),
                cell.allocationsPerNotification.map { BenchFormat.fixed($0, 4) } ?? "-",
                BenchFormat.fixed(cell.peakRssMib, 1),
                BenchFormat.grouped(Double(cell.resent)),
                cell.accounting.summary,
            ])
        }
        return table
    }
}
