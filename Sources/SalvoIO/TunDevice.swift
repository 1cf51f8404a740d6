internal import CLinuxShim
import SystemPackage
#if canImport(Glibc)
import Glibc
#endif

/// A TUN device: IP packets in and out of the kernel through one descriptor, which this
/// object owns (the device goes away with it). Needs CAP_NET_ADMIN and `/dev/net/tun`.
package final class TunDevice: Sendable {
    package let name: String
    /// The device's descriptor, for registering with an event loop.
    package var fd: FileDescriptor { FileDescriptor(rawValue: descriptor) }
    /// Stored raw: swift-system leaves `FileDescriptor` non-Sendable, and this class owns it.
    private let descriptor: Int32

    /// Creates the device `name` (at most 15 bytes), nonblocking.
    package init(name: String) throws(IOError) {
        descriptor = try syscallOrThrow("open a TUN device", target: name) { salvo_open_tun(name) }
        self.name = name
    }

    deinit { close(descriptor) }

    /// Reads one packet into `buffer`; nil when none is waiting.
    package func read(into buffer: UnsafeMutableRawBufferPointer) throws(IOError) -> Int? {
        switch try syscall("read", target: name, { Glibc.read(descriptor, buffer.baseAddress, buffer.count) }) {
        case .processed(let count): count
        case .wouldBlock: nil
        }
    }

    /// Hands one packet to the kernel. A full queue drops it, as a congested link would.
    package func write(_ packet: UnsafeRawBufferPointer) {
        _ = try? syscall("write", target: name, { Glibc.write(descriptor, packet.baseAddress, packet.count) })
    }
}

/// Moves the calling thread into the network namespace `name` (made by `ip netns add`):
/// its sockets then live there. Needs CAP_SYS_ADMIN.
package func enterNetworkNamespace(_ name: String) throws(IOError) {
    let path = "/var/run/netns/\(name)"
    try syscallOrThrow("enter the network namespace", target: path) { salvo_enter_network_namespace(path) }
}
