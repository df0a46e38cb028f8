/// The requests and events of apps (the OpenReplayKit library: `RPScreenRecorder`), of the person's
/// privacy choices (`replay privacy`) and of the system clip buffer (`replay clip`).
///
/// An app never says who it is: replayd knows the caller from the kernel (`SO_PEERCRED` of its
/// connection) and keys the app's sessions by that pid. Several apps may record at once; one app has
/// at most one session of each kind (`appRecording`, `appCapture`, `appClip`).

extension SessionStatus.Kind {
    /// An app's own recording (`startRecording`): only its windows and its sound.
    public static let appRecording = Self(rawValue: "app-recording")
    /// An app's in-app capture (`startCapture`): its own samples, handed back to it.
    public static let appCapture = Self(rawValue: "app-capture")
    /// An app's clip buffer (`startClipBuffering`): its last seconds, in memory.
    public static let appClip = Self(rawValue: "app-clip")
    /// The person's clip buffer (`replay clip start`): the whole screen's last seconds, in memory.
    public static let clip = Self(rawValue: "clip")
}

extension ReplayError.Code {
    /// The person answered "Don't Allow" to the consent prompt: nothing was captured.
    public static let userDeclined = Self(rawValue: "user-declined")
    /// A system session (`replay record`, a broadcast) took over: the app's session ended and its
    /// recording was discarded.
    public static let interrupted = Self(rawValue: "interrupted")
    /// A value out of range (a clip longer than 15 s, a negative duration).
    public static let invalidParameter = Self(rawValue: "invalid-parameter")
    /// Apps cannot record now: the person records the screen.
    public static let unavailable = Self(rawValue: "unavailable")
    /// A clip is being exported for this app already.
    public static let exportInProgress = Self(rawValue: "export-in-progress")
}

// MARK: - App sessions

/// What an app asks for when it starts a session: the display its windows are on (the app's own
/// `DISPLAY`; replayd captures only the caller's windows there) and whether the microphone is recorded.
public struct AppSessionOptions: Codable, Sendable, Equatable {
    public var display: String
    public var microphone: Bool
    public init(display: String, microphone: Bool) {
        self.display = display
        self.microphone = microphone
    }
}

/// What the app session requests answer with: the session's status (none when nothing runs).
public struct AppSessionAnswer: Codable, Sendable, Equatable {
    public var status: SessionStatus?
    public init(status: SessionStatus?) { self.status = status }
}

/// Start recording the caller (its windows, its sound, the microphone when asked). The first start
/// of an app shows the consent prompt (remembered 8 minutes). Answered once recording.
public struct AppStartRecordingRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appStartRecording"
    public var options: AppSessionOptions
    public init(options: AppSessionOptions) { self.options = options }
}

/// What an app's stopped recording became.
public struct AppRecordingAnswer: Codable, Sendable, Equatable {
    public var status: SessionStatus?
    /// Where the movie is: `outputPath` when one was given, else replayd's own copy kept for the
    /// preview (`appPresentPreview`) until it is saved, shared or discarded.
    public var path: String
    public init(status: SessionStatus?, path: String) {
        self.status = status
        self.path = path
    }
}

/// Stop the caller's recording. With `outputPath` (absolute, must not exist) the movie is moved
/// there; without it replayd keeps it for the preview.
public struct AppStopRecordingRequest: ControlMethod, Equatable {
    public typealias Answer = AppRecordingAnswer
    public static let method = "appStopRecording"
    public var outputPath: String?
    public init(outputPath: String?) { self.outputPath = outputPath }
}

/// An answer with nothing in it.
public struct EmptyAnswer: Codable, Sendable, Equatable {
    public init() {}
}

/// Discard the recording kept for the preview (and stop the caller's recording first, if one runs).
public struct AppDiscardRecordingRequest: ControlMethod, Equatable {
    public typealias Answer = EmptyAnswer
    public static let method = "appDiscardRecording"
    public init() {}
}

