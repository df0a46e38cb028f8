public import Foundation
import ReplayIPC
import Synchronization

// MARK: - RPBroadcastActivityViewController

/// Told what the person chose in the broadcast picker.
public protocol RPBroadcastActivityViewControllerDelegate: AnyObject {
    /// The picker closed: a controller for the chosen service (not started yet: call
    /// `startBroadcast`), or an error (`userDeclined` when the person cancelled).
    func broadcastActivityViewController(_ broadcastActivityViewController: RPBroadcastActivityViewController,
                                         didFinishWith broadcastController: RPBroadcastController?, error: (any Error)?)
}

/// The broadcast picker for the app's own broadcast, as ReplayKit's: `load(handler:)` gives it,
/// `present()` shows it. It is replayd's system window (WM_CLASS `openreplaykit-picker`) listing the
/// installed upload extensions, on the app's display: Linux has no view controllers to present, so
/// `present()` takes the place of `UIViewController.present(_:animated:)` and `dismiss` only calls its
/// completion (the window closes by itself once the person chose).
///
/// ```swift
/// RPBroadcastActivityViewController.load { picker, error in
///     picker?.delegate = self
///     picker?.present()
/// }
/// // the delegate: broadcastActivityViewController(_:didFinishWith:error:) → controller.startBroadcast { … }
/// ```
public final class RPBroadcastActivityViewController: Sendable {
    private struct State {
        var delegate = WeakDelegate()
        var presented = false
    }

    private let state = Mutex(State())
    /// The one service offered, when the app asked for it (`load(withPreferredExtension:)`).
    public let preferredExtension: String?
    private let display: String

    private init(preferredExtension: String?, display: String) {
        self.preferredExtension = preferredExtension
        self.display = display
    }

    /// Weak, as on iOS.
    public var delegate: (any RPBroadcastActivityViewControllerDelegate)? {
        get { state.withLock { $0.delegate }.value as? any RPBroadcastActivityViewControllerDelegate }
        set {
            let box = WeakDelegate(newValue)
            state.withLock { $0.delegate = box }
        }
    }

    /// Gives the picker for every installed service (fails without a display). `handler` is called
    /// before this returns, on the calling thread (so, as on iOS, it need not be `@Sendable`).
    public static func load(handler: @escaping (RPBroadcastActivityViewController?, (any Error)?) -> Void) {
        load(withPreferredExtension: nil, handler: handler)
    }

    /// Gives the picker offering only the extension `preferredExtension` (an identifier, as
    /// `replay services` lists them), or every service when nil.
    public static func load(withPreferredExtension preferredExtension: String?,
                            handler: @escaping (RPBroadcastActivityViewController?, (any Error)?) -> Void) {
        do {
            handler(try make(preferredExtension), nil)
        } catch {
            handler(nil, error)
        }
    }

    /// The async form of `load(withPreferredExtension:handler:)`.
    public static func load(withPreferredExtension preferredExtension: String? = nil) async throws -> RPBroadcastActivityViewController {
        try make(preferredExtension)
    }

    private static func make(_ preferredExtension: String?) throws(RPRecordingError) -> RPBroadcastActivityViewController {
        guard let display = RPScreenRecorder.shared().display else {
            throw RPRecordingError(.failedToStart, "this app has no X display (DISPLAY is not set): there is nothing of it to broadcast.")
        }
        return RPBroadcastActivityViewController(preferredExtension: preferredExtension, display: display)
    }

    /// Shows the picker; the delegate hears the person's choice.
    public func present() {
        Task { _ = try? await self.presentAndWait() }
    }

    /// Closes nothing (the picker closed itself when the person chose) and calls `completion` at once,
    /// on the calling thread: the seeds' `broadcastAVC.dismiss(animated: true) { … }` reads the same here.
    public func dismiss(animated: Bool = true, completion: (() -> Void)? = nil) {
        completion?()
    }

    /// Shows the picker and returns the controller for the person's choice (the delegate hears it
    /// too); throws `userDeclined` when they cancel.
    @discardableResult
    public func presentAndWait() async throws -> RPBroadcastController {
        let first = state.withLock { state in
            defer { state.presented = true }
            return !state.presented
        }
        do {
            guard first else { throw RPRecordingError(.broadcastInvalidSession, "this picker was shown already: load another.") }
            let recorder = RPScreenRecorder.shared()
            let choice = try await recorder.link.request(AppPickBroadcastServiceRequest(display: display, preferredExtension: preferredExtension))
            let controller = RPBroadcastController(identifier: choice.identifier, serviceName: choice.displayName,
                                                   microphone: choice.microphone || recorder.isMicrophoneEnabled, display: display)
            delegate?.broadcastActivityViewController(self, didFinishWith: controller, error: nil)
            return controller
        } catch {
            delegate?.broadcastActivityViewController(self, didFinishWith: nil, error: error)
            throw error
        }
    }
}

