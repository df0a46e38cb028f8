import BroadcastStore
import Foundation
import Logging
import ServiceLifecycle
import Synchronization

/// A message on the cluster's channel. `event`: something a broadcast's ingest node published (comment,
/// like, viewers, application, ended), for the other nodes to re-publish to their local subscribers.
/// `comment` and `like`: what a person did on a node that does not ingest the broadcast, for the ingest
/// node to apply (it owns the comments and the like count) and publish as an `event`.
struct ClusterMessage: Codable, Sendable {
    enum Kind: String, Codable, Sendable { case event, comment, like }
    var kind: Kind
    /// The node that sent it: a node skips its own events (it published them locally already).
    var node: String
    var broadcast: String
    var event: ServiceEvent?
    var user: String?
    var text: String?
}

/// This node's link to the others through the shared live state: announces its live broadcasts with a
/// heartbeat, sends their events, and hands what it hears to the live directory. A `Service`: its
/// sender, heartbeat and listener loops are children of `run()`.
final class ClusterLink: Service, Sendable {
    let state: any SharedLiveState
    let node = Token.hex(8)
    let logger: Logger
    static let heartbeatInterval = Duration.seconds(2)
    /// Messages to send, in order, by one loop (publishing is synchronous, sending is a query).
    private let outgoing: AsyncStream<String>
    private let outgoingContinuation: AsyncStream<String>.Continuation
    /// The live directory, attached before `run()`: what it does with a message from another node, and
    /// the viewer counts the heartbeat writes.
    private let member = Mutex<LiveDirectory?>(nil)

    init(state: any SharedLiveState, logger: Logger) {
        self.state = state
        self.logger = logger
        (outgoing, outgoingContinuation) = AsyncStream.makeStream(bufferingPolicy: .bufferingOldest(4096))
    }

    func attach(_ directory: LiveDirectory) { member.withLock { $0 = directory } }

    func send(_ message: ClusterMessage) {
        guard let data = try? JSONEncoder().encode(message), let text = String(data: data, encoding: .utf8) else { return }
        guard text.utf8.count < 7900 else {
            logger.warning("Cluster message too large, not sent", metadata: ["broadcast": "\(message.broadcast)", "bytes": "\(text.utf8.count)"])
            return
        }
        if case .dropped = outgoingContinuation.yield(text) {
            logger.warning("Cluster message dropped: the database is not keeping up", metadata: ["broadcast": "\(message.broadcast)"])
        }
    }

    func run() async throws {
        // The listener waits on the database for as long as the node runs: shutdown cancels the loops.
        await cancelWhenGracefulShutdown {
            await withDiscardingTaskGroup { group in
                group.addTask { await self.sendLoop() }
                group.addTask { await self.heartbeatLoop() }
                group.addTask { await self.listenLoop() }
            }
        }
    }

    private func sendLoop() async {
        for await payload in outgoing {
            do { try await state.send(payload) } catch {
                logger.error("Could not send a cluster message", metadata: ["error": "\(String(reflecting: error))"])
            }
        }
    }

    private func heartbeatLoop() async {
        while !Task.isCancelled {
            do { try await state.heartbeat(node: node, viewers: member.withLock { $0 }?.localViewerCounts ?? [:], at: Date().timeIntervalSince1970) } catch {
                logger.debug("Heartbeat failed", metadata: ["error": "\(String(reflecting: error))"])
            }
            try? await Task.sleep(for: Self.heartbeatInterval)
        }
    }

    /// Listens until the node shuts down, reconnecting after a lost connection (messages sent meanwhile
    /// are not heard: NOTIFY is not queued for a listener that is not there).
    private func listenLoop() async {
        while !Task.isCancelled {
            do {
                try await state.listen(logger: logger) { payload in await self.receive(payload) }
            } catch {
                guard !Task.isCancelled else { return }
                logger.warning("Lost the cluster channel; listening again in 1 s", metadata: ["error": "\(String(reflecting: error))"])
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }

    private func receive(_ payload: String) async {
        guard let message = try? JSONDecoder().decode(ClusterMessage.self, from: Data(payload.utf8)) else {
            logger.warning("Unreadable cluster message ignored")
            return
        }
        guard message.node != node || message.kind != .event else { return }
        await member.withLock { $0 }?.received(message)
    }
}
