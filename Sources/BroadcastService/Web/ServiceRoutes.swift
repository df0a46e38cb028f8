import Foundation
import Hummingbird
import HummingbirdWebSocket
import Logging
import NIOCore

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

struct ChatInput: Codable, Sendable { var text: String }

struct CredentialsForm: Decodable, Sendable {
    var name: String
    var password: String
    var csrf: String?
}

struct CSRFForm: Decodable, Sendable {
    var csrf: String?
    var label: String?
}

/// The routes of the web app and the extension API.
struct ServiceRoutes: Sendable {
    typealias Context = ServiceRequestContext

    let directory: LiveDirectory
    let accounts: Accounts
    let configuration: BroadcastServiceConfiguration
    let readiness: Readiness
    let logger: Logger
    var rtmpPort: Int { readiness.rtmpPort ?? configuration.rtmpPort }
    let chatLimiter = RateLimiter(limit: 5, window: 10)
    let likeLimiter = RateLimiter(limit: 10, window: 10)
    /// Accounts made from one client address.
    let signUpLimiter = RateLimiter(limit: 5, window: 3600)
    let csrfTokens = CSRFTokens(secret: CSRFTokens.randomSecret())
    var store: any ServiceStore { directory.store }

    /// Behind HTTPS the cookies are `__Host-` cookies: Secure, Path=/, no Domain, so that no sibling
    /// subdomain can set or shadow them.
    var sessionCookie: String { configuration.secureCookies ? "__Host-ork_session" : "ork_session" }
    var csrfCookie: String { configuration.secureCookies ? "__Host-ork_csrf" : "ork_csrf" }
    static let maximumChatLength = 300
    static let maximumTitleLength = 140
    static let maximumIconBytes = 256 << 10

    func register(on router: Router<Context>) {
        router.add(middleware: OriginCheckMiddleware(secureScheme: configuration.secureCookies, logger: logger))
        router.get("/healthz") { _, _ in "ok" }
        StaticFiles.register(on: router)
        router.get("/icons/:app") { _, context in try await self.icon(Self.pathParameter(context, "app")) }
        router.get("/user-icons/:user/:app") { _, context in
            try await self.icon(Self.pathParameter(context, "app"), userID: context.parameters.require("user", as: Int64.self))
        }
        ThumbnailRoutes.register(on: router, directory: directory)

        // Viewers.
        router.get("/") { request, _ in try await self.directoryPage(request) }
        router.get("/apps/:app") { request, context in try await self.applicationPage(request, applicationID: Self.pathParameter(context, "app")) }
        router.get("/b/:id") { request, context in try await self.broadcastPage(request, id: context.parameters.require("id")) }
        router.post("/b/:id/chat") { request, context in try await self.chat(request, id: context.parameters.require("id")) }
        router.post("/b/:id/like") { request, context in try await self.like(request, id: context.parameters.require("id")) }
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
            if file == "init.mp4" {
                bytes = stream.initSegment
            } else if file.hasPrefix("seg"), file.hasSuffix(".m4s"), let n = Int(file.dropFirst(3).dropLast(4)) {
                bytes = stream.hlsSegment(n)
            } else {
                bytes = nil
            }
            guard let bytes else { throw HTTPError(.notFound) }
            return Response(status: .ok, headers: [.contentType: "video/mp4"], body: .init(byteBuffer: bytes))
        }

        // Accounts.
        router.get("/signup") { request, _ in self.formPage(request, title: "Sign up", action: "/signup", error: nil) }
        router.post("/signup") { request, context in try await self.signUp(request, address: self.clientAddress(request, context)) }
        router.get("/signin") { request, _ in self.formPage(request, title: "Sign in", action: "/signin", error: nil) }
        router.post("/signin") { request, context in try await self.signIn(request, address: self.clientAddress(request, context)) }
        router.post("/signout") { request, _ in try await self.signOut(request) }
        router.get("/account") { request, _ in try await self.accountPage(request) }
        router.post("/account/keys") { request, _ in try await self.createKey(request) }
        router.post("/account/keys/:key/revoke") { request, context in
            try await self.revokeKey(request, keyID: context.parameters.require("key", as: Int64.self))
        }

