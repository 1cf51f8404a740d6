import Foundation
#if canImport(Glibc)
import Glibc
#endif

/// What the bench reads from the operating system about itself. (Allocation counts come
/// from jemalloc, which only the executable links: see `BenchSettings.allocationRequests`.)
package enum BenchSystem {
    /// A new directory under the system's temporary one, named `prefix-<pid>-<random>`; the
    /// caller removes it.
    static func temporaryDirectory(_ prefix: String) throws -> String {
        let path = NSTemporaryDirectory() + "\(prefix)-\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true)
        return path
    }

    /// User and system CPU seconds of the whole process so far.
    static func cpuSeconds() -> (user: Double, system: Double) {
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        func seconds(_ time: timeval) -> Double { Double(time.tv_sec) + Double(time.tv_usec) / 1e6 }
        return (seconds(usage.ru_utime), seconds(usage.ru_stime))
    }

    /// Resets the process's peak resident set (`VmHWM`) to its current size; false when the
    /// kernel refuses (then the peak is the process's lifetime high-water mark).
    @discardableResult
    static func resetPeakResidentSet() -> Bool {
        let fd = open("/proc/self/clear_refs", O_WRONLY | O_CLOEXEC)
        guard fd >= 0 else { return false }
        defer { close(fd) }
        return write(fd, "5", 1) == 1
    }

    /// `VmHWM` from /proc/self/status in MiB, or `ru_maxrss` when that is not readable.
    static func peakResidentSetMiB() -> Double {
        if let status = try? String(contentsOfFile: "/proc/self/status", encoding: .utf8),
           let line = status.split(separator: "\n").first(where: { $0.hasPrefix("VmHWM:") }),
           let kib = Double(line.split(separator: " ", omittingEmptySubsequences: true).dropFirst().first ?? "") {
            return kib / 1024
        }
        var usage = rusage()
        getrusage(RUSAGE_SELF.rawValue, &usage)
        return Double(usage.ru_maxrss) / 1024
    }

    /// The running process's executable (`/proc/self/exe`): in `salvo bench`, the `salvo`
    /// binary, which the harness starts again as `salvo mock`.
    package static func executablePath() -> String {
        var buffer = [CChar](repeating: 0, count: 4096)
        let length = readlink("/proc/self/exe", &buffer, buffer.count - 1)
        if length > 0 { return String(decoding: buffer[..<length].map { UInt8(bitPattern: $0) }, as: UTF8.self) }
        return URL(fileURLWithPath: CommandLine.arguments[0]).standardizedFileURL.path
    }

    /// Online cores.
    static var cores: Int { max(1, sysconf(Int32(_SC_NPROCESSORS_ONLN))) }

    static func machine() -> BenchResults.Machine {
        let cpuInfo = (try? String(contentsOfFile: "/proc/cpuinfo", encoding: .utf8)) ?? ""
        let model = cpuInfo.split(separator: "\n").first { $0.hasPrefix("model name") }
            .flatMap { $0.split(separator: ":", maxSplits: 1).last }
            .map { $0.trimmingCharacters(in: .whitespaces) } ?? "unknown CPU"
        var name = utsname()
        uname(&name)
        let kernel = withUnsafeBytes(of: &name.release) { String(decoding: $0.prefix { $0 != 0 }, as: UTF8.self) }
        let memory = Double(sysconf(Int32(_SC_PHYS_PAGES))) * Double(sysconf(Int32(_SC_PAGESIZE))) / Double(1 << 30)
        return .init(cores: cores, cpu: model, kernel: kernel, memoryGib: memory)
    }

    /// The short commit of the working directory's repository ("+dirty" when Sources/
    /// has uncommitted changes), or "nosha".
    static func commit() -> String {
        guard let sha = run("/usr/bin/env", ["git", "rev-parse", "--short", "HEAD"]), !sha.isEmpty else { return "nosha" }
        let dirty = run("/usr/bin/env", ["git", "status", "--porcelain", "--", "Sources", "Package.swift"]).map { !$0.isEmpty } ?? false
        return sha + (dirty ? "+dirty" : "")
    }

    /// The repository root (where results/ and scripts/ live), or the working directory.
    static func repositoryRoot() -> String {
        run("/usr/bin/env", ["git", "rev-parse", "--show-toplevel"]).flatMap { $0.isEmpty ? nil : $0 }
            ?? FileManager.default.currentDirectoryPath
    }

    /// Whether `program` is on PATH.
    static func which(_ program: String) -> String? {
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "/usr/bin:/bin").split(separator: ":") {
            let path = "\(directory)/\(program)"
            if access(path, X_OK) == 0 { return path }
        }
        return nil
    }

    /// A command's trimmed standard output, nil when it fails.
    static func run(_ executable: String, _ arguments: [String]) -> String? {
        let process = Process()
        process.executableURL = URL(fileURLWithPath: executable)
        process.arguments = arguments
        let output = Pipe()
        process.standardOutput = output
        process.standardError = FileHandle.nullDevice
        do { try process.run() } catch { return nil }
        let data = output.fileHandleForReading.readDataToEndOfFile()
        process.waitUntilExit()
        guard process.terminationStatus == 0 else { return nil }
        return String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
    }
}
