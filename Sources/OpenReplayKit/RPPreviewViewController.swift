import Foundation
import ReplayIPC
import Synchronization

/// Told when the person closes the preview, and what they did with the recording.
public protocol RPPreviewViewControllerDelegate: AnyObject {
    /// The preview window closed.
    func previewControllerDidFinish(_ previewController: RPPreviewViewController)
    /// What the person did: `RPPreviewViewController.ActivityType.save` or `.share`, or nothing
    /// (an empty set) when they cancelled (the recording is then deleted).
    func previewController(_ previewController: RPPreviewViewController, didFinishWithActivityTypes activityTypes: Set<String>)
}

extension RPPreviewViewControllerDelegate {
    public func previewControllerDidFinish(_ previewController: RPPreviewViewController) {}
    public func previewController(_ previewController: RPPreviewViewController, didFinishWithActivityTypes activityTypes: Set<String>) {}
}

/// The system preview of a stopped recording: `present()` shows replayd's preview window (a
/// system window the app cannot draw over), where the person plays and trims it, then saves it to
/// the Videos folder, shares it (saves it elsewhere) or cancels (deletes it).
public final class RPPreviewViewController: Sendable {
    /// What the person did, as `previewController(_:didFinishWithActivityTypes:)` reports it.
    public enum ActivityType {
        public static let save = "org.openreplaykit.activity.save"
        public static let share = "org.openreplaykit.activity.share"
    }

    private struct State {
        var delegate = WeakDelegate()
        var presented = false
        var savedPath: String?
    }

    private let state = Mutex(State())
    private let recorder: RPScreenRecorder
    /// Where replayd keeps the recording until the person decides.
    let path: String

    init(recorder: RPScreenRecorder, path: String) {
        self.recorder = recorder
        self.path = path
    }

    /// Weak, as on iOS.
    public var previewControllerDelegate: (any RPPreviewViewControllerDelegate)? {
        get { state.withLock { $0.delegate }.value as? any RPPreviewViewControllerDelegate }
        set {
            let box = WeakDelegate(newValue)
            state.withLock { $0.delegate = box }
        }
    }

    /// Where the person saved or shared the recording, once they have.
    public var savedPath: String? { state.withLock { $0.savedPath } }

    /// Shows the preview window; the delegate hears when the person closes it.
    public func present() {
        Task { _ = try? await self.presentAndWait() }
    }

    /// iOS's `dismiss(animated:completion:)`, which an app calls from `previewControllerDidFinish`.
    /// The window is replayd's and closes by itself when the person is done: this only calls
    /// `completion`, at once, on the calling thread.
    public func dismiss(animated flag: Bool, completion: (() -> Void)? = nil) {
        completion?()
    }

    /// Shows the preview window and returns what the person chose (empty: cancelled).
    @discardableResult
    public func presentAndWait() async throws -> Set<String> {
        let first = state.withLock { state in
            defer { state.presented = true }
            return !state.presented
        }
        guard first else { throw RPRecordingError(.recordingInvalidSession, "this preview was shown already.") }
        let answer = try await recorder.link.request(AppPresentPreviewRequest())
        let activities: Set<String> = switch answer.activity {
        case "saved": [ActivityType.save]
        case "shared": [ActivityType.share]
        default: []
        }
        state.withLock { $0.savedPath = answer.path }
        let delegate = previewControllerDelegate
        delegate?.previewController(self, didFinishWithActivityTypes: activities)
        delegate?.previewControllerDidFinish(self)
        return activities
    }
}
