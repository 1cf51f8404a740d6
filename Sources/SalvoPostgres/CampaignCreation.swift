import Foundation
import PostgresNIO
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire

/// Where a new campaign's notifications come from.
public enum CampaignInput: Sendable {
    /// A campaign file, streamed: a JSONL file, or a token list with one payload.
    case file(CampaignSource, onBadLine: BadLinePolicy)
    /// The registry's valid tokens of the campaign's topic and environment (seen since the
    /// date, when given), each sent `payload`.
    case registry(seenSince: Date?, payload: [UInt8])
}

/// What `salvo campaign create` asks for.
public struct CampaignDefinition: Sendable {
    /// The campaign's name, unique in the database.
    public var name: String
    /// Its notifications.
    public var input: CampaignInput
    /// The registry's app and environment its tokens belong to: a file's tokens are added to
    /// the registry there, and its invalidated tokens are left out. Nil: `--no-registry`.
    public var registry: RegistryScope?
    /// Notifications per chunk: the unit a worker leases, and at most what a worker that
    /// dies can have sent without it being recorded. At most `maximumChunkSize`.
    public var chunkSize: Int
    /// The largest chunk: a worker holds a chunk's tokens in memory, a chunk of one payload
    /// is one value of 32 bytes per token, and what a dead worker's chunk may send twice
    /// grows with it.
    public static let maximumChunkSize = 1_000_000
    /// Replace a campaign of the same name instead of refusing.
    public var replace: Bool

    /// A campaign `name` of `input`.
    public init(name: String, input: CampaignInput, registry: RegistryScope?, chunkSize: Int = 10_000, replace: Bool = false) {
        self.name = name
        self.input = input
        self.registry = registry
        self.chunkSize = chunkSize
        self.replace = replace
    }
}

/// What creating a campaign did.
public struct CreatedCampaign: Sendable, Equatable {
    /// Notifications in the campaign.
    public var total: Int
    /// Chunks they were cut into.
    public var chunks: Int
    /// Tokens left out because the registry has them invalidated.
    public var skippedInvalidated: Int
    /// Lines of the file that were skipped (`--on-bad-line skip`), the first ones.
    public var badLines: [BadLine]
    /// How many lines were skipped in all.
    public var badLineCount: Int
}

extension CampaignStore {
    /// Loads a campaign in one transaction: the file is streamed into the table with COPY
    /// (constant memory), or the registry's tokens are selected on the server; then the
    /// registry learns the file's new tokens, invalidated ones are left out, and the
    /// campaign is cut into chunks. Nothing is left behind when it fails.
    ///
    /// - Throws: `CampaignStoreError`: the name exists (without `replace`), a bad line
    ///   (with its number) under the abort policy, or a database error.
    public func create(_ definition: CampaignDefinition) async throws(CampaignStoreError) -> CreatedCampaign {
        guard (1...CampaignDefinition.maximumChunkSize).contains(definition.chunkSize) else {
            throw CampaignStoreError("--chunk-size must be 1 to \(CampaignDefinition.maximumChunkSize), not \(definition.chunkSize)")
        }
        do {
            return try await database.transaction { database in
                try await self.create(definition, in: database)
            }
        } catch {
            throw database.describe(error, while: "creating campaign \(definition.name)")
        }
    }

    private func create(_ definition: CampaignDefinition, in database: CampaignDatabase) async throws -> CreatedCampaign {
        let name = definition.name
        try await removeExisting(definition, in: database)
        var sharedPayload: String?
        switch definition.input {
        case .file(.tokens(_, let payload), _), .registry(_, let payload):
            sharedPayload = try Self.minifiedPayload(payload)
        case .file(.jsonl, _):
            break
        }
        let topic = definition.registry?.topic, environment = definition.registry?.environment.rawValue
        let created = try await database.query("""
            INSERT INTO campaigns (name, payload, topic, environment, total, chunk_size)
            VALUES (\(name), \(sharedPayload), \(topic), \(environment), 0, \(Int32(clamping: definition.chunkSize)))
            RETURNING id
            """)
        var id: Int64 = 0
        for try await value in created.decode(Int64.self) { id = value }

        // A campaign with one payload is staged in a temporary table, then stored packed:
        // each chunk's tokens as one value (`CampaignStore.items` reads a chunk as one value,
        // not ten thousand rows). One with a payload per item is stored row by row.
        let packed = sharedPayload != nil
        let table = packed ? "campaign_staging" : "campaign_items"
        if packed {
            try await database.query("""
                CREATE TEMPORARY TABLE campaign_staging (campaign_id bigint NOT NULL, seq bigint NOT NULL, token text NOT NULL)
                ON COMMIT DROP
                """)
        }
        let (badLines, badLineCount) = try await stageItems(definition, campaign: id, packed: packed, into: table, of: database)
        let skipped = try await registerTokens(definition, campaign: id, in: table, of: database)
        let size = Int64(definition.chunkSize)
        let (total, last) = try await makeChunks(campaign: id, packed: packed, size: size, in: database)
        // An empty campaign is a mistake to tell, not one to keep: nothing is left behind.
        if total == 0 {
            throw CampaignStoreError("campaign \(name) would have no notifications: "
                                     + Self.whyEmpty(definition, badLineCount: badLineCount, skippedInvalidated: skipped)
                                     + "; nothing was created")
        }
        try await database.query("UPDATE campaigns SET total = \(total) WHERE id = \(id)")
        let chunks = last == 0 ? 0 : Int((last + size - 1) / size)
        return CreatedCampaign(total: Int(total), chunks: chunks, skippedInvalidated: skipped, badLines: badLines,
                               badLineCount: badLineCount)
    }

