import Foundation
import PostgresNIO
import SalvoCampaignFiles
import SalvoEngine
import SalvoWire

/// The app and push environment a device token belongs to: the registry's key beside the token.
public struct RegistryScope: Sendable, Hashable {
    /// Where a token is valid: APNs' two environments (a token of one is a BadDeviceToken in
    /// the other), or the BlackBerry Dynamics NOC.
    public enum Environment: String, Sendable, CaseIterable {
        /// api.push.apple.com.
        case production
        /// api.sandbox.push.apple.com.
        case sandbox
        /// The BlackBerry Dynamics NOC: Push Channel tokens (opaque text, not hex), the topic
        /// being the app's BlackBerry Dynamics app id. An environment rather than a scope type
        /// of its own because that is what it is for the registry: the service a token is
        /// valid at, beside the app. The table keeps its key (token, topic, environment), and a
        /// Push Channel token can never be taken for an APNs one of the same app.
        case blackberry

        /// APNs' environments: those of hex device tokens (registrations, imports, campaigns).
        public static let apns: [Environment] = [.production, .sandbox]
    }

    /// The app's bundle id (the APNs topic), or its BlackBerry Dynamics app id (`.blackberry`).
    public var topic: String
    /// Where its tokens are valid.
    public var environment: Environment

    /// The tokens of `topic` in `environment`.
    public init(topic: String, environment: Environment) {
        self.topic = topic
        self.environment = environment
    }
}

/// The device-token registry: table `devices`, one row per token, app and environment,
/// with when it was registered and last seen, and when (and why) it was invalidated.
///
/// Apps register through `salvo registry serve` (or `import`); campaigns read it
/// (`--from-registry`) and prune it: a rejection that means the token is dead invalidates
/// it, and the next campaign skips it. A token the app registers again is valid again.
public struct DeviceRegistry: Sendable {
    let database: CampaignDatabase

    /// The registry in `database`.
    public init(_ database: CampaignDatabase) { self.database = database }

    /// Registers `token` (hex) for `scope`: a new row, or an existing one seen again now —
    /// valid again if it had been invalidated. Idempotent. Returns whether the row is new.
    @discardableResult
    public func register(_ token: DeviceToken, in scope: RegistryScope) async throws(CampaignStoreError) -> Bool {
        do {
            let rows = try await database.query("""
                INSERT INTO devices (token, topic, environment) VALUES (\(token.hex), \(scope.topic), \(scope.environment.rawValue))
                ON CONFLICT (token, topic, environment) DO UPDATE
                SET last_seen_at = now(), invalidated_at = NULL, invalid_reason = NULL
                RETURNING xmax = 0
                """)
            for try await inserted in rows.decode(Bool.self) { return inserted }
            return false
        } catch {
            throw database.describe(error, while: "registering a token")
        }
    }

    /// Loads a file of hex tokens, one per line, into the registry for `scope` with COPY
    /// (streamed), as registrations: new tokens are added, known ones seen again now.
    /// Returns the number of tokens read.
    ///
    /// - Throws: `CampaignStoreError` naming the file and line of a token that is not 64
    ///   hex digits; nothing is imported then.
    public func importTokens(from path: String, into scope: RegistryScope) async throws(CampaignStoreError) -> Int {
        let reader: CampaignReader
        do {
            reader = try CampaignReader(.tokens(path, payload: Array("{}".utf8)), for: .http2(defaultPushType: .alert))
        } catch {
            throw CampaignStoreError(error.description)
        }
        do {
            return try await database.transaction { database in
                try await database.query("CREATE TEMPORARY TABLE registry_import (token text NOT NULL) ON COMMIT DROP")
                var count = 0
                try await database.connection.copyFrom(table: "registry_import", columns: ["token"], logger: database.logger) { writer in
                    var buffer = ByteBuffer()
                    while let item = try reader.nextItem() {
                        buffer.writeString(item.token.hex + "\n")
                        count += 1
                        if buffer.readableBytes >= 1 << 18 {
                            try await writer.write(buffer)
                            buffer.clear()
                        }
                    }
                    if buffer.readableBytes > 0 { try await writer.write(buffer) }
                }
                try await database.query("""
                    INSERT INTO devices (token, topic, environment)
                    SELECT DISTINCT token, \(scope.topic), \(scope.environment.rawValue) FROM registry_import
                    ON CONFLICT (token, topic, environment) DO UPDATE
                    SET last_seen_at = now(), invalidated_at = NULL, invalid_reason = NULL
                    """)
                return count
            }
        } catch {
            throw database.describe(error, while: "importing \(path)")
        }
    }

    /// Invalidates tokens the feedback service reported, each with the time APNs found it
    /// unusable: only those not registered again since (the same rule as a 410's timestamp).
    /// Returns how many were invalidated.
    public func invalidate(feedback: [FeedbackTuple], in scope: RegistryScope) async throws(CampaignStoreError) -> Int {
        guard !feedback.isEmpty else { return 0 }
        do {
            return try await database.transaction { database in
                try await Self.invalidate(tokens: feedback.map(\.token.hex), reasons: feedback.map { _ in "Feedback" },
                                          since: feedback.map { Int64($0.timestamp) * 1000 }, in: scope, database: database)
            }
        } catch {
            throw database.describe(error, while: "invalidating feedback tokens")
        }
    }

