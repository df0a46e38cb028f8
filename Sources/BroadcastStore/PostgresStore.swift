import Foundation
import Logging
import NIOCore
import PostgresNIO

/// The shared store for several nodes: PostgreSQL through postgres-nio, same schema as SQLite,
/// migrated on start under an advisory lock (nodes may start together).
final class PostgresStore: ServiceStore {
    let client: PostgresClient

    init(client: PostgresClient) { self.client = client }

    /// Parses `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`.
    static func configuration(url: String) throws -> PostgresClient.Configuration {
        guard let components = URLComponents(string: url), let host = components.host, !host.isEmpty else {
            throw StoreError(message: "Cannot read the PostgreSQL URL \(url); expected postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE")
        }
        let database = components.path.hasPrefix("/") ? String(components.path.dropFirst()) : components.path
        return PostgresClient.Configuration(host: host, port: components.port ?? 5432, username: components.user ?? "postgres",
                                            password: components.password, database: database.isEmpty ? nil : database, tls: .disable)
    }

    static let migrations: [(String, [String])] = [
        ("v1", [
            "CREATE TABLE users (id BIGSERIAL PRIMARY KEY, name TEXT NOT NULL, password_hash TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL)",
            "CREATE UNIQUE INDEX users_by_name ON users (lower(name))",
            "CREATE TABLE sessions (token TEXT PRIMARY KEY, user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE, expires_at DOUBLE PRECISION NOT NULL)",
            """
            CREATE TABLE stream_keys (id BIGSERIAL PRIMARY KEY, user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                                      key TEXT NOT NULL UNIQUE, label TEXT NOT NULL, created_at DOUBLE PRECISION NOT NULL, revoked_at DOUBLE PRECISION)
            """,
            "CREATE TABLE application_icons (application_id TEXT PRIMARY KEY, png BYTEA NOT NULL)",
            """
            CREATE TABLE broadcasts (id TEXT PRIMARY KEY, user_id BIGINT NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                                     stream_key_id BIGINT NOT NULL REFERENCES stream_keys(id) ON DELETE CASCADE,
                                     title TEXT NOT NULL, application_id TEXT NOT NULL, application_name TEXT NOT NULL,
                                     created_at DOUBLE PRECISION NOT NULL, started_at DOUBLE PRECISION, ended_at DOUBLE PRECISION,
                                     viewer_peak INTEGER NOT NULL DEFAULT 0, likes INTEGER NOT NULL DEFAULT 0)
            """,
            "CREATE INDEX broadcasts_by_user ON broadcasts (user_id, created_at)",
        ]),
        // Sessions kept by their tokens until now: signed out, as a stolen copy would sign in.
        ("v2-session-digests", ["DELETE FROM sessions"]),
        // Which node ingests each live broadcast, refreshed by its heartbeat (SharedLiveState).
        ("v3-live-broadcasts", [
            """
            CREATE TABLE live_broadcasts (broadcast_id TEXT PRIMARY KEY REFERENCES broadcasts(id) ON DELETE CASCADE, node TEXT NOT NULL,
                                          address TEXT NOT NULL, viewers INTEGER NOT NULL DEFAULT 0, heartbeat_at DOUBLE PRECISION NOT NULL)
            """,
        ]),
    ]

    func migrate(logger: Logger) async throws {
        try await client.withTransaction(logger: logger) { connection in
            try await connection.query("SELECT pg_advisory_xact_lock(4242001)", logger: logger)
            try await connection.query("CREATE TABLE IF NOT EXISTS schema_migrations (version TEXT PRIMARY KEY)", logger: logger)
            var applied: Set<String> = []
            for try await version in try await connection.query("SELECT version FROM schema_migrations", logger: logger).decode(String.self) {
                applied.insert(version)
            }
            for (version, statements) in Self.migrations where !applied.contains(version) {
                for statement in statements { try await connection.query(PostgresQuery(unsafeSQL: statement), logger: logger) }
                try await connection.query("INSERT INTO schema_migrations (version) VALUES (\(version))", logger: logger)
                logger.info("PostgreSQL schema migrated", metadata: ["version": "\(version)"])
            }
        }
    }

