import BroadcastStore
import Foundation
import Hummingbird
import NIOCore

/// The pages a browser shows: the directory of what is live, an application's page, a broadcast's page
/// with its player, and the application icons. Who is signed in comes from `SessionMiddleware`.
struct PageRoutes: Sendable {
    typealias Context = ServiceRequestContext
    let web: WebSupport

    func addRoutes(to router: some RouterMethods<Context>) {
        router.get("/") { request, context in try await directoryPage(request, context: context) }
        router.get("/apps/:app") { request, context in
            try await applicationPage(request, context: context, applicationID: WebSupport.pathParameter(context, "app"))
        }
        router.get("/b/:id") { request, context in try await broadcastPage(request, context: context, id: context.parameters.require("id")) }
        router.get("/icons/:app") { _, context in try await icon(WebSupport.pathParameter(context, "app")) }
        router.get("/user-icons/:user/:app") { _, context in
            try await icon(WebSupport.pathParameter(context, "app"), userID: context.parameters.require("user", as: Int64.self))
        }
    }

    // directoryPage and applicationPage: DirectoryPages.swift.

    func broadcastPage(_ request: Request, context: Context, id: String) async throws -> Response {
        let user = context.user
        let csrf = web.csrfToken(request)
        guard let broadcast = web.directory.broadcast(id: id) else {
            guard let record = try await web.store.broadcast(id: id) else { throw HTTPError(.notFound, message: "No such broadcast.") }
            if record.endedAt != nil {
                return web.html(HTML.page(title: record.title, user: user?.name, csrf: csrf.0,
                                          body: "<h1>\(HTML.escape(record.title))</h1><p>This broadcast has ended.</p>"), csrf: csrf)
            }
            // Created, not live yet (its link is out before its first picture): the page waits and plays it then.
            let body = """
            <div id="waiting" data-id="\(HTML.escape(record.id))"><h1>\(HTML.escape(record.title))</h1>
            <p id="status">This broadcast has not started yet. It plays here as soon as it does.</p></div>
            <script src="/static/waiting.js"></script>
            """
            return web.html(HTML.page(title: record.title, user: user?.name, csrf: csrf.0, body: body), csrf: csrf)
        }
        let record = broadcast.record
        let comments = broadcast.comments.map { "<li><b>\(HTML.escape($0.user))</b>\(HTML.escape($0.text))</li>" }.joined()
        let interact = user == nil
            ? "<p><a href=\"/signin\">Sign in</a> to chat and like.</p>"
            : """
              <form id="chat-form"><input name="text" maxlength="\(WebSupport.maximumChatLength)" autocomplete="off" placeholder="Say something">\
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
        return web.html(HTML.page(title: record.title, user: user?.name, csrf: csrf.0, body: body), csrf: csrf)
    }

    /// `/icons/APP`: the operator-verified icon; `/user-icons/USER/APP`: that account's own upload (else the
    /// verified one). Without either, a tile with the application's initial.
    func icon(_ applicationID: String, userID: Int64? = nil) async throws -> Response {
        var png = try await web.store.applicationIcon(applicationID: ApplicationIcons.verifiedKey(applicationID))
        if png == nil, let userID { png = try await web.store.applicationIcon(applicationID: ApplicationIcons.accountKey(applicationID, userID: userID)) }
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
