import BroadcastStore
import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging

/// JSON shapes of the HTTP API (docs/SERVICE-API.md).
struct LiveBroadcastJSON: Codable, Sendable {
    var id: String
    var title: String
    var broadcaster: String
    var application: ApplicationJSON
    var viewerCount: Int
    var likes: Int
    var live: Bool
    var startedAt: Double?
    var endedAt: Double?
    var pageURL: String
    var hlsURL: String
    var webSocketURL: String
    var eventsURL: String
    var rtmpURL: String?
}

struct LiveListJSON: Codable, Sendable { var broadcasts: [LiveBroadcastJSON] }

/// The JSON API: what is live (public), and for a broadcasting extension, authenticated by its stream key
/// (`StreamKeyMiddleware`), creating and describing its broadcast and its events' WebSocket.
struct APIRoutes: Sendable {
    typealias Context = ServiceRequestContext
    let web: WebSupport

    struct ApplicationInput: Codable, Sendable {
        var id: String
        var name: String
        /// The application's icon, PNG, base64.
        var iconPNG: String?
    }

    struct CreateBroadcastInput: Codable, Sendable {
        var title: String
        var application: ApplicationInput?
    }

    /// `POST /api/v1/signin`: what a setup extension sends, the account's name and password and a label
    /// for the key it gets.
    struct SignInInput: Codable, Sendable {
        var account: String
        var password: String
        var label: String?
    }

    struct SignInAnswer: Codable, Sendable {
        var streamKey: String
        var account: String
        var label: String
        var rtmpURL: String
    }

