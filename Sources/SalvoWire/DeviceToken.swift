/// An APNs device token: exactly 32 bytes, stored inline.
///
/// The bytes live in four `UInt64` words kept in memory order (word 0 holds bytes 0...7
/// in the order they appear on the wire), so copying a token into a frame is a plain
/// 32-byte memory copy and creating one never touches the heap.
public struct DeviceToken: Hashable, Sendable, CustomStringConvertible {
    /// The length of every APNs device token on the binary interface.
    public static let byteCount = 32

    // A homogeneous tuple has a guaranteed contiguous layout (unlike struct fields), which
    // is what lets `withUnsafeBytes` expose it as 32 consecutive bytes.
    @usableFromInline
    internal var storage: (UInt64, UInt64, UInt64, UInt64)

    /// Parses a token from its hexadecimal text (64 hex digits, either case).
    ///
    /// Surrounding spaces, tabs, carriage returns and line feeds are ignored, so a line
    /// read from a file can be passed as is.
    ///
    /// - Throws: `DeviceTokenError.empty` when nothing but whitespace is given,
    ///   `.invalidCharacter` for the first non-hex character (its position is 1-based in
    ///   the trimmed text), `.oddLength` when the digits do not make whole bytes, and
    ///   `.wrongLength` when they make a number of bytes other than 32.
    public init(hex: some StringProtocol) throws(DeviceTokenError) {
        // Native String and Substring expose contiguous UTF-8, so this path never copies.
        let parsed: Result<DeviceToken, DeviceTokenError>? = hex.utf8.withContiguousStorageIfAvailable {
            utf8 in
            do throws(DeviceTokenError) {
                return .success(try DeviceToken(hex: UnsafeRawBufferPointer(utf8)))
            } catch {
                return .failure(error)
            }
        }
        if let parsed {
            self = try parsed.get()
        } else {
            // Bridged or otherwise non-contiguous strings: make a native copy first.
            var copy = String(hex)
            let result = copy.withUTF8 { utf8 -> Result<DeviceToken, DeviceTokenError> in
                do throws(DeviceTokenError) {
                    return .success(try DeviceToken(hex: UnsafeRawBufferPointer(utf8)))
                } catch {
                    return .failure(error)
                }
            }
            self = try result.get()
        }
    }

    /// Parses a token from hexadecimal text given as raw UTF-8 bytes.
    ///
    /// Used when reading token files without creating a `String` per line. Trims and
    /// reports errors exactly like `init(hex:)` for strings.
    public init(hex bytes: UnsafeRawBufferPointer) throws(DeviceTokenError) {
        var start = 0
        var end = bytes.count
        while start < end, Self.isTrimmable(bytes[start]) { start += 1 }
        while end > start, Self.isTrimmable(bytes[end - 1]) { end -= 1 }
        let length = end - start
        if length == 0 { throw .empty }

        // Validate every character before judging the length: a stray character is the
        // more useful report (a length error on "…abc\u{00E9}" would hide the real cause).
        // Note that when the fast path below succeeds, validation is already done.
        if length != 2 * Self.byteCount {
            for i in start..<end where Self.nibble(bytes[i]) == nil {
                throw .invalidCharacter(Self.character(in: bytes, at: i), position: i - start + 1)
            }
            if length % 2 != 0 { throw .oddLength(length) }
            throw .wrongLength(bytes: length / 2)
        }

        #if _endian(little)
        if let words = Self.parseSWAR(bytes.baseAddress! + start) {
            storage = words
            return
        }
        #endif
        // The scalar path: also the one that finds and reports a bad character.
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        var index = start
        for word in 0..<4 {
            var value: UInt64 = 0
            for _ in 0..<8 {
                guard let high = Self.nibble(bytes[index]) else {
                    throw .invalidCharacter(Self.character(in: bytes, at: index), position: index - start + 1)
                }
                guard let low = Self.nibble(bytes[index + 1]) else {
                    throw .invalidCharacter(Self.character(in: bytes, at: index + 1), position: index - start + 2)
                }
                value = value << 8 | UInt64(high << 4 | low)
                index += 2
            }
            // `bigEndian` puts the first parsed byte first in memory, on any host.
            switch word {
            case 0: words.0 = value.bigEndian
            case 1: words.1 = value.bigEndian
            case 2: words.2 = value.bigEndian
            default: words.3 = value.bigEndian
            }
        }
        storage = words
    }

    #if _endian(little)
    /// Parses 64 hex characters eight at a time with word arithmetic (SWAR), or returns
    /// nil when any character is not a hex digit. Campaign files hold millions of tokens:
    /// this is several times faster than a character loop.
    @inline(__always)
    private static func parseSWAR(_ text: UnsafeRawPointer) -> (UInt64, UInt64, UInt64, UInt64)? {
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        for word in 0..<4 {
            guard let low = HexText.parseEight(text + word * 16), let high = HexText.parseEight(text + word * 16 + 8)
            else { return nil }
            let value = UInt64(low) | UInt64(high) << 32
            switch word {
            case 0: words.0 = value
            case 1: words.1 = value
            case 2: words.2 = value
            default: words.3 = value
            }
        }
        return words
    }

    #endif

