/// The messages of the control socket (docs/PROTOCOL.md). Pure values; `ControlFrameCodec` turns
/// them into frames.
///
/// Every message is one JSON object with a `type`: `hello` (the first message each way),
/// `request` (client → replayd, with an `id` and a `method`), `response` (replayd → client, the same
/// `id`, either a `status` or an `error`), `event` (replayd → client, unsolicited).
public enum ControlMessage: Sendable, Equatable {
    case hello(Hello)
    case request(id: UInt64, ControlRequest)
    case response(id: UInt64, ControlResponse)
    case event(ControlEvent)
}

/// The protocol version this build speaks. A peer with another version is refused with a clear
/// error; additions that old peers can ignore (new optional fields, new methods answered with
/// `bad-request`) do not change it.
public let controlProtocolVersion = 1

/// The first message each way.
public struct Hello: Codable, Sendable, Equatable {
    public enum Role: String, Codable, Sendable { case client, daemon }
    public var version: Int
    public var role: Role
    /// The sender's process id (informative; replayd trusts SO_PEERCRED, not this).
    public var pid: Int32
    /// Who is speaking, e.g. `replay 0.1` or `replayd 0.1`.
    public var software: String

    public init(version: Int = controlProtocolVersion, role: Role, pid: Int32, software: String) {
        self.version = version
        self.role = role
        self.pid = pid
        self.software = software
    }
}

public enum ControlRequest: Sendable, Equatable {
    /// Start a system recording. Answered with its status once recording (or with the error); the
    /// connection is subscribed to its events.
    case startRecording(RecordingOptions)
    /// Stop the running recording. Answered once the file is finished, with the final status.
    case stopRecording
    /// What runs now. Answered with a status, or with none when nothing is recording.
    case status
    /// Mute or unmute the microphone of the running recording.
    case setMicrophone(on: Bool)
    /// Receive `status` (about twice a second) and `sessionEnded` events.
    case subscribe
    /// A method this build does not know (a newer client): answered with `bad-request`.
    case unknown(method: String)

    public var method: String {
        switch self {
        case .startRecording: "startRecording"
        case .stopRecording: "stopRecording"
        case .status: "status"
        case .setMicrophone: "setMicrophone"
        case .subscribe: "subscribe"
        case .unknown(let method): method
        }
    }
}

/// The answer to one request: a status (or none), or an error.
public enum ControlResponse: Sendable, Equatable {
    case success(SessionStatus?)
    case failure(ReplayError)
}

public enum ControlEvent: Sendable, Equatable {
    /// The running session, about twice a second, to subscribers.
    case status(SessionStatus)
    /// The session ended: its final status, and the error that ended it if any.
    case sessionEnded(SessionStatus, ReplayError?)
    /// replayd closes this connection, and why (protocol mismatch, refused peer, shutting down).
    case goodbye(ReplayError)
}

// MARK: - JSON shape

extension ControlMessage: Codable {
    private enum CodingKeys: String, CodingKey {
        case type, id, method, options, on, status, error, event
        // hello
        case version, role, pid, software
    }

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: CodingKeys.self)
        let type = try c.decode(String.self, forKey: .type)
        switch type {
        case "hello":
            self = .hello(Hello(version: try c.decode(Int.self, forKey: .version),
                                role: try c.decode(Hello.Role.self, forKey: .role),
                                pid: try c.decode(Int32.self, forKey: .pid),
                                software: try c.decode(String.self, forKey: .software)))
        case "request":
            let id = try c.decode(UInt64.self, forKey: .id)
            let method = try c.decode(String.self, forKey: .method)
            let request: ControlRequest
            switch method {
            case "startRecording": request = .startRecording(try c.decode(RecordingOptions.self, forKey: .options))
            case "stopRecording": request = .stopRecording
            case "status": request = .status
            case "setMicrophone": request = .setMicrophone(on: try c.decode(Bool.self, forKey: .on))
            case "subscribe": request = .subscribe
            default: request = .unknown(method: method)
            }
            self = .request(id: id, request)
        case "response":
            let id = try c.decode(UInt64.self, forKey: .id)
            if let error = try c.decodeIfPresent(ReplayError.self, forKey: .error) {
                self = .response(id: id, .failure(error))
            } else {
                self = .response(id: id, .success(try c.decodeIfPresent(SessionStatus.self, forKey: .status)))
            }
        case "event":
            let event = try c.decode(String.self, forKey: .event)
            switch event {
            case "status":
                self = .event(.status(try c.decode(SessionStatus.self, forKey: .status)))
            case "sessionEnded":
                self = .event(.sessionEnded(try c.decode(SessionStatus.self, forKey: .status),
                                            try c.decodeIfPresent(ReplayError.self, forKey: .error)))
            case "goodbye":
                self = .event(.goodbye(try c.decode(ReplayError.self, forKey: .error)))
            default:
                throw DecodingError.dataCorruptedError(forKey: .event, in: c, debugDescription: "unknown event \"\(event)\"")
            }
        default:
            throw DecodingError.dataCorruptedError(forKey: .type, in: c, debugDescription: "unknown message type \"\(type)\"")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: CodingKeys.self)
        switch self {
        case .hello(let hello):
            try c.encode("hello", forKey: .type)
            try c.encode(hello.version, forKey: .version)
            try c.encode(hello.role, forKey: .role)
            try c.encode(hello.pid, forKey: .pid)
            try c.encode(hello.software, forKey: .software)
        case .request(let id, let request):
            try c.encode("request", forKey: .type)
            try c.encode(id, forKey: .id)
            try c.encode(request.method, forKey: .method)
            switch request {
            case .startRecording(let options): try c.encode(options, forKey: .options)
            case .setMicrophone(let on): try c.encode(on, forKey: .on)
            case .stopRecording, .status, .subscribe, .unknown: break
            }
        case .response(let id, let response):
            try c.encode("response", forKey: .type)
            try c.encode(id, forKey: .id)
            switch response {
            case .success(let status): try c.encodeIfPresent(status, forKey: .status)
            case .failure(let error): try c.encode(error, forKey: .error)
            }
        case .event(let event):
            try c.encode("event", forKey: .type)
            switch event {
            case .status(let status):
                try c.encode("status", forKey: .event)
                try c.encode(status, forKey: .status)
            case .sessionEnded(let status, let error):
                try c.encode("sessionEnded", forKey: .event)
                try c.encode(status, forKey: .status)
                try c.encodeIfPresent(error, forKey: .error)
            case .goodbye(let error):
                try c.encode("goodbye", forKey: .event)
                try c.encode(error, forKey: .error)
            }
        }
    }
}
