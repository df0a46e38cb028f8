/// The requests and events of broadcasts: the person's (`replay broadcast`, the Control Center),
/// and those of the upload extension replayd runs for it (the OpenReplayKit SDK's
/// `RPBroadcastSampleHandler`). See docs/PROTOCOL.md, "Broadcasts".
///
/// An extension never says who it is either: replayd started it and knows its pid, and the
/// connection's peer (`SO_PEERCRED`) must be that pid for the extension requests below.

extension SessionStatus.Kind {
    /// The person's broadcast (`replay broadcast`): the whole screen through an upload extension.
    public static let broadcast = Self(rawValue: "broadcast")
}

extension ReplayError.Code {
    /// No installed upload extension has this identifier.
    public static let unknownService = Self(rawValue: "unknown-service")
    /// The upload extension failed: it crashed, hung, went over its memory limit, never came, or
    /// finished the broadcast with an error of its own (`finishBroadcastWithError`).
    public static let extensionFailed = Self(rawValue: "extension-failed")
}

// MARK: - the person's side

/// What a broadcast is started with.
public struct BroadcastOptions: Codable, Sendable, Equatable {
    /// The upload extension's identifier (`replay services` lists them); nil: the person picks one.
    public var service: String?
    public var display: String
    public var microphone: Bool
    public var systemAudio: Bool
    public var framesPerSecond: Int
    /// The title (`--title`), also in `setupInfo` as `title`.
    public var title: String?
    /// `broadcastStarted(withSetupInfo:)`'s dictionary: strings (`--setup KEY=VALUE`).
    public var setupInfo: [String: String]

    public init(service: String?, display: String, microphone: Bool = false, systemAudio: Bool = true, framesPerSecond: Int = 30,
                title: String? = nil, setupInfo: [String: String] = [:]) {
        self.service = service
        self.display = display
        self.microphone = microphone
        self.systemAudio = systemAudio
        self.framesPerSecond = framesPerSecond
        self.title = title
        self.setupInfo = setupInfo
    }
}

/// Start the person's broadcast. Answered with its status once the extension has the samples
/// (kind `broadcast`); the connection is subscribed to its events (`status`, `broadcastUpdated`,
/// `sessionEnded`). A system broadcast interrupts apps' sessions, as `startRecording` does.
public struct StartBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "startBroadcast"
    public var options: BroadcastOptions
    public init(options: BroadcastOptions) { self.options = options }
}

/// Finish the broadcast: the extension hears `broadcastFinished`, and the answer (the final status)
/// comes once it has left (at most `BroadcastHostLimits.finishGrace` later).
public struct StopBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "stopBroadcast"
    public init() {}
}

/// Pause the broadcast: no samples go to the extension until `resumeBroadcast`.
public struct PauseBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "pauseBroadcast"
    public init() {}
}

public struct ResumeBroadcastRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "resumeBroadcast"
    public init() {}
}

/// The broadcast's URL or service info changed (the extension said so): to subscribers.
public struct BroadcastUpdatedEvent: ControlEventBody, Equatable {
    public static let event = "broadcastUpdated"
    public var broadcastURL: String?
    public var serviceInfo: [String: String]?
    public init(broadcastURL: String?, serviceInfo: [String: String]?) {
        self.broadcastURL = broadcastURL
        self.serviceInfo = serviceInfo
    }
}

// MARK: - the extension's side

/// The extension's first request: replayd answers with the broadcast it is for, its setup info,
/// and the socket where it fetches the frame ring once (`RingHandover`, as an app's capture does).
public struct ExtensionAttachRequest: ControlMethod, Equatable {
    public typealias Answer = ExtensionAttachAnswer
    public static let method = "extensionAttach"
    public init() {}
}

public struct ExtensionAttachAnswer: Codable, Sendable, Equatable {
    public var identifier: String
    public var sessionID: String
    public var setupInfo: [String: String]
    public var ringSocket: String
    /// How often replayd wants `extensionHeartbeat` (it gives up after `BroadcastHostLimits.hangTimeout` without one).
    public var heartbeatSeconds: Double
    public init(identifier: String, sessionID: String, setupInfo: [String: String], ringSocket: String, heartbeatSeconds: Double) {
        self.identifier = identifier
        self.sessionID = sessionID
        self.setupInfo = setupInfo
        self.ringSocket = ringSocket
        self.heartbeatSeconds = heartbeatSeconds
    }
}

/// "Still working": sent by the SDK while no call into the extension's handler has been running
/// for longer than the hang timeout.
public struct ExtensionHeartbeatRequest: ControlMethod, Equatable {
    public typealias Answer = EmptyAnswer
    public static let method = "extensionHeartbeat"
    public init() {}
}

/// `updateBroadcastURL(_:)`: where viewers watch.
public struct ExtensionBroadcastURLRequest: ControlMethod, Equatable {
    public typealias Answer = EmptyAnswer
    public static let method = "extensionBroadcastURL"
    public var url: String
    public init(url: String) { self.url = url }
}

/// `updateServiceInfo(_:)`: the service's own figures (viewers, comments), as strings.
public struct ExtensionServiceInfoRequest: ControlMethod, Equatable {
    public typealias Answer = EmptyAnswer
    public static let method = "extensionServiceInfo"
    public var info: [String: String]
    public init(info: [String: String]) { self.info = info }
}

/// `finishBroadcastWithError(_:)`: the broadcast ends, and the person reads `message`.
public struct ExtensionFinishRequest: ControlMethod, Equatable {
    public typealias Answer = EmptyAnswer
    public static let method = "extensionFinish"
    public var message: String
    public var domain: String?
    public var code: Int?
    public init(message: String, domain: String? = nil, code: Int? = nil) {
        self.message = message
        self.domain = domain
        self.code = code
    }
}

/// To the extension: the person paused, resumed or finished the broadcast.
public struct BroadcastControlEvent: ControlEventBody, Equatable {
    public static let event = "broadcastControl"
    public enum Action: String, Codable, Sendable { case paused, resumed, finished }
    public var action: Action
    public init(action: Action) { self.action = action }
}

/// To the extension: the focused application changed (`broadcastAnnotated(withApplicationInfo:)`).
public struct BroadcastAnnotatedEvent: ControlEventBody, Equatable {
    public static let event = "broadcastAnnotated"
    /// The app's identifier (its desktop entry's name, else its executable's), its name, and its icon's path.
    public var bundleIdentifier: String
    public var name: String
    public var iconPath: String?
    public init(bundleIdentifier: String, name: String, iconPath: String?) {
        self.bundleIdentifier = bundleIdentifier
        self.name = name
        self.iconPath = iconPath
    }
}

/// The host's limits, shared by replayd and the SDK.
public enum BroadcastHostLimits {
    /// The extension must attach within this after it was started.
    public static let attachTimeout: Duration = .seconds(10)
    /// The SDK sends a heartbeat this often.
    public static let heartbeatInterval: Duration = .seconds(1)
    /// No heartbeat for this long: the extension hangs, and the broadcast ends.
    public static let hangTimeout: Duration = .seconds(6)
    /// After `broadcastFinished`, the extension has this long to leave before it is killed.
    public static let finishGrace: Duration = .seconds(5)
    /// The default resident memory limit of an upload extension (iOS gives 50 MB).
    public static let defaultMemoryMegabytes = 50
}
