public import NIOCore

/// The protocol state of one RTMP publishing connection, without I/O: bytes in, actions out.
///
/// Handshake → `connect` (application `live` only) → `createStream` → `publish(key)`, which asks the
/// owner to authorize the key (`.authorize`) and waits for `authorization(accepted:)` before reading on →
/// media (`.media`) → `deleteStream` or disconnect. Malformed input throws (`RTMPChunkError`,
/// `RTMPServerHandshake.Failure`, `RTMPCommandError`): the owner closes the connection.
public struct RTMPConnectionStateMachine: Sendable {
    public enum State: Sendable, Equatable {
        case handshaking
        case connecting(app: String?)
        case authorizing(app: String, streamKey: String, messageStreamID: UInt32)
        case publishing(messageStreamID: UInt32)
        case closed
    }

    public enum CloseReason: Sendable, Equatable {
        case unknownApplication(String)
        case streamKeyRefused
        case playRefused
        case unpublished
    }

    public enum Action: Sendable, Equatable {
        /// Write these bytes to the peer.
        case send(ByteBuffer)
        /// Check this stream key; answer with `authorization(accepted:)`.
        case authorize(app: String, streamKey: String)
        /// An audio or video message of the publication, in order.
        case media(RTMPMessage)
        /// Close the connection (after the `.send`s before it).
        case close(CloseReason)
    }

    public static let windowAcknowledgementSize: UInt32 = 2_500_000
    public static let outgoingChunkSize = 4096

    public private(set) var state = State.handshaking
    private var handshake = RTMPServerHandshake()
    private var decoder: RTMPChunkDecoder
    private var encoder = RTMPChunkEncoder()
    private var pending = ByteBuffer()
    private var bytesReceived: UInt64 = 0
    private var bytesAcknowledged: UInt64 = 0

    public init(maximumMessageSize: Int = 8 << 20) {
        decoder = RTMPChunkDecoder(maximumMessageSize: maximumMessageSize)
    }

    public var isPublishing: Bool { if case .publishing = state { true } else { false } }

    /// Feeds received bytes.
    public mutating func receive(_ bytes: ByteBuffer) throws -> [Action] {
        guard state != .closed else { return [] }
        pending.writeImmutableBuffer(bytes)
        bytesReceived += UInt64(bytes.readableBytes)
        var actions: [Action] = []
        var out = ByteBuffer()
        if bytesReceived - bytesAcknowledged >= UInt64(Self.windowAcknowledgementSize), state != .handshaking {
            bytesAcknowledged = bytesReceived
            encoder.encode(RTMPServerMessages.acknowledgement(UInt32(truncatingIfNeeded: bytesReceived)), into: &out)
        }
        try process(&actions, &out)
        return actions
    }

    /// The owner's answer to `.authorize`.
    public mutating func authorization(accepted: Bool) throws -> [Action] {
        guard case .authorizing(_, _, let streamID) = state else { return [] }
        var actions: [Action] = []
        var out = ByteBuffer()
        if accepted {
            state = .publishing(messageStreamID: streamID)
            encoder.encode(RTMPServerMessages.streamBegin(streamID), into: &out)
            encoder.encode(RTMPServerMessages.onStatus(level: "status", code: "NetStream.Publish.Start", description: "Publishing",
                                                       messageStreamID: streamID), into: &out)
            // Media that arrived behind the publish command.
            try process(&actions, &out)
        } else {
            encoder.encode(RTMPServerMessages.onStatus(level: "error", code: "NetStream.Publish.BadName", description: "Stream key refused",
                                                       messageStreamID: streamID), into: &out)
            flush(&out, into: &actions)
            close(.streamKeyRefused, &actions)
        }
        return actions
    }

    private mutating func process(_ actions: inout [Action], _ out: inout ByteBuffer) throws {
        if state == .handshaking {
            while state == .handshaking, let step = try handshake.feed(&pending) {
                switch step {
                case .send(let reply): out.writeImmutableBuffer(reply)
                case .complete: state = .connecting(app: nil)
                }
            }
        }
        while isReading, let message = try decoder.decodeMessage(&pending) {
            try handle(message, &actions, &out)
        }
        if pending.readerIndex > 64 << 10 { pending.discardReadBytes() }
        flush(&out, into: &actions)
    }

    /// Reading stops while a key is being checked, and after closing.
    private var isReading: Bool {
        switch state {
        case .connecting, .publishing: true
        case .handshaking, .authorizing, .closed: false
        }
    }

    private func flush(_ out: inout ByteBuffer, into actions: inout [Action]) {
        if out.readableBytes > 0 {
            actions.append(.send(out))
            out = ByteBuffer()
        }
    }

    private mutating func close(_ reason: CloseReason, _ actions: inout [Action]) {
        state = .closed
        actions.append(.close(reason))
    }

    private mutating func handle(_ message: RTMPMessage, _ actions: inout [Action], _ out: inout ByteBuffer) throws {
        switch message.type {
        case .amf0Command:
            try handle(try RTMPCommand(decoding: message.payload), messageStreamID: message.messageStreamID, &actions, &out)
        case .audio, .video:
            if isPublishing {
                flush(&out, into: &actions)
                actions.append(.media(message))
            }
        default:
            // Control messages are applied by the decoder; data messages (@setDataFrame) need no answer.
            break
        }
    }

    private mutating func handle(_ command: RTMPCommand, messageStreamID: UInt32, _ actions: inout [Action], _ out: inout ByteBuffer) throws {
        switch command.kind {
        case .connect(let app, _):
            guard app == "live" else {
                encoder.encode(RTMPServerMessages.command(RTMPCommand(name: "_error", transactionID: command.transactionID, arguments: [
                    .object([("level", .string("error")), ("code", .string("NetConnection.Connect.Rejected")),
                             ("description", .string("Unknown application; publish to /live/STREAM_KEY"))])])), into: &out)
                flush(&out, into: &actions)
                close(.unknownApplication(app), &actions)
                return
            }
            state = .connecting(app: app)
            encoder.encode(RTMPServerMessages.windowAcknowledgementSize(Self.windowAcknowledgementSize), into: &out)
            encoder.encode(RTMPServerMessages.setPeerBandwidth(Self.windowAcknowledgementSize), into: &out)
            encoder.encode(RTMPServerMessages.setChunkSize(UInt32(Self.outgoingChunkSize)), into: &out)
            encoder.setChunkSize(Self.outgoingChunkSize)
            encoder.encode(RTMPServerMessages.connectResult(transactionID: command.transactionID), into: &out)
        case .releaseStream, .fcPublish, .fcUnpublish:
            if command.transactionID != 0 { encoder.encode(RTMPServerMessages.result(transactionID: command.transactionID), into: &out) }
        case .createStream:
            encoder.encode(RTMPServerMessages.result(transactionID: command.transactionID, value: .number(1)), into: &out)
        case .publish(let name, _):
            guard case .connecting(let app?) = state else { return }
            // OBS and others may append a query (`key?param=…`): the key is what precedes it.
            let key = String(name.prefix { $0 != "?" })
            state = .authorizing(app: app, streamKey: key, messageStreamID: messageStreamID)
            flush(&out, into: &actions)
            actions.append(.authorize(app: app, streamKey: key))
        case .deleteStream:
            flush(&out, into: &actions)
            close(.unpublished, &actions)
        case .play:
            flush(&out, into: &actions)
            close(.playRefused, &actions)
        case .other:
            break
        }
    }
}
