public import NIOCore

/// RTMP message type ids (RTMP 1.0 specification, §5.4 and §7.1).
public enum RTMPMessageType: UInt8, Sendable {
    case setChunkSize = 1, abort = 2, acknowledgement = 3, userControl = 4, windowAcknowledgementSize = 5
    case setPeerBandwidth = 6, audio = 8, video = 9, amf3Data = 15, amf3Command = 17, amf0Data = 18, amf0Command = 20
    case aggregate = 22
}

/// One reassembled RTMP message.
public struct RTMPMessage: Sendable, Equatable {
    public var chunkStreamID: UInt32
    public var timestamp: UInt32
    public var typeID: UInt8
    public var messageStreamID: UInt32
    public var payload: ByteBuffer

    public init(chunkStreamID: UInt32, timestamp: UInt32, typeID: UInt8, messageStreamID: UInt32, payload: ByteBuffer) {
        self.chunkStreamID = chunkStreamID
        self.timestamp = timestamp
        self.typeID = typeID
        self.messageStreamID = messageStreamID
        self.payload = payload
    }

    public var type: RTMPMessageType? { RTMPMessageType(rawValue: typeID) }
}

/// Why a chunk stream was refused.
public struct RTMPChunkError: Error, Hashable, CustomStringConvertible {
    public enum Code: Hashable, Sendable {
        /// A message announced a length above the limit.
        case messageTooLarge(length: Int, limit: Int)
        /// A type 1/2/3 chunk on a chunk stream that never had a type 0 header.
        case noPreviousHeader(chunkStreamID: UInt32)
        /// A chunk size of 0 or above the limit.
        case invalidChunkSize(UInt32)
        /// More chunk streams at once than the limit.
        case tooManyChunkStreams(Int)
        /// Partly received messages, all chunk streams together, above the limit.
        case tooMuchBuffered(Int)
        /// A control message with too few bytes.
        case malformedControlMessage(UInt8)
        /// A type 1/2/3 chunk changed a message's length while it was being reassembled.
        case lengthChangedMidMessage(chunkStreamID: UInt32)
    }
    public let code: Code
    public var description: String { "RTMP chunk stream: \(code)" }
}

/// Decodes the RTMP chunk stream into messages (RTMP 1.0 §5.3).
///
/// It applies Set Chunk Size and Abort itself (the chunks that follow depend on them) and still
/// returns those messages. It is atomic per chunk: a call that finds an incomplete chunk consumes
/// nothing and returns nil.
public struct RTMPChunkDecoder: Sendable {
    public static let defaultChunkSize = 128

    /// The largest message accepted; larger ones are an error (protects memory).
    public let maximumMessageSize: Int
    /// The largest chunk size the peer may set.
    public let maximumChunkSize: Int
    /// The most chunk streams with state at once.
    public let maximumChunkStreams: Int
    public private(set) var chunkSize = RTMPChunkDecoder.defaultChunkSize

    struct ChunkStreamState: Sendable {
        var timestamp: UInt32 = 0
        var delta: UInt32 = 0
        var length = 0
        var typeID: UInt8 = 0
        var messageStreamID: UInt32 = 0
        var extendedTimestamp = false
        var partial: ByteBuffer? = nil
    }
    private var streams: [UInt32: ChunkStreamState] = [:]
    /// Bytes held in partly received messages, all chunk streams together.
    public private(set) var bufferedBytes = 0

    public init(maximumMessageSize: Int = 8 << 20, maximumChunkSize: Int = 4 << 20, maximumChunkStreams: Int = 64) {
        self.maximumMessageSize = maximumMessageSize
        self.maximumChunkSize = maximumChunkSize
        self.maximumChunkStreams = maximumChunkStreams
    }

    /// Decodes chunks until one message is complete (returned) or the input runs out (nil).
    public mutating func decodeMessage(_ input: inout ByteBuffer) throws(RTMPChunkError) -> RTMPMessage? {
        while true {
            switch try decodeChunk(&input) {
            case .needMoreData: return nil
            case .partial: continue
            case .message(let message): return message
            }
        }
    }

