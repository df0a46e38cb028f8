public import Foundation
import ReplayIPC
import Synchronization
import Dispatch
#if canImport(Glibc)
import Glibc
#endif

/// The class a broadcast **setup** extension subclasses: iOS's `BroadcastSetupViewController`
/// (a `UIViewController` there) with the broadcast part of its `NSExtensionContext`.
///
/// replayd starts the setup extension's program before a broadcast to the upload extension whose
/// manifest names it (`"setupExtension"`), unless the broadcast was started with setup values
/// already (`replay broadcast --setup KEY=VALUE`). Its `main.swift` is one line,
/// `RPBroadcastSetupExtensionMain(BroadcastSetupViewController.self)`, which makes one instance and
/// calls `viewDidLoad()` on the main thread. There the extension shows its own window (sign-in,
/// title, stream key) with any toolkit; the main thread is its own, so a toolkit's main loop may run
/// in `viewDidLoad` (GTK's) until the person is done. When they are, it calls
/// `userDidFinishSetup(broadcastURL:setupInfo:)` (or `extensionContext?.completeRequest(withBroadcast:setupInfo:)`):
/// the setup info goes to the upload extension's `broadcastStarted(withSetupInfo:)` (values as their
/// description, `NSString`s there), and the URL is the broadcast's until the upload extension says
/// another. `userDidCancelSetup()` or `cancelRequest(withError:)` cancels the broadcast: it does not
/// start, and the person reads the error's `localizedDescription` (or its
/// `NSLocalizedFailureReasonErrorKey`). The program exits once replayd has the answer.
///
/// `@MainActor`, as `UIViewController` is: everything but `extensionContext`'s answers happens on the
/// main thread, whose run loop runs (`Timer`s on `RunLoop.main`, `DispatchQueue.main`) once
/// `viewDidLoad` returns. A controller may set itself up in `override init()`.
@MainActor
open class RPBroadcastSetupViewController: NSObject {
    /// NSExtensionContext's role: where the answer goes. Set before `viewDidLoad()`.
    public internal(set) var extensionContext: RPBroadcastExtensionContext?

    public override init() {
        super.init()
    }

    /// How `RPBroadcastSetupExtensionMain` makes the controller from its class: inherited by every
    /// subclass with `override init()` or no initializer (see `RPBroadcastSampleHandler`'s).
    public required convenience init(extensionHost: RPBroadcastExtensionHostToken) {
        self.init()
    }

    /// Called once, on the main thread, when replayd has said what to set up: show the window here.
    open func viewDidLoad() {}

    static var running: RPBroadcastSetupViewController?

    /// The application whose broadcast this is (ReplayKit's `loadBroadcastingApplicationInfo`): its
    /// identifier (`org.gnome.Calculator`: its desktop entry's name, else its executable's), its
    /// name, and its icon (a PNG file), when it has one. For a system broadcast it is the
    /// application that had the focus when the broadcast was asked for (empty strings when none
    /// had it). `completion` is called before this returns.
    public func loadBroadcastingApplicationInfo(completion: (_ bundleID: String, _ displayName: String, _ appIcon: URL?) -> Void) {
        guard let application = extensionContext?.application else {
            completion("", "", nil)
            return
        }
        completion(application.bundleIdentifier, application.name, application.iconPath.map { URL(fileURLWithPath: $0) })
    }

    /// The person is done: completes the request with `broadcastURL` and `setupInfo`.
    open func userDidFinishSetup(broadcastURL: URL?, setupInfo: [String: any NSCoding & NSObjectProtocol]?) {
        extensionContext?.completeRequest(withBroadcast: broadcastURL, setupInfo: setupInfo)
    }

}

/// What gives `RPBroadcastSetupViewController` its `userDidCancelSetup()`. A protocol extension, not
/// a method of the class: Xcode's setup template declares its own `func userDidCancelSetup()`
/// without `override` (its superclass is `UIViewController` there), which a class method would forbid.
@MainActor
public protocol RPBroadcastSetupAnswering: AnyObject {
    var extensionContext: RPBroadcastExtensionContext? { get }
}

extension RPBroadcastSetupViewController: RPBroadcastSetupAnswering {}

extension RPBroadcastSetupAnswering {
    /// The person cancelled: cancels the request, saying so.
    public func userDidCancelSetup() {
        extensionContext?.cancelRequest(withError: NSError(domain: RPRecordingErrorDomain, code: RPRecordingErrorCode.userDeclined.rawValue,
                                                           userInfo: [NSLocalizedFailureReasonErrorKey: "the person cancelled the setup"]))
    }
}

/// The broadcast part of iOS's `NSExtensionContext` for a setup extension: its answer to replayd.
/// Either method may be called from any thread, once (a second answer is ignored).
public final class RPBroadcastExtensionContext: Sendable {
    let host: BroadcastSetupHost
    let application: BroadcastApplicationInfo

    init(host: BroadcastSetupHost, application: BroadcastApplicationInfo) {
        self.host = host
        self.application = application
    }

    /// The identifier of the upload extension (broadcast service) this setup is for.
    public var serviceIdentifier: String { host.service }

