public import Foundation
import ReplayIPC
import Synchronization

/// Told when the system stops the app's recording, and when recording becomes available or not.
/// Every method has a default implementation (they are optional on iOS). They are called on a
/// thread of the library's own: hop to your UI's thread before touching widgets.
public protocol RPScreenRecorderDelegate: AnyObject {
    /// The system stopped the recording (a system recording interrupted it: `interrupted`, and the
    /// recording is discarded; or it failed). `previewViewController` is nil when nothing was kept.
    /// By default this calls the iOS 9 form below, as iOS does for a delegate that has only that one.
    func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWith previewViewController: RPPreviewViewController?, error: (any Error)?)
    /// The iOS 9 form of the same (deprecated on iOS, still called there and here).
    func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWithError error: any Error, previewViewController: RPPreviewViewController?)
    /// `isAvailable` changed.
    func screenRecorderDidChangeAvailability(_ screenRecorder: RPScreenRecorder)
}

extension RPScreenRecorderDelegate {
    public func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWith previewViewController: RPPreviewViewController?, error: (any Error)?) {
        self.screenRecorder(screenRecorder, didStopRecordingWithError: error ?? RPRecordingError(.unknown, "the system stopped the recording."),
                       previewViewController: previewViewController)
    }
    public func screenRecorder(_ screenRecorder: RPScreenRecorder, didStopRecordingWithError error: any Error, previewViewController: RPPreviewViewController?) {}
    public func screenRecorderDidChangeAvailability(_ screenRecorder: RPScreenRecorder) {}
}

/// The app's recorder, as ReplayKit's: `RPScreenRecorder.shared()`. It records only this app (its
/// windows and its sound, and the microphone when `isMicrophoneEnabled`), through replayd, which
/// asks the person first.
///
/// ```swift
/// let recorder = RPScreenRecorder.shared()
/// try await recorder.startRecording()
/// // …
/// let preview = try await recorder.stopRecording()
/// preview.present()
/// ```
public final class RPScreenRecorder: Sendable {
    private struct State {
        var delegate = WeakDelegate()
        var isMicrophoneEnabled = false
        var isRecording = false
        var isClipBuffering = false
        /// Replayd's word on availability (nil: not asked yet).
        var available: Bool?
    }

    private let state = Mutex(State())
    private let environment: [String: String]
    let link: ReplaydLink

    private static let instance = RPScreenRecorder()

    /// The app's one recorder.
    public static func shared() -> RPScreenRecorder { instance }

    private init() {
        environment = ProcessInfo.processInfo.environment
        let box = RecorderBox()
        link = ReplaydLink(onEvent: { box.recorder?.handle($0) }, onClose: { box.recorder?.connectionClosed() })
        box.recorder = self
    }

    /// The desktop the app is on: its Wayland display when it has one (replayd then refuses what that
    /// desktop cannot give within the privacy model), else `DISPLAY`; nil with neither.
    var display: String? { DesktopSession.current(environment: environment)?.displayName }

    // MARK: properties

    /// Weak, as on iOS.
    public var delegate: (any RPScreenRecorderDelegate)? {
        get { state.withLock { $0.delegate }.value as? any RPScreenRecorderDelegate }
        set {
            let box = WeakDelegate(newValue)
            state.withLock { $0.delegate = box }
            // A delegate wants to hear about availability: ask replayd, which then tells us of changes.
            if newValue != nil { Task { await self.refreshAvailability() } }
        }
    }

    /// Whether the app can record: false where there is no display (`DISPLAY` unset, no X server),
    /// on a Wayland desktop that gives replayd no app's own windows (all but GNOME with
    /// OpenReplayKit's Shell extension, docs/WAYLAND.md), and while the person records the screen.
    /// A delegate hears when it changes.
    public var isAvailable: Bool {
        guard let display else { return false }
        if DesktopSession(displayName: display)?.isWayland == true {
            // Only replayd can ask the Shell extension (it answers replayd alone): false until it has said yes.
            guard WaylandSupport.appSessionsPossible(environment: environment) else { return false }
            return state.withLock { $0.available } ?? false
        }
        guard ReplaydLink.displayExists(display) else { return false }
        return state.withLock { $0.available } ?? true
    }