    /// Decodes every complete message in `input`.
    public mutating func decodeAll(_ input: inout ByteBuffer) throws(RTMPChunkError) -> [RTMPMessage] {
        var messages: [RTMPMessage] = []
        while let message = try decodeMessage(&input) { messages.append(message) }
        return messages
    }

    enum ChunkResult { case needMoreData, partial, message(RTMPMessage) }

    mutating func decodeChunk(_ input: inout ByteBuffer) throws(RTMPChunkError) -> ChunkResult {
        var cursor = input
        guard let first = cursor.readInteger(as: UInt8.self) else { return .needMoreData }
        let fmt = first >> 6
        var csid = UInt32(first & 0x3F)
        if csid == 0 {
            guard let b = cursor.readInteger(as: UInt8.self) else { return .needMoreData }
            csid = 64 + UInt32(b)
        } else if csid == 1 {
            guard let b0 = cursor.readInteger(as: UInt8.self), let b1 = cursor.readInteger(as: UInt8.self) else { return .needMoreData }
            csid = 64 + UInt32(b0) + UInt32(b1) * 256
        }
        let known = streams[csid]
        if known == nil {
            guard fmt == 0 else { throw RTMPChunkError(code: .noPreviousHeader(chunkStreamID: csid)) }
            guard streams.count < maximumChunkStreams else { throw RTMPChunkError(code: .tooManyChunkStreams(streams.count)) }
        }
        var state = known ?? ChunkStreamState()
        let startsMessage = state.partial == nil

        var timestampField: UInt32? = nil
        var length = state.length
        switch fmt {
        case 0, 1, 2:
            let headerSize = fmt == 0 ? 11 : (fmt == 1 ? 7 : 3)
            guard cursor.readableBytes >= headerSize else { return .needMoreData }
            timestampField = cursor.readUInt24()
            if fmt <= 1 {
                length = Int(cursor.readUInt24())
                state.typeID = cursor.readInteger(as: UInt8.self)!
            }
            if fmt == 0 {
                state.messageStreamID = cursor.readInteger(endianness: .little, as: UInt32.self)!
            }
        default:
            break
        }
        // The extended timestamp follows the message header when the 24-bit field is saturated; a
        // type 3 chunk repeats it when its chunk stream's last header had one (ffmpeg and OBS do so).
        var extended: UInt32? = nil
        let hasExtended = timestampField.map { $0 == 0xFFFFFF } ?? state.extendedTimestamp
        if hasExtended {
            guard let e = cursor.readInteger(as: UInt32.self) else { return .needMoreData }
            extended = e
        }
        if !startsMessage, fmt <= 1, length != state.length {
            throw RTMPChunkError(code: .lengthChangedMidMessage(chunkStreamID: csid))
        }
        guard length <= maximumMessageSize else {
            throw RTMPChunkError(code: .messageTooLarge(length: length, limit: maximumMessageSize))
        }
        let have = state.partial?.readableBytes ?? 0
        let take = min(chunkSize, length - have)
        guard cursor.readableBytes >= take else { return .needMoreData }
        // Interleaved partial messages may not hold more than twice the largest message (memory bound).
        guard bufferedBytes + take <= 2 * maximumMessageSize else { throw RTMPChunkError(code: .tooMuchBuffered(bufferedBytes + take)) }

        // The whole chunk is here: commit.
        if let field = timestampField {
            state.extendedTimestamp = field == 0xFFFFFF
            let value = extended ?? field
            if startsMessage {
                if fmt == 0 { state.timestamp = value; state.delta = 0 } else { state.delta = value; state.timestamp &+= value }
            }
        } else if startsMessage {
            // A type 3 chunk that starts a new message repeats the previous delta.
            state.timestamp &+= state.delta
        }
        state.length = length
        var body = state.partial ?? ByteBufferAllocator().buffer(capacity: min(length, 64 << 10))
        if take > 0 { body.writeImmutableBuffer(cursor.readSlice(length: take)!) }
        input = cursor

        guard body.readableBytes == length else {
            bufferedBytes += take
            state.partial = body
            streams[csid] = state
            return .partial
        }
        bufferedBytes -= have
        state.partial = nil
        streams[csid] = state
        let message = RTMPMessage(chunkStreamID: csid, timestamp: state.timestamp, typeID: state.typeID,
                                  messageStreamID: state.messageStreamID, payload: body)
        try apply(message)
        return .message(message)
    }

