import SalvoIO
import SalvoWire

final class ProviderConnection: SlotConnection<InFlightWindow> {
    init(shard: Shard, index: Int, lane: Lane, requests: RequestRecordBuilder) {
        super.init(shard: shard, index: index, lane: lane, window: InFlightWindow(), usesStandby: false)
    }
}
