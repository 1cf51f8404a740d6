import SalvoIO
#if canImport(Glibc)
import Glibc
#endif

/// How far a campaign got, kept in a small file so that a killed run can resume.
///
/// The file holds the highest line L such that every line up to L reached a terminal
/// state (accepted, rejected or failed). `--resume` loads L and calls
/// `CampaignReader.skip(throughLine: L)`, so no notification is sent twice for lines
/// the previous run finished, and none after L is forgotten.
///
/// The format is two lines of text, easy to read and to fix by hand:
///
///     salvo-checkpoint v1
///     line 12345
///
/// `save` is atomic and durable: it writes a temporary file in the same directory,
/// fsyncs it, renames it over the checkpoint and fsyncs the directory. After a crash or
/// `kill -9` the file holds either the old or the new line, never a torn one.
public struct Checkpoint: Sendable, Hashable {
    /// The checkpoint file.
    public let path: String

    /// A checkpoint kept at `path` (nothing is read or written yet).
    public init(path: String) {
        self.path = path
    }

    static let header = "salvo-checkpoint v1"

    /// Records that every line up to and including `line` is done.
    ///
    /// - Throws: `CheckpointError.io` when the file cannot be written; the previous
    ///   checkpoint is then left as it was.
    public func save(completedThroughLine line: Int) throws(CheckpointError) {
        precondition(line >= 0, "a checkpoint line cannot be negative")
        let text = "\(Self.header)\nline \(line)\n"
        let directory = Self.directory(of: path)
        let temporary = "\(path).tmp-\(getpid())"

        let fd = open(temporary, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o644)
        guard fd >= 0 else { throw .io(IOError("create", errno: errno, target: temporary)) }
        do throws(CheckpointError) {
            defer { close(fd) }
            try Self.writeAll(text, to: fd, path: temporary)
            // Without this, a rename can reach the disk before the data it names.
            guard fsync(fd) == 0 else { throw .io(IOError("fsync", errno: errno, target: temporary)) }
        } catch {
            unlink(temporary)
            throw error
        }
        guard rename(temporary, path) == 0 else {
            let error = IOError("rename to \(path)", errno: errno, target: temporary)
            unlink(temporary)
            throw .io(error)
        }
        // The rename lives in the directory: sync it too, or it may be lost on power failure.
        let directoryFD = open(directory, O_RDONLY | O_DIRECTORY | O_CLOEXEC)
        guard directoryFD >= 0 else { throw .io(IOError("open", errno: errno, target: directory)) }
        defer { close(directoryFD) }
        guard fsync(directoryFD) == 0 else { throw .io(IOError("fsync", errno: errno, target: directory)) }
    }

    /// The line saved last, or nil when there is no checkpoint file yet.
    ///
    /// - Throws: `CheckpointError.corrupt` when the file is not a checkpoint (it is never
    ///   guessed at: resuming from a wrong line would resend or drop notifications);
    ///   `.io` when it cannot be read.
    public func load() throws(CheckpointError) -> Int? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        if fd < 0 {
            if errno == ENOENT { return nil }
            throw .io(IOError("open", errno: errno, target: path))
        }
        defer { close(fd) }
        // A valid checkpoint is about 40 bytes; reading a little more is enough to tell.
        var bytes = [UInt8](repeating: 0, count: 256)
        var count = 0
        while count < bytes.count {
            let n = bytes.withUnsafeMutableBytes { read(fd, $0.baseAddress! + count, $0.count - count) }
            if n == 0 { break }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io(IOError("read", errno: errno, target: path))
            }
            count += n
        }
        return try parse(bytes[..<count])
    }

    private func parse(_ bytes: ArraySlice<UInt8>) throws(CheckpointError) -> Int {
        func corrupt(_ reason: String) -> CheckpointError { .corrupt(path: path, reason: reason) }
        guard bytes.count < 256 else { throw corrupt("it is longer than a checkpoint can be") }
        guard let text = String(validating: bytes, as: UTF8.self) else { throw corrupt("it is not UTF-8 text") }
        let lines = text.split(separator: "\n", omittingEmptySubsequences: false)
        guard lines.first == Substring(Self.header) else {
            throw corrupt("the first line is not \"\(Self.header)\"")
        }
        guard lines.count == 3, lines[2].isEmpty, lines[1].hasPrefix("line ") else {
            throw corrupt("expected a second line \"line N\" and nothing after it")
        }
        guard let line = Int(lines[1].dropFirst(5)), line >= 0 else {
            throw corrupt("\"\(lines[1])\" does not give a line number")
        }
        return line
    }

    /// The directory whose entry `rename` changes, to be fsynced after it.
    static func directory(of path: String) -> String {
        guard let slash = path.lastIndex(of: "/") else { return "." }
        return slash == path.startIndex ? "/" : String(path[..<slash])
    }

    private static func writeAll(_ text: String, to fd: Int32, path: String) throws(CheckpointError) {
        var remaining = Array(text.utf8)[...]
        while !remaining.isEmpty {
            let n = remaining.withUnsafeBytes { write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw .io(IOError("write", errno: errno, target: path))
            }
            remaining = remaining.dropFirst(n)
        }
    }
}

/// Why a checkpoint could not be saved or loaded.
public enum CheckpointError: Error, Sendable, Equatable, CustomStringConvertible {
    /// A system call failed.
    case io(IOError)
    /// The file exists but is not a checkpoint Salvo wrote.
    case corrupt(path: String, reason: String)

    public var description: String {
        switch self {
        case .io(let error):
            return "checkpoint: \(error)"
        case .corrupt(let path, let reason):
            return "checkpoint \(path) is not valid: \(reason); delete it to start from the beginning, or fix it to read \"\(Checkpoint.header)\\nline N\\n\""
        }
    }
}
