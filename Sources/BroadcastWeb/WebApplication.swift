package import BroadcastMedia
package import BroadcastStore
import Foundation
package import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
package import Logging
package import NIOPosix
package import ServiceLifecycle
import Synchronization

/// What the web app needs to know of the service's configuration.
package struct WebSettings: Sendable {
    package var host: String
    package var port: Int
    /// The configured RTMP port, shown in stream-key instructions until the ingest reports the bound one.
    package var rtmpPort: Int
    /// Behind an HTTPS reverse proxy: `__Host-` cookies with `Secure`, https/wss URLs, `X-Forwarded-For`.
    package var secureCookies: Bool
    package var httpLimits: HTTPLimits
    package var bcryptCost: UInt8
    /// `--relay`: an RTMP URL template, `{id}` and `{user}` replaced per broadcast.
    package var relayTemplate: String?
    /// Signs CSRF tokens: the cluster's shared keys, or a random secret of this process when none are given.
    let csrfTokens: CSRFTokens

    /// - Parameter signingKeys: `--signing-key-file`'s keys, the first signing; empty: a random key of this process.
    package init(host: String, port: Int, rtmpPort: Int, secureCookies: Bool, httpLimits: HTTPLimits, bcryptCost: UInt8,
                 relayTemplate: String?, signingKeys: [[UInt8]] = []) {
        csrfTokens = CSRFTokens(keys: signingKeys.isEmpty ? [CSRFTokens.randomSecret()] : signingKeys)
        self.host = host
        self.port = port
        self.rtmpPort = rtmpPort
        self.secureCookies = secureCookies
        self.httpLimits = httpLimits
        self.bcryptCost = bcryptCost
        self.relayTemplate = relayTemplate
    }
}

/// The web app: the live directory (which the RTMP ingest asks who may publish), the routes in their
/// groups, and the Hummingbird application serving them with WebSocket upgrades behind `HTTPRequestGuard`.
package struct BroadcastWebApp: Sendable {
    let web: WebSupport

    /// - Parameter thumbnailWorker: the thread thumbnails are decoded on, one at a time (Thumbnails.swift).
    /// - Parameter liveState: shared with the other nodes (PostgreSQL); nil when this node is alone (SQLite).
    package init(store: any ServiceStore, liveState: (any SharedLiveState)? = nil, settings: WebSettings, thumbnailWorker: NIOThreadPool,
                 readiness: Readiness, logger: Logger) {
        let cluster = liveState.map { ClusterLink(state: $0, logger: logger) }
        let host = settings.host.contains(":") ? "[\(settings.host)]" : settings.host
        let directory = LiveDirectory(store: store, logger: logger, thumbnails: ThumbnailCache(worker: thumbnailWorker, logger: logger),
                                      relayTemplate: settings.relayTemplate, cluster: cluster,
                                      address: { "http://\(host):\(readiness.httpPort ?? settings.port)" })
        cluster?.attach(directory)
        web = WebSupport(directory: directory, accounts: Accounts(store: store, threadPool: .singleton, bcryptCost: settings.bcryptCost),
                         settings: settings, readiness: readiness, logger: logger)
    }

    /// What the RTMP ingest asks of the service: who may publish, and where their media goes.
    package var ingestDelegate: any RTMPIngestDelegate { web.directory }

    /// What the web app runs beside the server: the link to the other nodes, when there are any.
    package var services: [any Service] { web.directory.cluster.map { [$0] } ?? [] }

    func buildRouter() -> Router<ServiceRequestContext> {
        let router = Router(context: ServiceRequestContext.self)
        router.add(middleware: OriginCheckMiddleware(secureScheme: web.settings.secureCookies, logger: web.logger))
        router.get("/healthz") { _, _ in "ok" }
        StaticFiles.addRoutes(to: router)
        ThumbnailRoutes(directory: web.directory).addRoutes(to: router)
        APIRoutes(web: web).addRoutes(to: router)
        // The browser's routes see who is signed in.
        let browser = router.group().add(middleware: SessionMiddleware(web: web))
        PageRoutes(web: web).addRoutes(to: browser)
        AccountRoutes(web: web).addRoutes(to: browser)
        ViewerRoutes(web: web).addRoutes(to: browser)
        return router
    }

    /// The Hummingbird application: runs `services` (the store's, the ingest) in its service group, and
    /// `beforeServerStarts` (the store's migration) before the HTTP server listens.
    package func application(services: [any Service], beforeServerStarts: @escaping @Sendable () async throws -> Void) -> some ApplicationProtocol {
        let router = buildRouter()
        let webSocketResponder = router.buildResponder()
        let limits = web.settings.httpLimits
        let connections = ConnectionCounter()
        let readiness = web.readiness
        // HTTP/1 with WebSocket upgrades, behind an `HTTPRequestGuard` that enforces `limits`.
        let server = HTTPServerBuilder { responder in
            GuardedHTTPChannel(inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                   configuration: .init(ws: .init(maxFrameSize: 8 << 20))),
                               limits: limits, connections: connections)
        }
        var app = Application(
            router: router,
            server: server,
            configuration: .init(address: .hostname(web.settings.host, port: web.settings.port), serverName: "broadcast-service"),
            services: services,
            onServerRunning: { channel in readiness.set(http: channel.localAddress?.port ?? 0) },
            logger: web.logger)
        app.beforeServerStarts(perform: beforeServerStarts)
        return app
    }
}

/// Prints `ready http=PORT rtmp=PORT` on standard output once both listeners are bound.
package final class Readiness: Sendable {
    private let ports = Mutex<(http: Int?, rtmp: Int?, printed: Bool)>((nil, nil, false))
    /// The bound RTMP port (differs from the configured one when that was 0).
    var rtmpPort: Int? { ports.withLock { $0.rtmp } }
    /// The bound HTTP port.
    var httpPort: Int? { ports.withLock { $0.http } }

    package init() {}

    package func set(http: Int) { ports.withLock { $0.http = http }; printIfReady() }
    package func set(rtmp: Int) { ports.withLock { $0.rtmp = rtmp }; printIfReady() }

    private func printIfReady() {
        let line: String? = ports.withLock { p in
            guard let http = p.http, let rtmp = p.rtmp, !p.printed else { return nil }
            p.printed = true
            return "ready http=\(http) rtmp=\(rtmp)"
        }
        if let line {
            print(line)
            fflush(nil)
        }
    }
}
