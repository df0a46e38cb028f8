public import NIOCore

/// Why a publish did not start or did not go on.
public struct RTMPPublishError: Error, Hashable, CustomStringConvertible {
    public enum Code: Hashable, Sendable {
        /// The TCP connection could not be made.
        case connectionFailed
        /// The server did not answer the handshake as RTMP.
        case handshakeFailed
        /// The server refused `connect` (an unknown application).
        case connectRefused
        /// The server refused `publish` (a wrong or revoked stream key, a name in use).
        case publishRefused
        /// The server ended a running publish (the key revoked, another publisher took it over).
        case publishEnded
        /// Handshake, connect and publish took longer than the setup timeout.
        case timedOut
        /// The server closed the connection.
        case connectionClosed
        /// The server sent something this client cannot read.
        case malformedResponse
        /// Media was sent before the server accepted the publish, or after it ended.
        case notPublishing
    }

    public let code: Code
    /// The server's status code (`NetStream.Publish.BadName`, `NetConnection.Connect.Rejected`…), when it sent one.
    public let status: String?
    /// What happened, with the server's own description when it gave one.
    public let message: String

    public init(code: Code, status: String? = nil, message: String) {
        self.code = code
        self.status = status
        self.message = message
    }

    public var description: String {
        "RTMP publish: \(message)" + (status.map { " (\($0))" } ?? "")
    }
}

/// The protocol state of one RTMP publishing client, without I/O: bytes in, actions out; media in, bytes out.
///
/// `start()` → C0 C1; S0 S1 S2 → C2, Set Chunk Size, `connect(app, tcUrl)`; its `_result` →
/// `releaseStream`, `FCPublish`, `createStream`; its `_result` (the message stream id) → `publish(key, "live")`;
/// `onStatus NetStream.Publish.Start` → `.publishing`, and `video`/`audio` encode FLV tags as RTMP messages.
/// Any `_error` to `connect`, or an `onStatus` of level `error`, fails with what the server said; so does a
/// server that ends the publish later. Pings are answered; acknowledgements sent per the server's window.
public struct RTMPPublishStateMachine: Sendable {
    public enum State: Sendable, Equatable {
        case idle
        case handshaking
        case connecting
        case creatingStream
        case startingPublish(messageStreamID: UInt32)
        case publishing(messageStreamID: UInt32)
        case closed
    }

    public enum Action: Sendable, Equatable {
        /// Write these bytes to the server.
        case send(ByteBuffer)
        /// The server accepted the publish: media may follow.
        case publishing
        /// The publish failed or ended: close the connection (after the `.send`s before it).
        case fail(RTMPPublishError)
    }

    /// Chunk size of what this client sends (large: media goes in few chunks).
    public static let outgoingChunkSize = 4096
    static let connectTransaction: Double = 1
    static let createStreamTransaction: Double = 4
    static let publishTransaction: Double = 5

    public let app: String
    public let streamKey: String
    public let tcURL: String
    public private(set) var state = State.idle
    private var handshake = RTMPClientHandshake()
    private var decoder = RTMPChunkDecoder()
    private var encoder = RTMPChunkEncoder()
    private var pending = ByteBuffer()
    private var bytesReceived: UInt64 = 0
    private var bytesAcknowledged: UInt64 = 0
    private var acknowledgementWindow: UInt64 = 2_500_000

    /// - Parameters:
    ///   - app: the application (`live` in `rtmp://host/live/KEY`).
    ///   - streamKey: the name published (the stream key).
    ///   - tcURL: the URL of the application (`rtmp://host:port/live`), as `connect` reports it.
    public init(app: String, streamKey: String, tcURL: String) {
        self.app = app
        self.streamKey = streamKey
        self.tcURL = tcURL
    }

    public var isPublishing: Bool { if case .publishing = state { true } else { false } }

    /// C0 and C1: the first bytes to send.
    public mutating func start() -> ByteBuffer {
        guard state == .idle else { return ByteBuffer() }
        state = .handshaking
        return handshake.start()
    }

