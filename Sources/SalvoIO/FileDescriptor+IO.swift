import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// Blocking file I/O for the modules above: each call goes through `syscallOrThrow` (EINTR
/// retried there, and only there) and fails with an `IOError` that names the file.
///
/// swift-system's own methods of the same kind retry EINTR themselves and throw a bare
/// `Errno`; these keep Salvo's one helper and its messages. Close with swift-system's
/// `close()`, which rightly never retries.
extension FileDescriptor {
    /// Opens `path`, close-on-exec; `operation` names the step in the error ("open", "create").
    package static func open(
        path: String, _ mode: AccessMode, options: OpenOptions = [], permissions: FilePermissions = [],
        operation: String = "open"
    ) throws(IOError) -> FileDescriptor {
        let flags = mode.rawValue | options.rawValue | O_CLOEXEC
        let fd = try syscallOrThrow(operation, target: path) { Glibc.open(path, flags, permissions.rawValue) }
        return FileDescriptor(rawValue: fd)
    }

    /// Reads up to `buffer.count` bytes: the count read, 0 at the end of the file.
    package func readSome(into buffer: UnsafeMutableRawBufferPointer, target: String) throws(IOError) -> Int {
        try syscallOrThrow("read", target: target) { Glibc.read(rawValue, buffer.baseAddress, buffer.count) }
    }

    /// Reads up to `buffer.count` bytes from `offset` (pread: the file position stays).
    package func readSome(
        into buffer: UnsafeMutableRawBufferPointer, atOffset offset: Int, target: String
    ) throws(IOError) -> Int {
        try syscallOrThrow("read", target: target) { Glibc.pread(rawValue, buffer.baseAddress, buffer.count, off_t(offset)) }
    }

    /// Writes all of `bytes`, however many calls it takes.
    package func writeAll(_ bytes: UnsafeRawBufferPointer, target: String) throws(IOError) {
        var offset = 0
        while offset < bytes.count {
            let written = try syscallOrThrow("write", target: target) {
                Glibc.write(rawValue, bytes.baseAddress! + offset, bytes.count - offset)
            }
            // Files and pipes never take nothing; a device that did would spin here forever.
            guard written > 0 else { throw IOError("write", errno: .ioError, target: target) }
            offset += written
        }
    }

    /// Writes all of `text`'s UTF-8.
    package func writeAll(_ text: String, target: String) throws(IOError) {
        var text = text
        try text.withUTF8 { bytes in
            Result { () throws(IOError) in try writeAll(UnsafeRawBufferPointer(bytes), target: target) }
        }.get()
    }

    /// Moves the file position to `offset` from the start.
    package func seek(toOffset offset: UInt64, target: String) throws(IOError) {
        try syscallOrThrow("seek", target: target) { Glibc.lseek(rawValue, off_t(offset), SEEK_SET) }
    }

    /// fsync(2): the file's data and metadata reach the disk before this returns.
    package func synchronize(target: String) throws(IOError) {
        try syscallOrThrow("fsync", target: target) { fsync(rawValue) }
    }
}
