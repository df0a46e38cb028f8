public import Foundation
import ReplayIPC
import Synchronization
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// `broadcastAnnotated(withApplicationInfo:)`'s keys: the focused application's identifier (its
/// desktop entry's name, such as `org.gnome.Calculator`, else its executable's name), its name,
/// and the path of its icon (a PNG) when it has one.
public let RPApplicationInfoBundleIdentifierKey = "RPApplicationInfoBundleIdentifierKey"
public let RPApplicationInfoNameKey = "RPApplicationInfoNameKey"
public let RPApplicationInfoIconPathKey = "RPApplicationInfoIconPathKey"

/// The class a broadcast upload extension subclasses (ReplayKit's `RPBroadcastSampleHandler`).
/// replayd starts the extension's program when the person starts a broadcast to it; the program's
/// `main.swift` is `RPBroadcastExtensionMain(SampleHandler.self)`, which makes one instance with its
/// `init()` and calls it:
///
/// `broadcastStarted(withSetupInfo:)` once, then `processSampleBuffer(_:with:)` for each picture
/// (NV12 `CVPixelBuffer`) and each chunk of sound (`.audioApp`: what the computer plays; `.audioMic`),
/// `broadcastAnnotated(withApplicationInfo:)` when the focused application changes,
/// `broadcastPaused()` / `broadcastResumed()`, and `broadcastFinished()` last, after which the
/// program leaves. Calls never overlap (one serial queue). A handler that is slow loses whole
/// pictures (replayd never waits for it), never sound; one that blocks for more than a few seconds
/// is taken as hung and the broadcast ends. The main thread runs its run loop, as an iOS
/// extension's does: `Timer`s on `RunLoop.main` and `DispatchQueue.main` work fire.
///
/// Not `Sendable` (a subclass keeps its own state as it likes): the host calls an instance from
/// one serial queue only; the `update…`/`finish…` methods may be called from any thread (they only
/// enqueue a message to replayd).
///
/// A handler sets itself up in `override init()`, as on iOS, or has no initializer of its own. One
/// whose initializers all take arguments also overrides `init()` (a convenience one will do), which
/// iOS's runtime calls too: otherwise it does not inherit `init(extensionHost:)` and must write it.
open class RPBroadcastSampleHandler: NSObject {
    public override init() {
        super.init()
    }

    /// How `RPBroadcastExtensionMain` makes a handler from its class. iOS makes it through the
    /// Objective-C runtime; here a `required` initializer is the only way, and a convenience one is
    /// inherited by every subclass that has `override init()` or no initializer, so none writes `required`.
    public required convenience init(extensionHost: RPBroadcastExtensionHostToken) {
        self.init()
    }

    /// The broadcast starts; `setupInfo` holds what the setup extension (or `replay broadcast
    /// --setup KEY=VALUE`) gave, as `NSString` values.
    open func broadcastStarted(withSetupInfo setupInfo: [String: NSObject]?) {}
    open func broadcastPaused() {}
    open func broadcastResumed() {}
    open func broadcastFinished() {}

    /// The focused application changed: `RPApplicationInfoBundleIdentifierKey`, `RPApplicationInfoNameKey`,
    /// `RPApplicationInfoIconPathKey`. By default this calls the `[String: NSObject]` form below,
    /// so a handler may override either.
    open func broadcastAnnotated(withApplicationInfo applicationInfo: [AnyHashable: Any]) {
        var info: [String: NSObject] = [:]
        for (key, value) in applicationInfo {
            guard let key = key.base as? String else { continue }
            if let value = value as? String { info[key] = NSString(string: value) } else if let value = value as? NSObject { info[key] = value }
        }
        broadcastAnnotated(withApplicationInfo: info)
    }

    /// The `[String: NSObject]` spelling of the same call (some of Apple's templates use it).
    open func broadcastAnnotated(withApplicationInfo applicationInfo: [String: NSObject]) {}