    /// Feeds bytes the server sent.
    public mutating func receive(_ bytes: ByteBuffer) -> [Action] {
        guard state != .closed, state != .idle else { return [] }
        pending.writeImmutableBuffer(bytes)
        bytesReceived += UInt64(bytes.readableBytes)
        var actions: [Action] = []
        var out = ByteBuffer()
        do {
            if state == .handshaking {
                let c2: ByteBuffer?
                do { c2 = try handshake.feed(&pending) } catch {
                    return fail(RTMPPublishError(code: .handshakeFailed, message: "the server's handshake is not RTMP: \(error)"), &out, &actions)
                }
                guard let c2 else { return actions }
                out.writeImmutableBuffer(c2)
                encoder.encode(RTMPServerMessages.setChunkSize(UInt32(Self.outgoingChunkSize)), into: &out)
                encoder.setChunkSize(Self.outgoingChunkSize)
                encoder.encode(RTMPServerMessages.command(RTMPCommand(
                    name: "connect", transactionID: Self.connectTransaction,
                    commandObject: .object([("app", .string(app)), ("type", .string("nonprivate")), ("flashVer", .string("FMLE/3.0 (compatible; OpenReplayKit)")),
                                            ("tcUrl", .string(tcURL))]))), into: &out)
                state = .connecting
            }
            while state != .closed, let message = try decoder.decodeMessage(&pending) {
                try handle(message, &out, &actions)
            }
        } catch let error as RTMPPublishError {
            return fail(error, &out, &actions)
        } catch {
            return fail(RTMPPublishError(code: .malformedResponse, message: "the server sent a malformed message: \(error)"), &out, &actions)
        }
        if state != .closed, bytesReceived - bytesAcknowledged >= acknowledgementWindow {
            bytesAcknowledged = bytesReceived
            encoder.encode(RTMPServerMessages.acknowledgement(UInt32(truncatingIfNeeded: bytesReceived)), into: &out)
        }
        if pending.readerIndex > 64 << 10 { pending.discardReadBytes() }
        flush(&out, into: &actions)
        return actions
    }

    /// The server closed the connection: the failure to report.
    public mutating func connectionClosed() -> RTMPPublishError? {
        defer { state = .closed }
        switch state {
        case .closed, .idle: return nil
        case .publishing: return RTMPPublishError(code: .connectionClosed, message: "the server closed the connection while publishing")
        default: return RTMPPublishError(code: .connectionClosed, message: "the server closed the connection before the publish started")
        }
    }

    /// An H.264 FLV tag at `timestamp` milliseconds (decoding time), as the bytes to send.
    public mutating func video(_ tag: FLVVideoTag, timestamp: UInt32) throws(RTMPPublishError) -> ByteBuffer {
        try media(type: .video, chunkStreamID: 6, payload: tag.encode(), timestamp: timestamp)
    }

    /// An AAC FLV tag at `timestamp` milliseconds, as the bytes to send.
    public mutating func audio(_ tag: FLVAudioTag, timestamp: UInt32) throws(RTMPPublishError) -> ByteBuffer {
        try media(type: .audio, chunkStreamID: 4, payload: tag.encode(), timestamp: timestamp)
    }

    /// `FCUnpublish` and `deleteStream`: the end of the publish, as the bytes to send before closing.
    public mutating func unpublish() -> ByteBuffer {
        var out = ByteBuffer()
        if case .publishing(let streamID) = state {
            encoder.encode(RTMPServerMessages.command(RTMPCommand(name: "FCUnpublish", transactionID: 6, arguments: [.string(streamKey)])), into: &out)
            encoder.encode(RTMPServerMessages.command(RTMPCommand(name: "deleteStream", transactionID: 7, arguments: [.number(Double(streamID))])),
                           into: &out)
        }
        state = .closed
        return out
    }

    private mutating func media(type: RTMPMessageType, chunkStreamID: UInt32, payload: ByteBuffer, timestamp: UInt32) throws(RTMPPublishError) -> ByteBuffer {
        guard case .publishing(let streamID) = state else {
            throw RTMPPublishError(code: .notPublishing, message: "media sent while not publishing (state \(state))")
        }
        var out = ByteBuffer()
        encoder.encode(RTMPMessage(chunkStreamID: chunkStreamID, timestamp: timestamp, typeID: type.rawValue, messageStreamID: streamID,
                                   payload: payload), into: &out)
        return out
    }