        // The JSON API.
        router.get("/api/live") { request, _ in
            let broadcasts = directory.broadcasts
            let verified = try await self.verifiedApplications(Set(broadcasts.map { $0.record.application.id }))
            return try Self.json(LiveListJSON(broadcasts: broadcasts.map { self.describe($0, request: request, verified: verified) }))
        }
        router.post("/api/v1/broadcasts") { request, _ in try await self.createBroadcast(request) }
        router.get("/api/v1/broadcasts/:id") { request, context in try await self.getBroadcast(request, id: context.parameters.require("id")) }
        router.put("/api/v1/broadcasts/:id/application") { request, context in
            try await self.changeApplication(request, id: context.parameters.require("id"))
        }
        router.ws("/api/v1/broadcasts/:id/events") { request, context in
            guard let id = context.parameters.get("id"), let key = try await self.apiKey(request),
                  let record = try await store.broadcast(id: id), record.userID == key.userID else {
                await HTTPRequestGuard.answerRefusedUpgrade(on: context.channel, status: 401)
                return .dontUpgrade
            }
            return .upgrade([:])
        } onUpgrade: { inbound, outbound, context in
            guard let id = context.requestContext.parameters.get("id") else { return }
            try await self.serveExtensionEvents(id: id, inbound: inbound, outbound: outbound)
        }
    }

    // MARK: Helpers

    /// A path parameter, percent-decoded (`/apps/%C3%9Cber` is the application `Über`).
    static func pathParameter(_ context: Context, _ name: String) throws -> String {
        let raw = try context.parameters.require(name)
        return raw.removingPercentEncoding ?? raw
    }

    /// The client's address: the peer, or behind the HTTPS proxy the address the proxy appended last to
    /// `X-Forwarded-For`.
    func clientAddress(_ request: Request, _ context: Context) -> String {
        if configuration.secureCookies, let forwarded = request.headers[.init("X-Forwarded-For")!],
           let last = forwarded.split(separator: ",").last?.trimmingCharacters(in: .whitespaces), !last.isEmpty {
            return last
        }
        return context.channel.remoteAddress?.ipAddress ?? "?"
    }

    static func json<T: Encodable>(_ value: T, status: HTTPResponse.Status = .ok) throws -> Response {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return Response(status: status, headers: [.contentType: "application/json"], body: .init(byteBuffer: ByteBuffer(data: try encoder.encode(value))))
    }

    func baseURL(_ request: Request) -> String {
        (configuration.secureCookies ? "https://" : "http://") + (request.head.authority ?? "\(configuration.host):\(configuration.port)")
    }

    func hostName(_ request: Request) -> String {
        let authority = request.head.authority ?? configuration.host
        if authority.hasPrefix("[") { return String(authority.prefix { $0 != "]" }) + "]" }
        return String(authority.prefix { $0 != ":" })
    }

    static func encodedPathSegment(_ text: String) -> String {
        text.addingPercentEncoding(withAllowedCharacters: .urlPathAllowed.subtracting(["/", "%", "?", "#", "+", "&", "=", ";"])) ?? "app"
    }

    /// The icon shown for an application in `userID`'s broadcasts: the operator-verified icon of the
    /// application, else the one that account uploaded (never another account's).
    func iconURL(_ applicationID: String, userID: Int64, verified: Bool, request: Request) -> String {
        baseURL(request) + (verified ? "/icons/" : "/user-icons/\(userID)/") + Self.encodedPathSegment(applicationID)
    }

    /// Which of these applications the operator verified (`broadcast-service app verify`).
    func verifiedApplications(_ ids: Set<String>) async throws -> Set<String> {
        var verified: Set<String> = []
        for id in ids where try await store.applicationIcon(applicationID: ApplicationIcons.verifiedKey(id)) != nil { verified.insert(id) }
        return verified
    }

    func describe(_ broadcast: LiveBroadcast, request: Request, verified: Set<String>) -> LiveBroadcastJSON {
        let record = broadcast.record
        return describe(record, broadcaster: broadcast.broadcaster, viewers: broadcast.viewerCount, live: true, request: request,
                        verified: verified.contains(record.application.id))
    }

    func describe(_ record: BroadcastRecord, broadcaster: String, viewers: Int, live: Bool, request: Request, verified: Bool,
                  withRTMP: Bool = false) -> LiveBroadcastJSON {
        let base = baseURL(request)
        let ws = base.hasPrefix("https://") ? "wss://" + base.dropFirst(8) : "ws://" + base.dropFirst(7)
        return LiveBroadcastJSON(
            id: record.id, title: record.title, broadcaster: broadcaster,
            application: ApplicationJSON(id: record.application.id, name: record.application.name,
                                         iconURL: iconURL(record.application.id, userID: record.userID, verified: verified, request: request),
                                         verified: verified),
            viewerCount: viewers, likes: record.likes, live: live, startedAt: record.startedAt, endedAt: record.endedAt,
            pageURL: "\(base)/b/\(record.id)", hlsURL: "\(base)/hls/\(record.id)/index.m3u8", webSocketURL: "\(ws)/b/\(record.id)/ws",
            eventsURL: "\(ws)/api/v1/broadcasts/\(record.id)/events",
            rtmpURL: withRTMP ? "rtmp://\(hostName(request)):\(rtmpPort)/live" : nil)
    }

    func currentUser(_ request: Request) async throws -> UserRecord? {
        guard let token = request.cookies[sessionCookie]?.value, !token.isEmpty else { return nil }
        return try await store.sessionUser(token: token, now: Date().timeIntervalSince1970)
    }

    /// What this browser's CSRF token is bound to: its session, else the random nonce of its CSRF cookie.
    func csrfBinding(_ request: Request) -> String? {
        if let session = request.cookies[sessionCookie]?.value, !session.isEmpty { return "session/" + session }
        if let nonce = request.cookies[csrfCookie]?.value, nonce.count == 64 { return "nonce/" + nonce }
        return nil
    }

    /// The CSRF token of this browser, and a new nonce to set when it has neither session nor nonce.
    func csrfToken(_ request: Request) -> (String, String?) {
        if let binding = csrfBinding(request) { return (csrfTokens.token(for: binding), nil) }
        let nonce = Token.hex(32)
        return (csrfTokens.token(for: "nonce/" + nonce), nonce)
    }

    func checkCSRF(_ request: Request, submitted: String?) throws {
        guard csrfTokens.check(submitted, binding: csrfBinding(request)) else {
            logger.warning("Request refused: missing or wrong CSRF token", metadata: ["path": "\(request.uri.path)"])
            throw HTTPError(.forbidden, message: "Missing or wrong CSRF token; reload the page and try again.")
        }
    }

    func html(_ body: String, status: HTTPResponse.Status = .ok, csrf: (String, String?)) -> Response {
        var response = Response(status: status, headers: [
            .contentType: "text/html; charset=utf-8",
            .contentSecurityPolicy: "default-src 'self'; img-src 'self' data:; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'",
            .init("X-Content-Type-Options")!: "nosniff",
        ], body: .init(byteBuffer: ByteBuffer(string: body)))
        if let nonce = csrf.1 {
            response.setCookie(Cookie(name: csrfCookie, value: nonce, path: "/", secure: configuration.secureCookies, httpOnly: true, sameSite: .strict))
        }
        return response
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location])
    }

    func form<T: Decodable>(_ request: Request, as type: T.Type) async throws -> T {
        var request = request
        let body = try await request.collectBody(upTo: 16 << 10)
        do {
            return try URLEncodedFormDecoder().decode(T.self, from: String(buffer: body))
        } catch {
            throw HTTPError(.badRequest, message: "Malformed form.")
        }
    }

    // MARK: Pages

    // directoryPage and applicationPage: Web/DirectoryPages.swift.

    func broadcastPage(_ request: Request, id: String) async throws -> Response {
        let user = try await currentUser(request)
        let csrf = csrfToken(request)
        guard let broadcast = directory.broadcast(id: id) else {
            guard let record = try await store.broadcast(id: id) else { throw HTTPError(.notFound, message: "No such broadcast.") }
            let state = record.endedAt != nil ? "This broadcast has ended." : "This broadcast has not started yet."
            return html(HTML.page(title: record.title, user: user?.name, csrf: csrf.0,
                                  body: "<h1>\(HTML.escape(record.title))</h1><p>\(state)</p>"), csrf: csrf)
        }
        let record = broadcast.record
        let comments = broadcast.comments.map { "<li><b>\(HTML.escape($0.user))</b>\(HTML.escape($0.text))</li>" }.joined()
        let interact = user == nil
            ? "<p><a href=\"/signin\">Sign in</a> to chat and like.</p>"
            : """
              <form id="chat-form"><input name="text" maxlength="\(Self.maximumChatLength)" autocomplete="off" placeholder="Say something">\
              <button>Send</button></form>
              """
        let body = """
        <div id="broadcast" data-id="\(HTML.escape(record.id))" data-csrf="\(HTML.escape(csrf.0))" data-user="\(HTML.escape(user?.name ?? ""))">
        <h1 id="title">\(HTML.escape(record.title))</h1>
        <p>by <b id="broadcaster">\(HTML.escape(broadcast.broadcaster))</b> · playing <span id="application">\(HTML.escape(record.application.name))</span>
        · <span id="viewers">\(broadcast.viewerCount)</span> watching · <span id="likes">\(record.likes)</span> likes
        \(user == nil ? "" : "<button id=\"like\">Like</button>")</p>
        <div id="side"><div><video id="video" muted autoplay playsinline controls></video><canvas id="screen" hidden></canvas>
        <button id="sound" hidden>Sound on</button></div>
        <div><ul id="chat">\(comments)</ul>\(interact)</div></div>
        <p id="status"></p></div>
        <script src="/static/player.js"></script>
        """
        return html(HTML.page(title: record.title, user: user?.name, csrf: csrf.0, body: body), csrf: csrf)
    }

    func formPage(_ request: Request, title: String, action: String, error: String?, status: HTTPResponse.Status = .ok) -> Response {
        let csrf = csrfToken(request)
        let body = "<h1>\(HTML.escape(title))</h1>" + HTML.form(action: action, csrf: csrf.0, submit: title,
                                                              fields: [("name", "Name", "text"), ("password", "Password", "password")], error: error)
        return html(HTML.page(title: title, user: nil, csrf: csrf.0, body: body), status: status, csrf: csrf)
    }

    func accountPage(_ request: Request) async throws -> Response {
        guard let user = try await currentUser(request) else { return Self.redirect("/signin") }
        let csrf = csrfToken(request)
        let keys = try await store.streamKeys(userID: user.id)
        let rtmp = "rtmp://\(hostName(request)):\(rtmpPort)/live"
        let rows = keys.map { key in
            key.revokedAt == nil
                ? """
                  <li class="key"><b>\(HTML.escape(key.label))</b> <code>\(HTML.escape(key.key))</code>
                  <form method="post" action="/account/keys/\(key.id)/revoke" class="inline"><input type="hidden" name="csrf" value="\(HTML.escape(csrf.0))"><button>Revoke</button></form></li>
                  """
                : "<li class=\"key revoked\"><b>\(HTML.escape(key.label))</b> revoked</li>"
        }.joined()
        let past = try await store.broadcasts(userID: user.id, limit: 20).map { b in
            "<li><a href=\"/b/\(HTML.escape(b.id))\">\(HTML.escape(b.title))</a> · \(HTML.escape(b.application.name)) · peak \(b.viewerPeak) · \(b.likes) likes</li>"
        }.joined()
        let body = """
        <h1>\(HTML.escape(user.name))</h1>
        <h2>Stream keys</h2><p>Publish to <code>\(HTML.escape(rtmp))/STREAM_KEY</code>.</p><ul id="keys">\(rows)</ul>
        <form method="post" action="/account/keys"><input type="hidden" name="csrf" value="\(HTML.escape(csrf.0))">
        <input name="label" placeholder="Label" maxlength="64"><button>Create a stream key</button></form>
        <h2>Broadcasts</h2><ul id="broadcasts">\(past)</ul>
        """
        return html(HTML.page(title: "Account", user: user.name, csrf: csrf.0, body: body), csrf: csrf)
    }

    // MARK: Account actions

    func sessionResponse(for user: UserRecord) async throws -> Response {
        let token = try await accounts.newSession(for: user)
        var response = Self.redirect("/account")
        response.setCookie(Cookie(name: sessionCookie, value: token, maxAge: Int(Accounts.sessionLifetime), path: "/", secure: configuration.secureCookies, httpOnly: true, sameSite: .lax))
        return response
    }

    func signUp(_ request: Request, address: String) async throws -> Response {
        let form = try await form(request, as: CredentialsForm.self)
        try checkCSRF(request, submitted: form.csrf)
        do {
            try Accounts.validate(name: form.name, password: form.password)
            guard signUpLimiter.allow(address) else {
                logger.notice("Sign-up refused: rate limited", metadata: ["peer": "\(address)"])
                return formPage(request, title: "Sign up", action: "/signup", error: "Too many new accounts from your address; try again later.",
                                status: .tooManyRequests)
            }
            let user = try await accounts.createUser(name: form.name, password: form.password)
            logger.info("Account created", metadata: ["user": "\(user.name)"])
            return try await sessionResponse(for: user)
        } catch let error as Accounts.Failure {
            return formPage(request, title: "Sign up", action: "/signup", error: error.message, status: .badRequest)
        }
    }

    func signIn(_ request: Request, address: String) async throws -> Response {
        let form = try await form(request, as: CredentialsForm.self)
        try checkCSRF(request, submitted: form.csrf)
        do {
            guard let user = try await accounts.signIn(name: form.name, password: form.password, address: address) else {
                logger.notice("Sign-in failed", metadata: ["user": "\(form.name.prefix(32))"])
                return formPage(request, title: "Sign in", action: "/signin", error: "Wrong name or password.", status: .unauthorized)
            }
            return try await sessionResponse(for: user)
        } catch let error as Accounts.Failure {
            logger.warning("Sign-in refused: rate limited", metadata: ["user": "\(form.name.prefix(32))"])
            return formPage(request, title: "Sign in", action: "/signin", error: error.message, status: .tooManyRequests)
        }
    }

    func signOut(_ request: Request) async throws -> Response {
        let form = try await form(request, as: CSRFForm.self)
        try checkCSRF(request, submitted: form.csrf)
        if let token = request.cookies[sessionCookie]?.value { try await store.deleteSession(token: token) }
        var response = Self.redirect("/")
        response.setCookie(Cookie(name: sessionCookie, value: "", maxAge: 0, path: "/", secure: configuration.secureCookies, httpOnly: true, sameSite: .lax))
        return response
    }

    func createKey(_ request: Request) async throws -> Response {
        guard let user = try await currentUser(request) else { throw HTTPError(.unauthorized) }
        let form = try await form(request, as: CSRFForm.self)
        try checkCSRF(request, submitted: form.csrf)
        let label = String((form.label ?? "").trimmingCharacters(in: .whitespacesAndNewlines).prefix(64))
        _ = try await store.createStreamKey(userID: user.id, key: Token.streamKey(), label: label.isEmpty ? "key" : label)
        return Self.redirect("/account")
    }

    func revokeKey(_ request: Request, keyID: Int64) async throws -> Response {
        guard let user = try await currentUser(request) else { throw HTTPError(.unauthorized) }
        let form = try await form(request, as: CSRFForm.self)
        try checkCSRF(request, submitted: form.csrf)
        if try await store.revokeStreamKey(id: keyID, userID: user.id, at: Date().timeIntervalSince1970) {
            // Refused everywhere at once: its live publish (and the extension's events) end now.
            await directory.endPublishing(streamKeyID: keyID)
        }
        return Self.redirect("/account")
    }

    // MARK: Chat and likes

    func signedInViewer(_ request: Request) async throws -> UserRecord {
        guard let user = try await currentUser(request) else { throw HTTPError(.unauthorized, message: "Sign in to chat and like.") }
        try checkCSRF(request, submitted: request.headers[.init("X-CSRF-Token")!])
        return user
    }

    func chat(_ request: Request, id: String) async throws -> Response {
        let user = try await signedInViewer(request)
        guard let broadcast = directory.broadcast(id: id) else { throw HTTPError(.notFound, message: "The broadcast is not live.") }
        var request = request
        let body = try await request.collectBody(upTo: 4 << 10)
        guard let input = try? JSONDecoder().decode(ChatInput.self, from: Data(buffer: body)) else { throw HTTPError(.badRequest, message: "Expected {\"text\": …}.") }
        let text = input.text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !text.isEmpty else { throw HTTPError(.badRequest, message: "Empty message.") }
        guard text.count <= Self.maximumChatLength else { throw HTTPError(.contentTooLarge, message: "At most \(Self.maximumChatLength) characters.") }
        guard chatLimiter.allow("\(user.id)") else {
            logger.notice("Chat refused: rate limited", metadata: ["user": "\(user.name)"])
            throw HTTPError(.tooManyRequests, message: "Slow down.")
        }
        broadcast.comment(Comment(user: user.name, text: text, time: Date().timeIntervalSince1970))
        return Response(status: .noContent)
    }

    func like(_ request: Request, id: String) async throws -> Response {
        let user = try await signedInViewer(request)
        guard let broadcast = directory.broadcast(id: id) else { throw HTTPError(.notFound, message: "The broadcast is not live.") }
        guard likeLimiter.allow("\(user.id)") else { throw HTTPError(.tooManyRequests, message: "Slow down.") }
        await directory.persist(broadcast.like(by: user.name))
        return Response(status: .noContent)
    }

    // MARK: WebSockets

    /// A viewer's WebSocket: media and events are written straight to its channel by the broadcast's
    /// `LiveStream` (framed once for all viewers); this task only reads the viewer's frames (pongs, the
    /// close) until the viewer leaves, the broadcast ends, or the viewer is dropped for falling behind.
    static func serveViewer(_ broadcast: LiveBroadcast, channel: any Channel, inbound: WebSocketInboundStream,
                            outbound: WebSocketOutboundWriter) async throws {
        let viewer = try await WebSocketViewer(channel: channel, maximumLag: broadcast.stream.maximumViewerLag)
        let count = broadcast.viewerJoined()
        try await outbound.write(.text(Self.eventText(ServiceEvent(type: "viewers", viewerCount: count, likes: broadcast.record.likes))))
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

    static func eventText(_ event: ServiceEvent) -> String {
        (try? JSONEncoder().encode(event)).flatMap { String(data: $0, encoding: .utf8) } ?? "{}"
    }

    func serveExtensionEvents(id: String, inbound: WebSocketInboundStream, outbound: WebSocketOutboundWriter) async throws {
        // The extension may connect just before its RTMP publish starts: wait up to 15 s for it.
        var broadcast = directory.broadcast(id: id)
        for _ in 0..<150 where broadcast == nil {
            try await Task.sleep(for: .milliseconds(100))
            broadcast = directory.broadcast(id: id)
        }
        guard let broadcast else {
            try await outbound.write(.text(Self.eventText(ServiceEvent(type: "ended"))))
            return
        }
        let (eventsID, events) = broadcast.events.subscribe()
        defer { broadcast.events.unsubscribe(eventsID) }
        try await outbound.write(.text(Self.eventText(ServiceEvent(type: "viewers", viewerCount: broadcast.viewerCount, likes: broadcast.record.likes))))
        try await withThrowingTaskGroup(of: Void.self) { group in
            group.addTask { for await event in events { try await outbound.write(.text(event)) } }
            group.addTask { for try await _ in inbound {} }
            _ = try await group.next()
            group.cancelAll()
        }
    }

    // MARK: Extension API

    func apiKey(_ request: Request) async throws -> StreamKeyRecord? {
        var token = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        // `?token=` only where a browser cannot set the header: WebSocket upgrades.
        if token == nil, request.headers[.upgrade]?.lowercased() == "websocket", let query = request.uri.queryParameters["token"] {
            token = String(query)
        }
        guard let token, !token.isEmpty else { return nil }
        return try await store.activeStreamKey(token)
    }

    func requireAPIKey(_ request: Request) async throws -> StreamKeyRecord {
        guard let key = try await apiKey(request) else {
            logger.notice("API request refused: missing, unknown or revoked token", metadata: ["path": "\(request.uri.path)"])
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
            guard let png = Data(base64Encoded: base64), png.count <= Self.maximumIconBytes,
                  png.starts(with: [0x89, 0x50, 0x4E, 0x47, 0x0D, 0x0A, 0x1A, 0x0A]) else {
                throw HTTPError(.badRequest, message: "application.iconPNG must be a base64 PNG of at most 256 KB.")
            }
            try await store.saveApplicationIcon(applicationID: ApplicationIcons.accountKey(id, userID: userID), png: [UInt8](png))
        }
        return ApplicationInfo(id: id, name: name)
    }

    func decodeJSON<T: Decodable>(_ request: Request, as type: T.Type) async throws -> T {
        var request = request
        let body = try await request.collectBody(upTo: 512 << 10)
        do { return try JSONDecoder().decode(T.self, from: Data(buffer: body)) } catch {
            throw HTTPError(.badRequest, message: "Malformed JSON: \(Self.shortReason(error))")
        }
    }

    func createBroadcast(_ request: Request) async throws -> Response {
        let key = try await requireAPIKey(request)
        let input = try await decodeJSON(request, as: CreateBroadcastInput.self)
        let title = input.title.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !title.isEmpty else { throw HTTPError(.badRequest, message: "A title is required.") }
        guard title.count <= Self.maximumTitleLength else {
            throw HTTPError(.badRequest, message: "A title has at most \(Self.maximumTitleLength) characters.")
        }
        var application = ApplicationInfo.desktop
        if let given = input.application { application = try await applicationInfo(given, userID: key.userID) }
        let verified = try await verifiedApplications([application.id]).contains(application.id)
        guard let user = try await store.user(id: key.userID) else { throw HTTPError(.unauthorized) }
        // Publishing already with this key: this describes the live broadcast.
        if let live = directory.broadcasts.first(where: { $0.record.streamKeyID == key.id }) {
            live.setTitle(title)
            let record = live.setApplication(application, iconURL: iconURL(application.id, userID: key.userID, verified: verified, request: request))
            await directory.persist(record)
            return try Self.json(describe(record, broadcaster: user.name, viewers: live.viewerCount, live: true, request: request, verified: verified,
                                          withRTMP: true), status: .created)
        }
        let record = BroadcastRecord(id: Token.shortID(), userID: key.userID, streamKeyID: key.id, title: title, application: application,
                                     createdAt: Date().timeIntervalSince1970, startedAt: nil, endedAt: nil, viewerPeak: 0, likes: 0)
        try await store.insertBroadcast(record)
        logger.info("Broadcast created", metadata: ["broadcast": "\(record.id)", "application": "\(application.id)"])
        return try Self.json(describe(record, broadcaster: user.name, viewers: 0, live: false, request: request, verified: verified, withRTMP: true),
                             status: .created)
    }

    func getBroadcast(_ request: Request, id: String) async throws -> Response {
        if let live = directory.broadcast(id: id) {
            return try Self.json(describe(live, request: request, verified: try await verifiedApplications([live.record.application.id])))
        }
        guard let record = try await store.broadcast(id: id), let user = try await store.user(id: record.userID) else {
            throw HTTPError(.notFound, message: "No such broadcast.")
        }
        let verified = try await verifiedApplications([record.application.id]).contains(record.application.id)
        return try Self.json(describe(record, broadcaster: user.name, viewers: 0, live: false, request: request, verified: verified))
    }

    func changeApplication(_ request: Request, id: String) async throws -> Response {
        let key = try await requireAPIKey(request)
        guard var record = try await store.broadcast(id: id), record.userID == key.userID else { throw HTTPError(.notFound, message: "No such broadcast.") }
        let application = try await applicationInfo(try await decodeJSON(request, as: ApplicationInput.self), userID: key.userID)
        if let live = directory.broadcast(id: id) {
            let verified = try await verifiedApplications([application.id]).contains(application.id)
            record = live.setApplication(application, iconURL: iconURL(application.id, userID: key.userID, verified: verified, request: request))
        } else {
            record.application = application
        }
        await directory.persist(record)
        return try await getBroadcast(request, id: id)
    }

    /// `/icons/APP`: the operator-verified icon; `/user-icons/USER/APP`: that account's own upload (else the
    /// verified one). Without either, a tile with the application's initial.
    func icon(_ applicationID: String, userID: Int64? = nil) async throws -> Response {
        var png = try await store.applicationIcon(applicationID: ApplicationIcons.verifiedKey(applicationID))
        if png == nil, let userID { png = try await store.applicationIcon(applicationID: ApplicationIcons.accountKey(applicationID, userID: userID)) }
        if let png {
            return Response(status: .ok, headers: [.contentType: "image/png", .cacheControl: "max-age=60", .init("X-Content-Type-Options")!: "nosniff"], body: .init(byteBuffer: ByteBuffer(bytes: png)))
        }
        // No icon uploaded: a plain tile with the application's initial.
        let initial = HTML.escape(String(applicationID.split(separator: ".").last?.first ?? "?").uppercased())
        let svg = """
        <svg xmlns="http://www.w3.org/2000/svg" width="64" height="64"><rect width="64" height="64" rx="12" fill="#456"/>\
        <text x="32" y="44" font-size="32" text-anchor="middle" fill="#fff" font-family="sans-serif">\(initial)</text></svg>
        """
        return Response(status: .ok, headers: [.contentType: "image/svg+xml", .cacheControl: "max-age=60",
                                                          .contentSecurityPolicy: "default-src 'none'; style-src 'unsafe-inline'"], body: .init(byteBuffer: ByteBuffer(string: svg)))
    }
}
