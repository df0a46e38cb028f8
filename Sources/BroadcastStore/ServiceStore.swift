import Foundation
package import Logging
import PostgresNIO
package import ServiceLifecycle

/// An account.
package struct UserRecord: Sendable, Equatable {
    package var id: Int64
    package var name: String
    package var passwordHash: String
    package var createdAt: Double
}

/// A stream key: whoever holds it may publish as its owner (and use the extension API).
package struct StreamKeyRecord: Sendable, Equatable {
    package var id: Int64
    package var userID: Int64
    package var key: String
    package var label: String
    package var createdAt: Double
    package var revokedAt: Double?
}

/// The application a broadcast shows (what `broadcastAnnotated(withApplicationInfo:)` reports).
package struct ApplicationInfo: Sendable, Equatable, Codable {
    package var id: String
    package var name: String
    package init(id: String, name: String) { self.id = id; self.name = name }
    package static let desktop = ApplicationInfo(id: "org.openreplaykit.desktop", name: "Desktop")
}

/// A broadcast, live or past.
package struct BroadcastRecord: Sendable, Equatable {
    package var id: String
    package var userID: Int64
    package var streamKeyID: Int64
    package var title: String
    package var application: ApplicationInfo
    package var createdAt: Double
    package var startedAt: Double?
    package var endedAt: Double?
    package var viewerPeak: Int
    package var likes: Int

    package init(id: String, userID: Int64, streamKeyID: Int64, title: String, application: ApplicationInfo, createdAt: Double,
                 startedAt: Double?, endedAt: Double?, viewerPeak: Int, likes: Int) {
        self.id = id
        self.userID = userID
        self.streamKeyID = streamKeyID
        self.title = title
        self.application = application
        self.createdAt = createdAt
        self.startedAt = startedAt
        self.endedAt = endedAt
        self.viewerPeak = viewerPeak
        self.likes = likes
    }
}

/// What the service keeps. SQLite (GRDB) is the embedded implementation.
package protocol ServiceStore: Sendable {
    func createUser(name: String, passwordHash: String) async throws -> UserRecord
    func user(named name: String) async throws -> UserRecord?
    func user(id: Int64) async throws -> UserRecord?

    /// Sessions are kept by their token's digest (`Token.digest`), never the token: a copy of the
    /// database signs nobody in.
    func createSession(digest: String, userID: Int64, expiresAt: Double) async throws
    /// The signed-in user of a session whose token has this digest and has not expired.
    func sessionUser(digest: String, now: Double) async throws -> UserRecord?
    func deleteSession(digest: String) async throws

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

package struct StoreError: Error, CustomStringConvertible {
    package let message: String
    package init(message: String) { self.message = message }
    package var description: String { message }
}

/// An open store and what it needs running while it is used.
package struct StoreConnection: Sendable {
    package let store: any ServiceStore
    /// Services the store needs running (PostgreSQL's connection pool): the server adds them to its
    /// service group; none for SQLite.
    package let services: [any Service]
    /// The live state shared with the other nodes (PostgreSQL); nil with SQLite, where the node is alone.
    package let liveState: (any SharedLiveState)?
    /// Migrates the schema once `services` run (SQLite migrates when opened).
    package let migrate: @Sendable () async throws -> Void
}

extension DatabaseLocation {
    /// Opens the store. For PostgreSQL nothing connects until the returned `services` run.
    package func open(logger: Logger) throws -> StoreConnection {
        switch self {
        case .sqlite(let path):
            return StoreConnection(store: try SQLiteStore(path: path), services: [], liveState: nil, migrate: {})
        case .postgres(let url):
            let client = PostgresClient(configuration: try PostgresStore.configuration(url: url), backgroundLogger: logger)
            let store = PostgresStore(client: client)
            return StoreConnection(store: store, services: [client], liveState: PostgresLiveState(client: client),
                                   migrate: { try await store.migrate(logger: logger) })
        }
    }

    /// Opens and migrates the store, runs `body` with it, and stops the store's services after (the
    /// command line's one-off tasks; the server runs them in its own service group).
    package func withStore<T>(logger: Logger, _ body: (any ServiceStore) async throws -> T) async throws -> T {
        let connection = try open(logger: logger)
        guard !connection.services.isEmpty else { return try await body(connection.store) }
        let services = ServiceGroup(services: connection.services, logger: logger)
        return try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { try await services.run() }
            do {
                try await connection.migrate()
                let result = try await body(connection.store)
                await services.triggerGracefulShutdown()
                return result
            } catch {
                await services.triggerGracefulShutdown()
                throw error
            }
        }
    }
}
