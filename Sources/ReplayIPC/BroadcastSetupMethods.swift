/// The requests of a broadcast **setup** extension (kind `broadcast-setup`, the OpenReplayKit SDK's
/// `RPBroadcastSetupViewController`): replayd starts it before a broadcast whose upload extension's
/// manifest names it (`setupExtension`) when the broadcast was started without `--setup` values. It
/// shows its own window (sign-in, title), then completes the request (its setup info goes to the
/// upload extension's `broadcastStarted(withSetupInfo:)`) or cancels it (the broadcast does not
/// start, and the person reads why). See docs/PROTOCOL.md, "Setup extensions".
///
/// As for upload extensions, only the pid replayd started (`SO_PEERCRED`) may send these.

extension ReplayError.Code {
    /// The setup extension cancelled the broadcast (`cancelRequest(withError:)`), or left without
    /// completing it.
    public static let setupCancelled = Self(rawValue: "setup-cancelled")
}

/// The application a setup extension sets up a broadcast of (`loadBroadcastingApplicationInfo`):
/// its identifier (its desktop entry's name, else its executable's), name, and icon (a PNG's path).
public struct BroadcastApplicationInfo: Codable, Sendable, Equatable {
    public var bundleIdentifier: String
    public var name: String
    public var iconPath: String?
    public init(bundleIdentifier: String, name: String, iconPath: String?) {
        self.bundleIdentifier = bundleIdentifier
        self.name = name
        self.iconPath = iconPath
    }
}

/// The setup extension's first request: replayd answers with what it sets up.
public struct ExtensionSetupAttachRequest: ControlMethod, Equatable {
    public typealias Answer = ExtensionSetupAttachAnswer
    public static let method = "extensionSetupAttach"
    public init() {}
}

public struct ExtensionSetupAttachAnswer: Codable, Sendable, Equatable {
    /// The setup extension's own identifier.
    public var identifier: String
    /// The upload extension (broadcast service) it sets up.
    public var service: String
    /// The application whose broadcast it is: the focused one for a system broadcast (empty strings
    /// when none has the focus).
    public var application: BroadcastApplicationInfo
    public init(identifier: String, service: String, application: BroadcastApplicationInfo) {
        self.identifier = identifier
        self.service = service
        self.application = application
    }
}

/// `completeRequest(withBroadcast:setupInfo:)`: the broadcast starts with this setup info (strings)
/// and, until the upload extension says another, this broadcast URL.
public struct ExtensionSetupCompleteRequest: ControlMethod, Equatable {
    public typealias Answer = EmptyAnswer
    public static let method = "extensionSetupComplete"
    public var broadcastURL: String?
    public var setupInfo: [String: String]
    public init(broadcastURL: String?, setupInfo: [String: String]) {
        self.broadcastURL = broadcastURL
        self.setupInfo = setupInfo
    }
}

/// `cancelRequest(withError:)`: the broadcast does not start, and the person reads `message`.
public struct ExtensionSetupCancelRequest: ControlMethod, Equatable {
    public typealias Answer = EmptyAnswer
    public static let method = "extensionSetupCancel"
    public var message: String
    public var domain: String?
    public var code: Int?
    public init(message: String, domain: String? = nil, code: Int? = nil) {
        self.message = message
        self.domain = domain
        self.code = code
    }
}
