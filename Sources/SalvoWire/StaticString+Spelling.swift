#if canImport(Glibc)
import Glibc
#endif

extension StaticString {
    /// Whether `bytes` are this string's UTF-8, byte for byte: one `memcmp`, where a
    /// String's `utf8.elementsEqual` walks both a byte at a time through generic code (the
    /// mock matches every request's header values so, the sender every answer's names).
    @inlinable
    public func isSpelled(by bytes: UnsafeRawBufferPointer) -> Bool {
        bytes.count == utf8CodeUnitCount && (bytes.isEmpty || memcmp(utf8Start, bytes.baseAddress!, bytes.count) == 0)
    }
}