    func addRoutes(to router: some RouterMethods<Context>) {
        // No cookie, so no CSRF token: a browser elsewhere is still refused by `OriginCheckMiddleware`.
        router.post("/api/v1/signin") { request, context in try await signIn(request, address: web.clientAddress(request, context)) }
        router.get("/api/live") { request, _ in
            let broadcasts = await web.directory.listing()
            let verified = try await web.verifiedApplications(Set(broadcasts.map { $0.record.application.id }))
            return try WebSupport.json(LiveListJSON(broadcasts: broadcasts.map { web.describe($0, request: request, verified: verified) }))
        }
        router.get("/api/v1/broadcasts/:id") { request, context in try await getBroadcast(request, id: context.parameters.require("id")) }

        let extensions = router.group("/api/v1/broadcasts").add(middleware: StreamKeyMiddleware(web: web))
        extensions.post { request, context in try await createBroadcast(request, key: requireStreamKey(request, context)) }
        extensions.put(":id/application") { request, context in
            try await changeApplication(request, id: context.parameters.require("id"), key: requireStreamKey(request, context))
        }
        extensions.ws(":id/events") { _, context in
            guard let id = context.parameters.get("id"), let key = context.streamKey,
                  let record = try await web.store.broadcast(id: id), record.userID == key.userID else {
                await HTTPRequestGuard.answerRefusedUpgrade(on: context.channel, status: 401)
                return .dontUpgrade
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            guard let id = context.requestContext.parameters.get("id") else { return }
            try await serveExtensionEvents(id: id, inbound: inbound, outbound: outbound)
        }
    }

    /// Account and password → a new stream key labelled for the extension (`201`); a wrong name or password
    /// `401`; throttled exactly as the page's sign-in (one `LoginThrottle` for both, by account and client
    /// address) `429` with `Retry-After`. Neither the password nor the key is logged.
    func signIn(_ request: Request, address: String) async throws -> Response {
        let input = try await WebSupport.decodeJSON(request, as: SignInInput.self)
        let name = String(input.account.prefix(64))
        let user: UserRecord?
        do {
            user = try await web.accounts.signIn(name: name, password: input.password, address: address)
        } catch let error as Accounts.Failure {
            web.logger.warning("API sign-in refused: rate limited", metadata: ["user": "\(name.prefix(32))", "peer": "\(address)"])
            throw HTTPError(.tooManyRequests, headers: [.retryAfter: "\(error.retryAfter ?? 60)"], message: error.message)
        }
        guard let user else {
            web.logger.notice("API sign-in failed", metadata: ["user": "\(name.prefix(32))", "peer": "\(address)"])
            throw HTTPError(.unauthorized, message: "Wrong account or password.")
        }
        let given = (input.label ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        let label = given.isEmpty ? "extension" : String(given.prefix(64))
        let key = try await web.store.createStreamKey(userID: user.id, key: Token.streamKey(), label: label)
        web.logger.info("Stream key created by API sign-in", metadata: ["user": "\(user.name)", "keyID": "\(key.id)"])
        return try WebSupport.json(SignInAnswer(streamKey: key.key, account: user.name, label: key.label,
                                                rtmpURL: "rtmp://\(web.hostName(request)):\(web.rtmpPort)/live"), status: .created)
    }

    func requireStreamKey(_ request: Request, _ context: Context) throws -> StreamKeyRecord {
        guard let key = context.streamKey else {
            web.logger.notice("API request refused: missing, unknown or revoked token", metadata: ["path": "\(request.uri.path)"])
            throw HTTPError(.unauthorized, message: "Authorization: Bearer STREAM_KEY required.")
        }
        return key
    }

    /// The application of a broadcast of `userID`; an icon it brings is that account's icon for it.
    func applicationInfo(_ input: ApplicationInput, userID: Int64) async throws -> ApplicationInfo {
        let id = input.id.trimmingCharacters(in: .whitespacesAndNewlines)
        let name = input.name.trimmingCharacters(in: .whitespacesAndNewlines)
        guard (1...200).contains(id.count), (1...100).contains(name.count), !id.contains("/") else {
            throw HTTPError(.badRequest, message: "application.id (1–200 characters, no '/') and application.name (1–100) are required.")
        }
        if let base64 = input.iconPNG {
            guard let png = Data(base64Encoded: base64), png.count <= ApplicationIcons.maximumBytes,
                  png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
                throw HTTPError(.badRequest, message: "application.iconPNG must be a base64 PNG of at most 256 KB.")
            }
            try await web.store.saveApplicationIcon(applicationID: ApplicationIcons.accountKey(id, userID: userID), png: [UInt8](png))
        }
        return ApplicationInfo(id: id, name: name)
    }

    func createBroadcast(_ request: Request, key: StreamKeyRecord) async throws -> Response {
        let input = try await WebSupport.decodeJSON(request, as: CreateBroadcastInput.self)
        let title = input.title.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !title.isEmpty else { throw HTTPError(.badRequest, message: "A title is required.") }
        guard title.count <= WebSupport.maximumTitleLength else {
            throw HTTPError(.badRequest, message: "A title has at most \(WebSupport.maximumTitleLength) characters.")
        }
        var application = ApplicationInfo.desktop
        if let given = input.application { application = try await applicationInfo(given, userID: key.userID) }
        let verified = try await web.verifiedApplications([application.id]).contains(application.id)
        guard let user = try await web.store.user(id: key.userID) else { throw HTTPError(.unauthorized) }
        // Publishing already with this key: this describes the live broadcast.
        if let live = web.directory.broadcasts.first(where: { $0.record.streamKeyID == key.id }) {
            live.setTitle(title)
            let record = live.setApplication(application, iconURL: web.iconURL(application.id, userID: key.userID, verified: verified, request: request))
            await web.directory.persist(record)
            return try WebSupport.json(web.describe(record, broadcaster: user.name, viewers: live.viewerCount, live: true, request: request,
                                                   verified: verified, withRTMP: true), status: .created)
        }
        let record = BroadcastRecord(id: Token.shortID(), userID: key.userID, streamKeyID: key.id, title: title, application: application,
                                     createdAt: Date().timeIntervalSince1970, startedAt: nil, endedAt: nil, viewerPeak: 0, likes: 0)
        try await web.store.insertBroadcast(record)
        web.logger.info("Broadcast created", metadata: ["broadcast": "\(record.id)", "application": "\(application.id)"])
        return try WebSupport.json(web.describe(record, broadcaster: user.name, viewers: 0, live: false, request: request, verified: verified,
                                               withRTMP: true), status: .created)
    }

    func getBroadcast(_ request: Request, id: String) async throws -> Response {
        if let live = web.directory.broadcast(id: id) {
            return try WebSupport.json(web.describe(live.listing, request: request, verified: try await web.verifiedApplications([live.record.application.id])))
        }
        if let live = await web.directory.liveElsewhere(id: id) {
            return try WebSupport.json(web.describe(live, request: request, verified: try await web.verifiedApplications([live.record.application.id])))
        }
        guard let record = try await web.store.broadcast(id: id), let user = try await web.store.user(id: record.userID) else {
            throw HTTPError(.notFound, message: "No such broadcast.")
        }
        let verified = try await web.verifiedApplications([record.application.id]).contains(record.application.id)
        return try WebSupport.json(web.describe(record, broadcaster: user.name, viewers: 0, live: false, request: request, verified: verified))
    }

    func changeApplication(_ request: Request, id: String, key: StreamKeyRecord) async throws -> Response {
        guard var record = try await web.store.broadcast(id: id), record.userID == key.userID else { throw HTTPError(.notFound, message: "No such broadcast.") }
        let application = try await applicationInfo(try await WebSupport.decodeJSON(request, as: ApplicationInput.self), userID: key.userID)
        if let live = web.directory.broadcast(id: id) {
            let verified = try await web.verifiedApplications([application.id]).contains(application.id)
            record = live.setApplication(application, iconURL: web.iconURL(application.id, userID: key.userID, verified: verified, request: request))
        } else {
            record.application = application
        }
        await web.directory.persist(record)
        return try await getBroadcast(request, id: id)
    }

    func serveExtensionEvents(id: String, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        // The extension may connect just before its RTMP publish starts: wait up to 15 s for it.
        var broadcast = web.directory.broadcast(id: id)
        var remote: (EventHub, LiveListing)?
        for attempt in 0..<150 where broadcast == nil {
            // Live on another node (asked every 0.5 s): its events come through the cluster's channel.
            if attempt % 5 == 0, let found = await web.directory.subscribeRemote(id: id) {
                remote = found
                break
            }
            try await Task.sleep(for: .milliseconds(100))
            broadcast = web.directory.broadcast(id: id)
        }
        if let (hub, listing) = remote {
            let (eventsID, events) = hub.subscribe()
            defer {
                hub.unsubscribe(eventsID)
                web.directory.releaseRemote(id: id, hub: hub)
            }
            try await outbound.write(.text(ServiceEvent.text(ServiceEvent(type: "viewers", viewerCount: listing.viewerCount, likes: listing.record.likes))))
            try await Self.forward(events, inbound: inbound, outbound: outbound)
            return
        }
        guard let broadcast else {
            try await outbound.write(.text(ServiceEvent.text(ServiceEvent(type: "ended"))))
            return
        }
        let (eventsID, events) = broadcast.events.subscribe()
        defer { broadcast.events.unsubscribe(eventsID) }
        try await outbound.write(.text(ServiceEvent.text(ServiceEvent(type: "viewers", viewerCount: broadcast.viewerCount, likes: broadcast.record.likes))))
        try await Self.forward(events, inbound: inbound, outbound: outbound)
    }

    /// Writes `events` to the extension until they end or the extension closes its socket.
    static func forward(_ events: AsyncStream<String>, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for await event in events { try await outbound.write(.text(event)) } }
            group.addTask { for try await _ in inbound {} }
            _ = try await group.next()
            group.cancelAll()
        }
    }
}