    private mutating func handle(_ message: RTMPMessage, _ out: inout ByteBuffer, _ actions: inout [Action]) throws {
        switch message.type {
        case .amf0Command:
            try handle(try RTMPCommand(decoding: message.payload), &out, &actions)
        case .windowAcknowledgementSize:
            if let size = message.payload.getInteger(at: message.payload.readerIndex, as: UInt32.self), size > 0 {
                acknowledgementWindow = UInt64(size)
            }
        case .userControl:
            // Ping request (event 6): answer with a ping response (event 7) carrying its timestamp.
            var payload = message.payload
            if payload.readInteger(as: UInt16.self) == 6, let time = payload.readInteger(as: UInt32.self) {
                var body = ByteBuffer()
                body.writeInteger(UInt16(7))
                body.writeInteger(time)
                encoder.encode(RTMPMessage(chunkStreamID: 2, timestamp: 0, typeID: RTMPMessageType.userControl.rawValue, messageStreamID: 0,
                                           payload: body), into: &out)
            }
        default:
            // Set Chunk Size and Abort are applied by the decoder; bandwidth and data messages need no answer.
            break
        }
    }

    private mutating func handle(_ command: RTMPCommand, _ out: inout ByteBuffer, _ actions: inout [Action]) throws {
        let info = command.arguments.first
        let code = info?["code"]?.stringValue
        let text = info?["description"]?.stringValue
        switch command.name {
        case "_result" where command.transactionID == Self.connectTransaction && state == .connecting:
            for (name, transaction) in [("releaseStream", 2.0), ("FCPublish", 3.0)] {
                encoder.encode(RTMPServerMessages.command(RTMPCommand(name: name, transactionID: transaction, arguments: [.string(streamKey)])),
                               into: &out)
            }
            encoder.encode(RTMPServerMessages.command(RTMPCommand(name: "createStream", transactionID: Self.createStreamTransaction)), into: &out)
            state = .creatingStream
        case "_result" where command.transactionID == Self.createStreamTransaction && state == .creatingStream:
            guard let id = command.arguments.first?.numberValue, id >= 0, id < Double(UInt32.max) else {
                throw RTMPPublishError(code: .malformedResponse, message: "createStream answered no stream id")
            }
            let streamID = UInt32(id)
            var publish = RTMPServerMessages.command(RTMPCommand(name: "publish", transactionID: Self.publishTransaction,
                                                                 arguments: [.string(streamKey), .string("live")]), messageStreamID: streamID)
            publish.chunkStreamID = 8
            encoder.encode(publish, into: &out)
            state = .startingPublish(messageStreamID: streamID)
        case "_error" where command.transactionID == Self.connectTransaction:
            throw RTMPPublishError(code: .connectRefused, status: code,
                                   message: "the server refused to connect to application '\(app)'" + (text.map { ": \($0)" } ?? ""))
        case "_error" where command.transactionID == Self.createStreamTransaction || command.transactionID == Self.publishTransaction:
            throw RTMPPublishError(code: .publishRefused, status: code, message: "the server refused the publish" + (text.map { ": \($0)" } ?? ""))
        case "onStatus":
            if info?["level"]?.stringValue == "error" {
                if isPublishing {
                    throw RTMPPublishError(code: .publishEnded, status: code, message: "the server ended the publish" + (text.map { ": \($0)" } ?? ""))
                }
                throw RTMPPublishError(code: .publishRefused, status: code,
                                       message: "the server refused to publish this stream key (wrong or revoked?)" + (text.map { ": \($0)" } ?? ""))
            }
            if code == "NetStream.Publish.Start", case .startingPublish(let streamID) = state {
                state = .publishing(messageStreamID: streamID)
                flush(&out, into: &actions)
                actions.append(.publishing)
            }
        default:
            break
        }
    }

    private mutating func fail(_ error: RTMPPublishError, _ out: inout ByteBuffer, _ actions: inout [Action]) -> [Action] {
        flush(&out, into: &actions)
        state = .closed
        actions.append(.fail(error))
        return actions
    }

    private func flush(_ out: inout ByteBuffer, into actions: inout [Action]) {
        if out.readableBytes > 0 {
            actions.append(.send(out))
            out = ByteBuffer()
        }
    }
}
