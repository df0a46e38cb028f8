public import NIOCore

/// An RTMP command message (AMF0, type 20) as the publish flow uses it.
public struct RTMPCommand: Sendable, Equatable {
    public var name: String
    public var transactionID: Double
    /// The command object (often `.null`).
    public var commandObject: AMF0Value
    public var arguments: [AMF0Value]

    public init(name: String, transactionID: Double, commandObject: AMF0Value = .null, arguments: [AMF0Value] = []) {
        self.name = name
        self.transactionID = transactionID
        self.commandObject = commandObject
        self.arguments = arguments
    }

    /// Parses an AMF0 command body.
    public init(decoding payload: ByteBuffer) throws(RTMPCommandError) {
        let values: [AMF0Value]
        do { values = try AMF0.decodeAll(payload) } catch { throw RTMPCommandError(message: "bad AMF0: \(error)") }
        guard let name = values.first?.stringValue else { throw RTMPCommandError(message: "no command name") }
        self.name = name
        self.transactionID = values.count > 1 ? (values[1].numberValue ?? 0) : 0
        self.commandObject = values.count > 2 ? values[2] : .null
        self.arguments = values.count > 3 ? Array(values[3...]) : []
    }

    public func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        AMF0.encode([.string(name), .number(transactionID), commandObject] + arguments, allocator: allocator)
    }

    /// The publish flow's commands, by meaning.
    public enum Kind: Sendable, Equatable {
        /// `connect(app, tcUrl)`.
        case connect(app: String, tcURL: String?)
        case releaseStream(name: String)
        case fcPublish(name: String)
        case createStream
        /// `publish(name, type)`; name is the stream key (possibly with a `?query`).
        case publish(name: String, type: String)
        case fcUnpublish(name: String)
        case deleteStream(streamID: Double)
        case play(name: String)
        case other(String)
    }

    public var kind: Kind {
        let firstString = arguments.first?.stringValue ?? ""
        switch name {
        case "connect":
            return .connect(app: commandObject["app"]?.stringValue ?? "", tcURL: commandObject["tcUrl"]?.stringValue)
        case "releaseStream": return .releaseStream(name: firstString)
        case "FCPublish": return .fcPublish(name: firstString)
        case "createStream": return .createStream
        case "publish": return .publish(name: firstString, type: arguments.count > 1 ? (arguments[1].stringValue ?? "live") : "live")
        case "FCUnpublish": return .fcUnpublish(name: firstString)
        case "deleteStream", "closeStream": return .deleteStream(streamID: arguments.first?.numberValue ?? 0)
        case "play": return .play(name: firstString)
        default: return .other(name)
        }
    }
}

public struct RTMPCommandError: Error, Hashable, CustomStringConvertible {
    public let message: String
    public var description: String { "RTMP command: \(message)" }
}

/// Builders of the server's messages in a publish session.
public enum RTMPServerMessages {
    public static func windowAcknowledgementSize(_ size: UInt32) -> RTMPMessage {
        control(.windowAcknowledgementSize) { $0.writeInteger(size) }
    }

    public static func setPeerBandwidth(_ size: UInt32, limitType: UInt8 = 2) -> RTMPMessage {
        control(.setPeerBandwidth) { $0.writeInteger(size); $0.writeInteger(limitType) }
    }

    public static func setChunkSize(_ size: UInt32) -> RTMPMessage {
        control(.setChunkSize) { $0.writeInteger(size & 0x7FFF_FFFF) }
    }

    public static func acknowledgement(_ sequence: UInt32) -> RTMPMessage {
        control(.acknowledgement) { $0.writeInteger(sequence) }
    }

    /// User control "Stream Begin" (event 0) for `streamID`.
    public static func streamBegin(_ streamID: UInt32) -> RTMPMessage {
        control(.userControl) { $0.writeInteger(UInt16(0)); $0.writeInteger(streamID) }
    }

    public static func command(_ command: RTMPCommand, messageStreamID: UInt32 = 0) -> RTMPMessage {
        RTMPMessage(chunkStreamID: 3, timestamp: 0, typeID: RTMPMessageType.amf0Command.rawValue,
                    messageStreamID: messageStreamID, payload: command.encode())
    }

    /// `_result` of `connect`.
    public static func connectResult(transactionID: Double) -> RTMPMessage {
        command(RTMPCommand(name: "_result", transactionID: transactionID,
                            commandObject: .object([("fmsVer", .string("FMS/3,0,1,123")), ("capabilities", .number(31))]),
                            arguments: [.object([("level", .string("status")), ("code", .string("NetConnection.Connect.Success")),
                                                 ("description", .string("Connection succeeded.")), ("objectEncoding", .number(0))])]))
    }

    /// `_result` with one value (createStream's stream id, releaseStream's nothing).
    public static func result(transactionID: Double, value: AMF0Value = .null) -> RTMPMessage {
        command(RTMPCommand(name: "_result", transactionID: transactionID, commandObject: .null, arguments: [value]))
    }

    /// `onStatus` on a message stream, e.g. `NetStream.Publish.Start` or `NetStream.Publish.BadName`.
    public static func onStatus(level: String, code: String, description: String, messageStreamID: UInt32) -> RTMPMessage {
        var message = command(RTMPCommand(name: "onStatus", transactionID: 0, commandObject: .null,
                                          arguments: [.object([("level", .string(level)), ("code", .string(code)),
                                                               ("description", .string(description))])]),
                              messageStreamID: messageStreamID)
        message.chunkStreamID = 5
        return message
    }

    private static func control(_ type: RTMPMessageType, _ body: (inout ByteBuffer) -> Void) -> RTMPMessage {
        var payload = ByteBufferAllocator().buffer(capacity: 8)
        body(&payload)
        return RTMPMessage(chunkStreamID: 2, timestamp: 0, typeID: type.rawValue, messageStreamID: 0, payload: payload)
    }
}
