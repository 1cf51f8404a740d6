import Foundation
import SystemPackage
import Testing
@testable import SalvoIO

/// The system-call boundary: errno as `Errno`, failures as `IOError` that read as before,
/// and file I/O through the one EINTR helper.
@Suite struct IOErrorTests {
    @Test func theDescriptionNamesTheErrnoAndSaysWhatItMeans() {
        let error = IOError("connect to", errno: .connectionRefused, target: "127.0.0.1:2195")
        #expect(error.description == "connect to 127.0.0.1:2195 failed: ECONNREFUSED (Connection refused)")
        #expect(IOError("epoll_ctl", errno: .badFileDescriptor).description == "epoll_ctl failed: EBADF (Bad file descriptor)")
        #expect(Errno(rawValue: 4242).symbolicName == "errno 4242")
    }

    @Test func aFailedCallThrowsItsErrnoTyped() {
        #expect(throws: IOError("fsync", errno: .badFileDescriptor, target: "nothing")) {
            try FileDescriptor(rawValue: -1).synchronize(target: "nothing")
        }
        #expect(throws: IOError("open", errno: .noSuchFileOrDirectory, target: "/nonexistent/salvo")) {
            _ = try FileDescriptor.open(path: "/nonexistent/salvo", .readOnly)
        }
    }

    @Test func aFileIsWrittenAndReadBackWholeAndTooLargeIsEFBIG() throws {
        let path = FileManager.default.temporaryDirectory.appendingPathComponent("salvo-ioerror-\(UUID())").path
        defer { unlink(path) }
        let text = String(repeating: "0123456789abcdef", count: 4096)  // 64 KiB: several reads
        try writeFile(path, text, mode: 0o600)
        #expect(try readSmallFile(path, limit: 1 << 20) == Array(text.utf8))
        #expect(throws: IOError("read", errno: .fileTooLarge, target: path)) {
            _ = try readSmallFile(path, limit: 1000)
        }
    }
}
