import BroadcastStore
import Foundation
import Hummingbird
import Logging

/// Accounts and stream keys: sign-up, sign-in and sign-out, the account page, creating and revoking keys.
/// Every form carries the browser's CSRF token (`CSRFMiddleware`); keys need a signed-in account.
struct AccountRoutes: Sendable {
    typealias Context = ServiceRequestContext
    let web: WebSupport
    /// Accounts made from one client address.
    let signUpLimiter = RateLimiter(limit: 5, window: 3600)

    struct CredentialsForm: Decodable, Sendable {
        var name: String
        var password: String
    }

    struct KeyForm: Decodable, Sendable {
        var label: String?
    }

    func addRoutes(to router: some RouterMethods<Context>) {
        router.get("/signup") { request, _ in formPage(request, title: "Sign up", action: "/signup", error: nil) }
        router.get("/signin") { request, _ in formPage(request, title: "Sign in", action: "/signin", error: nil) }
        router.get("/account") { request, context in try await accountPage(request, context: context) }

        let forms = router.group().add(middleware: CSRFMiddleware(web: web))
        forms.post("/signup") { request, context in try await signUp(request, address: web.clientAddress(request, context)) }
        forms.post("/signin") { request, context in try await signIn(request, address: web.clientAddress(request, context)) }
        forms.post("/signout") { request, _ in try await signOut(request) }

        let keys = router.group("/account/keys")
            .add(middleware: SignedInMiddleware(message: "Sign in to manage stream keys."))
            .add(middleware: CSRFMiddleware(web: web))
        keys.post { request, context in try await createKey(request, user: context.requireUser()) }
        keys.post(":key/revoke") { _, context in
            try await revokeKey(context.parameters.require("key", as: Int64.self), user: context.requireUser())
        }
    }

    // MARK: Pages

    func formPage(_ request: Request, title: String, action: String, error: String?, status: HTTPResponse.Status = .ok) -> Response {
        let csrf = web.csrfToken(request)
        let body = "<h1>\(HTML.escape(title))</h1>" + HTML.form(action: action, csrf: csrf.0, submit: title,
                                                              fields: [("name", "Name", "text"), ("password", "Password", "password")], error: error)
        return web.html(HTML.page(title: title, user: nil, csrf: csrf.0, body: body), status: status, csrf: csrf)
    }

    func accountPage(_ request: Request, context: Context) async throws -> Response {
        guard let user = context.user else { return WebSupport.redirect("/signin") }
        let csrf = web.csrfToken(request)
        let keys = try await web.store.streamKeys(userID: user.id)
        let rtmp = "rtmp://\(web.hostName(request)):\(web.rtmpPort)/live"
        let rows = keys.map { key in
            key.revokedAt == nil
                ? """
                  <li class="key"><b>\(HTML.escape(key.label))</b> <code>\(HTML.escape(key.key))</code>
                  <form method="post" action="/account/keys/\(key.id)/revoke" class="inline"><input type="hidden" name="csrf" value="\(HTML.escape(csrf.0))"><button>Revoke</button></form></li>
                  """
                : "<li class=\"key revoked\"><b>\(HTML.escape(key.label))</b> revoked</li>"
        }.joined()
        let past = try await web.store.broadcasts(userID: user.id, limit: 20).map { b in
            "<li><a href=\"/b/\(HTML.escape(b.id))\">\(HTML.escape(b.title))</a> · \(HTML.escape(b.application.name)) · peak \(b.viewerPeak) · \(b.likes) likes</li>"
        }.joined()
        let body = """
        <h1>\(HTML.escape(user.name))</h1>
        <h2>Stream keys</h2><p>Publish to <code>\(HTML.escape(rtmp))/STREAM_KEY</code>.</p><ul id="keys">\(rows)</ul>
        <form method="post" action="/account/keys"><input type="hidden" name="csrf" value="\(HTML.escape(csrf.0))">
        <input name="label" placeholder="Label" maxlength="64"><button>Create a stream key</button></form>
        <h2>Broadcasts</h2><ul id="broadcasts">\(past)</ul>
        """
        return web.html(HTML.page(title: "Account", user: user.name, csrf: csrf.0, body: body), csrf: csrf)
    }

    // MARK: Actions

    func sessionResponse(for user: UserRecord) async throws -> Response {
        let token = try await web.accounts.newSession(for: user)
        var response = WebSupport.redirect("/account")
        response.setCookie(Cookie(name: web.sessionCookie, value: token, maxAge: Int(Accounts.sessionLifetime), path: "/",
                                  secure: web.settings.secureCookies, httpOnly: true, sameSite: .lax))
        return response
    }

    func signUp(_ request: Request, address: String) async throws -> Response {
        let form = try await WebSupport.form(request, as: CredentialsForm.self)
        do {
            try Accounts.validate(name: form.name, password: form.password)
            guard signUpLimiter.allow(address) else {
                web.logger.notice("Sign-up refused: rate limited", metadata: ["peer": "\(address)"])
                return formPage(request, title: "Sign up", action: "/signup", error: "Too many new accounts from your address; try again later.",
                                status: .tooManyRequests)
            }
            let user = try await web.accounts.createUser(name: form.name, password: form.password)
            web.logger.info("Account created", metadata: ["user": "\(user.name)"])
            return try await sessionResponse(for: user)
        } catch let error as Accounts.Failure {
            return formPage(request, title: "Sign up", action: "/signup", error: error.message, status: .badRequest)
        }
    }

    func signIn(_ request: Request, address: String) async throws -> Response {
        let form = try await WebSupport.form(request, as: CredentialsForm.self)
        do {
            guard let user = try await web.accounts.signIn(name: form.name, password: form.password, address: address) else {
                web.logger.notice("Sign-in failed", metadata: ["user": "\(form.name.prefix(32))"])
                return formPage(request, title: "Sign in", action: "/signin", error: "Wrong name or password.", status: .unauthorized)
            }
            return try await sessionResponse(for: user)
        } catch let error as Accounts.Failure {
            web.logger.warning("Sign-in refused: rate limited", metadata: ["user": "\(form.name.prefix(32))"])
            var response = formPage(request, title: "Sign in", action: "/signin", error: error.message, status: .tooManyRequests)
            if let seconds = error.retryAfter { response.headers[.retryAfter] = "\(seconds)" }
            return response
        }
    }

    func signOut(_ request: Request) async throws -> Response {
        if let token = request.cookies[web.sessionCookie]?.value { try await web.store.deleteSession(digest: Token.digest(token)) }
        var response = WebSupport.redirect("/")
        response.setCookie(Cookie(name: web.sessionCookie, value: "", maxAge: 0, path: "/", secure: web.settings.secureCookies, httpOnly: true, sameSite: .lax))
        return response
    }

    func createKey(_ request: Request, user: UserRecord) async throws -> Response {
        let form = try await WebSupport.form(request, as: KeyForm.self)
        let label = String((form.label ?? "").trimmingCharacters(in: .whitespacesAndNewlines).prefix(64))
        _ = try await web.store.createStreamKey(userID: user.id, key: Token.streamKey(), label: label.isEmpty ? "key" : label)
        return WebSupport.redirect("/account")
    }

    func revokeKey(_ keyID: Int64, user: UserRecord) async throws -> Response {
        if try await web.store.revokeStreamKey(id: keyID, userID: user.id, at: Date().timeIntervalSince1970) {
            // Refused everywhere at once: its live publish (and the extension's events) end now.
            await web.directory.endPublishing(streamKeyID: keyID)
        }
        return WebSupport.redirect("/account")
    }
}
