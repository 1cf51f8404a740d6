import SalvoWire

/// Which protocol a sender speaks to the gateway.
public enum Transport: Sendable {
    /// Apple's HTTP/2 provider API, what Apple serves today: every notification is a
    /// request answered on its own stream.
    case http2(HTTP2Options)
    /// The legacy binary provider protocol, in this frame format (command 2, 1 or 0), for
    /// gateways that still speak it.
    case binary(FrameFormat)
}
