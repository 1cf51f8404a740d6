import Foundation
import SalvoIO
#if canImport(Glibc)
import Glibc
#endif

/// A real proxy from Debian, started on a free port of 127.0.0.1 and stopped by the test:
/// tinyproxy (HTTP CONNECT, Basic auth) or microsocks (SOCKS5, user and password).
public final class TestProxy {
    public static let tinyproxy = "/usr/bin/tinyproxy"
    public static let microsocks = "/usr/bin/microsocks"
    public static var hasTinyproxy: Bool { FileManager.default.isExecutableFile(atPath: tinyproxy) }
    public static var hasMicrosocks: Bool { FileManager.default.isExecutableFile(atPath: microsocks) }

    public let port: Int
    public let process: ChildProcess

    private init(port: Int, process: ChildProcess) throws {
        self.port = port
        self.process = process
        // Ready once it accepts a TCP connection; bounded.
        let listening = eventually({ (try? Socket.connect(host: "127.0.0.1", port: port, timeout: .milliseconds(500))) != nil },
                                   within: .seconds(20)) { $0 || !process.isRunning }
        guard listening else {
            process.kill(SIGKILL)
            throw ProxyDidNotStart(description: "the proxy on 127.0.0.1:\(port) did not start: \(process.errors)")
        }
    }

    public struct ProxyDidNotStart: Error, CustomStringConvertible { public var description: String }

    /// tinyproxy with Basic credentials, allowing CONNECT only to `connectPort` (its
    /// `ConnectPort` lines list the ports allowed; without any, every port is).
    public static func tinyproxy(in directory: String, user: String, password: String, connectPort: Int) throws -> TestProxy {
        let port = try freePort()
        let config = "\(directory)/tinyproxy-\(port).conf"
        try """
            Port \(port)
            Listen 127.0.0.1
            Timeout 60
            MaxClients 512
            LogLevel Info
            BasicAuth \(user) \(password)
            ConnectPort \(connectPort)

            """.write(toFile: config, atomically: true, encoding: .utf8)
        return try TestProxy(port: port, process: ChildProcess(tinyproxy, ["-d", "-c", config]))
    }

    /// microsocks with a user and password (on `port`, or a free one).
    public static func microsocks(user: String, password: String, port: Int? = nil) throws -> TestProxy {
        let port = try port ?? freePort()
        return try TestProxy(port: port, process: ChildProcess(microsocks, ["-i", "127.0.0.1", "-p", "\(port)", "-u", user, "-P", password]))
    }

    /// A port of 127.0.0.1 free a moment ago.
    public static func freePort() throws -> Int {
        guard let address = try Socket.listen(host: "127.0.0.1", port: 0).localAddress else {
            throw ProxyDidNotStart(description: "no free port on 127.0.0.1")
        }
        return address.port
    }

    public func stop() {
        process.kill(SIGTERM)
        _ = try? process.exitStatus(within: .seconds(10))
    }
}
