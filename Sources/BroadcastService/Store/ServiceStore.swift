import Foundation
public import Logging
import PostgresNIO

/// An account.
public struct UserRecord: Sendable, Equatable {
    public var id: Int64
    public var name: String
    public var passwordHash: String
    public var createdAt: Double
}

/// A stream key: whoever holds it may publish as its owner (and use the extension API).
public struct StreamKeyRecord: Sendable, Equatable {
    public var id: Int64
    public var userID: Int64
    public var key: String
    public var label: String
    public var createdAt: Double
    public var revokedAt: Double?
}

/// The application a broadcast shows (what `broadcastAnnotated(withApplicationInfo:)` reports).
public struct ApplicationInfo: Sendable, Equatable, Codable {
    public var id: String
    public var name: String
    public init(id: String, name: String) { self.id = id; self.name = name }
    public static let desktop = ApplicationInfo(id: "org.openreplaykit.desktop", name: "Desktop")
}

/// A broadcast, live or past.
public struct BroadcastRecord: Sendable, Equatable {
    public var id: String
    public var userID: Int64
    public var streamKeyID: Int64
    public var title: String
    public var application: ApplicationInfo
    public var createdAt: Double
    public var startedAt: Double?
    public var endedAt: Double?
    public var viewerPeak: Int
    public var likes: Int
}

/// What the service keeps. SQLite (GRDB) is the embedded implementation.
public protocol ServiceStore: Sendable {
    func createUser(name: String, passwordHash: String) async throws -> UserRecord
    func user(named name: String) async throws -> UserRecord?
    func user(id: Int64) async throws -> UserRecord?

    func createSession(token: String, userID: Int64, expiresAt: Double) async throws
    /// The signed-in user of a session token that has not expired.
    func sessionUser(token: String, now: Double) async throws -> UserRecord?
    func deleteSession(token: String) async throws

    func createStreamKey(userID: Int64, key: String, label: String) async throws -> StreamKeyRecord
    /// A key that is not revoked.
    func activeStreamKey(_ key: String) async throws -> StreamKeyRecord?
    func streamKeys(userID: Int64) async throws -> [StreamKeyRecord]
    func revokeStreamKey(id: Int64, userID: Int64, at time: Double) async throws -> Bool

    func saveApplicationIcon(applicationID: String, png: [UInt8]) async throws
    func applicationIcon(applicationID: String) async throws -> [UInt8]?

    func insertBroadcast(_ broadcast: BroadcastRecord) async throws
    func updateBroadcast(_ broadcast: BroadcastRecord) async throws
    func broadcast(id: String) async throws -> BroadcastRecord?
    /// The newest broadcast of a key that was created through the API and has not started yet.
    func pendingBroadcast(streamKeyID: Int64, since: Double) async throws -> BroadcastRecord?
    func broadcasts(userID: Int64, limit: Int) async throws -> [BroadcastRecord]
    /// Marks broadcasts left "live" by a crash as ended (called on start).
    func endUnfinishedBroadcasts(at time: Double) async throws
}

/// Where the service keeps its data, from `--database`.
public enum DatabaseLocation: Sendable, Equatable {
    case sqlite(path: String)
    case postgres(url: String)

    public init(argument: String?) {
        if let argument, argument.hasPrefix("postgres://") || argument.hasPrefix("postgresql://") {
            self = .postgres(url: argument)
        } else if let argument {
            self = .sqlite(path: argument)
        } else {
            self = .sqlite(path: Self.defaultDirectory() + "/service.sqlite")
        }
    }

    /// `$XDG_DATA_HOME/openreplaykit/service`, `~/.local/share/openreplaykit/service` by default.
    public static func defaultDirectory() -> String {
        let environment = ProcessInfo.processInfo.environment
        let base = environment["XDG_DATA_HOME"].flatMap { $0.isEmpty ? nil : $0 }
            ?? (environment["HOME"] ?? NSHomeDirectory()) + "/.local/share"
        return base + "/openreplaykit/service"
    }
}

public struct StoreError: Error, CustomStringConvertible {
    public let message: String
    public var description: String { message }
}

extension DatabaseLocation {
    /// Opens the store, migrates its schema, and runs `body` with it. For PostgreSQL the connection pool
    /// runs as a child task for the duration of `body`, and stops after it.
    public func withStore<T>(logger: Logger, _ body: (any ServiceStore) async throws -> T) async throws -> T {
        switch self {
        case .sqlite(let path):
            return try await body(try SQLiteStore(path: path))
        case .postgres(let url):
            let client = PostgresClient(configuration: try PostgresStore.configuration(url: url), backgroundLogger: logger)
            return try await withThrowingTaskGroup(of: Void.self) { group in
                group.addTask { await client.run() }
                defer { group.cancelAll() }
                let store = PostgresStore(client: client)
                try await store.migrate(logger: logger)
                return try await body(store)
            }
        }
    }
}
