import BroadcastStore
import Foundation
import Hummingbird
import Logging

/// Resolves the session cookie into `context.user` (nil without a valid session). Pages show who is
/// signed in from it; `SignedInMiddleware` refuses requests without one.
struct SessionMiddleware: RouterMiddleware {
    typealias Context = ServiceRequestContext
    let web: WebSupport

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var context = context
        if let token = request.cookies[web.sessionCookie]?.value, !token.isEmpty {
            context.user = try await web.store.sessionUser(digest: Token.digest(token), now: Date().timeIntervalSince1970)
        }
        return try await next(request, context)
    }
}

/// Refuses (401) requests without a signed-in account; after `SessionMiddleware`.
struct SignedInMiddleware: RouterMiddleware {
    typealias Context = ServiceRequestContext
    let message: String

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard context.user != nil else { throw HTTPError(.unauthorized, message: message) }
        return try await next(request, context)
    }
}

/// Refuses (403) a request whose CSRF token is not the one of its browser (`CSRFTokens`): taken from
/// the `X-CSRF-Token` header (the player's `fetch`es), else from the `csrf` field of a URL-encoded form
/// (whose body stays readable by the route).
struct CSRFMiddleware: RouterMiddleware {
    typealias Context = ServiceRequestContext
    let web: WebSupport

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var request = request
        var submitted = request.headers[.init("X-CSRF-Token")!]
        if submitted == nil, request.headers[.contentType]?.hasPrefix("application/x-www-form-urlencoded") == true {
            let body = try await request.collectBody(upTo: 16 << 10)
            submitted = (try? URLEncodedFormDecoder().decode(CSRFField.self, from: String(buffer: body)))?.csrf
        }
        guard web.csrfTokens.check(submitted, binding: web.csrfBinding(request)) else {
            web.logger.warning("Request refused: missing or wrong CSRF token", metadata: ["path": "\(request.uri.path)"])
            throw HTTPError(.forbidden, message: "Missing or wrong CSRF token; reload the page and try again.")
        }
        return try await next(request, context)
    }

    private struct CSRFField: Decodable { var csrf: String? }
}

/// Resolves an extension's stream key into `context.streamKey`: `Authorization: Bearer STREAM_KEY`, or
/// `?token=` on a WebSocket upgrade (where a browser cannot set the header). The routes refuse without it.
struct StreamKeyMiddleware: RouterMiddleware {
    typealias Context = ServiceRequestContext
    let web: WebSupport

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        var token = request.headers[.authorization].flatMap { $0.hasPrefix("Bearer ") ? String($0.dropFirst(7)) : nil }
        if token == nil, request.headers[.upgrade]?.lowercased() == "websocket", let query = request.uri.queryParameters["token"] {
            token = String(query)
        }
        var context = context
        if let token, !token.isEmpty { context.streamKey = try await web.store.activeStreamKey(token) }
        return try await next(request, context)
    }
}

extension ServiceRequestContext {
    /// The signed-in account, on routes behind `SignedInMiddleware`.
    func requireUser() throws -> UserRecord {
        guard let user else { throw HTTPError(.unauthorized) }
        return user
    }
}
