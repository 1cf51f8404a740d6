import Foundation

/// A throwaway PostgreSQL server for one test: `initdb` in a temporary directory, started
/// with `pg_ctl` on an ephemeral loopback port (and a Unix socket in the same directory),
/// stopped and removed by `stop()`.
///
/// PostgreSQL refuses to run as root: when the tests do (CI), the cluster runs as the
/// `postgres` system user (the Debian package creates it) through `runuser`, in a
/// directory it owns, which is also where its programs run: the checkout may be one that
/// user cannot enter (a clone under a 0700 home). Its superuser is `salvo` with a password, and connections over TCP
/// must give it (scram-sha-256), so that tests can also present wrong credentials.
public final class PostgresCluster: Sendable {
    /// What stopped the cluster from starting.
    public struct Failure: Error, CustomStringConvertible {
        public var description: String
    }

    /// The cluster's directory (data, socket, log).
    public let directory: String
    /// Its TCP port on 127.0.0.1.
    public let port: Int
    /// The superuser's password.
    public static let password = "salvo-test-password"
    private let binaries: String
    private let runAs: String?

    /// `postgres://salvo:…@127.0.0.1:port/database`.
    public func url(database: String = "postgres", password: String = PostgresCluster.password) -> String {
        "postgres://salvo:\(password)@127.0.0.1:\(port)/\(database)"
    }

    /// Creates and starts a cluster; throws `Failure` with PostgreSQL's own words when it cannot.
    public init() throws {
        guard let binaries = Self.findBinaries() else {
            throw Failure(description: "PostgreSQL's initdb and pg_ctl were not found (install postgresql: make test-deps)")
        }
        self.binaries = binaries
        runAs = getuid() == 0 ? "postgres" : nil
        directory = NSTemporaryDirectory() + "salvo-pg-\(UUID().uuidString.prefix(8))"
        let data = directory + "/data"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try Self.password.write(toFile: directory + "/pwfile", atomically: true, encoding: .utf8)
        if let runAs { try Self.run("/bin/chown", ["-R", runAs, directory]) }
        try Self.run(binaries + "/initdb", ["-D", data, "-U", "salvo", "--pwfile=\(directory)/pwfile", "-A", "scram-sha-256",
                                            "--auth-local=trust", "-E", "UTF8", "--no-sync"], as: runAs, in: directory)
        var attempt = 0
        while true {
            let port = try Self.freePort()
            do {
                try Self.run(binaries + "/pg_ctl", [
                    "-D", data, "-l", directory + "/log", "-w", "-t", "60", "start", "-o",
                    "-p \(port) -k \(directory) -c listen_addresses=127.0.0.1 -c fsync=off -c synchronous_commit=off "
                        + "-c full_page_writes=off -c max_connections=50",
                ], as: runAs, in: directory)
                self.port = port
                return
            } catch {
                // The port may have been taken between choosing and binding it: another.
                let log = (try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? ""
                attempt += 1
                guard attempt < 5, log.contains("could not bind") else {
                    try? FileManager.default.removeItem(atPath: directory)
                    throw Failure(description: "PostgreSQL did not start: \(error)\n\(log.suffix(2000))")
                }
            }
        }
    }

    /// Stops the server at once and removes its directory.
    public func stop() {
        _ = try? Self.run(binaries + "/pg_ctl", ["-D", directory + "/data", "-m", "immediate", "-w", "stop"], as: runAs, in: directory)
        try? FileManager.default.removeItem(atPath: directory)
    }

    /// Runs `psql` on the cluster's socket with `sql`; returns its standard output (its
    /// warnings, on standard error, are not part of it).
    @discardableResult
    public func psql(_ sql: String, database: String = "postgres") throws -> String {
        try Self.run(binaries + "/psql", ["-h", directory, "-p", "\(port)", "-U", "salvo", "-d", database, "-At", "-v",
                                          "ON_ERROR_STOP=1", "-c", sql], as: runAs, in: directory)
    }

    /// The directory with initdb, pg_ctl and psql: Debian's newest /usr/lib/postgresql/N/bin,
    /// else the directory of an initdb on PATH.
    static func findBinaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        for version in versions.reversed() where FileManager.default.isExecutableFile(atPath: "\(root)/\(version)/bin/initdb") {
            return "\(root)/\(version)/bin"
        }
        for directory in (ProcessInfo.processInfo.environment["PATH"] ?? "").split(separator: ":") {
            let candidate = URL(fileURLWithPath: "\(directory)/initdb").resolvingSymlinksInPath()
            if FileManager.default.isExecutableFile(atPath: candidate.path) { return candidate.deletingLastPathComponent().path }
        }
        return nil
    }