    /// The broadcast starts, with `setupInfo` given to the upload extension's `broadcastStarted(withSetupInfo:)`
    /// (values sent as their description) and `broadcastURL` as its URL until the upload extension gives another.
    public func completeRequest(withBroadcast broadcastURL: URL?, setupInfo: [String: any NSCoding & NSObjectProtocol]?) {
        var info: [String: String] = [:]
        for (key, value) in setupInfo ?? [:] { info[key] = value.description }
        host.answer(ExtensionSetupCompleteRequest(broadcastURL: broadcastURL?.absoluteString, setupInfo: info))
    }

    /// The broadcast does not start; the person reads the error's reason.
    public func cancelRequest(withError error: any Error) {
        let nsError = error as NSError
        let reason = (nsError.userInfo[NSLocalizedFailureReasonErrorKey] as? String) ?? nsError.localizedDescription
        host.answer(ExtensionSetupCancelRequest(message: reason, domain: nsError.domain, code: nsError.code))
    }
}

/// A setup extension's `main`: attaches to replayd, makes `controllerType`'s instance, calls its
/// `viewDidLoad()` on the main thread, and exits once its answer is delivered (status 0; 1 when it
/// could not attach or replayd went away first).
public func RPBroadcastSetupExtensionMain(_ controllerType: RPBroadcastSetupViewController.Type) -> Never {
    signal(SIGPIPE, SIG_IGN)
    guard let socket = ProcessInfo.processInfo.environment["ORK_REPLAYD_SOCKET"] else {
        BroadcastSetupHost.log("this program is an OpenReplayKit broadcast setup extension: replayd starts it (ORK_REPLAYD_SOCKET is not set).")
        exit(1)
    }
    let host = BroadcastSetupHost()
    // Attached before the controller exists, so that loadBroadcastingApplicationInfo answers at once
    // whatever runs the main thread afterwards (a toolkit's loop does not drain the main queue).
    guard let attached = host.attach(socket: socket) else { exit(1) }
    host.service = attached.service
    // `main` runs on the main thread: the main actor's.
    MainActor.assumeIsolated {
        let controller = controllerType.init(extensionHost: RPBroadcastExtensionHostToken())
        controller.extensionContext = RPBroadcastExtensionContext(host: host, application: attached.application)
        controller.viewDidLoad()
        // Kept for as long as the program runs (its window's callbacks may refer to it).
        RPBroadcastSetupViewController.running = controller
    }
    runMainRunLoop()
}

/// The setup extension's side of the connection: attach, then one answer, then exit.
final class BroadcastSetupHost: Sendable {
    private let answers: AsyncStream<any ControlMethod & Sendable>.Continuation
    private let outgoing: AsyncStream<any ControlMethod & Sendable>
    private let answered = Mutex(false)
    private let attachedAnswer = Mutex<ExtensionSetupAttachAnswer?>(nil)
    private let serviceName = Mutex("")

    var service: String {
        get { serviceName.withLock { $0 } }
        set { serviceName.withLock { $0 = newValue } }
    }

    init() {
        (outgoing, answers) = AsyncStream.makeStream(of: (any ControlMethod & Sendable).self)
    }

    func answer(_ request: some ControlMethod & Sendable) {
        let first = answered.withLock { done in
            defer { done = true }
            return !done
        }
        if first { answers.yield(request) }
    }

    /// Connects and attaches, blocking the calling (main) thread until replayd has answered; the
    /// connection then stays open on the pool until the answer is delivered, and the process exits.
    func attach(socket: String) -> ExtensionSetupAttachAnswer? {
        let ready = DispatchSemaphore(value: 0)
        Task.detached { [self] in
            let code: Int32
            do {
                code = try await ControlConnection.withConnection(socketPath: socket, software: "OpenReplayKit setup extension 0.1") { connection in
                    let attached: ExtensionSetupAttachAnswer
                    do {
                        attached = try await connection.request(ExtensionSetupAttachRequest())
                    } catch {
                        Self.log("replayd refused the setup extension: \(error)")
                        return Int32(1)
                    }
                    attachedAnswer.withLock { $0 = attached }
                    ready.signal()
                    return await withTaskGroup(of: Int32.self) { group in
                        // The one answer, delivered.
                        group.addTask { [outgoing] in
                            for await request in outgoing {
                                guard let encoded = try? ControlRequest(request) else { continue }
                                do {
                                    if case .failure(let refused) = try await connection.send(encoded) {
                                        Self.log("replayd refused the setup's answer: \(refused.message)")
                                        return 1
                                    }
                                    return 0
                                } catch {
                                    Self.log("cannot give replayd the setup's answer: \(error)")
                                    return 1
                                }
                            }
                            return 1
                        }
                        // Or replayd gone first: the window has nothing left to set up.
                        group.addTask {
                            for await _ in connection.events {}
                            if !Task.isCancelled { Self.log("replayd closed the connection before the setup was answered") }
                            return 1
                        }
                        let code = await group.next() ?? 1
                        group.cancelAll()
                        return code
                    }
                }
            } catch {
                Self.log("cannot reach replayd: \(error)")
                code = 1
            }
            // Not attached: the main thread, still waiting, exits; attached: the answer is delivered (or
            // cannot be), and the program is over.
            if attachedAnswer.withLock({ $0 }) == nil {
                ready.signal()
                return
            }
            exit(code)
        }
        ready.wait()
        return attachedAnswer.withLock { $0 }
    }

    static func log(_ text: String) {
        var line = "openreplaykit setup extension: \(text)\n"
        line.withUTF8 { _ = write(2, $0.baseAddress, $0.count) }
    }
}
