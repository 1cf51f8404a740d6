#if canImport(Glibc)
import Glibc
#endif

/// Writes a line to standard error, for diagnostics and progress that never mix with data on
/// standard output. Uses write(2) on the descriptor: the C `stderr` global is shared mutable
/// state to Swift 6.
package func printError(_ message: String) {
    var line = message + "\n"
    line.withUTF8 { bytes in
        var offset = 0
        while offset < bytes.count {
            let written = write(STDERR_FILENO, bytes.baseAddress! + offset, bytes.count - offset)
            if written < 0 && errno == EINTR { continue }
            guard written > 0 else { return }
            offset += written
        }
    }
}