    /// Runs a program to its end (as `user`, through runuser, when given) in `directory`
    /// (default: the test's own); returns its standard output, or throws with its output
    /// and its errors. Standard error is kept apart: a warning there must never read as a
    /// result.
    ///
    /// Spawned directly and reaped with `waitpid`, its output going to files: the server
    /// `pg_ctl start` leaves running inherits the descriptors, and Foundation's `Process`
    /// waits for that server too, not just for pg_ctl.
    @discardableResult
    static func run(_ program: String, _ arguments: [String], as user: String? = nil, in directory: String? = nil) throws -> String {
        let outputPath = NSTemporaryDirectory() + "salvo-pg-output-\(UUID().uuidString)"
        let errorPath = outputPath + "-errors"
        defer {
            try? FileManager.default.removeItem(atPath: outputPath)
            try? FileManager.default.removeItem(atPath: errorPath)
        }
        let command = user.map { ["/usr/sbin/runuser", "-u", $0, "--", program] + arguments } ?? [program] + arguments
        // env -C: Swift's Glibc does not show posix_spawn_file_actions_addchdir_np.
        let argv = directory.map { ["/usr/bin/env", "-C", $0] + command } ?? command
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, outputPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        posix_spawn_file_actions_addopen(&actions, 2, errorPath, O_WRONLY | O_CREAT | O_TRUNC, 0o644)
        var cArguments = argv.map { strdup($0) } + [nil]
        defer { cArguments.forEach { free($0) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, &cArguments, environ)
        guard spawned == 0 else { throw Failure(description: "cannot start \(argv[0]): errno \(spawned)") }
        // Bounded: every program here finishes on its own (pg_ctl -w -t 60), well within this.
        let deadline = ContinuousClock.now + .seconds(120)
        var status: Int32 = 0
        while waitpid(pid, &status, WNOHANG) == 0 {
            guard ContinuousClock.now < deadline else {
                kill(pid, SIGKILL)
                waitpid(pid, &status, 0)
                throw Failure(description: "\(program) did not finish within 120 s")
            }
            usleep(5_000)
        }
        let text = (try? String(contentsOfFile: outputPath, encoding: .utf8)) ?? ""
        // WIFEXITED and WEXITSTATUS are macros Swift does not import.
        guard status & 0x7f == 0, (status >> 8) & 0xff == 0 else {
            let errors = (try? String(contentsOfFile: errorPath, encoding: .utf8)) ?? ""
            throw Failure(description: "\(program) \(arguments.joined(separator: " ")) failed (wait status \(status)): \(text)\(errors)")
        }
        return text
    }

    /// A TCP port on 127.0.0.1 that was free a moment ago.
    public static func freePort() throws -> Int {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        guard fd >= 0 else { throw Failure(description: "socket: errno \(errno)") }
        defer { close(fd) }
        var address = sockaddr_in()
        address.sin_family = sa_family_t(AF_INET)
        address.sin_addr.s_addr = inet_addr("127.0.0.1")
        address.sin_port = 0
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        let bound = withUnsafeMutablePointer(to: &address) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { pointer in
                bind(fd, pointer, length) == 0 && getsockname(fd, pointer, &length) == 0
            }
        }
        guard bound else { throw Failure(description: "bind: errno \(errno)") }
        return Int(UInt16(bigEndian: address.sin_port))
    }
}