    open func processSampleBuffer(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {}

    /// Ends the broadcast with `error`: the person reads its `localizedDescription` (or
    /// `NSLocalizedFailureReasonErrorKey`) in `replay`'s output and the indicator.
    public func finishBroadcastWithError(_ error: any Error) {
        let nsError = error as NSError
        let reason = (nsError.userInfo[NSLocalizedFailureReasonErrorKey] as? String) ?? nsError.localizedDescription
        BroadcastExtensionHost.current?.send(ExtensionFinishRequest(message: reason, domain: nsError.domain, code: nsError.code))
    }

    /// The service's own information (viewers, comments…), shown by `replay status` and given to
    /// the app that started the broadcast. Values are sent as their description.
    public func updateServiceInfo(_ serviceInfo: [String: any NSCoding & NSObjectProtocol]) {
        var info: [String: String] = [:]
        for (key, value) in serviceInfo { info[key] = value.description }
        BroadcastExtensionHost.current?.send(ExtensionServiceInfoRequest(info: info))
    }

    /// Where viewers watch this broadcast; `replay broadcast` prints it as soon as it is known.
    public func updateBroadcastURL(_ broadcastURL: URL) {
        BroadcastExtensionHost.current?.send(ExtensionBroadcastURLRequest(url: broadcastURL.absoluteString))
    }
}

/// Only `RPBroadcastExtensionMain` makes one: the argument of the initializer it calls.
public struct RPBroadcastExtensionHostToken: Sendable {
    init() {}
}

/// An upload extension's `main`: runs `handlerType`'s instance (made with its `init()`) for the
/// broadcast replayd started this program for, and exits when it is over (status 0; 1 when it
/// could not attach).
public func RPBroadcastExtensionMain(_ handlerType: RPBroadcastSampleHandler.Type) -> Never {
    RPBroadcastExtensionMain { makeHandler(of: handlerType) }
}

/// An instance of `handlerType` made with its own `init()` (or its superclass's, when it has none).
func makeHandler(of handlerType: RPBroadcastSampleHandler.Type) -> RPBroadcastSampleHandler {
    handlerType.init(extensionHost: RPBroadcastExtensionHostToken())
}

/// The same for a handler made some other way (one whose initializer takes arguments):
/// `RPBroadcastExtensionMain { SampleHandler(service: .production) }`. `makeHandler` is called once,
/// on the main thread, before the broadcast's first call.
public func RPBroadcastExtensionMain(_ makeHandler: () -> RPBroadcastSampleHandler) -> Never {
    signal(SIGPIPE, SIG_IGN)
    // replayd's limit counts the pages the extension dirtied (Private_Dirty), where a transparent
    // huge page counts whole, however little of it is written. libx264 asks for huge pages for all
    // its big buffers, mostly empty ones too: at 1080p that cost the shipped extensions 6.5 MB
    // (docs/lab-notes/2026-11-24-upload-extensions.md). Without them the limit counts the memory in use.
    TransparentHugePages.disable()
    let handler = makeHandler()
    let host = BroadcastExtensionHost(handler: handler)
    BroadcastExtensionHost.current = host
    Task.detached {
        exit(await host.run())
    }
    runMainRunLoop()
}

/// Runs the main thread's run loop for ever: it also drains the main dispatch queue (and so the
/// main actor), and unlike `dispatchMain()` it fires `Timer`s scheduled on `RunLoop.main` and
/// `perform(_:with:afterDelay:)`-style delayed work, which iOS extensions rely on.
func runMainRunLoop() -> Never {
    // `run(mode:before:)` returns when a source fires or when the loop has none: loop again.
    while true {
        _ = RunLoop.main.run(mode: .default, before: .distantFuture)
    }
}

/// The extension's side of the broadcast host: the connection to replayd, the frame ring, and
/// the serial queue every call into the handler goes through.
final class BroadcastExtensionHost: Sendable {
    nonisolated(unsafe) static var current: BroadcastExtensionHost?

    /// Only ever touched on `calls`.
    private let handler: Unchecked<RPBroadcastSampleHandler>
    /// Every call into the handler, in order.
    private let calls = DispatchQueue(label: "openreplaykit-broadcast-handler")
    /// When the call running now began (nil between calls): heartbeats stop while one runs too long.
    private let busySince = Mutex<ContinuousClock.Instant?>(nil)
    private let outbox: AsyncStream<any ControlMethod & Sendable>.Continuation
    private let outgoing: AsyncStream<any ControlMethod & Sendable>
    private let finished = Mutex(false)

    /// A call running longer than this stops the heartbeats (replayd then ends the broadcast).
    static let stuckAfter: Duration = .seconds(3)

