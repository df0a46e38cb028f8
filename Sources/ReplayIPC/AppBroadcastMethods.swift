/// The requests and events of an app's own broadcast (the OpenReplayKit library's
/// `RPBroadcastActivityViewController` and `RPBroadcastController`) and of the system picker shown
/// from an app (`RPSystemBroadcastPickerView`). See docs/PROTOCOL.md, "In-app broadcasts".
///
/// As for every app request, replayd knows the app by its connection's pid (`SO_PEERCRED`), never by
/// what it says. An in-app broadcast carries only the app's windows and sound (and the microphone when
/// asked), through the upload extension the person chose; it pauses by itself when the app loses the
/// focus, and only the app resumes it.

extension SessionStatus.Kind {
    /// An app's own broadcast (`RPBroadcastController.startBroadcast`): its windows and sound, to an upload extension.
    public static let appBroadcast = Self(rawValue: "app-broadcast")
}

/// Show the broadcast picker for the calling app (`RPBroadcastActivityViewController`): answered with
/// the service the person chose, or `user-declined` when they cancelled. Nothing starts yet.
public struct AppPickBroadcastServiceRequest: ControlMethod, Equatable {
    public typealias Answer = AppBroadcastServiceAnswer
    public static let method = "appPickBroadcastService"
    /// Where the picker shows: the app's own display.
    public var display: String
    /// Offer only this service (`load(withPreferredExtension:)`, `RPSystemBroadcastPickerView.preferredExtension`).
    public var preferredExtension: String?
    /// Whether the picker shows its microphone switch (`RPSystemBroadcastPickerView.showsMicrophoneButton`).
    public var showsMicrophoneButton: Bool
    public init(display: String, preferredExtension: String? = nil, showsMicrophoneButton: Bool = true) {
        self.display = display
        self.preferredExtension = preferredExtension
        self.showsMicrophoneButton = showsMicrophoneButton
    }
}

/// The person's choice in the picker.
public struct AppBroadcastServiceAnswer: Codable, Sendable, Equatable {
    public var identifier: String
    public var displayName: String
    public var microphone: Bool
    public init(identifier: String, displayName: String, microphone: Bool) {
        self.identifier = identifier
        self.displayName = displayName
        self.microphone = microphone
    }
}

/// Start the calling app's broadcast to `service`. Every start shows the pairing prompt, which names
/// the app and the service (never remembered); "Don't Allow" is `user-declined`. Answered with the
/// status (kind `app-broadcast`) once the extension has the samples; the connection hears
/// `broadcastUpdated`, `appBroadcastPaused` and the session's end (`sessionEnded`, and
/// `appSessionStopped` when the system ended it).
public struct AppStartBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appStartBroadcast"
    public var options: AppSessionOptions
    public var service: String
    /// `broadcastStarted(withSetupInfo:)`'s dictionary.
    public var setupInfo: [String: String]
    public init(options: AppSessionOptions, service: String, setupInfo: [String: String] = [:]) {
        self.options = options
        self.service = service
        self.setupInfo = setupInfo
    }
}

/// Pause the calling app's broadcast (no samples go to the extension until it resumes).
public struct AppPauseBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appPauseBroadcast"
    public init() {}
}

/// Resume the calling app's broadcast, after its own pause or the pause on losing the focus.
public struct AppResumeBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appResumeBroadcast"
    public init() {}
}

/// Finish the calling app's broadcast: the extension hears `broadcastFinished`, and the answer (the
/// final status) comes once it has left.
public struct AppFinishBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = AppSessionAnswer
    public static let method = "appFinishBroadcast"
    public init() {}
}

/// To the app: its broadcast was paused or resumed. `reason` says why when replayd paused it itself
/// (the app lost the focus); nil when the app asked.
public struct AppBroadcastPausedEvent: ControlEventBody, Equatable {
    public static let event = "appBroadcastPaused"
    public var paused: Bool
    public var reason: String?
    public init(paused: Bool, reason: String? = nil) {
        self.paused = paused
        self.reason = reason
    }
}
