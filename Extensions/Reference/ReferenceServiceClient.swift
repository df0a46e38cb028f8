import Foundation
import HTTPTypes
import HummingbirdWSClient
import Logging
import NIOCore
import NIOHTTP1
import NIOPosix

/// Why talking to the service failed, in words for the person (the service's own message when it
/// gave one). `status` is the HTTP status, when there was an answer.
struct ReferenceServiceError: Error, CustomStringConvertible, Sendable {
    var message: String
    var status: Int?
    var description: String { message }
}

/// Where the service is: `http://HOST:PORT` (a path prefix is kept, for a service behind a proxy).
struct ReferenceServer: Sendable, CustomStringConvertible {
    let host: String
    let port: Int
    let pathPrefix: String
    let description: String

    init(_ text: String) throws(ReferenceServiceError) {
        let trimmed = text.hasSuffix("/") ? String(text.dropLast()) : text
        guard let url = URL(string: trimmed), let scheme = url.scheme?.lowercased(), let host = url.host, !host.isEmpty else {
            throw ReferenceServiceError(message: "\"\(text)\" is not the address of a broadcast service: give --setup server=http://HOST:PORT.")
        }
        guard scheme == "http" else {
            throw ReferenceServiceError(message: "\(text): only http:// services are supported by this extension for now (give --setup server=http://HOST:PORT).")
        }
        self.host = host
        port = url.port ?? 80
        pathPrefix = url.path
        description = trimmed
    }
}

/// The application a broadcast shows (what `broadcastAnnotated(withApplicationInfo:)` gives).
struct BroadcastApplication: Sendable, Equatable {
    var id: String
    var name: String
    /// A PNG file, sent when it is small enough for the service (256 KB).
    var iconPath: String?

    /// What the service files a broadcast under when no application was named yet.
    static let desktop = BroadcastApplication(id: "org.openreplaykit.desktop", name: "Desktop", iconPath: nil)

    var json: [String: Any] {
        var object: [String: Any] = ["id": String(id.replacingOccurrences(of: "/", with: "-").prefix(200)), "name": String(name.prefix(100))]
        if let iconPath, let attributes = try? FileManager.default.attributesOfItem(atPath: iconPath),
           let size = attributes[.size] as? Int, size <= 256 * 1024, let png = FileManager.default.contents(atPath: iconPath) {
            object["iconPNG"] = png.base64EncodedString()
        }
        return object
    }
}

/// A broadcast the service created (the fields of its broadcast object this extension uses).
struct CreatedBroadcast: Sendable {
    var id: String
    var pageURL: String
    var eventsURL: String
    var rtmpURL: String
}

/// One viewer event from `GET /api/v1/broadcasts/{id}/events` (docs/SERVICE-API.md).
enum ViewerEvent: Sendable, Equatable {
    case viewers(count: Int, likes: Int?)
    case comment(user: String, text: String)
    case like(user: String, likes: Int)
    case ended
    case other

    init?(json text: String) {
        guard let object = (try? JSONSerialization.jsonObject(with: Data(text.utf8))) as? [String: Any],
              let type = object["type"] as? String else { return nil }
        switch type {
        case "viewers": self = .viewers(count: object["viewerCount"] as? Int ?? 0, likes: object["likes"] as? Int)
        case "comment": self = .comment(user: object["user"] as? String ?? "?", text: object["text"] as? String ?? "")
        case "like": self = .like(user: object["user"] as? String ?? "?", likes: object["likes"] as? Int ?? 0)
        case "ended": self = .ended
        default: self = .other
        }
    }
}

/// The reference broadcast service's extension API (docs/SERVICE-API.md, "Extension endpoints"):
/// JSON over HTTP/1.1 (NIOHTTP1, one connection a request), and the events WebSocket.
struct ReferenceServiceClient: Sendable {
    let server: ReferenceServer
    let logger: Logger
    static let requestTimeout: Duration = .seconds(15)

    /// `POST /api/v1/signin`: a new stream key of the account.
    func signIn(account: String, password: String, label: String) async throws(ReferenceServiceError) -> String {
        let answer = try await call("POST", "/api/v1/signin", json: ["account": account, "password": password, "label": label])
        guard let key = answer["streamKey"] as? String else { throw malformed("the sign-in") }
        return key
    }

    /// `POST /api/v1/broadcasts`.
    func createBroadcast(key: String, title: String, application: BroadcastApplication) async throws(ReferenceServiceError) -> CreatedBroadcast {
        let answer = try await call("POST", "/api/v1/broadcasts", key: key, json: ["title": title, "application": application.json])
        guard let id = answer["id"] as? String, let page = answer["pageURL"] as? String, let events = answer["eventsURL"] as? String,
              let rtmp = answer["rtmpURL"] as? String else { throw malformed("the new broadcast") }
        return CreatedBroadcast(id: id, pageURL: page, eventsURL: events, rtmpURL: rtmp)
    }

