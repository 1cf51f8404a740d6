import SalvoWire

/// Where a notification goes: one device, or every device subscribed to a broadcast
/// channel (iOS 18 Live Activities). What rejection and failure events name.
public enum PushTarget: Sendable, Hashable, CustomStringConvertible {
    /// A device, by its token.
    case device(DeviceToken)
    /// A broadcast channel, by its id as Apple made it (base64).
    case channel(String)

    /// The device token in hex, or `channel:` and the channel id: how reports and the
    /// rejected-token CSV name a target. A token is hex and never holds a colon, so the two
    /// cannot be confused.
    public var description: String {
        switch self {
        case .device(let token): token.hex
        case .channel(let id): "channel:" + id
        }
    }

    /// The device token; nil for a channel.
    public var token: DeviceToken? {
        if case .device(let token) = self { return token }
        return nil
    }
}
