import BroadcastMedia
import BroadcastStore
import Crypto
import Foundation
import Logging
import Synchronization

/// Generates random identifiers and secrets.
package enum Token {
    /// `bytes` random bytes as lowercase hex.
    static func hex(_ bytes: Int) -> String {
        var generator = SystemRandomNumberGenerator()
        return hex(of: (0..<bytes).map { _ in UInt8.random(in: 0...255, using: &generator) })
    }

    /// `bytes` as lowercase hex: tokens, digests and signatures (per request: no formatter).
    static func hex(of bytes: some Sequence<UInt8>) -> String {
        let digits = Array("0123456789abcdef".utf8)
        var text: [UInt8] = []
        for byte in bytes { text += [digits[Int(byte >> 4)], digits[Int(byte & 15)]] }
        return String(decoding: text, as: UTF8.self)
    }

    /// A short id for URLs (base32-ish, 12 characters).
    static func shortID() -> String {
        let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789")
        var generator = SystemRandomNumberGenerator()
        return String((0..<12).map { _ in alphabet[Int.random(in: 0..<alphabet.count, using: &generator)] })
    }

    /// A new stream key.
    package static func streamKey() -> String { "live_" + hex(16) }

    /// What the store keeps of a session token: its SHA-256 (the token is 256 random bits, so no salt
    /// or slow hash is needed to make the digest useless to whoever reads the database).
    static func digest(_ token: String) -> String {
        hex(of: SHA256.hash(data: Array(token.utf8)))
    }
}

/// Fans JSON events (comments, likes, viewer count, application changes) out to the broadcaster's
/// extension. (Viewers' pages get them through the broadcast's `LiveStream`, with the media.)
final class EventHub: Sendable {
    private let state = Mutex<(next: Int, subscribers: [Int: AsyncStream<String>.Continuation])>((0, [:]))

    func subscribe() -> (Int, AsyncStream<String>) {
        let (stream, continuation) = AsyncStream<String>.makeStream(bufferingPolicy: .bufferingNewest(256))
        let id = state.withLock { s in
            let id = s.next
            s.next += 1
            s.subscribers[id] = continuation
            return id
        }
        return (id, stream)
    }

    func unsubscribe(_ id: Int) {
        state.withLock { $0.subscribers.removeValue(forKey: id) }?.finish()
    }

    var isEmpty: Bool { state.withLock { $0.subscribers.isEmpty } }

    /// Sends `event` to the subscribers; returns its JSON text.
    @discardableResult
    func publish(_ event: ServiceEvent) -> String? {
        guard let data = try? JSONEncoder().encode(event), let text = String(data: data, encoding: .utf8) else { return nil }
        state.withLock { s in for c in s.subscribers.values { c.yield(text) } }
        return text
    }

    func finishAll() {
        let all = state.withLock { s in
            let all = Array(s.subscribers.values)
            s.subscribers.removeAll()
            return all
        }
        for c in all { c.finish() }
    }
}

/// An event on a broadcast's event stream (see docs/SERVICE-API.md).
struct ServiceEvent: Codable, Sendable {
    var type: String
    var viewerCount: Int?
    var likes: Int?
    var user: String?
    var text: String?
    var time: Double?
    var application: ApplicationJSON?
    var mime: String?
}

struct ApplicationJSON: Codable, Sendable {
    var id: String
    var name: String
    var iconURL: String?
    /// The operator verified the application: `iconURL` is its own icon, not the account's upload.
    var verified: Bool?
}

struct Comment: Sendable {
    var user: String
    var text: String
    var time: Double
}

/// Coalesces viewer-count changes: at most one "viewers" event per `interval`, and always a trailing one
/// carrying the final count. Without it every join and leave would be sent to every viewer (quadratic).
struct ViewerCountCoalescer {
    enum Action: Equatable {
        case none
        case publishNow
        /// Publish the count as it will be then (a timer).
        case publishAt(ContinuousClock.Instant)
    }

    let interval: Duration
    private var lastPublished: ContinuousClock.Instant?
    private var timerPending = false

    init(interval: Duration) { self.interval = interval }

    mutating func countChanged(at now: ContinuousClock.Instant) -> Action {
        if timerPending { return .none }
        if let lastPublished, now < lastPublished + interval {
            timerPending = true
            return .publishAt(lastPublished + interval)
        }
        lastPublished = now
        return .publishNow
    }

    mutating func timerFired(at now: ContinuousClock.Instant) -> Action {
        guard timerPending else { return .none }
        timerPending = false
        lastPublished = now
        return .publishNow
    }
}