    init(handler: RPBroadcastSampleHandler) {
        self.handler = Unchecked(handler)
        (outgoing, outbox) = AsyncStream.makeStream(of: (any ControlMethod & Sendable).self)
    }

    func send(_ request: some ControlMethod & Sendable) { outbox.yield(request) }

    /// Calls `body` with the handler on the serial queue and waits for it.
    private func call(_ body: @escaping @Sendable (RPBroadcastSampleHandler) -> Void) {
        let handler = handler.value
        calls.sync {
            busySince.withLock { $0 = .now }
            body(handler)
            busySince.withLock { $0 = nil }
        }
    }

    private func callFinishedOnce() {
        let first = finished.withLock { done in
            defer { done = true }
            return !done
        }
        if first { call { $0.broadcastFinished() } }
    }

    func run() async -> Int32 {
        guard let socket = ProcessInfo.processInfo.environment["ORK_REPLAYD_SOCKET"] else {
            log("this program is an OpenReplayKit broadcast upload extension: replayd starts it (ORK_REPLAYD_SOCKET is not set).")
            return 1
        }
        do {
            return try await ControlConnection.withConnection(socketPath: socket, software: "OpenReplayKit extension 0.1") { connection in
                try await serve(connection)
            }
        } catch {
            log("cannot reach replayd: \(error)")
            return 1
        }
    }

    private func serve(_ connection: ControlConnection) async throws -> Int32 {
        let attach = try await connection.request(ExtensionAttachRequest())
        let (memory, signal) = try await RingHandover.receiveOffThePool(from: attach.ringSocket)
        let ring = try SampleBufferRing(memory: memory, signal: signal)
        let setupInfo = Unchecked(attach.setupInfo.mapValues { NSString(string: $0) as NSObject })
        call { $0.broadcastStarted(withSetupInfo: setupInfo.value) }
        let ringEnded = AsyncStream<Void>.makeStream()
        ring.start(named: "openreplaykit-broadcast-samples", handler: { [self] buffer, type in
            call { $0.processSampleBuffer(buffer, with: type) }
        }, ended: { ringEnded.continuation.finish() })

        return await withTaskGroup(of: Int32?.self) { group in
            // What the handler says, in order.
            group.addTask { [outgoing] in
                for await request in outgoing {
                    guard let encoded = try? ControlRequest(request) else { continue }
                    _ = try? await connection.send(encoded)
                }
                return nil
            }
            group.addTask { [self] in
                while !Task.isCancelled {
                    let stuck = busySince.withLock { since in since.map { ContinuousClock.now - $0 > Self.stuckAfter } ?? false }
                    if !stuck { _ = try? await connection.request(ExtensionHeartbeatRequest()) }
                    try? await Task.sleep(for: BroadcastHostLimits.heartbeatInterval)
                }
                return nil
            }
            group.addTask { [self] in
                for await event in connection.events {
                    if let control = event.decode(BroadcastControlEvent.self) {
                        switch control.action {
                        case .paused: call { $0.broadcastPaused() }
                        case .resumed: call { $0.broadcastResumed() }
                        case .finished:
                            // The samples already in the ring go first, then broadcastFinished.
                            for await _ in ringEnded.stream {}
                            callFinishedOnce()
                            return 0
                        }
                    } else if let annotation = event.decode(BroadcastAnnotatedEvent.self) {
                        var info: [AnyHashable: Any] = [RPApplicationInfoBundleIdentifierKey: annotation.bundleIdentifier,
                                                        RPApplicationInfoNameKey: annotation.name]
                        if let icon = annotation.iconPath { info[RPApplicationInfoIconPathKey] = icon }
                        let sendable = Unchecked(info)
                        call { $0.broadcastAnnotated(withApplicationInfo: sendable.value) }
                    }
                }
                // replayd went away: the broadcast is over.
                ring.stop()
                callFinishedOnce()
                return 0
            }
            var code: Int32 = 0
            for await result in group {
                if let result {
                    code = result
                    break
                }
            }
            group.cancelAll()
            outbox.finish()
            return code
        }
    }

    private func log(_ text: String) {
        var line = "openreplaykit extension: \(text)\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}

/// What goes to the handler's queue and is touched only there: the handler itself, and
/// dictionaries of strings made on one thread and never touched again by their maker.
private struct Unchecked<Value>: @unchecked Sendable {
    let value: Value
    init(_ value: Value) { self.value = value }
}
