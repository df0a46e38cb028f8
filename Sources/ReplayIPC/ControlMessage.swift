/// The messages of the control socket (docs/PROTOCOL.md). Pure values; `ControlFrameCodec` turns
/// them into frames.
///
/// Every message is one JSON object with a `type`: `hello` (the first message each way),
/// `request` (client → replayd, with an `id` and a `method`), `response` (replayd → client, the same
/// `id`, its answer's fields or an `error`), `event` (replayd → client, unsolicited, with an `event`
/// name). Requests, answers and events carry their own fields beside the envelope's: each is a
/// Swift type of its own (`ControlMethod`, `ControlEventBody`), so that a new one is added by
/// declaring it, without editing a central switch, and a peer that does not know it ignores it.
public enum ControlMessage: Sendable, Equatable {
    case hello(Hello)
    case request(id: UInt64, ControlRequest)
    case response(id: UInt64, ControlResponse)
    case event(ControlEvent)
}

/// The protocol version this build speaks. A peer with another version is refused with a clear
/// error; additions that old peers can ignore (new optional fields, new methods answered with
/// `bad-request`, new events) do not change it.
public let controlProtocolVersion = 1

/// The first message each way.
public struct Hello: Codable, Sendable, Equatable {
    /// Who speaks: open, so that a new kind of peer (an app, an extension) is not a decoding error.
    public struct Role: RawRepresentable, Codable, Sendable, Hashable, CustomStringConvertible {
        public var rawValue: String
        public init(rawValue: String) { self.rawValue = rawValue }
        public var description: String { rawValue }

        /// A control client such as `replay`.
        public static let client = Role(rawValue: "client")
        public static let daemon = Role(rawValue: "daemon")
    }

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

// MARK: - Requests

/// A request a client can send: its `method` name and its own fields (the conforming type's
/// properties), answered on success with an `Answer` (its fields in the response).
public protocol ControlMethod: Codable, Sendable {
    associatedtype Answer: Codable, Sendable
    static var method: String { get }
}

/// A request as it crossed the socket: the method name and its fields.
public struct ControlRequest: Sendable, Equatable {
    public var method: String
    public var payload: ControlPayload

    public init(method: String, payload: ControlPayload = .empty) {
        self.method = method
        self.payload = payload
    }

    public init<Method: ControlMethod>(_ request: Method) throws(ControlCodecError) {
        self.init(method: Method.method, payload: try ControlPayload(request))
    }

    /// The request as `Method` (whose name it must carry).
    public func decode<Method: ControlMethod>(_ type: Method.Type) throws(ControlCodecError) -> Method {
        guard method == Method.method else {
            throw ControlCodecError(.malformedMessage, "a \"\(method)\" request is not \"\(Method.method)\"")
        }
        return try payload.decode(Method.self)
    }
}

/// The answer to one request: the answer's fields, or an error.
public enum ControlResponse: Sendable, Equatable {
    case success(ControlPayload)
    case failure(ReplayError)
}

// MARK: - Events

/// An event replayd can send: its `event` name and its own fields.
public protocol ControlEventBody: Codable, Sendable {
    static var event: String { get }
}

/// An event as it crossed the socket: its name and fields. A client looks for the events it knows
/// (`decode`) and ignores the others, so that replayd may add events without a new version.
public struct ControlEvent: Sendable, Equatable {
    public var name: String
    public var payload: ControlPayload

    public init(name: String, payload: ControlPayload = .empty) {
        self.name = name
        self.payload = payload
    }

    public init<Body: ControlEventBody>(_ event: Body) throws(ControlCodecError) {
        self.init(name: Body.event, payload: try ControlPayload(event))
    }

    /// The event as `Body`, or nil when it is another event (or does not decode as one).
    public func decode<Body: ControlEventBody>(_ type: Body.Type) -> Body? {
        guard name == Body.event else { return nil }
        return try? payload.decode(Body.self)
    }
}

// MARK: - JSON shape

extension ControlMessage: Codable {
    private struct Key: CodingKey {
        var stringValue: String
        var intValue: Int? { nil }
        init(_ string: String) { stringValue = string }
        init?(stringValue: String) { self.stringValue = stringValue }
        init?(intValue: Int) { nil }
    }

    /// The envelope's keys: a message's own fields may not use them.
    private static let envelope: Set<String> = ["type", "id", "method", "event"]

    public init(from decoder: any Decoder) throws {
        let c = try decoder.container(keyedBy: Key.self)
        let type = try c.decode(String.self, forKey: Key("type"))
        func payload() throws -> ControlPayload {
            var fields = try decoder.singleValueContainer().decode([String: JSONValue].self)
            for key in Self.envelope { fields[key] = nil }
            return ControlPayload(fields: fields)
        }
        switch type {
        case "hello":
            self = .hello(try Hello(from: decoder))
        case "request":
            self = .request(id: try c.decode(UInt64.self, forKey: Key("id")),
                            ControlRequest(method: try c.decode(String.self, forKey: Key("method")), payload: try payload()))
        case "response":
            let id = try c.decode(UInt64.self, forKey: Key("id"))
            if let error = try c.decodeIfPresent(ReplayError.self, forKey: Key("error")) {
                self = .response(id: id, .failure(error))
            } else {
                self = .response(id: id, .success(try payload()))
            }
        case "event":
            self = .event(ControlEvent(name: try c.decode(String.self, forKey: Key("event")), payload: try payload()))
        default:
            throw DecodingError.dataCorruptedError(forKey: Key("type"), in: c, debugDescription: "unknown message type \"\(type)\"")
        }
    }

    public func encode(to encoder: any Encoder) throws {
        var c = encoder.container(keyedBy: Key.self)
        func encode(_ payload: ControlPayload) throws {
            for (key, value) in payload.fields where !Self.envelope.contains(key) {
                try c.encode(value, forKey: Key(key))
            }
        }
        switch self {
        case .hello(let hello):
            try c.encode("hello", forKey: Key("type"))
            try hello.encode(to: encoder)
        case .request(let id, let request):
            try c.encode("request", forKey: Key("type"))
            try c.encode(id, forKey: Key("id"))
            try c.encode(request.method, forKey: Key("method"))
            try encode(request.payload)
        case .response(let id, let response):
            try c.encode("response", forKey: Key("type"))
            try c.encode(id, forKey: Key("id"))
            switch response {
            case .success(let payload): try encode(payload)
            case .failure(let error): try c.encode(error, forKey: Key("error"))
            }
        case .event(let event):
            try c.encode("event", forKey: Key("type"))
            try c.encode(event.name, forKey: Key("event"))
            try encode(event.payload)
        }
    }
}
