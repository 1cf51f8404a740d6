internal import CLinuxShim
#if canImport(Glibc)
import Glibc
#endif

/// A TUN device: IP packets in and out of the kernel through one descriptor, which this
/// object owns (the device goes away with it). Needs CAP_NET_ADMIN and `/dev/net/tun`.
package final class TunDevice: Sendable {
    package let name: String
    package let fd: Int32

    /// Creates the device `name` (at most 15 bytes), nonblocking.
    package init(name: String) throws(IOError) {
        let fd = salvo_open_tun(name)
        guard fd >= 0 else { throw IOError("open a TUN device", errno: errno, target: name) }
        self.name = name
        self.fd = fd
    }

    deinit { close(fd) }

    /// Reads one packet into `buffer`; nil when none is waiting.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> Int? {
        while true {
            let count = Glibc.read(fd, buffer.baseAddress, buffer.count)
            if count >= 0 { return count }
            if errno == EINTR { continue }
            if errno == EAGAIN { return nil }
            throw IOError("read", errno: errno, target: name)
        }
    }

    /// Hands one packet to the kernel. A full queue drops it, as a congested link would.
    package func write(_ packet: UnsafeRawBufferPointer) {
        while Glibc.write(fd, packet.baseAddress, packet.count) < 0 && errno == EINTR {}
    }
}

/// Moves the calling thread into the network namespace `name` (made by `ip netns add`):
/// its sockets then live there. Needs CAP_SYS_ADMIN.
package func enterNetworkNamespace(_ name: String) throws(IOError) {
    let path = "/var/run/netns/\(name)"
    guard salvo_enter_network_namespace(path) == 0 else { throw IOError("enter the network namespace", errno: errno, target: path) }
}
