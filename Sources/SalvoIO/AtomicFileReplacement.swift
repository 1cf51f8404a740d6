import Synchronization
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Numbers this process's temporary files, so that no two replacements share one.
private let temporaryFiles = Atomic<UInt64>(0)

/// Replaces the file at `path` with `text`, atomically and durably: a temporary file of its
/// own in the same directory, fsynced, renamed over `path`, and the directory fsynced.
/// After a crash the file holds either the old or the new text, never a torn one. When two
/// replacements overlap, the one renamed last is what the file holds.
///
/// - Throws: `IOError` naming the file; `path` is then left as it was.
package func replaceFileAtomically(_ path: String, with text: String, permissions: FilePermissions) throws(IOError) {
    let directory = directory(of: path)
    let temporary = "\(path).tmp-\(getpid())-\(temporaryFiles.wrappingAdd(1, ordering: .relaxed).newValue)"
    let fd = try FileDescriptor.open(path: temporary, .writeOnly, options: [.create, .exclusiveCreate],
                                     permissions: permissions, operation: "create")
    do throws(IOError) {
        defer { try? fd.close() }
        try fd.writeAll(text, target: temporary)
        // Without this, a rename can reach the disk before the data it names.
        try fd.synchronize(target: temporary)
        try syscallOrThrow("rename to \(path)", target: temporary) { rename(temporary, path) }
    } catch {
        unlink(temporary)
        throw error
    }
    // The rename lives in the directory: sync it too, or it may be lost on power failure.
    let directoryFD = try FileDescriptor.open(path: directory, .readOnly, options: .directory)
    defer { try? directoryFD.close() }
    try directoryFD.synchronize(target: directory)
}

/// The directory whose entry a rename of `path` changes.
package func directory(of path: String) -> String {
    guard let slash = path.lastIndex(of: "/") else { return "." }
    return slash == path.startIndex ? "/" : String(path[..<slash])
}