/// A broadcast that is live now.
final class LiveBroadcast: Sendable {
    struct State {
        var record: BroadcastRecord
        var broadcaster: String
        var viewers = 0
        var comments: [Comment] = []
        var viewerEvents = ViewerCountCoalescer(interval: LiveBroadcast.viewerCountInterval)
    }

    static let viewerCountInterval = Duration.milliseconds(500)

    let stream: LiveStream
    /// Events for the broadcaster's extension; viewers get the same events through `stream`.
    let events = EventHub()
    /// The other nodes, which re-publish this broadcast's events to their own subscribers (PostgreSQL).
    let cluster: ClusterLink?
    let id: String
    private let state: Mutex<State>

    init(record: BroadcastRecord, broadcaster: String, stream: LiveStream, cluster: ClusterLink? = nil) {
        self.stream = stream
        self.cluster = cluster
        self.id = record.id
        self.state = Mutex(State(record: record, broadcaster: broadcaster))
    }

    var record: BroadcastRecord { state.withLock { $0.record } }
    var broadcaster: String { state.withLock { $0.broadcaster } }
    var viewerCount: Int { state.withLock { $0.viewers } }
    var comments: [Comment] { state.withLock { $0.comments } }
    var listing: LiveListing { state.withLock { LiveListing(record: $0.record, broadcaster: $0.broadcaster, viewerCount: $0.viewers) } }

    /// Sends an event to the extension and to every viewer.
    func publish(_ event: ServiceEvent) {
        guard let text = events.publish(event) else { return }
        stream.sendToViewers(text: text)
        if let cluster { cluster.send(ClusterMessage(kind: .event, node: cluster.node, broadcast: id, event: event)) }
    }

    /// Counts a viewer in; returns the new count.
    func viewerJoined() -> Int {
        let (count, action) = state.withLock { s in
            s.viewers += 1
            s.record.viewerPeak = max(s.record.viewerPeak, s.viewers)
            return (s.viewers, s.viewerEvents.countChanged(at: .now))
        }
        perform(action)
        return count
    }

    func viewerLeft() {
        let action = state.withLock { s in
            s.viewers = max(0, s.viewers - 1)
            return s.viewerEvents.countChanged(at: .now)
        }
        perform(action)
    }

    private func perform(_ action: ViewerCountCoalescer.Action) {
        switch action {
        case .none:
            break
        case .publishNow:
            publish(ServiceEvent(type: "viewers", viewerCount: viewerCount))
        case .publishAt(let deadline):
            Task {
                try? await Task.sleep(until: deadline, clock: .continuous)
                self.perform(self.state.withLock { $0.viewerEvents.timerFired(at: .now) })
            }
        }
    }

    func like(by user: String) -> BroadcastRecord {
        let record = state.withLock { s in
            s.record.likes += 1
            return s.record
        }
        publish(ServiceEvent(type: "like", likes: record.likes, user: user, time: Date().timeIntervalSince1970))
        return record
    }

    func comment(_ comment: Comment) {
        state.withLock { s in
            s.comments.append(comment)
            if s.comments.count > 50 { s.comments.removeFirst(s.comments.count - 50) }
        }
        publish(ServiceEvent(type: "comment", user: comment.user, text: comment.text, time: comment.time))
    }

    func setApplication(_ application: ApplicationInfo, iconURL: String?) -> BroadcastRecord {
        let record = state.withLock { s in
            s.record.application = application
            return s.record
        }
        publish(ServiceEvent(type: "application", application: ApplicationJSON(id: application.id, name: application.name, iconURL: iconURL)))
        return record
    }

    func setTitle(_ title: String) {
        state.withLock { $0.record.title = title }
    }

    func markEnded(at time: Double) -> BroadcastRecord {
        state.withLock { s in
            s.record.endedAt = time
            return s.record
        }
    }
}

/// The live broadcasts, and the ingest's gatekeeper: a publish with an active stream key becomes a
/// live broadcast (the one the extension API prepared for that key, or a new one).
final class LiveDirectory: RTMPIngestDelegate {
    let store: any ServiceStore
    let logger: Logger
    private let live = Mutex<[String: LiveBroadcast]>([:])

    /// `--relay`: an RTMP URL template, `{id}` and `{user}` replaced per broadcast.
    let relayTemplate: String?
    /// The live broadcasts' thumbnails (`GET /b/{id}/thumbnail.jpg`).
    let thumbnails: ThumbnailCache
    /// The other nodes (PostgreSQL); nil when this node is alone (SQLite).
    let cluster: ClusterLink?
    /// Where this node's ingested broadcasts are announced as ingested (`http://host:port`).
    let address: @Sendable () -> String
    /// Events of broadcasts live on other nodes, for the extensions connected to this one.
    private let remoteHubs = Mutex<[String: EventHub]>([:])

