import SalvoIO

/// Where a connection goes when a proxy applies: its TCP connect to the proxy, then a
/// tunnel of its own to the gateway, then TLS with the gateway as without a proxy. Only
/// connection setup reads it: a request costs the same with or without a proxy.
struct ProxyRoute: Sendable {
    let proxy: ProxyConfiguration
    let gatewayHost: String
    let gatewayPort: Int
    /// The gateway's addresses, resolved here for a `socks5` proxy (which is given an
    /// address); empty for the others, which are given the name.
    let gatewayAddresses: [SocketAddress]

    /// A fresh tunnel for one connection attempt; attempts take the gateway's addresses in turn.
    func tunnel(attempt: Int) -> ProxyTunnel {
        let address = gatewayAddresses.isEmpty ? nil : gatewayAddresses[attempt % gatewayAddresses.count]
        return ProxyTunnel(proxy: proxy, targetHost: gatewayHost, targetPort: gatewayPort, targetAddress: address)
    }
}