    private typealias UserRow = (Int64, String, String, Double)
    private typealias KeyRow = (Int64, Int64, String, String, Double, Double?)
    private typealias BroadcastRow = (String, Int64, Int64, String, String, String, Double, Double?, Double?, Int32, Int32)
    private static let broadcastColumns = "id, user_id, stream_key_id, title, application_id, application_name, created_at, started_at, ended_at, viewer_peak, likes"

    private func users(_ query: PostgresQuery) async throws -> [UserRecord] {
        var out: [UserRecord] = []
        for try await (id, name, hash, created) in try await client.query(query).decode(UserRow.self) {
            out.append(UserRecord(id: id, name: name, passwordHash: hash, createdAt: created))
        }
        return out
    }

    private func keys(_ query: PostgresQuery) async throws -> [StreamKeyRecord] {
        var out: [StreamKeyRecord] = []
        for try await (id, user, key, label, created, revoked) in try await client.query(query).decode(KeyRow.self) {
            out.append(StreamKeyRecord(id: id, userID: user, key: key, label: label, createdAt: created, revokedAt: revoked))
        }
        return out
    }

    private func broadcasts(_ query: PostgresQuery) async throws -> [BroadcastRecord] {
        var out: [BroadcastRecord] = []
        for try await row in try await client.query(query).decode(BroadcastRow.self) {
            out.append(BroadcastRecord(id: row.0, userID: row.1, streamKeyID: row.2, title: row.3,
                                       application: ApplicationInfo(id: row.4, name: row.5), createdAt: row.6, startedAt: row.7,
                                       endedAt: row.8, viewerPeak: Int(row.9), likes: Int(row.10)))
        }
        return out
    }

    func createUser(name: String, passwordHash: String) async throws -> UserRecord {
        let now = Date().timeIntervalSince1970
        let rows = try await users("""
            INSERT INTO users (name, password_hash, created_at) VALUES (\(name), \(passwordHash), \(now)) RETURNING id, name, password_hash, created_at
            """)
        guard let user = rows.first else { throw StoreError(message: "INSERT INTO users returned nothing") }
        return user
    }

    func user(named name: String) async throws -> UserRecord? {
        try await users("SELECT id, name, password_hash, created_at FROM users WHERE lower(name) = lower(\(name))").first
    }

    func user(id: Int64) async throws -> UserRecord? {
        try await users("SELECT id, name, password_hash, created_at FROM users WHERE id = \(id)").first
    }

    func createSession(digest: String, userID: Int64, expiresAt: Double) async throws {
        try await client.query("INSERT INTO sessions (token, user_id, expires_at) VALUES (\(digest), \(userID), \(expiresAt))")
    }

    func sessionUser(digest: String, now: Double) async throws -> UserRecord? {
        try await users("""
            SELECT users.id, users.name, users.password_hash, users.created_at FROM sessions JOIN users ON users.id = sessions.user_id
            WHERE token = \(digest) AND expires_at > \(now)
            """).first
    }

    func deleteSession(digest: String) async throws {
        try await client.query("DELETE FROM sessions WHERE token = \(digest)")
    }

    func createStreamKey(userID: Int64, key: String, label: String) async throws -> StreamKeyRecord {
        let now = Date().timeIntervalSince1970
        let rows = try await keys("""
            INSERT INTO stream_keys (user_id, key, label, created_at) VALUES (\(userID), \(key), \(label), \(now))
            RETURNING id, user_id, key, label, created_at, revoked_at
            """)
        guard let record = rows.first else { throw StoreError(message: "INSERT INTO stream_keys returned nothing") }
        return record
    }

