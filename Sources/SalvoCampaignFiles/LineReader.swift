import SalvoIO
import SystemPackage
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
package struct LineReader: ~Copyable {
    let path: String
    /// The longest line accepted, in bytes, without its line ending.
    let maximumLineLength: Int
    private let fd: FileDescriptor
    /// `maximumLineLength` plus room for `\r\n`: a full buffer without a `\n` therefore
    /// always holds a line that is too long, even after dropping a `\r`.
    private let buffer: UnsafeMutableRawBufferPointer
    /// Unconsumed bytes are `start..<end`; `scanned..<end` has not been searched for `\n`.
    private var start = 0
    private var end = 0
    private var scanned = 0
    private var atEndOfFile = false
    /// The file offset of `buffer[0]`.
    private var bufferOffset: UInt64 = 0
    private static let readSize = 1 << 16
    /// The number of the line last returned (1-based); 0 before the first.
    package private(set) var lineNumber = 0
    /// The file offset where the line last returned starts (before any byte order mark).
    private(set) var lineOffset: UInt64 = 0
    /// The file offset where the line last returned ends, before its line ending.
    private(set) var lineEnd: UInt64 = 0

    package init(path: String, maximumLineLength: Int) throws(CampaignError) {
        precondition(maximumLineLength >= 1, "maximumLineLength must be positive")
        do throws(IOError) { fd = try FileDescriptor.open(path: path, .readOnly) } catch { throw .io(error) }
        self.path = path
        self.maximumLineLength = maximumLineLength
        buffer = .allocate(byteCount: maximumLineLength + 2, alignment: 16)
    }

    deinit {
        try? fd.close()
        buffer.deallocate()
    }

    /// The buffer's size in bytes: fixed for the reader's life (tests check it).
    var bufferCapacity: Int { buffer.count }

    /// The next line without its line ending, or nil at the end of the file. The bytes are
    /// valid until the next call.
    package mutating func nextLine() throws(CampaignError) -> UnsafeRawBufferPointer? {
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

    /// Moves so that the next line returned is the one starting at file offset `offset`,
    /// numbered `line`. A target inside the buffer costs nothing; anything else refills
    /// from there, so a reader that rereads runs of lines from a recent part of the file
    /// reads the disk (or the page cache) rarely.
    mutating func seek(toOffset offset: UInt64, line: Int) throws(CampaignError) {
        if offset >= bufferOffset, offset <= bufferOffset + UInt64(end) {
            start = Int(offset - bufferOffset)
        } else {
            do throws(IOError) { try fd.seek(toOffset: offset, target: path) } catch { throw .io(error) }
            bufferOffset = offset
            start = 0
            end = 0
            atEndOfFile = false
        }
        scanned = start
        lineNumber = line - 1
    }

    /// Trims the line ending and the BOM, checks the length, counts the line.
    private mutating func finishLine(_ range: Range<Int>) throws(CampaignError) -> UnsafeRawBufferPointer {
        lineNumber += 1
        lineOffset = bufferOffset + UInt64(range.lowerBound)
        var lower = range.lowerBound
        var upper = range.upperBound
        if upper > lower, buffer[upper - 1] == 0x0D { upper -= 1 }
        lineEnd = bufferOffset + UInt64(upper)
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
            bufferOffset += UInt64(start)
            scanned -= start
            end = pending
            start = 0
        }
        guard end < buffer.count else {
            throw .lineTooLong(line: lineNumber + 1, limit: maximumLineLength)
        }
        // Reads of at most 64 KiB: a reader that seeks (to resend a run of lines) needs
        // a few KiB after the seek, not a whole buffer; a long line takes several reads.
        let space = UnsafeMutableRawBufferPointer(start: base + end, count: min(buffer.count - end, Self.readSize))
        let count: Int
        do throws(IOError) { count = try fd.readSome(into: space, target: path) } catch { throw .io(error) }
        if count == 0 { atEndOfFile = true }
        end += count
    }
}