// MARK: - RPBroadcastController

/// Told how the app's broadcast goes. Every method has a default implementation (they are optional
/// on iOS); they are called on a thread of the library's own.
public protocol RPBroadcastControllerDelegate: AnyObject {
    /// The broadcast ended without the app finishing it: the extension failed or gave up
    /// (`finishBroadcastWithError`, its reason in the error's words), the person broadcast or recorded
    /// the screen (`interrupted`), or stopped it with the indicator.
    func broadcastController(_ broadcastController: RPBroadcastController, didFinishWithError error: (any Error)?)
    /// The extension's `updateServiceInfo` (viewers, comments), as iOS gives it (`NSString` values).
    /// By default this calls the `[String: String]` form below, so a delegate may implement either.
    func broadcastController(_ broadcastController: RPBroadcastController, didUpdateServiceInfo serviceInfo: [String: any NSCoding & NSObjectProtocol])
    /// The same as strings.
    func broadcastController(_ broadcastController: RPBroadcastController, didUpdateServiceInfo serviceInfo: [String: String])
    /// The extension's `updateBroadcastURL`: where viewers watch.
    func broadcastController(_ broadcastController: RPBroadcastController, didUpdateBroadcast broadcastURL: URL)
}

extension RPBroadcastControllerDelegate {
    public func broadcastController(_ broadcastController: RPBroadcastController, didFinishWithError error: (any Error)?) {}
    public func broadcastController(_ broadcastController: RPBroadcastController, didUpdateServiceInfo serviceInfo: [String: any NSCoding & NSObjectProtocol]) {
        var strings: [String: String] = [:]
        for (key, value) in serviceInfo { strings[key] = value.description }
        self.broadcastController(broadcastController, didUpdateServiceInfo: strings)
    }
    public func broadcastController(_ broadcastController: RPBroadcastController, didUpdateServiceInfo serviceInfo: [String: String]) {}
    public func broadcastController(_ broadcastController: RPBroadcastController, didUpdateBroadcast broadcastURL: URL) {}
}

/// The app's own broadcast to the service the person chose, as ReplayKit's: only the app's windows
/// and sound (and the microphone when the person switched it on in the picker, or
/// `RPScreenRecorder.shared().isMicrophoneEnabled`) go to the service's upload extension, which
/// replayd runs. Each `startBroadcast` asks the person first, naming the app and the service.
///
/// The broadcast pauses by itself when another application takes the focus (`isPaused` becomes
/// true); the app resumes it (`resumeBroadcast`), typically once it has the focus again and the
/// person agrees. One broadcast runs at a time on the desktop.
public final class RPBroadcastController: Sendable {
    private enum Phase { case ready, starting, broadcasting, finishing }

    private struct State {
        var delegate = WeakDelegate()
        var phase = Phase.ready
        var isPaused = false
        var broadcastURL: URL?
        var serviceInfo: [String: String]?
    }

    private let state = Mutex(State())
    /// The upload extension's identifier.
    public let broadcastExtensionBundleID: String?
    /// The service's name, as the picker showed it.
    public let serviceName: String
    private let microphone: Bool
    private let display: String

    /// The controller whose broadcast runs (or starts) in this process: it hears replayd's events.
    private static let active = Mutex<RPBroadcastController?>(nil)

    init(identifier: String, serviceName: String, microphone: Bool, display: String) {
        broadcastExtensionBundleID = identifier
        self.serviceName = serviceName
        self.microphone = microphone
        self.display = display
    }

    /// Weak, as on iOS.
    public var delegate: (any RPBroadcastControllerDelegate)? {
        get { state.withLock { $0.delegate }.value as? any RPBroadcastControllerDelegate }
        set {
            let box = WeakDelegate(newValue)
            state.withLock { $0.delegate = box }
        }
    }

    /// True from the start until the broadcast ends, paused or not.
    public var isBroadcasting: Bool { state.withLock { $0.phase == .broadcasting } }
    /// True while paused: by the app, or by itself when the app lost the focus.
    public var isPaused: Bool { state.withLock { $0.isPaused } }
    /// Where viewers watch, once the extension said (nil before).
    public var broadcastURL: URL? { state.withLock { $0.broadcastURL } }
    /// The extension's latest service info (viewers, comments), as strings.
    public var serviceInfo: [String: String]? { state.withLock { $0.serviceInfo } }

