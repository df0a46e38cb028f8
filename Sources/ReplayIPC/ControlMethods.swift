/// The requests and events of the system recording (`replay record`, `stop`, `status`, `mic`).
/// Each is its own type: a new one is declared beside these and registered with replayd's router.

/// What the recording requests answer with: the session's status, or none when nothing records.
public struct SessionAnswer: Codable, Sendable, Equatable {
    public var status: SessionStatus?
    public init(status: SessionStatus?) { self.status = status }
}

/// Start a system recording. Answered with its status once recording (or with the error); the
/// connection is subscribed to its events.
public struct StartRecordingRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "startRecording"
    public var options: RecordingOptions
    public init(options: RecordingOptions) { self.options = options }
}

/// Stop the running recording. Answered once the file is finished, with the final status.
public struct StopRecordingRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "stopRecording"
    public init() {}
}

/// What runs now. Answered with a status, or with none when nothing is recording.
public struct StatusRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "status"
    public init() {}
}

/// Mute or unmute the microphone of the running recording.
public struct SetMicrophoneRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "setMicrophone"
    public var on: Bool
    public init(on: Bool) { self.on = on }
}

/// Receive `status` (about twice a second) and `sessionEnded` events.
public struct SubscribeRequest: ControlMethod, Equatable {
    public typealias Answer = SessionAnswer
    public static let method = "subscribe"
    public init() {}
}

extension ControlMethod where Self == StartRecordingRequest {
    public static func startRecording(_ options: RecordingOptions) -> Self { Self(options: options) }
}
extension ControlMethod where Self == StopRecordingRequest {
    public static var stopRecording: Self { Self() }
}
extension ControlMethod where Self == StatusRequest {
    public static var status: Self { Self() }
}
extension ControlMethod where Self == SetMicrophoneRequest {
    public static func setMicrophone(on: Bool) -> Self { Self(on: on) }
}
extension ControlMethod where Self == SubscribeRequest {
    public static var subscribe: Self { Self() }
}

/// The running session, about twice a second, to subscribers.
public struct StatusEvent: ControlEventBody, Equatable {
    public static let event = "status"
    public var status: SessionStatus
    public init(status: SessionStatus) { self.status = status }
}

/// The session ended: its final status, and the error that ended it if any.
public struct SessionEndedEvent: ControlEventBody, Equatable {
    public static let event = "sessionEnded"
    public var status: SessionStatus
    public var error: ReplayError?
    public init(status: SessionStatus, error: ReplayError?) {
        self.status = status
        self.error = error
    }
}

/// replayd closes this connection, and why (protocol mismatch, refused peer, shutting down).
public struct GoodbyeEvent: ControlEventBody, Equatable {
    public static let event = "goodbye"
    public var error: ReplayError
    public init(error: ReplayError) { self.error = error }
}
