package import ReplayIPC
package import Foundation

/// The life of the session in one slot (`SessionSlot`: the system recording, an app's recording…):
/// idle → starting → recording → stopping → idle. One session at a time per slot.
///
/// A value type with no I/O: each event returns what the owner (`RecordingSessions`) must do, so
/// the owner re-checks the state after every `await` by feeding the outcome back in.
package struct SessionStateMachine: Sendable {
    package struct Session: Sendable, Equatable {
        package var id: String
        package var kind: SessionStatus.Kind
        /// From SO_PEERCRED of the connection that asked.
        package var clientPID: Int32
        package var options: RecordingOptions
        package var startedAt: Date
        /// The app it belongs to (its slot's owner), nil for the person's sessions.
        package var owner: Int32?
        package var output: SessionOutput

        package init(id: String, kind: SessionStatus.Kind = .recording, clientPID: Int32, options: RecordingOptions, startedAt: Date,
                     owner: Int32? = nil, output: SessionOutput = .movie) {
            self.id = id
            self.kind = kind
            self.clientPID = clientPID
            self.options = options
            self.startedAt = startedAt
            self.owner = owner
            self.output = output
        }
    }

    package enum State: Sendable, Equatable {
        case idle
        /// `ScreenRecorder.prepare` runs; `stopRequested` remembers a stop that came meanwhile.
        case starting(Session, stopRequested: Bool)
        case recording(Session)
        /// `stop()` was called; waiting for `run()` to finish the file.
        case stopping(Session)
    }

    package private(set) var state: State = .idle

    package init() {}

    package var current: Session? {
        switch state {
        case .idle: nil
        case .starting(let session, _), .recording(let session), .stopping(let session): session
        }
    }

    package var isIdle: Bool { state == .idle }

    // MARK: start

    package enum StartAction: Sendable, Equatable {
        /// Call `ScreenRecorder.prepare`, then `prepareSucceeded` or `prepareFailed`.
        case prepare(Session)
        /// Answer the client with this error; nothing changes.
        case reject(ReplayError)
    }

    package mutating func startRequested(_ session: Session) -> StartAction {
        guard let running = current else {
            state = .starting(session, stopRequested: false)
            return .prepare(session)
        }
        return .reject(Self.sessionActiveError(running))
    }

    package enum PreparedAction: Sendable, Equatable {
        /// Show the indicator and run the recorder.
        case beginRecording
        /// A stop came while preparing: call `stop()` then `run()`, which finishes the file at once.
        case beginAndStop
        /// Not our session (cannot happen unless the owner is confused): close the recorder.
        case discard
    }

    package mutating func prepareSucceeded(id: String) -> PreparedAction {
        guard case .starting(let session, let stopRequested) = state, session.id == id else { return .discard }
        if stopRequested {
            state = .stopping(session)
            return .beginAndStop
        }
        state = .recording(session)
        return .beginRecording
    }

    /// Prepare threw: back to idle. Returns the session that failed (nil when not ours).
    package mutating func prepareFailed(id: String) -> Session? {
        guard case .starting(let session, _) = state, session.id == id else { return nil }
        state = .idle
        return session
    }

    // MARK: stop

    package enum StopAction: Sendable, Equatable {
        /// Call `recorder.stop()`, then wait for the session to end.
        case stopRecorder(Session)
        /// Already on its way down (or still preparing): wait for the session to end.
        case waitForEnd(Session)
        /// Answer "nothing is recording".
        case nothingRecording
    }

    package mutating func stopRequested() -> StopAction {
        switch state {
        case .idle:
            return .nothingRecording
        case .starting(let session, _):
            state = .starting(session, stopRequested: true)
            return .waitForEnd(session)
        case .recording(let session):
            state = .stopping(session)
            return .stopRecorder(session)
        case .stopping(let session):
            return .waitForEnd(session)
        }
    }

    // MARK: end

    package enum EndAction: Sendable, Equatable {
        /// Tear down the indicator, tell subscribers and stop waiters, forget the recorder.
        case sessionEnded(Session)
        case ignore
    }

    /// `run()` returned or threw.
    package mutating func runEnded(id: String) -> EndAction {
        switch state {
        case .recording(let session) where session.id == id, .stopping(let session) where session.id == id:
            state = .idle
            return .sessionEnded(session)
        default:
            return .ignore
        }
    }

    // MARK: status

    package var statusState: SessionStatus.State? {
        switch state {
        case .idle: nil
        case .starting: .starting
        case .recording: .running
        case .stopping: .stopping
        }
    }

    /// The error a second `replay record` gets: which recording runs, since when, started by whom.
    package static func sessionActiveError(_ running: Session) -> ReplayError {
        ReplayError(.sessionActive,
                    "a recording is already running: \"\(running.options.outputPath)\" on display \(running.options.display), since \(clockTime(running.startedAt)), started by pid \(running.clientPID). Stop it with `replay stop` (or wait for it to end), then start again.")
    }

    /// `HH:MM:SS` in local time.
    package static func clockTime(_ date: Date) -> String {
        var seconds = time_t(date.timeIntervalSince1970)
        var parts = tm()
        localtime_r(&seconds, &parts)
        func two(_ value: Int32) -> String { value < 10 ? "0\(value)" : "\(value)" }
        return "\(two(parts.tm_hour)):\(two(parts.tm_min)):\(two(parts.tm_sec))"
    }
}

/// What a session writes to.
package enum SessionOutput: Sendable, Equatable {
    /// A movie file (the session's `options.outputPath`).
    case movie
    /// A clip buffer of the last `seconds`, in memory (kept with `keyframeMargin` more).
    case clip(seconds: Double)
    /// The app's own samples, before the encoder, through a frame ring (in-app capture); no file,
    /// and nothing is encoded (the engine runs no encoder with no destination).
    case ring

    /// What a clip buffer keeps beyond its length: one keyframe interval, so that a clip of its
    /// whole length can start at the keyframe before it.
    package static let keyframeMargin = 2.0
}

/// When replayd leaves by itself: after `limit` with no session and no client connected.
package struct IdleExitPolicy: Sendable {
    package let limit: Duration?
    private var idleSince: ContinuousClock.Instant?

    /// `limit` nil or zero: never.
    package init(limit: Duration?) {
        self.limit = (limit == nil || limit! <= .zero) ? nil : limit
    }

    /// Feeds what is true at `now`; returns true when it is time to exit.
    package mutating func update(busy: Bool, now: ContinuousClock.Instant) -> Bool {
        guard let limit, !busy else {
            idleSince = nil
            return false
        }
        let since = idleSince ?? now
        idleSince = since
        return now - since >= limit
    }
}