    /// Whether the app's recording or its in-app capture runs (iOS says true for both).
    public var isRecording: Bool { state.withLock { $0.isRecording } || isCapturing }

    /// Record the microphone too (set before starting).
    public var isMicrophoneEnabled: Bool {
        get { state.withLock { $0.isMicrophoneEnabled } }
        set { state.withLock { $0.isMicrophoneEnabled = newValue } }
    }

    private var options: AppSessionOptions? {
        display.map { AppSessionOptions(display: $0, microphone: isMicrophoneEnabled) }
    }

    private func noDisplayError() -> RPRecordingError {
        RPRecordingError(.failedToStart, "this app has no X display (DISPLAY is not set): there is nothing of it to record.")
    }

    // MARK: recording

    /// Starts recording the app. The first start asks the person (the answer holds 8 minutes);
    /// "Don't Allow" fails with `userDeclined`.
    public func startRecording() async throws {
        guard let options else {
            notifyAvailability(false)
            throw noDisplayError()
        }
        if isRecording { throw RPRecordingError(.attemptToStartInRecordingState, "this app is already recording or capturing: stop it first.") }
        _ = try await link.request(AppStartRecordingRequest(options: options), starting: true)
        state.withLock { $0.isRecording = true }
    }

    public func startRecording(handler: (((any Error)?) -> Void)? = nil) {
        let handler = HandedOver(handler)
        Task { handler.value?(await Self.failure { try await self.startRecording() }) }
    }

    /// Stops the recording; the movie waits in replayd for the preview (`present()`), or
    /// `discardRecording`.
    public func stopRecording() async throws -> RPPreviewViewController {
        let answer: AppRecordingAnswer
        do {
            answer = try await link.request(AppStopRecordingRequest(outputPath: nil))
        } catch {
            state.withLock { $0.isRecording = false }
            throw error
        }
        state.withLock { $0.isRecording = false }
        return RPPreviewViewController(recorder: self, path: answer.path)
    }

    public func stopRecording(handler: ((RPPreviewViewController?, (any Error)?) -> Void)? = nil) {
        let handler = HandedOver(handler)
        Task {
            do {
                let preview = try await self.stopRecording()
                handler.value?(preview, nil)
            } catch {
                handler.value?(nil, error)
            }
        }
    }

    /// Stops the recording and writes the movie to `url` (a file that must not exist), without a preview.
    public func stopRecording(withOutput url: URL) async throws {
        guard url.isFileURL else { throw RPRecordingError(.failedToObtainURL, "\(url) is not a file URL.") }
        let path = url.standardizedFileURL.path
        _ = try await link.request(AppStopRecordingRequest(outputPath: path.hasPrefix("/") ? path : FileManager.default.currentDirectoryPath + "/" + path))
        state.withLock { $0.isRecording = false }
    }

    public func stopRecording(withOutput url: URL, completionHandler: (((any Error)?) -> Void)? = nil) {
        let completionHandler = HandedOver(completionHandler)
        Task { completionHandler.value?(await Self.failure { try await self.stopRecording(withOutput: url) }) }
    }

    /// Discards the recording (a running one is stopped first): its file is removed.
    public func discardRecording() async {
        _ = try? await link.request(AppDiscardRecordingRequest())
        state.withLock { $0.isRecording = false }
    }

    public func discardRecording(handler: @escaping () -> Void) {
        let handler = HandedOver(handler)
        Task {
            await self.discardRecording()
            handler.value()
        }
    }

    // MARK: clip buffering (iOS 15)

    /// Keeps the app's last 15 s in replayd's memory (encoded), for `exportClip`.
    public func startClipBuffering() async throws {
        guard let options else { throw noDisplayError() }
        _ = try await link.request(AppStartClipBufferingRequest(options: options), starting: true)
        state.withLock { $0.isClipBuffering = true }
    }

    public func startClipBuffering(completionHandler: (((any Error)?) -> Void)? = nil) {
        let completionHandler = HandedOver(completionHandler)
        Task { completionHandler.value?(await Self.failure { try await self.startClipBuffering() }) }
    }

    public func stopClipBuffering() async throws {
        defer { state.withLock { $0.isClipBuffering = false } }
        _ = try await link.request(AppStopClipBufferingRequest())
    }