    /// `PUT /api/v1/broadcasts/{id}/application`.
    func setApplication(key: String, broadcast: String, application: BroadcastApplication) async throws(ReferenceServiceError) {
        _ = try await call("PUT", "/api/v1/broadcasts/\(broadcast)/application", key: key, json: application.json)
    }

    /// Reads the events WebSocket until it closes (the broadcast ended, or the connection broke).
    func events(url: String, key: String, _ receive: @escaping @Sendable (ViewerEvent) -> Void) async throws {
        var headers = HTTPFields()
        headers[.authorization] = "Bearer \(key)"
        try await WebSocketClient.connect(url: url, configuration: .init(maxFrameSize: 1 << 16, additionalHeaders: headers),
                                          logger: logger) { inbound, _, _ in
            for try await message in inbound.messages(maxSize: 1 << 16) {
                guard case .text(let text) = message, let event = ViewerEvent(json: text) else { continue }
                receive(event)
                if event == .ended { return }
            }
        }
    }

    private func malformed(_ what: String) -> ReferenceServiceError {
        ReferenceServiceError(message: "the broadcast service at \(server) gave an answer this extension does not understand for \(what).")
    }

    /// One JSON request; a status other than 2xx throws the service's message.
    private func call(_ method: String, _ path: String, key: String? = nil, json: [String: Any]) async throws(ReferenceServiceError) -> [String: Any] {
        let body: Data
        do { body = try JSONSerialization.data(withJSONObject: json) } catch { throw ReferenceServiceError(message: "cannot encode the request: \(error)") }
        let (status, answer): (Int, Data)
        do {
            (status, answer) = try await withThrowingTaskGroup(of: (Int, Data).self) { group in
                group.addTask { try await request(method, server.pathPrefix + path, key: key, body: body) }
                group.addTask {
                    try await Task.sleep(for: Self.requestTimeout)
                    throw ReferenceServiceError(message: "the broadcast service at \(server) did not answer within 15 s.")
                }
                defer { group.cancelAll() }
                return try await group.next()!
            }
        } catch let error as ReferenceServiceError {
            throw error
        } catch {
            throw ReferenceServiceError(message: "cannot reach the broadcast service at \(server) (\(Self.describe(error))): check --setup server=…")
        }
        guard (200..<300).contains(status) else {
            throw ReferenceServiceError(message: "the broadcast service at \(server) refused: \(Self.reason(of: answer, status: status))", status: status)
        }
        guard let object = (try? JSONSerialization.jsonObject(with: answer)) as? [String: Any] else { throw malformed(path) }
        return object
    }

    /// The service's words: `{"error":{"message":…}}` (JSON errors) or the plain-text reason.
    static func reason(of body: Data, status: Int) -> String {
        if let object = (try? JSONSerialization.jsonObject(with: body)) as? [String: Any],
           let error = object["error"] as? [String: Any], let message = error["message"] as? String {
            return message + " (HTTP \(status))"
        }
        let text = String(decoding: body.prefix(300), as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
        return (text.isEmpty ? HTTPResponseStatus(statusCode: status).reasonPhrase : text) + " (HTTP \(status))"
    }

    private static func describe(_ error: any Error) -> String {
        if let connect = error as? NIOConnectionError, let first = connect.connectionErrors.first { return "\(first.error)" }
        return "\(error)"
    }

    private func request(_ method: String, _ path: String, key: String?, body: Data) async throws -> (Int, Data) {
        let host = server.host, port = server.port
        let channel = try await ClientBootstrap(group: MultiThreadedEventLoopGroup.singleton)
            .connectTimeout(.seconds(5))
            .connect(host: host, port: port) { channel in
                channel.eventLoop.makeCompletedFuture {
                    try channel.pipeline.syncOperations.addHTTPClientHandlers()
                    return try NIOAsyncChannel<HTTPClientResponsePart, HTTPClientRequestPart>(wrappingChannelSynchronously: channel)
                }
            }
        return try await channel.executeThenClose { inbound, outbound in
            var head = HTTPRequestHead(version: .http1_1, method: HTTPMethod(rawValue: method), uri: path)
            head.headers.add(name: "Host", value: port == 80 ? host : "\(host):\(port)")
            head.headers.add(name: "Content-Type", value: "application/json")
            head.headers.add(name: "Content-Length", value: "\(body.count)")
            head.headers.add(name: "Connection", value: "close")
            head.headers.add(name: "User-Agent", value: "OpenReplayKit reference extension")
            if let key { head.headers.add(name: "Authorization", value: "Bearer \(key)") }
            try await outbound.write(.head(head))
            try await outbound.write(.body(.byteBuffer(ByteBuffer(bytes: body))))
            try await outbound.write(.end(nil))
            var status = 0
            var answer = ByteBuffer()
            for try await part in inbound {
                switch part {
                case .head(let response): status = Int(response.status.code)
                case .body(var bytes): answer.writeBuffer(&bytes)
                case .end: return (status, Data(answer.readableBytesView))
                }
            }
            throw ReferenceServiceError(message: "the broadcast service at \(server) closed the connection before answering.")
        }
    }
}