    /// Creates a token from its 32 raw bytes.
    ///
    /// - Throws: `DeviceTokenError.wrongLength` unless `bytes` holds exactly 32 bytes.
    public init(bytes: UnsafeRawBufferPointer) throws(DeviceTokenError) {
        guard bytes.count == Self.byteCount else { throw .wrongLength(bytes: bytes.count) }
        var words: (UInt64, UInt64, UInt64, UInt64) = (0, 0, 0, 0)
        Swift.withUnsafeMutableBytes(of: &words) { destination in
            destination.copyMemory(from: bytes)
        }
        storage = words
    }

    /// The token as 64 lowercase hexadecimal characters.
    public var hex: String {
        String(unsafeUninitializedCapacity: 2 * Self.byteCount) { output in
            writeHex(into: UnsafeMutableRawBufferPointer(output))
            return 2 * Self.byteCount
        }
    }

    /// Writes the 64 lowercase hexadecimal digits at the start of `destination` (an HTTP/2
    /// request's `:path` ends with them), without allocating.
    @inlinable
    public func writeHex(into destination: UnsafeMutableRawBufferPointer) {
        precondition(destination.count >= 2 * Self.byteCount, "a token's hex needs \(2 * Self.byteCount) bytes")
        withUnsafeBytes { bytes in
            for offset in stride(from: 0, to: Self.byteCount, by: 4) {
                HexText.write(bytes.loadUnaligned(fromByteOffset: offset, as: UInt32.self).bigEndian,
                              to: destination.baseAddress! + 2 * offset)
            }
        }
    }

    /// The lowercase hexadecimal form, as `hex`.
    public var description: String { hex }

    /// Calls `body` with the token's 32 bytes. The pointer is valid only inside `body`.
    @inlinable
    public func withUnsafeBytes<R, E: Error>(_ body: (UnsafeRawBufferPointer) throws(E) -> R) throws(E) -> R {
        try Swift.withUnsafeBytes(of: storage, body)
    }

    /// Copies the token's 32 bytes to `destination`, which must have room for them.
    ///
    /// This is the encoder's hot path: one fixed-size copy, no bounds bookkeeping.
    @inlinable
    public func copyBytes(to destination: UnsafeMutableRawPointer) {
        Swift.withUnsafeBytes(of: storage) { source in
            destination.copyMemory(from: source.baseAddress!, byteCount: Self.byteCount)
        }
    }

    /// Whether the two tokens have the same 32 bytes.
    public static func == (lhs: DeviceToken, rhs: DeviceToken) -> Bool {
        lhs.storage.0 == rhs.storage.0 && lhs.storage.1 == rhs.storage.1
            && lhs.storage.2 == rhs.storage.2 && lhs.storage.3 == rhs.storage.3
    }

    /// Hashes the 32 bytes, so tokens can key a set or a dictionary (a clean-up list).
    public func hash(into hasher: inout Hasher) {
        hasher.combine(storage.0)
        hasher.combine(storage.1)
        hasher.combine(storage.2)
        hasher.combine(storage.3)
    }

    // MARK: - Parsing helpers

    @inline(__always)
    static func isTrimmable(_ byte: UInt8) -> Bool {
        byte == 0x20 || byte == 0x09 || byte == 0x0D || byte == 0x0A
    }

    /// The value of one hex digit, or nil. Arithmetic instead of a table: no global to
    /// initialise, and the branches predict well on valid input.
    @inline(__always)
    static func nibble(_ byte: UInt8) -> UInt8? {
        let digit = byte &- 0x30  // "0"
        if digit < 10 { return digit }
        let letter = (byte | 0x20) &- 0x61  // "a", after folding "A"..."F" to lowercase
        if letter < 6 { return letter + 10 }
        return nil
    }

    /// The character starting at `index`, for error messages only. Decodes one Unicode
    /// scalar; malformed UTF-8 becomes U+FFFD.
    static func character(in bytes: UnsafeRawBufferPointer, at index: Int) -> Character {
        var iterator = bytes[index...].makeIterator()
        var decoder = UTF8()
        switch decoder.decode(&iterator) {
        case .scalarValue(let scalar): return Character(scalar)
        case .emptyInput, .error: return "\u{FFFD}"
        }
    }
}

/// Why a device token could not be created.
public enum DeviceTokenError: Error, Equatable, Sendable, CustomStringConvertible {
    /// The text was empty, or only whitespace.
    case empty
    /// The text holds an odd number of hex digits (the count is given), so it cannot be bytes.
    case oddLength(Int)
    /// A character that is not a hex digit. `position` is 1-based, counted in the text after
    /// surrounding whitespace was trimmed; every character before it is an ASCII hex digit,
    /// so it is both the character and the byte position.
    case invalidCharacter(Character, position: Int)
    /// The token decodes to this many bytes instead of 32.
    case wrongLength(bytes: Int)

    /// The problem in a sentence, for error messages.
    public var description: String {
        switch self {
        case .empty:
            return "device token is empty; APNs tokens are 32 bytes (64 hex characters)"
        case .oddLength(let count):
            return "device token has \(count) hex characters, an odd number; APNs tokens are 32 bytes (64 hex characters)"
        case .invalidCharacter(let character, let position):
            let shown = character.unicodeScalars.allSatisfy({ $0.properties.isWhitespace || $0.value < 0x20 || $0.value == 0x7F })
                ? character.unicodeScalars.map { "U+" + String($0.value, radix: 16, uppercase: true) }.joined(separator: " ")
                : "'\(character)'"
            return "non-hex character \(shown) at position \(position) of the device token"
        case .wrongLength(let bytes):
            return "device token has \(bytes) bytes; APNs tokens are 32 bytes (64 hex characters)"
        }
    }
}
