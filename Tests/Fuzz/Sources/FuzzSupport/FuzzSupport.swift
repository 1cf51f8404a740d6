import SalvoIO
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Stops the run when a property does not hold: the message goes to standard error and the
/// trap makes libFuzzer save the input as a crash, to be replayed by passing its file to the
/// fuzzer.
public func require(
    _ holds: Bool, _ message: @autoclosure () -> String, file: StaticString = #fileID, line: UInt = #line
) {
    guard !holds else { return }
    fatalError(message(), file: file, line: line)
}

/// The ways a stream decoder is fed the same bytes; each must give the same result.
public enum Feeding: CaseIterable, Sendable, CustomStringConvertible {
    /// All of it in one call.
    case whole
    /// One byte per call.
    case byteByByte
    /// Pieces of random sizes, empty ones included, drawn from a generator seeded with a hash
    /// of the bytes themselves: the same input always splits the same way, so a crash replays.
    case randomSplits

    /// The consecutive ranges of `input` to feed, in order; together they cover it exactly.
    public func pieces(of input: UnsafeRawBufferPointer) -> [Range<Int>] {
        switch self {
        case .whole:
            return [0..<input.count]
        case .byteByByte:
            return (0..<input.count).map { $0..<($0 + 1) }
        case .randomSplits:
            var random = SplitMix64(seed: fnv1a(input))
            var pieces: [Range<Int>] = []
            var start = 0
            while start < input.count {
                let left = input.count - start
                // Mostly short pieces, so that every header and item boundary gets split,
                // some long ones, and now and then an empty call.
                let length: Int
                switch random.next() % 8 {
                case 0: length = 0
                case 1...5: length = 1 + Int(random.next() % 8)
                default: length = 1 + Int(random.next() % UInt64(left))
                }
                let end = start + Swift.min(length, left)
                pieces.append(start..<end)
                start = end
            }
            return pieces
        }
    }

    public var description: String {
        switch self {
        case .whole: "whole"
        case .byteByByte: "byte by byte"
        case .randomSplits: "in random splits"
        }
    }
}

/// FNV-1a over `bytes`: a seed that depends on every byte.
func fnv1a(_ bytes: UnsafeRawBufferPointer) -> UInt64 {
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325
    for byte in bytes {
        hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3
    }
    return hash
}

/// A file rewritten with each input, for parsers that read from disk. It lives in /dev/shm
/// when there is one, so the fuzzer runs at memory speed, and is removed when the process
/// exits.
public final class ScratchFile: Sendable {
    /// Where the file is.
    public let path: String

    /// A scratch file whose name starts with `name` and holds the process id, so that
    /// parallel fuzzers do not share one.
    public init(_ name: String) {
        let directory = access("/dev/shm", W_OK) == 0 ? "/dev/shm" : (getenv("TMPDIR").map { String(cString: $0) } ?? "/tmp")
        path = "\(directory)/salvo-fuzz-\(name)-\(getpid())"
        scratchPaths.withLock { $0.append(path) }
        ScratchFile.removeAtExit
    }

    /// Replaces the file's contents with `bytes`.
    public func write(_ bytes: UnsafeRawBufferPointer) {
        let fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0o600)
        require(fd >= 0, "cannot create \(path): errno \(errno)")
        defer { close(fd) }
        var written = 0
        while written < bytes.count {
            let n = Glibc.write(fd, bytes.baseAddress! + written, bytes.count - written)
            require(n > 0, "cannot write \(path): errno \(errno)")
            written += n
        }
    }

    private static let removeAtExit: Void = {
        atexit {
            for path in scratchPaths.withLock({ $0 }) { unlink(path) }
        }
    }()
}

private let scratchPaths = Mutex<[String]>([])
