import Foundation
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire

/// What a Push Channel run does with each item: `notify` (a campaign) or `checkToken`
/// (cleaning a token list before one).
public enum PushChannelRequest: Sendable, Hashable {
    /// Send the item's payload to its token.
    case notify
    /// Ask whether the item's token is alive (its payload is not sent).
    case checkToken
}

/// How a Push Channel run ended.
public enum PushChannelRunEnding: Sendable, Hashable {
    /// Every line was read and sent.
    case readToEnd
    /// Reading stopped at this input error (a bad line under the abort policy, a read
    /// error); everything taken before it was sent and is accounted for.
    case inputError(String)
    /// The service could not be reached (this says why); the lines not yet taken were left
    /// for a resume.
    case unreachable(String)
}

/// Runs a Push Channel campaign: `connections` workers take items from the reader in line
/// order and send each with the client, one request at a time per connection, and the
/// ledger settles every one. Rejected tokens are handed to `onRejected` as they come (the
/// rejected CSV, and the seam for a token registry).
public final class PushChannelRun: Sendable {
    /// The accounting (and the checkpoint's line).
    public let ledger: PushChannelLedger
    private let client: PushChannelClient
    private let request: PushChannelRequest
    private let onRejected: @Sendable (PushChannelItem, GNPCode) -> Void

    /// A run with `client`, doing `request` for each item.
    public init(client: PushChannelClient, request: PushChannelRequest = .notify, resumedAfter: Int = 0,
                onRejected: @escaping @Sendable (PushChannelItem, GNPCode) -> Void = { _, _ in }) {
        self.client = client
        self.request = request
        ledger = PushChannelLedger(resumedAfter: resumedAfter)
        self.onRejected = onRejected
    }

    /// Sends everything `reader` yields from where it stands. Returns when every item taken
    /// is settled.
    public func send(from reader: PushChannelCampaignReader) async -> PushChannelRunEnding {
        let feed = ItemFeed(reader: reader, ledger: ledger)
        await withTaskGroup(of: Void.self) { group in
            for _ in 0..<max(1, client.configuration.connections) {
                group.addTask { [self] in
                    while let item = feed.next() {
                        let result = switch request {
                        case .notify: await client.notify(item)
                        case .checkToken: await client.checkToken(item.token, host: item.host)
                        }
                        if case .failed = result.outcome, result.unreachable {
                            feed.stop(.unreachable(result.lastError ?? "cannot connect"))
                        }
                        if case .rejected(let code) = result.outcome { onRejected(item, code) }
                        ledger.settle(line: item.line, result.outcome, resent: result.resent,
                                      possibleDuplicates: result.possibleDuplicates)
                    }
                }
            }
        }
        return feed.ending
    }
}

/// The reader behind a lock, shared by the workers: each takes the next item and notes it
/// in the ledger in one step, so the checkpoint never passes a line still in flight.
///
/// Thread rule: `reader` and `stopped` only under `lock`.
private final class ItemFeed: @unchecked Sendable {
    private let lock = NSLock()
    private let reader: PushChannelCampaignReader
    private let ledger: PushChannelLedger
    private var stopped: PushChannelRunEnding?

    init(reader: PushChannelCampaignReader, ledger: PushChannelLedger) {
        self.reader = reader
        self.ledger = ledger
    }

    var ending: PushChannelRunEnding { lock.withLock { stopped ?? .readToEnd } }

    /// The next item, or nil when the file is done or the run stopped.
    func next() -> PushChannelItem? {
        lock.withLock {
            guard stopped == nil else { return nil }
            do throws(CampaignError) {
                guard let item = try reader.next() else {
                    ledger.read(through: reader.linesRead)
                    stopped = .readToEnd
                    return nil
                }
                ledger.submitted(line: item.line, linesRead: reader.linesRead)
                return item
            } catch {
                // The bad line itself is not done: the resume starts with it.
                ledger.read(through: max(0, reader.linesRead - 1))
                stopped = .inputError(error.description)
                return nil
            }
        }
    }

    /// Stops handing out items (the first reason wins).
    func stop(_ ending: PushChannelRunEnding) {
        lock.withLock { if stopped == nil || stopped == .readToEnd { stopped = ending } }
    }
}
