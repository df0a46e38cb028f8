import Crypto
import Foundation
import Hummingbird
import Logging

/// CSRF tokens the server can check: an HMAC, under the signing keys, of what the browser is bound to —
/// its session token once signed in, else a random nonce in its own cookie. A planted cookie gives
/// nothing (the attacker cannot compute the HMAC), and signing in changes the session and so the token.
/// The first key signs and every key verifies, so a cluster sharing the keys accepts a token made on any
/// node, and a key can be rotated in (second, then first) and out without stale forms.
struct CSRFTokens: Sendable {
    private let keys: [SymmetricKey]

    /// - Parameter keys: at least one; the first signs.
    init(keys: [[UInt8]]) {
        precondition(!keys.isEmpty, "CSRFTokens needs a key")
        self.keys = keys.map { SymmetricKey(data: $0) }
    }

    init(secret: [UInt8]) { self.init(keys: [secret]) }

    /// A new random secret (a restart makes open forms stale: the page is reloaded).
    static func randomSecret() -> [UInt8] {
        var generator = SystemRandomNumberGenerator()
        return (0..<32).map { _ in UInt8.random(in: 0...255, using: &generator) }
    }

    /// The token of a browser bound to `binding` (a session token, or the anonymous nonce).
    func token(for binding: String) -> String { token(for: binding, key: keys[0]) }

    private func token(for binding: String, key: SymmetricKey) -> String {
        Token.hex(of: HMAC<SHA256>.authenticationCode(for: Data(("csrf/" + binding).utf8), using: key))
    }

    /// Whether `submitted` is the token of `binding` under any key, compared in constant time.
    func check(_ submitted: String?, binding: String?) -> Bool {
        guard let submitted, let binding, !binding.isEmpty else { return false }
        let given = Array(submitted.utf8)
        // Every key is tried (no early exit), so the time says nothing of which one matched.
        return keys.reduce(false) { matched, key in
            let expected = Array(token(for: binding, key: key).utf8)
            let equal = expected.count == given.count && zip(expected, given).reduce(0) { $0 | ($1.0 ^ $1.1) } == 0
            return matched || equal
        }
    }
}

/// `--signing-key-file`: the keys a cluster shares to sign CSRF tokens (and any value one node signs
/// and another checks). One key a line, at least 32 characters (e.g. `openssl rand -hex 32`); blank lines
/// and lines starting with `#` are skipped. The first key signs, all verify: to rotate, add the new key as
/// the second line on every node, then move it first, then remove the old one.
package enum SigningKeyFile {
    package static let minimumKeyLength = 32

    package static func parse(_ text: String) throws -> [[UInt8]] {
        var keys: [[UInt8]] = []
        for (number, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.trimmingCharacters(in: .whitespacesAndNewlines)
            guard !line.isEmpty, !line.hasPrefix("#") else { continue }
            guard line.utf8.count >= minimumKeyLength else {
                throw SigningKeyFileError(message: "line \(number + 1) is shorter than \(minimumKeyLength) characters; make keys with `openssl rand -hex 32`")
            }
            keys.append(Array(line.utf8))
        }
        guard !keys.isEmpty else { throw SigningKeyFileError(message: "it holds no key; put one key a line, e.g. from `openssl rand -hex 32`") }
        return keys
    }
}

package struct SigningKeyFileError: Error, CustomStringConvertible {
    package let message: String
    package var description: String { message }
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