    /// A Push Channel token the NOC answered `402 Invalid Token` for, and when it answered.
    public struct PushChannelRejection: Sendable, Hashable {
        /// The Push Channel token, as the campaign gave it.
        public var token: String
        /// When the NOC's answer came.
        public var answeredAt: Date

        /// `token`, found dead at `answeredAt`.
        public init(token: String, answeredAt: Date) {
            self.token = token
            self.answeredAt = answeredAt
        }
    }

    /// Tokens per statement of `invalidate(pushChannel:app:)`.
    public static let pushChannelBatchSize = 1000

    /// Records Push Channel tokens of BlackBerry Dynamics app `appID` as dead (reason
    /// `InvalidToken`, the NOC's 402), in scope (`appID`, `.blackberry`), one statement per
    /// `pushChannelBatchSize` tokens. A token the registry knows is invalidated at its answer's
    /// time unless it was seen (registered) after it, the rule of a 410's timestamp; one
    /// already invalid keeps its first time and reason. A token it does not know is added as
    /// invalid (registered, seen and invalidated at the answer's time): nothing registers Push
    /// Channel tokens before a campaign, so the registry learns them from their deaths, and a
    /// registration afterwards makes one valid again. Returns the rows added or invalidated.
    @discardableResult
    public func invalidate(pushChannel rejections: [PushChannelRejection], app appID: String)
        async throws(CampaignStoreError) -> Int
    {
        let environment = RegistryScope.Environment.blackberry.rawValue
        var count = 0
        do {
            for start in stride(from: 0, to: rejections.count, by: Self.pushChannelBatchSize) {
                let batch = rejections[start..<min(start + Self.pushChannelBatchSize, rejections.count)]
                // DISTINCT ON: a token twice in one batch (twice in the campaign) would make
                // ON CONFLICT touch its row twice, which PostgreSQL refuses; its first answer counts.
                let rows = try await database.query("""
                    INSERT INTO devices AS d (token, topic, environment, registered_at, last_seen_at, invalidated_at, invalid_reason)
                    SELECT DISTINCT ON (r.token) r.token, \(appID), \(environment), r.at, r.at, r.at, 'InvalidToken'
                    FROM unnest(\(batch.map(\.token)), \(batch.map(\.answeredAt))) AS r(token, at)
                    ORDER BY r.token, r.at
                    ON CONFLICT (token, topic, environment) DO UPDATE
                    SET invalidated_at = excluded.invalidated_at, invalid_reason = excluded.invalid_reason
                    WHERE d.invalidated_at IS NULL AND d.last_seen_at <= excluded.invalidated_at
                    RETURNING d.token
                    """)
                for try await _ in rows.decode(String.self) { count += 1 }
            }
            return count
        } catch {
            throw database.describe(error, while: "recording dead Push Channel tokens")
        }
    }

    /// Marks tokens of `scope` invalid with their reason. A token with a time (a 410's
    /// timestamp, a feedback record's, ms since 1970) is invalidated only if it was not seen
    /// (registered) after that time: a token registered again afterwards stays valid. One
    /// without (BadDeviceToken, binary status 8) is invalidated now. Returns the rows changed.
    @discardableResult
    static func invalidate(tokens: [String], reasons: [String], since: [Int64?], in scope: RegistryScope,
                           database: CampaignDatabase) async throws -> Int {
        let rows = try await database.query("""
            UPDATE devices d
            SET invalidated_at = CASE WHEN r.at < 0 THEN now() ELSE to_timestamp(r.at / 1000.0) END, invalid_reason = r.reason
            FROM unnest(\(tokens), \(reasons), \(since.map { $0 ?? -1 })) AS r(token, reason, at)
            WHERE d.token = r.token AND d.topic = \(scope.topic) AND d.environment = \(scope.environment.rawValue)
              AND d.invalidated_at IS NULL AND (r.at < 0 OR d.last_seen_at <= to_timestamp(r.at / 1000.0))
            RETURNING d.token
            """)
        var count = 0
        for try await _ in rows.decode(String.self) { count += 1 }
        return count
    }

    /// The registry's row for a token, for tests and tools: whether it is valid, and why not.
    public func state(of token: DeviceToken, in scope: RegistryScope) async throws(CampaignStoreError)
        -> (invalidatedAt: Date?, reason: String?)?
    {
        do {
            let rows = try await database.query("""
                SELECT invalidated_at, invalid_reason FROM devices
                WHERE token = \(token.hex) AND topic = \(scope.topic) AND environment = \(scope.environment.rawValue)
                """)
            for try await (at, reason) in rows.decode((Date?, String?).self) { return (at, reason) }
            return nil
        } catch {
            throw database.describe(error, while: "reading the registry")
        }
    }
}
