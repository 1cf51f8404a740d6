import Foundation
import PostgresNIO
import SalvoEngine

/// A campaign's progress and outcome, computed from the database: what `salvo campaign
/// status` prints, and the same report `salvo send --report` writes.
public struct CampaignStatus: Sendable {
    /// One worker's share.
    public struct Worker: Sendable, Equatable {
        /// Its name.
        public var name: String
        /// Chunks it finished.
        public var chunks: Int
        /// Notifications it made final (accepted, rejected or failed).
        public var final: Int
        /// Of those, accepted.
        public var accepted: Int
        /// Seconds since it last wrote back.
        public var secondsSinceSeen: Double
    }

    /// The campaign.
    public var name: String
    /// Notifications in it.
    public var total: Int
    /// Chunks: all, finished, leased right now.
    public var chunks: Int, doneChunks: Int, leasedChunks: Int
    /// Chunks taken over from a worker whose lease expired.
    public var takeovers: Int
    /// Of the report's possible duplicates, those counted at takeovers: what the workers
    /// whose leases expired may have sent after their last write-back. The rest are the
    /// workers' resends after silent drops.
    public var takeoverDuplicates: Int
    /// The protocols its workers spoke to the gateway (`h2`, `binary`), as they wrote back.
    public var protocols: Set<String>
    /// Whether it was cancelled.
    public var isCancelled: Bool
    /// Per worker.
    public var workers: [Worker]
    /// The totals, as `salvo send --report` has them: `submitted` is what is final.
    public var report: SenderReport

    /// Notifications made final per second while the campaign was active: from its first
    /// lease to its last write-back, or to now while chunks are leased.
    public var ratePerSecond: Double { report.ratePerSecond }

    /// Whether its workers spoke HTTP/2 (every one that wrote back).
    public var isHTTP2: Bool { !protocols.isEmpty && protocols == ["h2"] }

    /// Whether every chunk is done.
    public var isFinished: Bool { doneChunks == chunks }
}

extension CampaignStore {
    /// The campaign's progress and totals, summed over its chunks and workers.
    public func status(of name: String) async throws(CampaignStoreError) -> CampaignStatus {
        let campaign = try await campaign(named: name)
        do {
            let rows = try await database.query("""
                SELECT count(*), count(*) FILTER (WHERE done),
                       count(*) FILTER (WHERE NOT done AND lease_owner IS NOT NULL AND lease_expires_at >= now()),
                       coalesce(sum(takeovers), 0)::bigint,
                       coalesce(sum(accepted), 0)::bigint, coalesce(sum(rejected), 0)::bigint, coalesce(sum(failed), 0)::bigint,
                       coalesce(sum(resent), 0)::bigint, coalesce(sum(possible_duplicates), 0)::bigint,
                       coalesce(sum(takeover_duplicates), 0)::bigint,
                       -- Active time: from the first lease to the last write-back, or to now
                       -- while a chunk is leased (a campaign that ended does not slow down).
                       coalesce(extract(epoch FROM
                           CASE WHEN bool_or(NOT done AND lease_owner IS NOT NULL AND lease_expires_at >= now()) THEN now()
                                ELSE max(coalesce(written_at, finished_at, started_at)) END
                           - min(started_at)), 0)::float8
                FROM campaign_chunks WHERE campaign_id = \(campaign.id)
                """)
            var status = CampaignStatus(name: name, total: campaign.total, chunks: 0, doneChunks: 0, leasedChunks: 0, takeovers: 0,
                                        takeoverDuplicates: 0, protocols: [], isCancelled: campaign.isCancelled, workers: [],
                                        report: SenderReport(submitted: 0, accepted: 0, rejected: 0, failed: 0, seconds: 0))
            for try await (chunks, done, leased, takeovers, accepted, rejected, failed, resent, duplicates, takeoverDuplicates, seconds)
                in rows.decode((Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Int64, Double).self)
            {
                (status.chunks, status.doneChunks, status.leasedChunks, status.takeovers, status.takeoverDuplicates) =
                    (Int(chunks), Int(done), Int(leased), Int(takeovers), Int(takeoverDuplicates))
                let final = Int(accepted + rejected + failed)
                status.report = SenderReport(
                    submitted: final, accepted: Int(accepted), rejected: Int(rejected), failed: Int(failed), resent: Int(resent),
                    possibleDuplicates: Int(duplicates), seconds: seconds, sendingSeconds: seconds,
                    rejectedByReason: try await sums(of: "rejected_by_reason", campaign: campaign.id),
                    failedByReason: try await sums(of: "failed_by_reason", campaign: campaign.id))
                status.report.byTopic = TopicOutcomeKeys.unflatten(try await sums(of: "outcomes_by_topic", campaign: campaign.id))
            }
            let workers = try await database.query("""
                SELECT worker, chunks, final, accepted, extract(epoch FROM now() - last_seen_at)::float8, protocol
                FROM campaign_workers WHERE campaign_id = \(campaign.id) ORDER BY worker
                """)
            for try await (worker, chunks, final, accepted, seen, spoken)
                in workers.decode((String, Int64, Int64, Int64, Double, String?).self)
            {
                status.workers.append(.init(name: worker, chunks: Int(chunks), final: Int(final), accepted: Int(accepted),
                                            secondsSinceSeen: seen))
                if let spoken { status.protocols.insert(spoken) }
            }
            return status
        } catch {
            throw database.describe(error, while: "reading the status of campaign \(name)")
        }
    }

    /// The campaign's count dictionaries summed over its chunks.
    private func sums(of column: StaticString, campaign: Int64) async throws -> [String: Int] {
        // `column` is one of the constants of this file, never input.
        var query = PostgresQuery(unsafeSQL: """
            SELECT key, sum(value::bigint)::bigint FROM campaign_chunks, jsonb_each_text(\(column))
            WHERE campaign_id = $1 GROUP BY key
            """)
        query.binds.append(campaign)
        var sums: [String: Int] = [:]
        for try await (key, total) in try await database.query(query).decode((String, Int64).self) { sums[key] = Int(total) }
        return sums
    }

    /// Writes the campaign's rejected notifications as CSV, `token,status,reason,timestamp`
    /// (the same columns as `salvo send --rejected`), in sequence order, streamed to `write`.
    /// Returns how many there were.
    public func writeRejected(of name: String, _ write: (String) -> Void) async throws(CampaignStoreError) -> Int {
        let campaign = try await campaign(named: name)
        do {
            let rows = try await database.query("""
                SELECT token, status, reason, apns_timestamp FROM campaign_rejections
                WHERE campaign_id = \(campaign.id) ORDER BY seq
                """)
            write("token,status,reason,timestamp\n")
            var count = 0
            for try await (token, status, reason, timestamp) in rows.decode((String, Int32, String, Int64?).self) {
                write("\(token),\(status),\(reason),\(timestamp.map(String.init) ?? "")\n")
                count += 1
            }
            return count
        } catch {
            throw database.describe(error, while: "reading the rejections of campaign \(name)")
        }
    }
}