    func activeStreamKey(_ key: String) async throws -> StreamKeyRecord? {
        try await keys("SELECT id, user_id, key, label, created_at, revoked_at FROM stream_keys WHERE key = \(key) AND revoked_at IS NULL").first
    }

    func streamKeys(userID: Int64) async throws -> [StreamKeyRecord] {
        try await keys("SELECT id, user_id, key, label, created_at, revoked_at FROM stream_keys WHERE user_id = \(userID) ORDER BY id")
    }

    func revokeStreamKey(id: Int64, userID: Int64, at time: Double) async throws -> Bool {
        let rows = try await keys("""
            UPDATE stream_keys SET revoked_at = \(time) WHERE id = \(id) AND user_id = \(userID) AND revoked_at IS NULL
            RETURNING id, user_id, key, label, created_at, revoked_at
            """)
        return !rows.isEmpty
    }

    func saveApplicationIcon(applicationID: String, png: [UInt8]) async throws {
        let bytes = ByteBuffer(bytes: png)
        try await client.query("""
            INSERT INTO application_icons (application_id, png) VALUES (\(applicationID), \(bytes))
            ON CONFLICT (application_id) DO UPDATE SET png = EXCLUDED.png
            """)
    }

    func applicationIcon(applicationID: String) async throws -> [UInt8]? {
        for try await png in try await client.query("SELECT png FROM application_icons WHERE application_id = \(applicationID)").decode(ByteBuffer.self) {
            return Array(png.readableBytesView)
        }
        return nil
    }

    func insertBroadcast(_ b: BroadcastRecord) async throws {
        try await client.query("""
            INSERT INTO broadcasts (id, user_id, stream_key_id, title, application_id, application_name, created_at, started_at, ended_at, viewer_peak, likes)
            VALUES (\(b.id), \(b.userID), \(b.streamKeyID), \(b.title), \(b.application.id), \(b.application.name), \(b.createdAt),
                    \(b.startedAt), \(b.endedAt), \(Int32(clamping: b.viewerPeak)), \(Int32(clamping: b.likes)))
            """)
    }

    func updateBroadcast(_ b: BroadcastRecord) async throws {
        try await client.query("""
            UPDATE broadcasts SET title = \(b.title), application_id = \(b.application.id), application_name = \(b.application.name),
                started_at = \(b.startedAt), ended_at = \(b.endedAt), viewer_peak = \(Int32(clamping: b.viewerPeak)), likes = \(Int32(clamping: b.likes))
            WHERE id = \(b.id)
            """)
    }

    func broadcast(id: String) async throws -> BroadcastRecord? {
        try await broadcasts("SELECT \(unescaped: Self.broadcastColumns) FROM broadcasts WHERE id = \(id)").first
    }

    func pendingBroadcast(streamKeyID: Int64, since: Double) async throws -> BroadcastRecord? {
        try await broadcasts("""
            SELECT \(unescaped: Self.broadcastColumns) FROM broadcasts
            WHERE stream_key_id = \(streamKeyID) AND started_at IS NULL AND created_at >= \(since) ORDER BY created_at DESC LIMIT 1
            """).first
    }

    func broadcasts(userID: Int64, limit: Int) async throws -> [BroadcastRecord] {
        try await broadcasts("""
            SELECT \(unescaped: Self.broadcastColumns) FROM broadcasts WHERE user_id = \(userID) ORDER BY created_at DESC LIMIT \(limit)
            """)
    }

    func endUnfinishedBroadcasts(at time: Double) async throws {
        // Broadcasts another node still heartbeats are live there, not left over by a crash.
        try await client.query("""
            UPDATE broadcasts SET ended_at = \(time) WHERE started_at IS NOT NULL AND ended_at IS NULL
            AND id NOT IN (SELECT broadcast_id FROM live_broadcasts WHERE heartbeat_at > \(time - 10))
            """)
    }
}