    /// Deletes the campaign of the same name when the definition says to replace it, or
    /// refuses to create one: locked, so that two creations of one name do not both win.
    private func removeExisting(_ definition: CampaignDefinition, in database: CampaignDatabase) async throws {
        let name = definition.name
        let existing = try await database.query("SELECT id FROM campaigns WHERE name = \(name) FOR UPDATE")
        for try await _ in existing.decode(Int64.self) {
            guard definition.replace else {
                throw CampaignStoreError("campaign \(name) exists already: give --replace to replace it, or another --name")
            }
            try await database.query("DELETE FROM campaigns WHERE name = \(name)")
        }
    }

    /// Puts the campaign's items into `table`: the file's lines (with their bad lines), or
    /// the registry's valid tokens of the topic.
    private func stageItems(_ definition: CampaignDefinition, campaign id: Int64, packed: Bool, into table: String,
                            of database: CampaignDatabase) async throws -> (badLines: [BadLine], badLineCount: Int) {
        switch definition.input {
        case .file(let source, let policy):
            return try await copyItems(from: source, onBadLine: policy, packed: packed, campaign: id, into: table, of: database)
        case .registry(let seenSince, _):
            guard let registry = definition.registry else {
                throw CampaignStoreError("a campaign from the registry needs its topic")
            }
            try await database.query("""
                INSERT INTO campaign_staging (campaign_id, seq, token)
                SELECT \(id), row_number() OVER (ORDER BY token), token FROM devices
                WHERE topic = \(registry.topic) AND environment = \(registry.environment.rawValue)
                  AND invalidated_at IS NULL AND (\(seenSince)::timestamptz IS NULL OR last_seen_at >= \(seenSince))
                """)
            return ([], 0)
        }
    }

    /// A file campaign with a registry: its tokens are known to the registry from now on,
    /// and those the registry knows as invalidated are taken out. How many were.
    private func registerTokens(_ definition: CampaignDefinition, campaign id: Int64, in table: String,
                                of database: CampaignDatabase) async throws -> Int {
        guard let registry = definition.registry, case .file = definition.input else { return 0 }
        // A token the registry knows is left as it is (sending to it is not a registration).
        try await database.query("""
            INSERT INTO devices (token, topic, environment)
            SELECT DISTINCT token, \(registry.topic), \(registry.environment.rawValue) FROM \(unescaped: table)
            WHERE campaign_id = \(id)
            ON CONFLICT (token, topic, environment) DO NOTHING
            """)
        let deleted = try await database.query("""
            DELETE FROM \(unescaped: table) i USING devices d
            WHERE i.campaign_id = \(id) AND d.token = i.token AND d.topic = \(registry.topic)
              AND d.environment = \(registry.environment.rawValue) AND d.invalidated_at IS NOT NULL
            RETURNING i.seq
            """)
        var skipped = 0
        for try await _ in deleted.decode(Int64.self) { skipped += 1 }
        return skipped
    }

    /// Cuts the staged items into chunks of `size`: the item count and the last sequence.
    private func makeChunks(campaign id: Int64, packed: Bool, size: Int64,
                            in database: CampaignDatabase) async throws -> (total: Int64, last: Int64) {
        var (total, last): (Int64, Int64) = (0, 0)
        if packed {
            // Numbered again, without the gaps left by invalidated tokens: a packed chunk's
            // token i is item first_seq + i.
            let counted = try await database.query("SELECT count(*) FROM campaign_staging")
            for try await count in counted.decode(Int64.self) { (total, last) = (count, count) }
            try await database.query("""
                INSERT INTO campaign_chunks (campaign_id, first_seq, last_seq, completed_through, tokens)
                SELECT \(id), min(n), max(n), min(n) - 1, string_agg(decode(token, 'hex'), ''::bytea ORDER BY n) FROM (
                    SELECT row_number() OVER (ORDER BY seq) AS n, token FROM campaign_staging) AS items
                GROUP BY (n - 1) / \(size)
                """)
        } else {
            let counted = try await database.query("SELECT count(*), coalesce(max(seq), 0) FROM campaign_items WHERE campaign_id = \(id)")
            for try await row in counted.decode((Int64, Int64).self) { (total, last) = row }
            try await database.query("""
                INSERT INTO campaign_chunks (campaign_id, first_seq, last_seq, completed_through)
                SELECT \(id), g, least(g + \(size) - 1, \(last)), g - 1 FROM generate_series(1, \(last), \(size)) g
                """)
        }
        return (total, last)
    }

