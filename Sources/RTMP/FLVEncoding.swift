public import NIOCore

// Writing FLV tag bodies (= RTMP audio/video message payloads): what a publishing client sends.

extension FLVVideoTag {
    /// An H.264 tag (codec id 7).
    public init(frameType: FrameType, packet: Packet) {
        self.frameType = frameType
        self.codecID = 7
        self.packet = packet
    }

    /// The AVC sequence header a publish starts with.
    public static func sequenceHeader(_ configuration: AVCDecoderConfigurationRecord) -> FLVVideoTag {
        FLVVideoTag(frameType: .keyframe, packet: .sequenceHeader(configuration))
    }

    /// The tag body: frame type and codec, AVC packet type, composition time (24 bits, signed), data.
    public func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: 5 + payloadSize)
        out.writeInteger(frameType.rawValue << 4 | codecID)
        switch packet {
        case .sequenceHeader(let configuration):
            out.writeInteger(UInt8(0))
            out.writeUInt24(0)
            out.writeBytes(configuration.bytes)
        case .nalus(let data, let compositionTime):
            out.writeInteger(UInt8(1))
            out.writeUInt24(UInt32(bitPattern: compositionTime) & 0xFF_FFFF)
            out.writeImmutableBuffer(data)
        case .endOfSequence:
            out.writeInteger(UInt8(2))
            out.writeUInt24(0)
        }
        return out
    }

    private var payloadSize: Int {
        switch packet {
        case .sequenceHeader(let configuration): configuration.bytes.count
        case .nalus(let data, _): data.readableBytes
        case .endOfSequence: 0
        }
    }
}

extension FLVAudioTag {
    /// An AAC tag (sound format 10).
    public init(packet: Packet) {
        self.soundFormat = 10
        self.packet = packet
    }

    /// The AAC sequence header (AudioSpecificConfig) a publish sends before its first frame.
    public static func sequenceHeader(_ configuration: AudioSpecificConfig) -> FLVAudioTag {
        FLVAudioTag(packet: .sequenceHeader(configuration))
    }

    /// The tag body: `0xAF` (AAC; the rate, size and channel bits are fixed for AAC), packet type, data.
    public func encode(allocator: ByteBufferAllocator = ByteBufferAllocator()) -> ByteBuffer {
        var out = allocator.buffer(capacity: 2 + 64)
        out.writeInteger(soundFormat << 4 | 0x0F)
        switch packet {
        case .sequenceHeader(let configuration):
            out.writeInteger(UInt8(0))
            out.writeBytes(configuration.bytes)
        case .raw(let frame):
            out.writeInteger(UInt8(1))
            out.writeImmutableBuffer(frame)
        }
        return out
    }
}
