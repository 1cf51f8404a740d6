import Foundation
import SalvoEngine
import SalvoIO

/// The one-line progress display on standard error, only when it is a terminal:
/// which cell and run, and the live count of the run in progress.
final class BenchProgress: Sendable {
    private let state = Locked<(label: String, total: Int)>(("", 0))

    /// Nil when standard error is not a terminal.
    static func make() -> BenchProgress? { isatty(STDERR_FILENO) == 1 ? BenchProgress() : nil }

    func begin(_ label: String, total: Int) {
        state.withLock { $0 = (label, total) }
        draw("\(label)  starting")
    }

    func update(settled report: SenderReport) {
        let (label, total) = state.withLock { $0 }
        let settled = report.accepted + report.rejected + report.failed
        let share = total > 0 ? 100 * Double(report.submitted) / Double(total) : 0
        draw("\(label)  sent \(BenchFormat.grouped(Double(report.submitted))) (\(Int(share))%)  settled \(BenchFormat.grouped(Double(settled)))")
    }

    func note(_ text: String) { draw(text) }

    /// Clears the line (before printing anything else).
    func clear() { FileHandle.standardError.write(Data("\r\u{1B}[2K".utf8)) }

    private func draw(_ text: String) {
        FileHandle.standardError.write(Data("\r\u{1B}[2K\(text)".utf8))
    }
}