    private mutating func apply(_ message: RTMPMessage) throws(RTMPChunkError) {
        guard message.messageStreamID == 0 || message.typeID == 1 || message.typeID == 2 else { return }
        switch message.type {
        case .setChunkSize:
            guard let raw = message.payload.getInteger(at: message.payload.readerIndex, as: UInt32.self) else {
                throw RTMPChunkError(code: .malformedControlMessage(message.typeID))
            }
            let size = raw & 0x7FFF_FFFF
            guard size >= 1, Int(size) <= maximumChunkSize else { throw RTMPChunkError(code: .invalidChunkSize(raw)) }
            chunkSize = Int(size)
        case .abort:
            guard let raw = message.payload.getInteger(at: message.payload.readerIndex, as: UInt32.self) else {
                throw RTMPChunkError(code: .malformedControlMessage(message.typeID))
            }
            bufferedBytes -= streams[raw]?.partial?.readableBytes ?? 0
            streams[raw]?.partial = nil
        default:
            break
        }
    }
}

/// Encodes messages as RTMP chunks: a type 0 header on the first chunk, type 3 on the rest.
public struct RTMPChunkEncoder: Sendable {
    public private(set) var chunkSize = RTMPChunkDecoder.defaultChunkSize

    public init() {}

    /// Changes the chunk size used for the messages that follow (send a Set Chunk Size first).
    public mutating func setChunkSize(_ size: Int) { chunkSize = max(1, min(size, 0x7FFF_FFFF)) }

    public func encode(_ message: RTMPMessage, into out: inout ByteBuffer) {
        let extended = message.timestamp >= 0xFFFFFF
        let length = message.payload.readableBytes
        writeBasicHeader(fmt: 0, csid: message.chunkStreamID, into: &out)
        out.writeUInt24(extended ? 0xFFFFFF : message.timestamp)
        out.writeUInt24(UInt32(length))
        out.writeInteger(message.typeID)
        out.writeInteger(message.messageStreamID, endianness: .little)
        if extended { out.writeInteger(message.timestamp) }
        var payload = message.payload
        var first = true
        while first || payload.readableBytes > 0 {
            if !first {
                writeBasicHeader(fmt: 3, csid: message.chunkStreamID, into: &out)
                if extended { out.writeInteger(message.timestamp) }
            }
            first = false
            let n = min(chunkSize, payload.readableBytes)
            out.writeImmutableBuffer(payload.readSlice(length: n)!)
        }
    }

    private func writeBasicHeader(fmt: UInt8, csid: UInt32, into out: inout ByteBuffer) {
        if csid < 64 {
            out.writeInteger(fmt << 6 | UInt8(csid))
        } else if csid < 320 {
            out.writeInteger(fmt << 6)
            out.writeInteger(UInt8(csid - 64))
        } else {
            out.writeInteger(fmt << 6 | 1)
            out.writeInteger(UInt8((csid - 64) & 0xFF))
            out.writeInteger(UInt8((csid - 64) >> 8))
        }
    }
}

extension ByteBuffer {
    mutating func readUInt24() -> UInt32 {
        let b = readBytes(length: 3)!
        return UInt32(b[0]) << 16 | UInt32(b[1]) << 8 | UInt32(b[2])
    }

    mutating func writeUInt24(_ value: UInt32) {
        writeInteger(UInt8((value >> 16) & 0xFF))
        writeInteger(UInt8((value >> 8) & 0xFF))
        writeInteger(UInt8(value & 0xFF))
    }
}
