import OpenReplayKit
import ExtensionStreaming
import Foundation
import Logging
import Synchronization
#if canImport(Glibc)
import Glibc
#endif

/// Broadcasts to the project's reference service (`broadcast-service`, docs/SERVICE-API.md).
///
/// Setup info: `server` (http://HOST:PORT), `user` and `password` (signed in with
/// `POST /api/v1/signin` for a stream key, which is kept in the app group: the next broadcast to
/// that account needs no password and does not wait for the sign-in, `KeptStreamKey`; or `key`, a
/// stream key already made), `title`
/// (`replay broadcast --title` gives it too). It creates the broadcast with the application in front
/// (the last `broadcastAnnotated`, else "Desktop") and the title, gives the page URL back
/// (`updateBroadcastURL`), and publishes over RTMP with the key through `StreamPipeline` (shared
/// with the RTMP extension; the pictures that come while it signs in are held, the last one sent
/// first). Each new application in front moves the broadcast (`PUT …/application`); the viewers'
/// count, likes and comments from the events WebSocket come back as `updateServiceInfo`. A refusal
/// (a wrong password, 401, an unknown server) ends the broadcast with the service's words.
///
/// `@unchecked Sendable`: the SDK calls it from one serial queue; what the service task and the
/// pipeline's failure callback touch is in `ReferenceBroadcast` (a `Mutex`), and they only call the
/// `update…`/`finish…` methods, which may be called from any thread.
final class ReferenceSampleHandler: RPBroadcastSampleHandler, @unchecked Sendable {
    private var broadcast: ReferenceBroadcast?
    private var task: Task<Void, Never>?
    /// The application annotated before the broadcast began (the host may annotate first).
    private var application = BroadcastApplication.desktop

    override func broadcastStarted(withSetupInfo setupInfo: [String: NSObject]?) {
        let info = (setupInfo ?? [:]).mapValues { $0.description }
        var logger = Logger(label: "org.openreplaykit.reference")
        logger.logLevel = .info
        let setup: ReferenceSetup
        do throws(ReferenceServiceError) {
            setup = try ReferenceSetup(info)
        } catch {
            finish(error.message)
            return
        }
        let broadcast = ReferenceBroadcast(setup: setup, application: application, logger: logger, handler: self)
        self.broadcast = broadcast
        task = Task { await broadcast.run() }
    }

    override func processSampleBuffer(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {
        broadcast?.pipeline.process(sampleBuffer, with: sampleBufferType)
    }

    override func broadcastAnnotated(withApplicationInfo applicationInfo: [AnyHashable: Any]) {
        guard let id = applicationInfo[RPApplicationInfoBundleIdentifierKey] as? String, !id.isEmpty else { return }
        let name = (applicationInfo[RPApplicationInfoNameKey] as? String).flatMap { $0.isEmpty ? nil : $0 } ?? id
        application = BroadcastApplication(id: id, name: name, iconPath: applicationInfo[RPApplicationInfoIconPathKey] as? String)
        broadcast?.annotate(application)
    }

    override func broadcastFinished() {
        task?.cancel()
        broadcast?.pipeline.finish()
        broadcast = nil
    }

    func finish(_ reason: String) {
        finishBroadcastWithError(NSError(domain: "org.openreplaykit.reference", code: 1, userInfo: [NSLocalizedFailureReasonErrorKey: reason]))
    }
}

/// The setup info, checked: what is missing is said with the `--setup` that gives it.
struct ReferenceSetup: Sendable {
    var server: ReferenceServer
    var credentials: Credentials
    var title: String

    enum Credentials: Sendable {
        /// An account; without a password, the stream key kept from its last sign-in is used.
        case account(user: String, password: String?)
        case streamKey(String)
    }