    init(store: any ServiceStore, logger: Logger, thumbnails: ThumbnailCache, relayTemplate: String? = nil, cluster: ClusterLink? = nil,
         address: @escaping @Sendable () -> String = { "" }) {
        self.store = store
        self.logger = logger
        self.thumbnails = thumbnails
        self.relayTemplate = relayTemplate
        self.cluster = cluster
        self.address = address
    }

    var broadcasts: [LiveBroadcast] {
        live.withLock { Array($0.values) }.sorted { ($0.record.startedAt ?? 0) > ($1.record.startedAt ?? 0) }
    }

    func broadcast(id: String) -> LiveBroadcast? { live.withLock { $0[id] } }

    func startPublishing(app: String, streamKey: String, remoteAddress: String) async -> IngestPublication? {
        do {
            guard let key = try await store.activeStreamKey(streamKey), let user = try await store.user(id: key.userID) else { return nil }
            let now = Date().timeIntervalSince1970
            var record: BroadcastRecord
            if var pending = try await store.pendingBroadcast(streamKeyID: key.id, since: now - 24 * 3600) {
                pending.startedAt = now
                record = pending
                try await store.updateBroadcast(record)
            } else {
                record = BroadcastRecord(id: Token.shortID(), userID: user.id, streamKeyID: key.id, title: "\(user.name)'s broadcast",
                                         application: .desktop, createdAt: now, startedAt: now, endedAt: nil, viewerPeak: 0, likes: 0)
                try await store.insertBroadcast(record)
            }
            let broadcast = LiveBroadcast(record: record, broadcaster: user.name, stream: LiveStream(), cluster: cluster)
            // One live broadcast per key: a new publish replaces a stale one.
            let previous = live.withLock { l -> LiveBroadcast? in
                let previous = l.values.first { $0.record.streamKeyID == key.id }
                if let previous { l[previous.record.id] = nil }
                l[record.id] = broadcast
                return previous
            }
            if let previous { await end(previous) }
            await announce(record.id)
            logger.info("Broadcast live", metadata: ["broadcast": "\(record.id)", "user": "\(user.name)", "peer": "\(remoteAddress)"])
            let relay = relayTemplate.map { $0.replacingOccurrences(of: "{id}", with: record.id).replacingOccurrences(of: "{user}", with: user.name) }
            return IngestPublication(broadcastID: record.id, stream: broadcast.stream, relayURL: relay)
        } catch {
            logger.error("Publish refused: store error", metadata: ["error": "\(error)"])
            return nil
        }
    }

    func stopPublishing(_ publication: IngestPublication) async {
        let broadcast = live.withLock { l -> LiveBroadcast? in
            guard let b = l[publication.broadcastID], b.stream === publication.stream else { return nil }
            l[publication.broadcastID] = nil
            return b
        }
        if let broadcast { await end(broadcast) }
    }

    private func end(_ broadcast: LiveBroadcast) async {
        let record = broadcast.markEnded(at: Date().timeIntervalSince1970)
        broadcast.publish(ServiceEvent(type: "ended"))
        broadcast.events.finishAll()
        broadcast.stream.end()
        thumbnails.forget(record.id)
        if let cluster {
            do { try await cluster.state.withdraw(broadcastID: record.id, node: cluster.node) } catch {
                logger.error("Could not withdraw a broadcast from the shared live state", metadata: ["broadcast": "\(record.id)", "error": "\(error)"])
            }
        }
        do { try await store.updateBroadcast(record) } catch {
            logger.error("Could not record the end of a broadcast", metadata: ["broadcast": "\(record.id)", "error": "\(error)"])
        }
        logger.info("Broadcast ended", metadata: ["broadcast": "\(record.id)", "viewerPeak": "\(record.viewerPeak)", "likes": "\(record.likes)"])
    }

    /// Ends the live broadcast of a revoked stream key; the ingest then disconnects its publisher.
    func endPublishing(streamKeyID: Int64) async {
        let broadcast = live.withLock { l -> LiveBroadcast? in
            guard let b = l.values.first(where: { $0.record.streamKeyID == streamKeyID }) else { return nil }
            l[b.record.id] = nil
            return b
        }
        if let broadcast { await end(broadcast) }
    }

    /// Saves a record that changed while live (likes, application, peak).
    func persist(_ record: BroadcastRecord) async {
        do { try await store.updateBroadcast(record) } catch {
            logger.error("Could not save a broadcast", metadata: ["broadcast": "\(record.id)", "error": "\(error)"])
        }
    }
}