    private var link: ReplaydLink { RPScreenRecorder.shared().link }

    // MARK: starting and finishing

    /// Starts the broadcast: the person is asked first (the app and the service, every time;
    /// "Don't Allow" throws `userDeclined`), then replayd starts the extension. Returns once the
    /// extension receives the app's samples. A finished controller can start again.
    public func startBroadcast() async throws {
        let ready = state.withLock { state in
            guard state.phase == .ready else { return false }
            state.phase = .starting
            state.isPaused = false
            return true
        }
        guard ready else { throw RPRecordingError(.attemptToStartInRecordingState, "this broadcast is already running: finish it first.") }
        let taken = Self.active.withLock { active in
            if let current = active, current !== self { return false }
            active = self
            return true
        }
        guard taken else {
            state.withLock { $0.phase = .ready }
            throw RPRecordingError(.attemptToStartInRecordingState, "this app is broadcasting already (another controller): finish that broadcast first.")
        }
        do {
            let answer = try await link.request(AppStartBroadcastRequest(options: AppSessionOptions(display: display, microphone: microphone),
                                                                         service: broadcastExtensionBundleID ?? ""), starting: true)
            state.withLock { $0.phase = .broadcasting }
            if let status = answer.status { apply(BroadcastUpdatedEvent(broadcastURL: status.broadcastURL, serviceInfo: status.serviceInfo)) }
        } catch {
            ended()
            throw error
        }
    }

    public func startBroadcast(handler: @escaping ((any Error)?) -> Void) {
        let handler = HandedOver(handler)
        Task { handler.value(await Self.failure { try await self.startBroadcast() }) }
    }

    /// Finishes the broadcast: the extension hears `broadcastFinished`; returns once it has left.
    public func finishBroadcast() async throws {
        let running = state.withLock { state in
            guard state.phase == .broadcasting else { return false }
            state.phase = .finishing
            return true
        }
        guard running else { throw RPRecordingError(.attemptToStopNonRecording, "this broadcast is not running.") }
        defer { ended() }
        _ = try await link.request(AppFinishBroadcastRequest())
    }

    public func finishBroadcast(handler: @escaping ((any Error)?) -> Void) {
        let handler = HandedOver(handler)
        Task { handler.value(await Self.failure { try await self.finishBroadcast() }) }
    }

    // MARK: pausing

    /// Pauses the broadcast: no samples go to the extension (it hears `broadcastPaused`).
    public func pauseBroadcast() async throws {
        guard isBroadcasting else { throw RPRecordingError(.attemptToStopNonRecording, "this broadcast is not running.") }
        _ = try await link.request(AppPauseBroadcastRequest())
        state.withLock { $0.isPaused = true }
    }

    /// iOS's form: pauses without waiting.
    public func pauseBroadcast() {
        Task { _ = try? await self.pauseBroadcast() }
    }

    /// Resumes the broadcast, after the app's pause or the pause on losing the focus.
    public func resumeBroadcast() async throws {
        guard isBroadcasting else { throw RPRecordingError(.attemptToStopNonRecording, "this broadcast is not running.") }
        _ = try await link.request(AppResumeBroadcastRequest())
        state.withLock { $0.isPaused = false }
    }

    /// iOS's form: resumes without waiting.
    public func resumeBroadcast() {
        Task { _ = try? await self.resumeBroadcast() }
    }

    // MARK: events

    /// replayd's events for the app's broadcast (from the recorder's connection).
    static func route(_ event: ControlEvent) {
        guard let controller = active.withLock({ $0 }) else { return }
        if let update = event.decode(BroadcastUpdatedEvent.self) {
            controller.apply(update)
        } else if let paused = event.decode(AppBroadcastPausedEvent.self) {
            controller.state.withLock { $0.isPaused = paused.paused }
        } else if let ended = event.decode(SessionEndedEvent.self), ended.status.kind == .appBroadcast {
            controller.endedBySystem(ended.error.map { RPRecordingError($0) })
        }
    }

    /// replayd went away: a running broadcast is over.
    static func connectionClosed() {
        guard let controller = active.withLock({ $0 }) else { return }
        controller.endedBySystem(RPRecordingError(.failedApplicationConnectionInterrupted, "replayd went away: the broadcast ended."))
    }

