public import Foundation
import ReplayIPC
import Synchronization

/// The screen as apps see it (UIScreen's role in ReplayKit): whether anything captures it now.
///
/// `isCaptured` is true while any OpenReplayKit session records, captures or buffers the screen
/// (the person's, or any app's). replayd tells the library at once when that changes, and it also
/// sets the root window property `_OPENREPLAYKIT_CAPTURED` (CARDINAL 0/1) for toolkits that watch
/// X11 directly. Watching keeps a connection to replayd open (and starts replayd when needed).
public final class RPScreen: Sendable {
    /// Posted (object: the screen) when `isCaptured` changes.
    public static let capturedDidChangeNotification = Notification.Name("RPScreenCapturedDidChangeNotification")

    public static let main = RPScreen()

    private struct State {
        var captured = false
        var watching = false
        var continuations: [UUID: AsyncStream<Bool>.Continuation] = [:]
    }

    private let state = Mutex(State())

    private init() {}

    /// Whether any session captures the screen now. The first read starts watching (until then,
    /// and while replayd cannot be reached, it reads false).
    public var isCaptured: Bool {
        startWatching()
        return state.withLock { $0.captured }
    }

    /// The values of `isCaptured`: the current one first, then each change.
    public var capturedChanges: AsyncStream<Bool> {
        let (stream, continuation) = AsyncStream.makeStream(of: Bool.self, bufferingPolicy: .bufferingNewest(16))
        let id = UUID()
        let current = state.withLock { state in
            state.continuations[id] = continuation
            return state.captured
        }
        continuation.yield(current)
        continuation.onTermination = { [weak self] _ in
            self?.state.withLock { _ = $0.continuations.removeValue(forKey: id) }
        }
        startWatching()
        return stream
    }

    private func startWatching() {
        let first = state.withLock { state in
            defer { state.watching = true }
            return !state.watching
        }
        if first { Task { await RPScreenRecorder.shared().refreshAvailability() } }
    }

    func update(captured: Bool) {
        let continuations: [AsyncStream<Bool>.Continuation]? = state.withLock { state in
            guard state.captured != captured else { return nil }
            state.captured = captured
            return Array(state.continuations.values)
        }
        guard let continuations else { return }
        for continuation in continuations { continuation.yield(captured) }
        NotificationCenter.default.post(name: Self.capturedDidChangeNotification, object: nil)
    }

    /// After replayd went away: watch again on the next read.
    func connectionLost() {
        state.withLock { $0.watching = false }
    }
}
