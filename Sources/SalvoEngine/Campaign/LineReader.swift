import SalvoIO
#if canImport(Glibc)
import Glibc
#endif

/// Splits a file into lines through one fixed buffer, so reading a campaign of any size
/// takes the same memory.
///
/// Lines end at `\n`; a `\r` before it is dropped (CRLF files), and so is a UTF-8 byte
/// order mark at the start of line 1 (spreadsheet exports write one). The last line needs
/// no terminator. A line must fit the buffer: a longer one is an error, not a reason to
/// grow, because nothing in a campaign file legitimately comes near the limit.
struct LineReader: ~Copyable {
    let path: String
    /// The longest line accepted, in bytes, without its line ending.
    let maximumLineLength: Int
    private let fd: Int32
    /// `maximumLineLength` plus room for `\r\n`: a full buffer without a `\n` therefore
    /// always holds a line that is too long, even after dropping a `\r`.
    private let buffer: UnsafeMutableRawBufferPointer
    /// Unconsumed bytes are `start..<end`; `scanned..<end` has not been searched for `\n`.
    private var start = 0
    private var end = 0
    private var scanned = 0
    private var atEndOfFile = false
    /// The number of the line last returned (1-based); 0 before the first.
    private(set) var lineNumber = 0

    init(path: String, maximumLineLength: Int) throws(CampaignError) {
        precondition(maximumLineLength >= 1, "maximumLineLength must be positive")
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw .io(IOError("open", errno: errno, target: path)) }
        self.fd = fd
        self.path = path
        self.maximumLineLength = maximumLineLength
        buffer = .allocate(byteCount: maximumLineLength + 2, alignment: 16)
    }

    deinit {
        close(fd)
        buffer.deallocate()
    }

    /// The buffer's size in bytes: fixed for the reader's life (tests check it).
    var bufferCapacity: Int { buffer.count }

    /// The next line without its line ending, or nil at the end of the file. The bytes are
    /// valid until the next call.
    mutating func nextLine() throws(CampaignError) -> UnsafeRawBufferPointer? {
        let base = buffer.baseAddress!
        while true {
            if scanned < end, let newline = memchr(base + scanned, 0x0A, end - scanned) {
                let index = base.distance(to: newline)
                let line = try finishLine(start..<index)
                start = index + 1
                scanned = start
                return line
            }
            scanned = end
            if atEndOfFile {
                guard start < end else { return nil }
                let line = try finishLine(start..<end)
                start = end
                return line
            }
            try refill()
        }
    }

    /// Trims the line ending and the BOM, checks the length, counts the line.
    private mutating func finishLine(_ range: Range<Int>) throws(CampaignError) -> UnsafeRawBufferPointer {
        lineNumber += 1
        var lower = range.lowerBound
        var upper = range.upperBound
        if upper > lower, buffer[upper - 1] == 0x0D { upper -= 1 }
        if lineNumber == 1, upper - lower >= 3, buffer[lower] == 0xEF, buffer[lower + 1] == 0xBB, buffer[lower + 2] == 0xBF {
            lower += 3
        }
        guard upper - lower <= maximumLineLength else {
            throw .lineTooLong(line: lineNumber, limit: maximumLineLength)
        }
        return UnsafeRawBufferPointer(rebasing: buffer[lower..<upper])
    }

    /// Moves the unconsumed tail to the front and reads more after it.
    private mutating func refill() throws(CampaignError) {
        let base = buffer.baseAddress!
        if start > 0 {
            let pending = end - start
            if pending > 0 { base.copyMemory(from: base + start, byteCount: pending) }
            scanned -= start
            end = pending
            start = 0
        }
        guard end < buffer.count else {
            throw .lineTooLong(line: lineNumber + 1, limit: maximumLineLength)
        }
        while true {
            let count = read(fd, base + end, buffer.count - end)
            if count > 0 {
                end += count
                return
            }
            if count == 0 {
                atEndOfFile = true
                return
            }
            if errno == EINTR { continue }
            throw .io(IOError("read", errno: errno, target: path))
        }
    }
}