    public func stopClipBuffering(completionHandler: (((any Error)?) -> Void)? = nil) {
        let completionHandler = HandedOver(completionHandler)
        Task { completionHandler.value?(await Self.failure { try await self.stopClipBuffering() }) }
    }

    /// Writes the last `duration` seconds (at most 15) to `url` (a new file) as an MP4, while
    /// buffering goes on. The clip starts at a keyframe: it can be up to 2 s longer than asked.
    public func exportClip(to url: URL, duration: TimeInterval) async throws {
        guard duration > 0, duration <= AppExportClipRequest.maximumSeconds else {
            throw RPRecordingError(.invalidParameter, "a clip is at most \(Int(AppExportClipRequest.maximumSeconds)) seconds long, not \(duration).")
        }
        guard url.isFileURL else { throw RPRecordingError(.failedToObtainURL, "\(url) is not a file URL.") }
        _ = try await link.request(AppExportClipRequest(outputPath: url.standardizedFileURL.path, durationSeconds: duration))
    }

    public func exportClip(to url: URL, duration: TimeInterval, completionHandler: (((any Error)?) -> Void)? = nil) {
        let completionHandler = HandedOver(completionHandler)
        Task { completionHandler.value?(await Self.failure { try await self.exportClip(to: url, duration: duration) }) }
    }

    // MARK: events

    private func handle(_ event: ControlEvent) {
        RPBroadcastController.route(event)
        if let stopped = event.decode(AppSessionStoppedEvent.self) {
            let error = RPRecordingError(stopped.error)
            let wasRecording: Bool = state.withLock { state in
                switch stopped.status.kind {
                case .appRecording:
                    defer { state.isRecording = false }
                    return state.isRecording
                case .appClip: state.isClipBuffering = false
                default: break
                }
                return false
            }
            if wasRecording { delegate?.screenRecorder(self, didStopRecordingWith: nil, error: error) }
        } else if let changed = event.decode(AvailabilityChangedEvent.self) {
            notifyAvailability(changed.available)
        } else if let captured = event.decode(CapturedChangedEvent.self) {
            RPScreen.main.update(captured: captured.captured)
        }
    }

    /// replayd went away: whatever ran is over.
    private func connectionClosed() {
        let wasRecording: Bool = state.withLock { state in
            defer {
                state.isRecording = false
                state.isClipBuffering = false
            }
            return state.isRecording
        }
        if wasRecording {
            delegate?.screenRecorder(self, didStopRecordingWith: nil,
                                     error: RPRecordingError(.failedApplicationConnectionInterrupted, "replayd went away: the recording ended."))
        }
        RPBroadcastController.connectionClosed()
        RPScreen.main.update(captured: false)
        RPScreen.main.connectionLost()
    }

    private func notifyAvailability(_ available: Bool) {
        let changed: Bool = state.withLock { state in
            defer { state.available = available }
            return (state.available ?? true) != available
        }
        if changed { delegate?.screenRecorderDidChangeAvailability(self) }
    }

    /// Asks replayd whether apps can record (and subscribes to its changes and to `isCaptured`).
    func refreshAvailability() async {
        guard let display else {
            notifyAvailability(false)
            return
        }
        guard let answer = try? await link.request(AvailabilityRequest(display: display)) else { return }
        notifyAvailability(answer.available)
        if let captured = answer.captured { RPScreen.main.update(captured: captured) }
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

/// Lets the link's handlers reach the recorder, which is made after the link (the one recorder
/// lives as long as the process).
private final class RecorderBox: Sendable {
    private let value = Mutex<RPScreenRecorder?>(nil)
    var recorder: RPScreenRecorder? {
        get { value.withLock { $0 } }
        set { value.withLock { $0 = newValue } }
    }
}

extension ReplaydLink {
    /// A local display (`:N`) has its X socket; other forms are trusted.
    static func displayExists(_ display: String) -> Bool {
        guard display.hasPrefix(":") else { return true }
        let number = display.dropFirst().split(separator: ".").first.map(String.init) ?? ""
        return Int(number) != nil && FileManager.default.fileExists(atPath: "/tmp/.X11-unix/X\(number)")
    }
}
