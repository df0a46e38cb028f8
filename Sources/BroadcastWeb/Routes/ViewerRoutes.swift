import BroadcastMedia
import BroadcastStore
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

/// What a viewer of a live broadcast uses: its WebSocket (media and events), its HLS playlist and
/// segments, and, signed in and with the page's CSRF token, chat and likes.
struct ViewerRoutes: Sendable {
    typealias Context = ServiceRequestContext
    let web: WebSupport
    let chatLimiter = RateLimiter(limit: 5, window: 10)
    let likeLimiter = RateLimiter(limit: 10, window: 10)

    struct ChatInput: Codable, Sendable { var text: String }

    func addRoutes(to router: some RouterMethods<Context>) {
        let directory = web.directory
        router.ws("/b/:id/ws") { _, context in
            guard let id = context.parameters.get("id"), directory.broadcast(id: id) != nil else { return .dontUpgrade }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            guard let id = context.requestContext.parameters.get("id"), let broadcast = directory.broadcast(id: id) else { return }
            try await Self.serveViewer(broadcast, channel: context.requestContext.channel, inbound: inbound, outbound: outbound)
        }
        router.get("/hls/:id/index.m3u8") { _, context in
            guard let playlist = directory.broadcast(id: try context.parameters.require("id"))?.stream.hlsPlaylist() else {
                throw HTTPError(.notFound, message: "No HLS playlist yet")
            }
            return Response(status: .ok, headers: [.contentType: "application/vnd.apple.mpegurl", .cacheControl: "no-cache"],
                            body: .init(byteBuffer: ByteBuffer(string: playlist)))
        }
        router.get("/hls/:id/:file") { _, context in
            guard let stream = directory.broadcast(id: try context.parameters.require("id"))?.stream else { throw HTTPError(.notFound) }
            let file = try context.parameters.require("file")
            let bytes: ByteBuffer?
            if file == "init.mp4" || (file.hasPrefix("init-") && file.hasSuffix(".mp4")) {
                bytes = stream.initSegment
            } else if file.hasPrefix("seg"), file.hasSuffix(".m4s"), let n = Int(file.dropFirst(3).dropLast(4)) {
                bytes = stream.hlsSegment(n)
            } else {
                bytes = nil
            }
            guard let bytes else { throw HTTPError(.notFound) }
            return Response(status: .ok, headers: [.contentType: "video/mp4"], body: .init(byteBuffer: bytes))
        }

        let interaction = router.group("/b/:id")
            .add(middleware: SignedInMiddleware(message: "Sign in to chat and like."))
            .add(middleware: CSRFMiddleware(web: web))
        interaction.post("chat") { request, context in try await chat(request, id: context.parameters.require("id"), user: context.requireUser()) }
        interaction.post("like") { _, context in try await like(id: context.parameters.require("id"), user: context.requireUser()) }
    }

    func chat(_ request: Request, id: String, user: UserRecord) async throws -> Response {
        let broadcast = web.directory.broadcast(id: id)
        if broadcast == nil, await !web.directory.isLiveElsewhere(id: id) { throw HTTPError(.notFound, message: "The broadcast is not live.") }
        var request = request
        let body = try await request.collectBody(upTo: 4 << 10)
        guard let input = try? JSONDecoder().decode(ChatInput.self, from: Data(buffer: body)) else { throw HTTPError(.badRequest, message: "Expected {\"text\": …}.") }
        let text = input.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw HTTPError(.badRequest, message: "Empty message.") }
        guard text.count <= WebSupport.maximumChatLength else {
            throw HTTPError(.contentTooLarge, message: "At most \(WebSupport.maximumChatLength) characters.")
        }
        guard chatLimiter.allow("\(user.id)") else {
            web.logger.notice("Chat refused: rate limited", metadata: ["user": "\(user.name)"])
            throw HTTPError(.tooManyRequests, message: "Slow down.")
        }
        if let broadcast {
            broadcast.comment(Comment(user: user.name, text: text, time: Date().timeIntervalSince1970))
        } else {
            // Live on another node, which owns its chat: it publishes the line to every node.
            guard await web.directory.forward(.comment, id: id, user: user.name, text: text) else {
                throw HTTPError(.notFound, message: "The broadcast is not live.")
            }
        }
        return Response(status: .noContent)
    }

    func like(id: String, user: UserRecord) async throws -> Response {
        let broadcast = web.directory.broadcast(id: id)
        if broadcast == nil, await !web.directory.isLiveElsewhere(id: id) { throw HTTPError(.notFound, message: "The broadcast is not live.") }
        guard likeLimiter.allow("\(user.id)") else { throw HTTPError(.tooManyRequests, message: "Slow down.") }
        guard let broadcast else {
            _ = await web.directory.forward(.like, id: id, user: user.name)
            return Response(status: .noContent)
        }
        await web.directory.persist(broadcast.like(by: user.name))
        return Response(status: .noContent)
    }

    /// A viewer's WebSocket: media and events are written straight to its channel by the broadcast's
    /// `LiveStream` (framed once for all viewers); this task only reads the viewer's frames (pongs, the
    /// close) until the viewer leaves, the broadcast ends, or the viewer is dropped for falling behind.
    static func serveViewer(_ broadcast: LiveBroadcast, channel: any Channel, inbound: WebSocketInboundStream,
                            outbound: WebSocketOutboundWriter) async throws {
        let viewer = try await WebSocketViewer(channel: channel, maximumLag: broadcast.stream.maximumViewerLag)
        let count = broadcast.viewerJoined()
        try await outbound.write(.text(ServiceEvent.text(ServiceEvent(type: "viewers", viewerCount: count, likes: broadcast.record.likes))))
        let id = broadcast.stream.subscribe(viewer)
        defer {
            broadcast.stream.unsubscribe(id)
            broadcast.viewerLeft()
        }
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { await viewer.waitUntilFinished() }
            group.addTask { for try await _ in inbound {} }
            _ = try await group.next()
            group.cancelAll()
        }
    }
}

extension ServiceEvent {
    /// The event as the JSON text of a WebSocket message.
    static func text(_ event: ServiceEvent) -> String {
        (try? JSONEncoder().encode(event)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
    }
}
