public import NIOCore
import Foundation

/// The framing of the control socket: a 4-byte big-endian payload length, then that many bytes of
/// one UTF-8 JSON object (`ControlMessage`). A frame longer than `maximumFrameLength` or of length 0
/// is a protocol error (the connection is closed), never an allocation.
///
/// Pure: no channel, no I/O. `decode(buffer:)` returns nil until a whole frame is there.
public struct ControlFrameCodec: Sendable {
    /// 1 MiB: a status is about 600 bytes; nothing legitimate comes near.
    public static let defaultMaximumFrameLength = 1 << 20

    public var maximumFrameLength: Int

    public init(maximumFrameLength: Int = ControlFrameCodec.defaultMaximumFrameLength) {
        self.maximumFrameLength = maximumFrameLength
    }

    /// Appends one frame holding `message`.
    public func encode(_ message: ControlMessage, into buffer: inout ByteBuffer) throws(ControlCodecError) {
        let payload: Data
        do {
            payload = try Self.encoder.encode(message)
        } catch {
            throw ControlCodecError(.malformedMessage, "cannot encode \(message): \(error)")
        }
        guard payload.count <= maximumFrameLength else {
            throw ControlCodecError(.frameTooLong, "a \(payload.count)-byte message is over the \(maximumFrameLength)-byte limit")
        }
        buffer.writeInteger(UInt32(payload.count), endianness: .big)
        buffer.writeBytes(payload)
    }

    public func encode(_ message: ControlMessage) throws(ControlCodecError) -> ByteBuffer {
        var buffer = ByteBuffer()
        try encode(message, into: &buffer)
        return buffer
    }

    /// Reads one whole frame from the front of `buffer` and decodes it; nil (and nothing read)
    /// when the frame is not complete yet. Throws on a bad length or a payload that is not a message;
    /// the bytes of a frame that was read whole are consumed even then.
    public func decode(buffer: inout ByteBuffer) throws(ControlCodecError) -> ControlMessage? {
        guard let length = buffer.getInteger(at: buffer.readerIndex, endianness: .big, as: UInt32.self) else {
            return nil
        }
        guard length > 0 else {
            throw ControlCodecError(.emptyFrame, "a frame of length 0")
        }
        guard length <= maximumFrameLength else {
            throw ControlCodecError(.frameTooLong, "a frame of \(length) bytes is over the \(maximumFrameLength)-byte limit")
        }
        guard buffer.readableBytes >= 4 + Int(length) else { return nil }
        buffer.moveReaderIndex(forwardBy: 4)
        let bytes = buffer.readBytes(length: Int(length))!
        do {
            return try Self.decoder.decode(ControlMessage.self, from: Data(bytes))
        } catch {
            throw ControlCodecError(.malformedMessage, "not a control message: \(Self.describe(error))")
        }
    }

    /// At end of stream: whatever is left is a truncated frame.
    public func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws(ControlCodecError) -> ControlMessage? {
        if let message = try decode(buffer: &buffer) { return message }
        if seenEOF && buffer.readableBytes > 0 {
            let count = buffer.readableBytes
            buffer.moveReaderIndex(forwardBy: count)
            throw ControlCodecError(.truncatedFrame, "the connection ended inside a frame (\(count) bytes left over)")
        }
        return nil
    }

    private static var encoder: JSONEncoder {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }

    private static var decoder: JSONDecoder { JSONDecoder() }

    private static func describe(_ error: any Error) -> String {
        switch error {
        case DecodingError.dataCorrupted(let context): return context.debugDescription
        case DecodingError.keyNotFound(let key, _): return "missing \"\(key.stringValue)\""
        case DecodingError.typeMismatch(_, let context), DecodingError.valueNotFound(_, let context):
            let path = context.codingPath.map(\.stringValue).joined(separator: ".")
            return "wrong type at \"\(path)\""
        default: return "\(error)"
        }
    }
}

public struct ControlCodecError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Kind: String, Sendable, Equatable {
        case frameTooLong, emptyFrame, truncatedFrame, malformedMessage
    }
    public var kind: Kind
    public var message: String

    public init(_ kind: Kind, _ message: String) {
        self.kind = kind
        self.message = message
    }

    public var description: String { message }
}

// MARK: - NIO channel handlers over the codec

/// Frames in, `ControlMessage`s out.
public struct ControlMessageDecoder: NIOSingleStepByteToMessageDecoder {
    public typealias InboundOut = ControlMessage
    public let codec: ControlFrameCodec

    public init(codec: ControlFrameCodec = ControlFrameCodec()) { self.codec = codec }

    public mutating func decode(buffer: inout ByteBuffer) throws -> ControlMessage? {
        try codec.decode(buffer: &buffer)
    }

    public mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> ControlMessage? {
        try codec.decodeLast(buffer: &buffer, seenEOF: seenEOF)
    }
}

/// `ControlMessage`s in, frames out.
public struct ControlMessageEncoder: MessageToByteEncoder {
    public typealias OutboundIn = ControlMessage
    public let codec: ControlFrameCodec

    public init(codec: ControlFrameCodec = ControlFrameCodec()) { self.codec = codec }

    public func encode(data: ControlMessage, out: inout ByteBuffer) throws {
        try codec.encode(data, into: &out)
    }
}

extension ChannelPipeline.SynchronousOperations {
    /// Adds the control framing: inbound frames to `ControlMessage`, outbound the reverse.
    public func addControlMessageCodec(_ codec: ControlFrameCodec = ControlFrameCodec()) throws {
        try addHandler(ByteToMessageHandler(ControlMessageDecoder(codec: codec)))
        try addHandler(MessageToByteHandler(ControlMessageEncoder(codec: codec)))
    }
}
