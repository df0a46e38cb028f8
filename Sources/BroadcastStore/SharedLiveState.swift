import Foundation
package import Logging
import NIOCore
import PostgresNIO

/// A broadcast live on some node of the cluster, as the shared state has it.
package struct SharedLiveBroadcast: Sendable, Equatable {
    package var record: BroadcastRecord
    package var broadcaster: String
    /// The node that ingests it (its id) and the address other nodes reach it at.
    package var node: String
    package var address: String
    package var viewers: Int
}

/// The live state nodes share: which broadcasts are live where, and one channel of messages every node
/// hears. PostgreSQL's (`live_broadcasts` rows with a heartbeat, `LISTEN/NOTIFY`); with SQLite there is
/// none and the node is alone.
package protocol SharedLiveState: Sendable {
    /// Seconds without a heartbeat after which a row is not live (its node is gone).
    var expiry: Double { get }
    func announce(broadcastID: String, node: String, address: String, viewers: Int, at time: Double) async throws
    func withdraw(broadcastID: String, node: String) async throws
    /// Refreshes this node's rows (and their viewer counts), and deletes rows expired long ago.
    func heartbeat(node: String, viewers: [String: Int], at time: Double) async throws
    /// The broadcasts whose heartbeat is fresh at `time`, newest first.
    func live(at time: Double) async throws -> [SharedLiveBroadcast]
    func live(broadcastID: String, at time: Double) async throws -> SharedLiveBroadcast?
    /// Sends `payload` to every node listening (this one included), at most 7,900 bytes.
    func send(_ payload: String) async throws
    /// Calls `receive` with every payload until cancelled, or throws when the connection is lost.
    func listen(logger: Logger, _ receive: @Sendable (String) async -> Void) async throws
}

/// `live_broadcasts` and the `broadcast_events` channel on the cluster's PostgreSQL.
final class PostgresLiveState: SharedLiveState {
    static let channel = "broadcast_events"
    let client: PostgresClient
    let expiry: Double

    init(client: PostgresClient, expiry: Double = 10) {
        self.client = client
        self.expiry = expiry
    }

    func announce(broadcastID: String, node: String, address: String, viewers: Int, at time: Double) async throws {
        try await client.query("""
            INSERT INTO live_broadcasts (broadcast_id, node, address, viewers, heartbeat_at)
            VALUES (\(broadcastID), \(node), \(address), \(Int32(clamping: viewers)), \(time))
            ON CONFLICT (broadcast_id) DO UPDATE SET node = EXCLUDED.node, address = EXCLUDED.address,
                viewers = EXCLUDED.viewers, heartbeat_at = EXCLUDED.heartbeat_at
            """)
    }

    func withdraw(broadcastID: String, node: String) async throws {
        // Only this node's row: a publisher that moved to another node keeps its new row.
        try await client.query("DELETE FROM live_broadcasts WHERE broadcast_id = \(broadcastID) AND node = \(node)")
    }

    func heartbeat(node: String, viewers: [String: Int], at time: Double) async throws {
        try await client.query("UPDATE live_broadcasts SET heartbeat_at = \(time) WHERE node = \(node)")
        for (id, count) in viewers {
            try await client.query("UPDATE live_broadcasts SET viewers = \(Int32(clamping: count)) WHERE broadcast_id = \(id) AND node = \(node)")
        }
        try await client.query("DELETE FROM live_broadcasts WHERE heartbeat_at < \(time - 10 * expiry)")
    }

    private typealias Row = (String, Int64, Int64, String, String, String, Double, Double?, Double?, Int32, Int32, String, String, String, Int32)

    private func rows(_ query: PostgresQuery) async throws -> [SharedLiveBroadcast] {
        var out: [SharedLiveBroadcast] = []
        for try await r in try await client.query(query).decode(Row.self) {
            let record = BroadcastRecord(id: r.0, userID: r.1, streamKeyID: r.2, title: r.3, application: ApplicationInfo(id: r.4, name: r.5),
                                         createdAt: r.6, startedAt: r.7, endedAt: r.8, viewerPeak: Int(r.9), likes: Int(r.10))
            out.append(SharedLiveBroadcast(record: record, broadcaster: r.11, node: r.12, address: r.13, viewers: Int(r.14)))
        }
        return out
    }

    private static let columns = """
        b.id, b.user_id, b.stream_key_id, b.title, b.application_id, b.application_name, b.created_at, b.started_at, b.ended_at,
        b.viewer_peak, b.likes, u.name, l.node, l.address, l.viewers
        FROM live_broadcasts l JOIN broadcasts b ON b.id = l.broadcast_id JOIN users u ON u.id = b.user_id
        """

    func live(at time: Double) async throws -> [SharedLiveBroadcast] {
        try await rows("SELECT \(unescaped: Self.columns) WHERE l.heartbeat_at > \(time - expiry) ORDER BY b.started_at DESC")
    }

    func live(broadcastID: String, at time: Double) async throws -> SharedLiveBroadcast? {
        try await rows("SELECT \(unescaped: Self.columns) WHERE l.broadcast_id = \(broadcastID) AND l.heartbeat_at > \(time - expiry)").first
    }

    func send(_ payload: String) async throws {
        try await client.query("SELECT pg_notify(\(Self.channel), \(payload))")
    }

    func listen(logger: Logger, _ receive: @Sendable (String) async -> Void) async throws {
        // One pooled connection held for as long as this node listens.
        try await client.withConnection { connection in
            try await connection.listen(on: Self.channel) { notifications in
                logger.info("Listening for cluster events", metadata: ["channel": "\(Self.channel)"])
                for try await notification in notifications { await receive(notification.payload) }
            }
        }
    }
}
