import BroadcastMedia
public import BroadcastStore
public import BroadcastWeb
import Foundation
import Hummingbird
public import Logging
import NIOCore
import NIOPosix
import ServiceLifecycle

/// How to run the service (the `broadcast-service` command's options).
public struct BroadcastServiceConfiguration: Sendable {
    public var host: String
    public var port: Int
    public var rtmpPort: Int
    public var database: DatabaseLocation
    public var bcryptCost: UInt8
    /// Milliseconds of media per fMP4 fragment pushed to viewers.
    public var fragmentDuration: Int64
    /// Up to this many viewers of a broadcast, every video frame is a fragment of its own (least
    /// latency); beyond, `fragmentDuration` (a third of the messages per viewer). 0: never.
    public var frameFragmentViewers: Int
    public var rtmpSetupTimeout: Duration
    public var rtmpIdleTimeout: Duration
    /// An RTMP URL to re-publish every broadcast to, `{id}` and `{user}` replaced (scale past one node).
    public var relayTemplate: String?
    /// Behind an HTTPS reverse proxy: `__Host-` cookies with `Secure`, https/wss URLs in answers, and the
    /// client address taken from the proxy's `X-Forwarded-For`.
    public var secureCookies: Bool
    /// Timeouts and size limits of HTTP requests, and connections per client address.
    public var httpLimits: HTTPLimits
    /// Keys shared by every node of a cluster (`--signing-key-file`): the first signs CSRF tokens, all
    /// verify. Empty: a random key of this process (a single node; a restart makes open forms stale).
    public var signingKeys: [[UInt8]]

    public init(host: String = "127.0.0.1", port: Int = 8080, rtmpPort: Int = 1935, database: DatabaseLocation = DatabaseLocation(argument: nil),
                bcryptCost: UInt8 = 12, fragmentDuration: Int64 = 100, frameFragmentViewers: Int = 100, rtmpSetupTimeout: Duration = .seconds(10),
                rtmpIdleTimeout: Duration = .seconds(15), relayTemplate: String? = nil, secureCookies: Bool = false,
                httpLimits: HTTPLimits = HTTPLimits(), signingKeys: [[UInt8]] = []) {
        self.signingKeys = signingKeys
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
        self.frameFragmentViewers = frameFragmentViewers
    }
}

/// The reference broadcast service: the web app (Hummingbird) and the RTMP ingest, one service group,
/// which also runs the store's connection pool (PostgreSQL) and migrates it before the web app listens.
public enum BroadcastServer {
    /// Runs until SIGINT/SIGTERM. Prints `ready http=PORT rtmp=PORT` on standard output once both listen.
    public static func run(configuration: BroadcastServiceConfiguration, logger: Logger) async throws {
        let database = try configuration.database.open(logger: logger)
        // Thumbnails are decoded on a thread of their own, one at a time.
        let thumbnailWorker = NIOThreadPool(numberOfThreads: 1)
        thumbnailWorker.start()
        let readiness = Readiness()
        let web = BroadcastWebApp(
            store: database.store, liveState: database.liveState,
            settings: WebSettings(host: configuration.host, port: configuration.port, rtmpPort: configuration.rtmpPort,
                                  secureCookies: configuration.secureCookies, httpLimits: configuration.httpLimits,
                                  bcryptCost: configuration.bcryptCost, relayTemplate: configuration.relayTemplate,
                                  signingKeys: configuration.signingKeys),
            thumbnailWorker: thumbnailWorker, readiness: readiness, logger: logger)
        let ingest = RTMPIngestServer(
            configuration: .init(host: configuration.host, port: configuration.rtmpPort,
                                 setupTimeout: TimeAmount(configuration.rtmpSetupTimeout), idleTimeout: TimeAmount(configuration.rtmpIdleTimeout),
                                 fragmentDuration: configuration.fragmentDuration, frameFragmentViewers: configuration.frameFragmentViewers),
            delegate: web.ingestDelegate, logger: logger, onBound: { readiness.set(rtmp: $0) })
        // The store is migrated, and broadcasts a crash left "live" ended, before the web app listens and
        // before the ingest takes a publisher. The group stops its services in reverse order: the web app,
        // the ingest, then the store's client.
        let (storeReady, storeIsReady) = AsyncStream<Void>.makeStream()
        let app = web.application(services: database.services + web.services + [AfterStoreIsReady(ready: storeReady, service: ingest)]) {
            try await database.migrate()
            try await database.store.endUnfinishedBroadcasts(at: Date().timeIntervalSince1970)
            storeIsReady.finish()
        }
        do {
            try await app.runService()
        } catch {
            try? await thumbnailWorker.shutdownGracefully()
            throw error
        }
        try await thumbnailWorker.shutdownGracefully()
    }
}

/// Runs `service` once the store is ready (`ready` finishes); never, if the group shuts down first.
struct AfterStoreIsReady: Service {
    let ready: AsyncStream<Void>
    let service: any Service

    func run() async throws {
        for await _ in ready.cancelOnGracefulShutdown() {}
        guard !Task.isCancelled, !Task.isShuttingDownGracefully else { return }
        try await service.run()
    }
}
