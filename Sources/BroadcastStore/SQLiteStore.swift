import Foundation
import GRDB

/// The embedded store: SQLite through GRDB, schema migrated on open.
final class SQLiteStore: ServiceStore {
    private let database: DatabaseQueue

    init(path: String) throws {
        let directory = (path as NSString).deletingLastPathComponent
        // Password hashes and stream keys: a folder we make is the service user's alone (0700), and the
        // file (SQLite gives its journals the file's mode) is 0600 whoever made it.
        if !directory.isEmpty, !FileManager.default.fileExists(atPath: directory) {
            try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o700])
        }
        let descriptor = open(path, O_CREAT | O_WRONLY | O_CLOEXEC, 0o600)
        guard descriptor >= 0 else {
            throw StoreFileError(description: "cannot open the database \(path): \(String(cString: strerror(errno)))")
        }
        let madePrivate = fchmod(descriptor, 0o600) == 0
        close(descriptor)
        guard madePrivate else {
            throw StoreFileError(description: "cannot make the database \(path) private (chmod 600): \(String(cString: strerror(errno)))")
        }
        var configuration = Configuration()
        configuration.foreignKeysEnabled = true
        configuration.busyMode = .timeout(5)
        database = try DatabaseQueue(path: path, configuration: configuration)
        try Self.migrator.migrate(database)
    }

    static var migrator: DatabaseMigrator {
        var migrator = DatabaseMigrator()
        migrator.registerMigration("v1") { db in
            try db.execute(sql: """
                CREATE TABLE users (id INTEGER PRIMARY KEY AUTOINCREMENT, name TEXT NOT NULL UNIQUE COLLATE NOCASE,
                                    password_hash TEXT NOT NULL, created_at REAL NOT NULL);
                CREATE TABLE sessions (token TEXT PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                                       expires_at REAL NOT NULL);
                CREATE TABLE stream_keys (id INTEGER PRIMARY KEY AUTOINCREMENT, user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                                          key TEXT NOT NULL UNIQUE, label TEXT NOT NULL, created_at REAL NOT NULL, revoked_at REAL);
                CREATE TABLE application_icons (application_id TEXT PRIMARY KEY, png BLOB NOT NULL);
                CREATE TABLE broadcasts (id TEXT PRIMARY KEY, user_id INTEGER NOT NULL REFERENCES users(id) ON DELETE CASCADE,
                                         stream_key_id INTEGER NOT NULL REFERENCES stream_keys(id) ON DELETE CASCADE,
                                         title TEXT NOT NULL, application_id TEXT NOT NULL, application_name TEXT NOT NULL,
                                         created_at REAL NOT NULL, started_at REAL, ended_at REAL,
                                         viewer_peak INTEGER NOT NULL DEFAULT 0, likes INTEGER NOT NULL DEFAULT 0);
                CREATE INDEX broadcasts_by_user ON broadcasts(user_id, created_at);
                """)
        }
        migrator.registerMigration("v2-session-digests") { db in
            // Sessions kept by their tokens until now: signed out, as a stolen copy would sign in.
            try db.execute(sql: "DELETE FROM sessions")
        }
        return migrator
    }

    func createUser(name: String, passwordHash: String) async throws -> UserRecord {
        let now = Date().timeIntervalSince1970
        return try await database.write { db in
            try db.execute(sql: "INSERT INTO users (name, password_hash, created_at) VALUES (?, ?, ?)", arguments: [name, passwordHash, now])
            return UserRecord(id: db.lastInsertedRowID, name: name, passwordHash: passwordHash, createdAt: now)
        }
    }

    func user(named name: String) async throws -> UserRecord? {
        try await database.read { db in try Row.fetchOne(db, sql: "SELECT * FROM users WHERE name = ?", arguments: [name]).map(Self.user) }
    }

    func user(id: Int64) async throws -> UserRecord? {
        try await database.read { db in try Row.fetchOne(db, sql: "SELECT * FROM users WHERE id = ?", arguments: [id]).map(Self.user) }
    }

    func createSession(digest: String, userID: Int64, expiresAt: Double) async throws {
        try await database.write { db in
            try db.execute(sql: "INSERT INTO sessions (token, user_id, expires_at) VALUES (?, ?, ?)", arguments: [digest, userID, expiresAt])
        }
    }

    func sessionUser(digest: String, now: Double) async throws -> UserRecord? {
        try await database.read { db in
            try Row.fetchOne(db, sql: "SELECT users.* FROM sessions JOIN users ON users.id = sessions.user_id WHERE token = ? AND expires_at > ?",
                             arguments: [digest, now]).map(Self.user)
        }
    }

    func deleteSession(digest: String) async throws {
        try await database.write { db in try db.execute(sql: "DELETE FROM sessions WHERE token = ?", arguments: [digest]) }
    }

    func createStreamKey(userID: Int64, key: String, label: String) async throws -> StreamKeyRecord {
        let now = Date().timeIntervalSince1970
        return try await database.write { db in
            try db.execute(sql: "INSERT INTO stream_keys (user_id, key, label, created_at) VALUES (?, ?, ?, ?)", arguments: [userID, key, label, now])
            return StreamKeyRecord(id: db.lastInsertedRowID, userID: userID, key: key, label: label, createdAt: now, revokedAt: nil)
        }
    }

    func activeStreamKey(_ key: String) async throws -> StreamKeyRecord? {
        try await database.read { db in
            try Row.fetchOne(db, sql: "SELECT * FROM stream_keys WHERE key = ? AND revoked_at IS NULL", arguments: [key]).map(Self.streamKey)
        }
    }

    func streamKeys(userID: Int64) async throws -> [StreamKeyRecord] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM stream_keys WHERE user_id = ? ORDER BY id", arguments: [userID]).map(Self.streamKey)
        }
    }

    func revokeStreamKey(id: Int64, userID: Int64, at time: Double) async throws -> Bool {
        try await database.write { db in
            try db.execute(sql: "UPDATE stream_keys SET revoked_at = ? WHERE id = ? AND user_id = ? AND revoked_at IS NULL",
                           arguments: [time, id, userID])
            return db.changesCount > 0
        }
    }

    func saveApplicationIcon(applicationID: String, png: [UInt8]) async throws {
        try await database.write { db in
            try db.execute(sql: "INSERT OR REPLACE INTO application_icons (application_id, png) VALUES (?, ?)",
                           arguments: [applicationID, Data(png)])
        }
    }

    func applicationIcon(applicationID: String) async throws -> [UInt8]? {
        try await database.read { db in
            try Data.fetchOne(db, sql: "SELECT png FROM application_icons WHERE application_id = ?", arguments: [applicationID]).map { [UInt8]($0) }
        }
    }

    func insertBroadcast(_ b: BroadcastRecord) async throws {
        try await database.write { db in
            try db.execute(sql: """
                INSERT INTO broadcasts (id, user_id, stream_key_id, title, application_id, application_name, created_at, started_at, ended_at, viewer_peak, likes)
                VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
                """, arguments: [b.id, b.userID, b.streamKeyID, b.title, b.application.id, b.application.name, b.createdAt,
                                 b.startedAt, b.endedAt, b.viewerPeak, b.likes])
        }
    }

    func updateBroadcast(_ b: BroadcastRecord) async throws {
        try await database.write { db in
            try db.execute(sql: """
                UPDATE broadcasts SET title = ?, application_id = ?, application_name = ?, started_at = ?, ended_at = ?, viewer_peak = ?, likes = ?
                WHERE id = ?
                """, arguments: [b.title, b.application.id, b.application.name, b.startedAt, b.endedAt, b.viewerPeak, b.likes, b.id])
        }
    }

    func broadcast(id: String) async throws -> BroadcastRecord? {
        try await database.read { db in try Row.fetchOne(db, sql: "SELECT * FROM broadcasts WHERE id = ?", arguments: [id]).map(Self.broadcast) }
    }

    func pendingBroadcast(streamKeyID: Int64, since: Double) async throws -> BroadcastRecord? {
        try await database.read { db in
            try Row.fetchOne(db, sql: """
                SELECT * FROM broadcasts WHERE stream_key_id = ? AND started_at IS NULL AND created_at >= ? ORDER BY created_at DESC LIMIT 1
                """, arguments: [streamKeyID, since]).map(Self.broadcast)
        }
    }

    func broadcasts(userID: Int64, limit: Int) async throws -> [BroadcastRecord] {
        try await database.read { db in
            try Row.fetchAll(db, sql: "SELECT * FROM broadcasts WHERE user_id = ? ORDER BY created_at DESC LIMIT ?",
                             arguments: [userID, limit]).map(Self.broadcast)
        }
    }

    func endUnfinishedBroadcasts(at time: Double) async throws {
        try await database.write { db in
            try db.execute(sql: "UPDATE broadcasts SET ended_at = ? WHERE started_at IS NOT NULL AND ended_at IS NULL", arguments: [time])
        }
    }

    private static func user(_ row: Row) -> UserRecord {
        UserRecord(id: row["id"], name: row["name"], passwordHash: row["password_hash"], createdAt: row["created_at"])
    }

    private static func streamKey(_ row: Row) -> StreamKeyRecord {
        StreamKeyRecord(id: row["id"], userID: row["user_id"], key: row["key"], label: row["label"],
                        createdAt: row["created_at"], revokedAt: row["revoked_at"])
    }

    private static func broadcast(_ row: Row) -> BroadcastRecord {
        BroadcastRecord(id: row["id"], userID: row["user_id"], streamKeyID: row["stream_key_id"], title: row["title"],
                        application: ApplicationInfo(id: row["application_id"], name: row["application_name"]),
                        createdAt: row["created_at"], startedAt: row["started_at"], endedAt: row["ended_at"],
                        viewerPeak: row["viewer_peak"], likes: row["likes"])
    }
}

struct StoreFileError: Error, CustomStringConvertible {
    var description: String
}