    init(_ info: [String: String]) throws(ReferenceServiceError) {
        guard let server = info["server"], !server.isEmpty else {
            throw ReferenceServiceError(message: "no service address: start the broadcast with --setup server=http://HOST:PORT --setup user=NAME --setup password=PASSWORD.")
        }
        self.server = try ReferenceServer(server)
        if let key = info["key"], !key.isEmpty {
            credentials = .streamKey(key)
        } else if let user = info["user"], !user.isEmpty {
            credentials = .account(user: user, password: info["password"].flatMap { $0.isEmpty ? nil : $0 })
        } else {
            throw ReferenceServiceError(message: "Not signed in: give the account with --setup user=NAME --setup password=PASSWORD (or a stream key with --setup key=…).")
        }
        let title = (info["title"] ?? "").trimmingCharacters(in: .whitespacesAndNewlines)
        self.title = title.isEmpty ? "Live from OpenReplayKit" : String(title.prefix(140))
    }
}

/// One broadcast on the service: sign in, create, publish, follow the application in front, and
/// pass the viewers' feedback back. Runs as one task (`run`); annotations arrive from the handler.
final class ReferenceBroadcast: Sendable {
    let pipeline: StreamPipeline
    private let setup: ReferenceSetup
    private let client: ReferenceServiceClient
    private let logger: Logger
    /// The handler, for its `update…`/`finish…` calls (which may come from any thread).
    private let handler: ReferenceSampleHandler
    /// The newest application in front (only the newest matters: the service shows one).
    private let applications: AsyncStream<BroadcastApplication>
    private let annotations: AsyncStream<BroadcastApplication>.Continuation
    private let first: BroadcastApplication
    private let feedback = Mutex(ServiceFeedback())

    init(setup: ReferenceSetup, application: BroadcastApplication, logger: Logger, handler: ReferenceSampleHandler) {
        self.setup = setup
        self.logger = logger
        self.handler = handler
        first = application
        client = ReferenceServiceClient(server: setup.server, logger: logger)
        (applications, annotations) = AsyncStream.makeStream(of: BroadcastApplication.self, bufferingPolicy: .bufferingNewest(1))
        pipeline = StreamPipeline(url: nil, logger: logger) { [weak handler] reason in handler?.finish(reason) }
    }

    func annotate(_ application: BroadcastApplication) { annotations.yield(application) }

    /// The new stream key's label on the account page: "OpenReplayKit on HOST".
    static var keyLabel: String {
        var name = [CChar](repeating: 0, count: 256)
        let host = gethostname(&name, name.count) == 0 ? String(decoding: name.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }, as: UTF8.self) : "this computer"
        return String("OpenReplayKit on \(host)".prefix(64))
    }

    func run() async {
        do throws(ReferenceServiceError) {
            let started = ContinuousClock.now
            let (key, broadcast) = try await signInAndCreate()
            logger.info("broadcast created", metadata: ["page": "\(broadcast.pageURL)", "ms": "\((ContinuousClock.now - started) / .milliseconds(1))"])
            if let page = URL(string: broadcast.pageURL) { handler.updateBroadcastURL(page) }
            pipeline.connect(to: (broadcast.rtmpURL.hasSuffix("/") ? broadcast.rtmpURL : broadcast.rtmpURL + "/") + key)
            await withTaskGroup(of: Void.self) { group in
                group.addTask { await self.followApplications(key: key, broadcast: broadcast) }
                group.addTask { await self.forwardFeedback(key: key, broadcast: broadcast) }
                await group.waitForAll()
            }
        } catch {
            logger.error("\(error.message)")
            handler.finish(error.message)
        }
    }

