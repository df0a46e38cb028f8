import Crypto
import Foundation
import Hummingbird
import Logging

/// CSRF tokens the server can check: an HMAC, under a secret of this process, of what the browser is
/// bound to — its session token once signed in, else a random nonce in its own cookie. A planted cookie
/// gives nothing (the attacker cannot compute the HMAC), and signing in changes the session and so the
/// token.
struct CSRFTokens: Sendable {
    private let key: SymmetricKey

    init(secret: [UInt8]) { key = SymmetricKey(data: secret) }

    /// A new random secret (a restart makes open forms stale: the page is reloaded).
    static func randomSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// The token of a browser bound to `binding` (a session token, or the anonymous nonce).
    func token(for binding: String) -> String {
        HMAC<SHA256>.authenticationCode(for: Data(("csrf/" + binding).utf8), using: key).map { String(format: "%02x", $0) }.joined()
    }

    /// Whether `submitted` is the token of `binding`, compared in constant time.
    func check(_ submitted: String?, binding: String?) -> Bool {
        guard let submitted, let binding, !binding.isEmpty else { return false }
        let expected = Array(token(for: binding).utf8), given = Array(submitted.utf8)
        guard expected.count == given.count else { return false }
        return zip(expected, given).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
    }
}

/// Whether a state-changing request may come from where the browser says it comes from: `Sec-Fetch-Site`
/// must be `same-origin` or `none` (typed by the user), and `Origin`, when sent, this service's own. Clients
/// that send neither (curl, an extension's HTTP library) are not browsers carrying ambient cookies.
struct RequestOriginPolicy: Sendable, Equatable {
    /// `http://host:port` or `https://host` as the browser sees this service.
    var ownOrigin: String

    enum Verdict: Equatable {
        case allowed
        case refused(String)
    }

    static func isStateChanging(_ method: String) -> Bool {
        !["GET", "HEAD", "OPTIONS", "TRACE"].contains(method.uppercased())
    }

    func check(origin: String?, fetchSite: String?) -> Verdict {
        if let fetchSite, !["same-origin", "none"].contains(fetchSite.lowercased()) {
            return .refused("Sec-Fetch-Site: \(fetchSite)")
        }
        if let origin, origin.lowercased() != ownOrigin.lowercased() {
            return .refused("Origin: \(origin)")
        }
        return .allowed
    }
}

/// Refuses state-changing requests that a browser says come from another site or origin (403), before
/// any route runs. Requests with an `Authorization` header (the extension API's bearer keys) carry no
/// ambient credential and are left to the route.
struct OriginCheckMiddleware<Context: RequestContext>: RouterMiddleware {
    let secureScheme: Bool
    let logger: Logger

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        if RequestOriginPolicy.isStateChanging(request.method.rawValue), request.headers[.authorization] == nil {
            let policy = RequestOriginPolicy(ownOrigin: (secureScheme ? "https://" : "http://") + (request.head.authority ?? ""))
            if case .refused(let why) = policy.check(origin: request.headers[.origin], fetchSite: request.headers[.init("Sec-Fetch-Site")!]) {
                logger.warning("Request refused: cross-site", metadata: ["path": "\(request.uri.path)", "why": "\(why)"])
                throw HTTPError(.forbidden, message: "Cross-site requests are refused.")
            }
        }
        return try await next(request, context)
    }
}
