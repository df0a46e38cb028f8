package import NIOCore
import Foundation

/// The framing of the control socket: a 4-byte big-endian payload length, then that many bytes of
/// one UTF-8 JSON object (`ControlMessage`). A frame longer than `maximumFrameLength` or of length 0
/// is a protocol error (the connection is closed), never an allocation. `package`: the public API of
/// the IPC module (and of the library apps link) shows no NIO type.
///
/// Pure: no channel, no I/O. `decode(buffer:)` returns nil until a whole frame is there.
package struct ControlFrameCodec: Sendable {
    /// 1 MiB: a status is about 600 bytes; nothing legitimate comes near.
    package static let defaultMaximumFrameLength = 1 << 20

    package var maximumFrameLength: Int

    package init(maximumFrameLength: Int = ControlFrameCodec.defaultMaximumFrameLength) {
        self.maximumFrameLength = maximumFrameLength
    }

    /// Appends one frame holding `message`.
    package func encode(_ message: ControlMessage, into buffer: inout ByteBuffer) throws(ControlCodecError) {
        let payload: Data
        do {
            payload = try ControlJSON.encoder.encode(message)
        } catch {
            throw ControlCodecError(.malformedMessage, "cannot encode \(message): \(error)")
        }
        guard payload.count <= maximumFrameLength else {
            throw ControlCodecError(.frameTooLong, "a \(payload.count)-byte message is over the \(maximumFrameLength)-byte limit")
        }
        buffer.writeInteger(UInt32(payload.count), endianness: .big)
        buffer.writeBytes(payload)
    }

    package func encode(_ message: ControlMessage) throws(ControlCodecError) -> ByteBuffer {
        var buffer = ByteBuffer()
        try encode(message, into: &buffer)
        return buffer
    }

    /// Reads one whole frame from the front of `buffer` and decodes it; nil (and nothing read)
    /// when the frame is not complete yet. Throws on a bad length or a payload that is not a message;
    /// the bytes of a frame that was read whole are consumed even then.
    package func decode(buffer: inout ByteBuffer) throws(ControlCodecError) -> ControlMessage? {
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
            return try ControlJSON.decoder.decode(ControlMessage.self, from: Data(bytes))
        } catch {
            throw ControlCodecError(.malformedMessage, "not a control message: \(ControlJSON.describe(error))")
        }
    }

    /// At end of stream: whatever is left is a truncated frame.
    package func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws(ControlCodecError) -> ControlMessage? {
        if let message = try decode(buffer: &buffer) { return message }
        if seenEOF && buffer.readableBytes > 0 {
            let count = buffer.readableBytes
            buffer.moveReaderIndex(forwardBy: count)
            throw ControlCodecError(.truncatedFrame, "the connection ended inside a frame (\(count) bytes left over)")
        }
        return nil
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
package struct ControlMessageDecoder: NIOSingleStepByteToMessageDecoder {
    package typealias InboundOut = ControlMessage
    package let codec: ControlFrameCodec

    package init(codec: ControlFrameCodec = ControlFrameCodec()) { self.codec = codec }

    package mutating func decode(buffer: inout ByteBuffer) throws -> ControlMessage? {
        try codec.decode(buffer: &buffer)
    }

    package mutating func decodeLast(buffer: inout ByteBuffer, seenEOF: Bool) throws -> ControlMessage? {
        try codec.decodeLast(buffer: &buffer, seenEOF: seenEOF)
    }
}

/// `ControlMessage`s in, frames out.
package struct ControlMessageEncoder: MessageToByteEncoder {
    package typealias OutboundIn = ControlMessage
    package let codec: ControlFrameCodec

    package init(codec: ControlFrameCodec = ControlFrameCodec()) { self.codec = codec }

    package func encode(data: ControlMessage, out: inout ByteBuffer) throws {
        try codec.encode(data, into: &out)
    }
}

extension ChannelPipeline.SynchronousOperations {
    /// Adds the control framing: inbound frames to `ControlMessage`, outbound the reverse.
    package func addControlMessageCodec(_ codec: ControlFrameCodec = ControlFrameCodec()) throws {
        try addHandler(ByteToMessageHandler(ControlMessageDecoder(codec: codec)))
        try addHandler(MessageToByteHandler(ControlMessageEncoder(codec: codec)))
    }
}