/// What the person did in the preview window.
public struct AppPreviewAnswer: Codable, Sendable, Equatable {
    /// `saved`, `shared` or `cancelled` (open: a client meets others without error).
    public var activity: String
    /// Where the movie went when saved or shared.
    public var path: String?
    public init(activity: String, path: String?) {
        self.activity = activity
        self.path = path
    }
}

/// Show the system preview of the caller's kept recording; answered when the person closes it.
public struct AppPresentPreviewRequest: ControlMethod, Equatable {
    public typealias Answer = AppPreviewAnswer
    public static let method = "appPresentPreview"
    public init() {}
}

/// What `appStartCapture` answers: the session, and where to fetch the frame ring once.
public struct AppCaptureAnswer: Codable, Sendable, Equatable {
    public var status: SessionStatus?
    /// A socket in replayd's private folder that hands the caller (and only it) the ring's memory and
    /// eventfd once (`RingHandover`); it is gone after that, or after `RingHandover.timeout`.
    public var ringSocket: String
    public init(status: SessionStatus?, ringSocket: String) {
        self.status = status
        self.ringSocket = ringSocket
    }
}

/// Start the caller's in-app capture (its samples come back to it through the frame ring).
public struct AppStartCaptureRequest: ControlMethod, Equatable {
    public typealias Answer = AppCaptureAnswer
    public static let method = "appStartCapture"
    public var options: AppSessionOptions
    public init(options: AppSessionOptions) { self.options = options }
}

/// Stop the caller's in-app capture.
public struct AppStopCaptureRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appStopCapture"
    public init() {}
}

/// Start the caller's clip buffer (its last 15 s, encoded, in replayd's memory).
public struct AppStartClipBufferingRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appStartClipBuffering"
    public var options: AppSessionOptions
    public init(options: AppSessionOptions) { self.options = options }
}

/// Stop the caller's clip buffer (what it held is forgotten).
public struct AppStopClipBufferingRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appStopClipBuffering"
    public init() {}
}

/// What an exported clip is.
public struct ClipAnswer: Codable, Sendable, Equatable {
    public var path: String
    /// The clip's length (it starts at a keyframe: up to one keyframe interval longer than asked).
    public var seconds: Double
    public init(path: String, seconds: Double) {
        self.path = path
        self.seconds = seconds
    }
}

/// Write the last `durationSeconds` (at most 15) of the caller's clip buffer to `outputPath`
/// (absolute, must not exist), while buffering goes on.
public struct AppExportClipRequest: ControlMethod, Equatable {
    public typealias Answer = ClipAnswer
    public static let method = "appExportClip"
    public var outputPath: String
    public var durationSeconds: Double
    public init(outputPath: String, durationSeconds: Double) {
        self.outputPath = outputPath
        self.durationSeconds = durationSeconds
    }
    /// iOS's limit for `exportClip(to:duration:)`.
    public static let maximumSeconds = 15.0
}

/// Whether recording is possible for the caller now.
public struct AvailabilityAnswer: Codable, Sendable, Equatable {
    public var available: Bool
    /// Why not, in a sentence, when it is not.
    public var reason: String?
    /// Whether some session captures the screen now (`RPScreen.isCaptured`).
    public var captured: Bool?
    public init(available: Bool, reason: String?, captured: Bool? = nil) {
        self.available = available
        self.reason = reason
        self.captured = captured
    }
}

/// Is recording available on `display`? (An X display replayd can open; no system session
/// running.) The connection then receives `availabilityChanged` and `capturedChanged` events.
public struct AvailabilityRequest: ControlMethod, Equatable {
    public typealias Answer = AvailabilityAnswer
    public static let method = "availability"
    public var display: String
    public init(display: String) { self.display = display }
}

// MARK: - App events (to the app's own connections only)

