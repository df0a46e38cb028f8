import BroadcastStore
import Foundation
import Hummingbird
import Logging
import NIOCore

/// What every route group shares: the live directory and the store, the settings, the CSRF signing
/// keys, and the helpers that turn records into pages and JSON.
struct WebSupport: Sendable {
    let directory: LiveDirectory
    let accounts: Accounts
    let settings: WebSettings
    let readiness: Readiness
    let logger: Logger
    /// Signed with the cluster's keys (`--signing-key-file`), else a random secret of this process.
    var csrfTokens: CSRFTokens { settings.csrfTokens }

    var store: any ServiceStore { directory.store }
    /// The bound RTMP port (differs from the configured one when that was 0).
    var rtmpPort: Int { readiness.rtmpPort ?? settings.rtmpPort }

    /// Behind HTTPS the cookies are `__Host-` cookies: Secure, Path=/, no Domain, so that no sibling
    /// subdomain can set or shadow them.
    var sessionCookie: String { settings.secureCookies ? "__Host-ork_session" : "ork_session" }
    var csrfCookie: String { settings.secureCookies ? "__Host-ork_csrf" : "ork_csrf" }
    static let maximumChatLength = 300
    static let maximumTitleLength = 140

    /// A path parameter, percent-decoded (`/apps/%C3%9Cber` is the application `Über`).
    static func pathParameter(_ context: ServiceRequestContext, _ name: String) throws -> String {
        let raw = try context.parameters.require(name)
        return raw.removingPercentEncoding ?? raw
    }

    /// The client's address: the peer, or behind the HTTPS proxy the address the proxy appended last to
    /// `X-Forwarded-For`.
    func clientAddress(_ request: Request, _ context: ServiceRequestContext) -> String {
        if settings.secureCookies, let forwarded = request.headers[.init("X-Forwarded-For")!],
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
        (settings.secureCookies ? "https://" : "http://") + (request.head.authority ?? "\(settings.host):\(settings.port)")
    }

    func hostName(_ request: Request) -> String {
        let authority = request.head.authority ?? settings.host
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

    func describe(_ broadcast: LiveListing, request: Request, verified: Set<String>) -> LiveBroadcastJSON {
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

    // MARK: CSRF

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

    // MARK: Responses

    func html(_ body: String, status: HTTPResponse.Status = .ok, csrf: (String, String?)) -> Response {
        var response = Response(status: status, headers: [
            .contentType: "text/html; charset=utf-8",
            .contentSecurityPolicy: "default-src 'self'; img-src 'self' data:; media-src 'self' blob:; connect-src 'self'; frame-ancestors 'none'",
            .init("X-Content-Type-Options")!: "nosniff",
        ], body: .init(byteBuffer: ByteBuffer(string: body)))
        if let nonce = csrf.1 {
            response.setCookie(Cookie(name: csrfCookie, value: nonce, path: "/", secure: settings.secureCookies, httpOnly: true, sameSite: .strict))
        }
        return response
    }

    static func redirect(_ location: String) -> Response {
        Response(status: .seeOther, headers: [.location: location])
    }

    /// A URL-encoded form of at most 16 KB.
    static func form<T: Decodable>(_ request: Request, as type: T.Type) async throws -> T {
        var request = request
        let body = try await request.collectBody(upTo: 16 << 10)
        do {
            return try URLEncodedFormDecoder().decode(T.self, from: String(buffer: body))
        } catch {
            throw HTTPError(.badRequest, message: "Malformed form.")
        }
    }

    static func decodeJSON<T: Decodable>(_ request: Request, as type: T.Type) async throws -> T {
        var request = request
        let body = try await request.collectBody(upTo: 512 << 10)
        do { return try JSONDecoder().decode(T.self, from: Data(buffer: body)) } catch {
            throw HTTPError(.badRequest, message: "Malformed JSON: \(shortReason(error))")
        }
    }

    /// A short reason for a JSON decoding failure (no Swift debug text).
    static func shortReason(_ error: any Error) -> String {
        guard let error = error as? DecodingError else { return "not valid JSON." }
        func path(_ context: DecodingError.Context) -> String {
            let keys = context.codingPath.map { $0.intValue.map(String.init) ?? $0.stringValue }
            return keys.isEmpty ? "the document" : keys.joined(separator: ".")
        }
        switch error {
        case .keyNotFound(let key, let context):
            let parent = path(context)
            return "\(parent == "the document" ? "" : parent + ".")\(key.stringValue) is required."
        case .typeMismatch(_, let context), .valueNotFound(_, let context): return "\(path(context)) has the wrong type."
        case .dataCorrupted: return "not valid JSON."
        @unknown default: return "not valid JSON."
        }
    }
}