    /// The stream key (given, kept from the account's last sign-in, or from signing in now) and the
    /// broadcast created with it. A kept key the service refuses (revoked on the account page) is
    /// forgotten, and the account signs in again when a password was given.
    private func signInAndCreate() async throws(ReferenceServiceError) -> (key: String, broadcast: CreatedBroadcast) {
        let server = setup.server
        switch setup.credentials {
        case .streamKey(let key):
            return (key, try await client.createBroadcast(key: key, title: setup.title, application: first))
        case .account(let user, let password):
            let keys = KeptStreamKeys()
            if let kept = keys.key(server: server, user: user), password.map(kept.matches) ?? true {
                do throws(ReferenceServiceError) {
                    let broadcast = try await client.createBroadcast(key: kept.key, title: setup.title, application: first)
                    logger.info("signed in with the stream key kept from the last sign-in", metadata: ["user": "\(user)"])
                    return (kept.key, broadcast)
                } catch where error.status == 401 || error.status == 403 {
                    keys.keep(nil, server: server, user: user)
                    guard password != nil else {
                        throw ReferenceServiceError(message: "the stream key kept from the last sign-in as \(user) at \(server) was refused "
                            + "(\(error.message)): sign in again with --setup password=PASSWORD.", status: error.status)
                    }
                    logger.notice("the kept stream key was refused (\(error.message)); signing in again")
                }
            }
            guard let password else {
                throw ReferenceServiceError(message: "Not signed in to \(server) as \(user): give --setup password=PASSWORD once "
                    + "(the stream key it gives is kept for the next broadcasts).")
            }
            let asked = ContinuousClock.now
            let key = try await client.signIn(account: user, password: password, label: Self.keyLabel)
            logger.info("signed in", metadata: ["user": "\(user)", "ms": "\((ContinuousClock.now - asked) / .milliseconds(1))"])
            if let problem = keys.keep(KeptStreamKey(key: key, password: password), server: server, user: user) {
                logger.warning("the stream key is not kept for the next broadcast: \(problem)")
            }
            return (key, try await client.createBroadcast(key: key, title: setup.title, application: first))
        }
    }

    /// Moves the broadcast to each new application in front, in order.
    private func followApplications(key: String, broadcast: CreatedBroadcast) async {
        var shown = first
        for await application in applications where application != shown {
            if Task.isCancelled { return }
            do throws(ReferenceServiceError) {
                try await client.setApplication(key: key, broadcast: broadcast.id, application: application)
                shown = application
                logger.info("application in front", metadata: ["id": "\(application.id)"])
            } catch {
                // The broadcast goes on under the application it had; the next change tries again.
                logger.warning("cannot move the broadcast to \(application.id): \(error.message)")
            }
        }
    }

    /// The viewers' count, likes and comments as service info, until the broadcast ends. The
    /// service waits 15 s for the publish to go live; a broken connection is made again.
    private func forwardFeedback(key: String, broadcast: CreatedBroadcast) async {
        while !Task.isCancelled {
            do {
                try await client.events(url: broadcast.eventsURL, key: key) { [self] event in
                    let info = feedback.withLock { feedback in feedback.apply(event) }
                    if let info { handler.updateServiceInfo(info.mapValues { NSString(string: $0) as any NSCoding & NSObjectProtocol }) }
                }
                if feedback.withLock({ $0.ended }) { return }
            } catch {
                logger.debug("events: \(error)")
            }
            try? await Task.sleep(for: .seconds(1))
        }
    }
}

/// What the viewers said so far, as the service info `replay status` shows.
struct ServiceFeedback: Sendable {
    var viewers = 0
    var likes = 0
    var comments = 0
    var lastComment: String?
    var ended = false

    /// Applies `event`; the new service info, when it changed.
    mutating func apply(_ event: ViewerEvent) -> [String: String]? {
        switch event {
        case .viewers(let count, let total):
            viewers = count
            if let total { likes = total }
        case .comment(let user, let text):
            comments += 1
            lastComment = "\(user): \(text)"
        case .like(_, let total):
            likes = total
        case .ended:
            ended = true
            return nil
        case .other:
            return nil
        }
        var info = ["viewers": "\(viewers)", "likes": "\(likes)", "comments": "\(comments)"]
        if let lastComment { info["lastComment"] = lastComment }
        return info
    }
}