/// The system ended one of the app's sessions (not the app): `interrupted` by a system session
/// (the recording is discarded), or failed (disk full, the display went away).
public struct AppSessionStoppedEvent: ControlEventBody, Equatable {
    public static let event = "appSessionStopped"
    public var status: SessionStatus
    public var error: ReplayError
    public init(status: SessionStatus, error: ReplayError) {
        self.status = status
        self.error = error
    }
}

/// Recording became available or unavailable for apps (a system session started or ended).
public struct AvailabilityChangedEvent: ControlEventBody, Equatable {
    public static let event = "availabilityChanged"
    public var available: Bool
    public var reason: String?
    public init(available: Bool, reason: String?) {
        self.available = available
        self.reason = reason
    }
}

/// Some session captures the screen now (`captured`), or none does any more: `RPScreen.isCaptured`.
public struct CapturedChangedEvent: ControlEventBody, Equatable {
    public static let event = "capturedChanged"
    public var captured: Bool
    public init(captured: Bool) { self.captured = captured }
}

// MARK: - Privacy (`replay privacy`)

/// One app's remembered consent answer.
public struct ConsentEntry: Codable, Sendable, Equatable {
    /// The app's executable (`/proc/PID/exe`): what an answer is remembered for.
    public var executable: String
    /// The name the prompt showed.
    public var name: String
    /// `allow` or `deny`.
    public var answer: String
    /// Seconds until the prompt comes again.
    public var remainingSeconds: Double
    public init(executable: String, name: String, answer: String, remainingSeconds: Double) {
        self.executable = executable
        self.name = name
        self.answer = answer
        self.remainingSeconds = remainingSeconds
    }
}

public struct PrivacyListAnswer: Codable, Sendable, Equatable {
    public var apps: [ConsentEntry]
    public init(apps: [ConsentEntry]) { self.apps = apps }
}

/// The consent answers replayd remembers now.
public struct PrivacyListRequest: ControlMethod, Equatable {
    public typealias Answer = PrivacyListAnswer
    public static let method = "privacyList"
    public init() {}
}

public struct PrivacyResetAnswer: Codable, Sendable, Equatable {
    /// The answers forgotten.
    public var removed: [ConsentEntry]
    public init(removed: [ConsentEntry]) { self.removed = removed }
}

/// Forget the answers for `app` (an executable path, its base name, or the name the prompt showed),
/// or all of them: the next start asks again.
public struct PrivacyResetRequest: ControlMethod, Equatable {
    public typealias Answer = PrivacyResetAnswer
    public static let method = "privacyReset"
    public var app: String?
    public init(app: String?) { self.app = app }
}

// MARK: - The person's clip buffer (`replay clip`)

/// Start the system clip buffer: the whole screen (and sound), the last `seconds` (≤ 60) in memory.
public struct ClipStartRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "clipStart"
    public var options: RecordingOptions
    public var seconds: Double
    public init(options: RecordingOptions, seconds: Double) {
        self.options = options
        self.seconds = seconds
    }
    public static let maximumSeconds = 60.0
}

/// Save the last `seconds` of the system clip buffer to `outputPath`, while buffering goes on.
public struct ClipSaveRequest: ControlMethod, Equatable {
    public typealias Answer = ClipAnswer
    public static let method = "clipSave"
    public var outputPath: String
    public var seconds: Double?
    public init(outputPath: String, seconds: Double?) {
        self.outputPath = outputPath
        self.seconds = seconds
    }
}

/// Stop the system clip buffer.
public struct ClipStopRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "clipStop"
    public init() {}
}

/// Every session running now (the system recording, the clip buffer, apps' sessions): `replay status`.
public struct SessionsAnswer: Codable, Sendable, Equatable {
    public var sessions: [SessionStatus]
    public init(sessions: [SessionStatus]) { self.sessions = sessions }
}

public struct SessionsRequest: ControlMethod, Equatable {
    public typealias Answer = SessionsAnswer
    public static let method = "sessions"
    public init() {}
}