    private func apply(_ update: BroadcastUpdatedEvent) {
        let (url, info, box): (URL?, [String: String]?, WeakDelegate) = state.withLock { state in
            guard state.phase == .starting || state.phase == .broadcasting else { return (nil, nil, WeakDelegate()) }
            let url = update.broadcastURL.flatMap(URL.init(string:)).flatMap { $0 == state.broadcastURL ? nil : $0 }
            let info = update.serviceInfo.flatMap { $0 == state.serviceInfo ? nil : $0 }
            if let url { state.broadcastURL = url }
            if let info { state.serviceInfo = info }
            return (url, info, state.delegate)
        }
        let delegate = box.value as? any RPBroadcastControllerDelegate
        if let url { delegate?.broadcastController(self, didUpdateBroadcast: url) }
        if let info {
            let objects: [String: any NSCoding & NSObjectProtocol] = info.mapValues { NSString(string: $0) }
            delegate?.broadcastController(self, didUpdateServiceInfo: objects)
        }
    }

    /// The broadcast ended without the app finishing it: the delegate hears why.
    private func endedBySystem(_ error: RPRecordingError?) {
        let wasRunning = state.withLock { $0.phase == .broadcasting }
        guard wasRunning else { return }
        ended()
        delegate?.broadcastController(self, didFinishWithError: error)
    }

    private func ended() {
        state.withLock { state in
            state.phase = .ready
            state.isPaused = false
        }
        Self.active.withLock { if $0 === self { $0 = nil } }
    }

    private static func failure(_ body: @Sendable () async throws -> Void) async -> (any Error)? {
        do {
            try await body()
            return nil
        } catch {
            return error
        }
    }
}

// MARK: - RPSystemBroadcastPickerView

/// The system broadcast picker as an app shows it (`RPSystemBroadcastPickerView`'s role): its
/// action (`showPicker()`, what the view's button does on iOS) shows replayd's picker on the app's
/// display; the person's choice starts the **person's** broadcast of the whole screen, as
/// `replay broadcast` does. The app does not own it: it cannot stop it, it goes on when the app
/// quits, and it interrupts the app's own sessions as any system broadcast does.
public final class RPSystemBroadcastPickerView: Sendable {
    private struct State {
        var preferredExtension: String?
        var showsMicrophoneButton = true
    }

    private let state = Mutex(State())

    public init() {}

    /// iOS's `RPSystemBroadcastPickerView(frame:)`. There is no view to place here (no UIKit): the
    /// frame is ignored, and the app calls `showPicker()` from its own button.
    public convenience init(frame: CGRect) {
        self.init()
    }

    /// Offer only this upload extension (its identifier); nil offers every installed service.
    public var preferredExtension: String? {
        get { state.withLock { $0.preferredExtension } }
        set { state.withLock { $0.preferredExtension = newValue } }
    }

    /// Whether the picker shows its microphone switch (true by default, as on iOS). Without it the
    /// broadcast has no microphone.
    public var showsMicrophoneButton: Bool {
        get { state.withLock { $0.showsMicrophoneButton } }
        set { state.withLock { $0.showsMicrophoneButton = newValue } }
    }

    /// The view's action: shows the picker and, once the person chose, starts the system broadcast.
    /// Returns when it runs (with the service's identifier); throws `userDeclined` when the person cancelled.
    @discardableResult
    public func showPicker() async throws -> String {
        let recorder = RPScreenRecorder.shared()
        guard let display = recorder.display else {
            throw RPRecordingError(.failedToStart, "this app has no X display (DISPLAY is not set): the picker has nowhere to show.")
        }
        let (preferred, showsMicrophone) = state.withLock { ($0.preferredExtension, $0.showsMicrophoneButton) }
        let choice = try await recorder.link.request(AppPickBroadcastServiceRequest(display: display, preferredExtension: preferred,
                                                                                   showsMicrophoneButton: showsMicrophone))
        _ = try await recorder.link.request(StartBroadcastRequest(options: BroadcastOptions(service: choice.identifier, display: display,
                                                                                           microphone: choice.microphone)), starting: true)
        return choice.identifier
    }

    /// The action without waiting: `completionHandler` hears how it went.
    public func showPicker(completionHandler: (((any Error)?) -> Void)?) {
        let completionHandler = HandedOver(completionHandler)
        Task {
            do {
                try await self.showPicker()
                completionHandler.value?(nil)
            } catch {
                completionHandler.value?(error)
            }
        }
    }
}
