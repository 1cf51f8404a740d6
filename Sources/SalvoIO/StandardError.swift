import SystemPackage

/// Writes a line to standard error, for diagnostics and progress that never mix with data on
/// standard output. Uses write(2) on the descriptor: the C `stderr` global is shared mutable
/// state to Swift 6.
package func printError(_ message: String) {
    // Nowhere to report a failure to report: a closed stderr drops the line.
    try? FileDescriptor.standardError.writeAll(message + "\n", target: "stderr")
}
