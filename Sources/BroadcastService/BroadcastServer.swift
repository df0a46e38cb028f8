public import Logging
import Foundation
import Hummingbird
import HummingbirdCore
import HummingbirdWebSocket
import NIOCore
import NIOPosix
import ServiceLifecycle
import Synchronization

/// How to run the service (the `broadcast-service` command's options).
public struct BroadcastServiceConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var rtmpPort: Int
    public var database: DatabaseLocation
    public var bcryptCost: UInt8
    /// Milliseconds of media per fMP4 fragment pushed to viewers.
    public var fragmentDuration: Int64
    public var rtmpSetupTimeout: Duration
    public var rtmpIdleTimeout: Duration
    /// An RTMP URL to re-publish every broadcast to, `{id}` and `{user}` replaced (scale past one node).
    public var relayTemplate: String?
    /// Behind an HTTPS reverse proxy: `__Host-` cookies with `Secure`, https/wss URLs in answers, and the
    /// client address taken from the proxy's `X-Forwarded-For`.
    public var secureCookies: Bool
    /// Timeouts and size limits of HTTP requests, and connections per client address.
    public var httpLimits: HTTPLimits

    public init(host: String = "127.0.0.1", port: Int = 8080, rtmpPort: Int = 1935, database: DatabaseLocation = DatabaseLocation(argument: nil),
                bcryptCost: UInt8 = 12, fragmentDuration: Int64 = 100, rtmpSetupTimeout: Duration = .seconds(10),
                rtmpIdleTimeout: Duration = .seconds(15), relayTemplate: String? = nil, secureCookies: Bool = false,
                httpLimits: HTTPLimits = HTTPLimits()) {
        self.secureCookies = secureCookies
        self.httpLimits = httpLimits
        self.relayTemplate = relayTemplate
        self.rtmpSetupTimeout = rtmpSetupTimeout
        self.rtmpIdleTimeout = rtmpIdleTimeout
        self.host = host
        self.port = port
        self.rtmpPort = rtmpPort
        self.database = database
        self.bcryptCost = bcryptCost
        self.fragmentDuration = fragmentDuration
    }
}

/// The reference broadcast service: the web app (Hummingbird) and the RTMP ingest, one service group.
public enum BroadcastServer {
    /// Runs until SIGINT/SIGTERM. Prints `ready http=PORT rtmp=PORT` on standard output once both listen.
    public static func run(configuration: BroadcastServiceConfiguration, logger: Logger) async throws {
        try await configuration.database.withStore(logger: logger) { store in
            try await store.endUnfinishedBroadcasts(at: Date().timeIntervalSince1970)
            // Thumbnails are decoded on a thread of their own, one at a time (Web/Thumbnails.swift).
            let thumbnailWorker = NIOThreadPool(numberOfThreads: 1)
            thumbnailWorker.start()
            let directory = LiveDirectory(store: store, logger: logger, thumbnails: ThumbnailCache(worker: thumbnailWorker, logger: logger),
                                          relayTemplate: configuration.relayTemplate)
            let ready = Readiness()
            let ingest = RTMPIngestServer(
                configuration: .init(host: configuration.host, port: configuration.rtmpPort,
                                     setupTimeout: TimeAmount(configuration.rtmpSetupTimeout), idleTimeout: TimeAmount(configuration.rtmpIdleTimeout),
                                     fragmentDuration: configuration.fragmentDuration),
                delegate: directory, logger: logger, onBound: { ready.set(rtmp: $0) })
            let routes = ServiceRoutes(directory: directory,
                                       accounts: Accounts(store: store, threadPool: .singleton, bcryptCost: configuration.bcryptCost),
                                       configuration: configuration, readiness: ready, logger: logger)
            let router = Router(context: ServiceRequestContext.self)
            routes.register(on: router)
            let webSocketResponder = router.buildResponder()
            let limits = configuration.httpLimits
            let connections = ConnectionCounter()
            // HTTP/1 with WebSocket upgrades, behind an `HTTPRequestGuard` that enforces `limits`.
            let server = HTTPServerBuilder { responder in
                GuardedHTTPChannel(inner: HTTP1WebSocketUpgradeChannel(responder: responder, webSocketResponder: webSocketResponder,
                                                                       configuration: .init(ws: .init(maxFrameSize: 8 << 20))),
                                   limits: limits, connections: connections)
            }
            let app = Application(
                router: router,
                server: server,
                configuration: .init(address: .hostname(configuration.host, port: configuration.port), serverName: "broadcast-service"),
                services: [ingest],
                onServerRunning: { channel in ready.set(http: channel.localAddress?.port ?? 0) },
                logger: logger)
            do {
                try await app.runService()
            } catch {
                try? await thumbnailWorker.shutdownGracefully()
                throw error
            }
            try await thumbnailWorker.shutdownGracefully()
        }
    }
}

/// Prints the ready line once both listeners are bound.
final class Readiness: Sendable {
    private let ports = Mutex<(http: Int?, rtmp: Int?, printed: Bool)>((nil, nil, false))
    /// The bound RTMP port (differs from the configured one when that was 0).
    var rtmpPort: Int? { ports.withLock { $0.rtmp } }

    func set(http: Int) { ports.withLock { $0.http = http }; printIfReady() }
    func set(rtmp: Int) { ports.withLock { $0.rtmp = rtmp }; printIfReady() }

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