/// A live broadcast as the directory pages and `/api/live` list it: this node's, or another node's.
struct LiveListing: Sendable {
    var record: BroadcastRecord
    var broadcaster: String
    var viewerCount: Int
}

/// The live state shared with the other nodes. Without a cluster (SQLite) the node is alone and every
/// answer is its own.
extension LiveDirectory {
    /// Every live broadcast of the cluster, newest first. This node's come from memory (their counts are
    /// current), the others' from the shared state.
    func listing() async -> [LiveListing] {
        let local = broadcasts.map { LiveListing(record: $0.record, broadcaster: $0.broadcaster, viewerCount: $0.viewerCount) }
        guard let cluster else { return local }
        let shared: [SharedLiveBroadcast]
        do { shared = try await cluster.state.live(at: Date().timeIntervalSince1970) } catch {
            logger.error("Could not read the shared live state; listing this node's broadcasts", metadata: ["error": "\(error)"])
            return local
        }
        let localIDs = Set(local.map(\.record.id))
        let others = shared.filter { !localIDs.contains($0.record.id) }
            .map { LiveListing(record: $0.record, broadcaster: $0.broadcaster, viewerCount: $0.viewers) }
        return (local + others).sorted { ($0.record.startedAt ?? 0) > ($1.record.startedAt ?? 0) }
    }

    /// The event hub of a broadcast live on another node, and its listing; nil if it is live nowhere.
    func subscribeRemote(id: String) async -> (EventHub, LiveListing)? {
        guard let cluster, let shared = try? await cluster.state.live(broadcastID: id, at: Date().timeIntervalSince1970) else { return nil }
        let hub = remoteHubs.withLock { hubs in
            if let hub = hubs[id] { return hub }
            let hub = EventHub()
            hubs[id] = hub
            return hub
        }
        return (hub, LiveListing(record: shared.record, broadcaster: shared.broadcaster, viewerCount: shared.viewers))
    }

    /// Forgets a remote broadcast's hub once nobody here listens to it.
    func releaseRemote(id: String, hub: EventHub) {
        remoteHubs.withLock { hubs in
            if hubs[id] === hub, hub.isEmpty { hubs[id] = nil }
        }
    }

    /// Whether a broadcast this node does not ingest is live on another; if so, asks its ingest node to
    /// apply a comment or a like (it owns them, and publishes the result to every node).
    func forward(_ kind: ClusterMessage.Kind, id: String, user: String, text: String? = nil) async -> Bool {
        guard let cluster, await isLiveElsewhere(id: id) else { return false }
        cluster.send(ClusterMessage(kind: kind, node: cluster.node, broadcast: id, user: user, text: text))
        return true
    }

    func isLiveElsewhere(id: String) async -> Bool { await liveElsewhere(id: id) != nil }

    /// A broadcast live on another node, as the shared state lists it.
    func liveElsewhere(id: String) async -> LiveListing? {
        guard let cluster, let shared = try? await cluster.state.live(broadcastID: id, at: Date().timeIntervalSince1970) else { return nil }
        return LiveListing(record: shared.record, broadcaster: shared.broadcaster, viewerCount: shared.viewers)
    }

    var localViewerCounts: [String: Int] {
        Dictionary(broadcasts.map { ($0.id, $0.viewerCount) }, uniquingKeysWith: { a, _ in a })
    }

    func announce(_ id: String) async {
        guard let cluster, let broadcast = broadcast(id: id) else { return }
        do {
            try await cluster.state.announce(broadcastID: id, node: cluster.node, address: address(), viewers: broadcast.viewerCount,
                                             at: Date().timeIntervalSince1970)
        } catch {
            logger.error("Could not announce a broadcast in the shared live state", metadata: ["broadcast": "\(id)", "error": "\(error)"])
        }
    }

    /// A message from another node: events go to this node's subscribers of that broadcast; comments and
    /// likes are applied here when this node ingests the broadcast.
    func received(_ message: ClusterMessage) async {
        switch message.kind {
        case .event:
            guard let event = message.event, let hub = remoteHubs.withLock({ $0[message.broadcast] }) else { return }
            hub.publish(event)
            if event.type == "ended" {
                remoteHubs.withLock { if $0[message.broadcast] === hub { $0[message.broadcast] = nil } }
                hub.finishAll()
            }
        case .comment:
            guard let broadcast = broadcast(id: message.broadcast), let user = message.user, let text = message.text else { return }
            broadcast.comment(Comment(user: user, text: text, time: Date().timeIntervalSince1970))
        case .like:
            guard let broadcast = broadcast(id: message.broadcast), let user = message.user else { return }
            await persist(broadcast.like(by: user))
        }
    }
}