    /// Why a campaign came out empty, for the user.
    private static func whyEmpty(_ definition: CampaignDefinition, badLineCount: Int, skippedInvalidated: Int) -> String {
        switch definition.input {
        case .registry(let seenSince, _):
            let scope = definition.registry.map { "\($0.topic) (\($0.environment.rawValue))" } ?? "its topic"
            let since = seenSince.map { " seen since \(ISO8601DateFormatter().string(from: $0))" } ?? ""
            return "the device registry has no valid token of \(scope)\(since)"
        case .file(let source, _):
            if skippedInvalidated > 0 {
                return "every token of \(source.path) (\(skippedInvalidated)) is invalidated in the registry"
            }
            if badLineCount > 0 { return "none of the \(badLineCount) notification lines of \(source.path) can be sent" }
            return "\(source.path) has no notification lines"
        }
    }

    /// Streams the file's notifications into `table` with COPY, numbered from 1, in
    /// batches of about 256 KiB: memory stays the same whatever the file's size. Packed
    /// (one payload, in the campaign's row), only their sequences and tokens.
    private func copyItems(from source: CampaignSource, onBadLine: BadLinePolicy, packed: Bool, campaign: Int64,
                           into table: String, of database: CampaignDatabase) async throws -> ([BadLine], Int) {
        // Read for HTTP/2 (its larger payload limit): a worker sending over the binary
        // protocol refuses a payload above 2048 bytes when it reaches it.
        let reader = try CampaignReader(source, for: .http2(defaultPushType: .alert), onBadLine: onBadLine)
        let campaignField = "\(campaign)\t"
        let columns = ["campaign_id", "seq", "token"]
            + (packed ? [] : ["payload", "expiry", "priority", "push_type", "topic", "collapse_id", "apns_id"])
        try await database.connection.copyFrom(table: table, columns: columns, logger: database.logger) { writer in
            var buffer = ByteBuffer()
            var sequence: Int64 = 0
            while let item = try reader.nextItem() {
                sequence += 1
                buffer.writeString(campaignField)
                buffer.writeString("\(sequence)\t\(item.token.hex)")
                if !packed {
                    buffer.writeStaticString("\t")
                    Self.writeCopyText(item.payload, to: &buffer)
                    buffer.writeString("\t\(item.expiry.map(String.init) ?? "\\N")\t\(item.priority.map(String.init) ?? "\\N")")
                    // The line's own headers, as the reader checked them; NULL: the worker's.
                    let request = item.request
                    buffer.writeString("\t\(request.pushType?.name ?? "\\N")\t")
                    if let topic = request.topic { Self.writeCopyText(topic, to: &buffer) } else { buffer.writeStaticString("\\N") }
                    buffer.writeStaticString("\t")
                    if let collapseID = request.collapseID { Self.writeCopyText(collapseID, to: &buffer) } else { buffer.writeStaticString("\\N") }
                    buffer.writeString("\t\(request.apnsID?.description ?? "\\N")")
                }
                buffer.writeStaticString("\n")
                if buffer.readableBytes >= 1 << 18 {
                    try await writer.write(buffer)
                    buffer.clear()
                }
            }
            if buffer.readableBytes > 0 { try await writer.write(buffer) }
        }
        return (reader.skippedLines, reader.skippedLineCount)
    }

    /// `bytes` in COPY's text format: backslash, tab, newline and carriage return escaped.
    static func writeCopyText(_ bytes: UnsafeRawBufferPointer, to buffer: inout ByteBuffer) {
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\\"): buffer.writeStaticString("\\\\")
            case UInt8(ascii: "\t"): buffer.writeStaticString("\\t")
            case UInt8(ascii: "\n"): buffer.writeStaticString("\\n")
            case UInt8(ascii: "\r"): buffer.writeStaticString("\\r")
            default: buffer.writeInteger(byte)
            }
        }
    }

    /// The payload as the engine sends it: validated (the reason when it is not a JSON
    /// object or too long, as a token list's reader says it) and minified.
    static func minifiedPayload(_ payload: [UInt8]) throws -> String {
        _ = try CampaignReader(.tokens("/dev/null", payload: payload), for: .http2(defaultPushType: .alert))
        return payload.withUnsafeBytes { json in
            var minified = [UInt8](repeating: 0, count: JSONScanner.minifiedCount(json))
            _ = minified.withUnsafeMutableBytes { JSONScanner.minify(json, into: $0) }
            return String(decoding: minified, as: UTF8.self)
        }
    }
}
