public import NIOCore

/// What went wrong while reading an FLV tag body or a codec configuration.
public struct FLVError: Error, Hashable, CustomStringConvertible {
    public let message: String
    public init(message: String) { self.message = message }
    public var description: String { "FLV: \(message)" }
}

/// The body of an FLV video tag (= an RTMP video message), as far as H.264 needs it.
public struct FLVVideoTag: Sendable, Equatable {
    public enum FrameType: UInt8, Sendable { case keyframe = 1, interframe = 2, disposable = 3, generatedKeyframe = 4, command = 5 }
    public enum Packet: Sendable, Equatable {
        /// AVC sequence header: the decoder configuration record (avcC).
        case sequenceHeader(AVCDecoderConfigurationRecord)
        /// Length-prefixed NAL units, and the composition time offset (pts − dts) in milliseconds.
        case nalus(ByteBuffer, compositionTime: Int32)
        case endOfSequence
    }

    public var frameType: FrameType
    /// 7 is AVC (H.264); other codecs are reported as unsupported.
    public var codecID: UInt8
    public var packet: Packet

    public var isKeyframe: Bool { frameType == .keyframe || frameType == .generatedKeyframe }

    public init(decoding body: ByteBuffer) throws(FLVError) {
        var body = body
        guard let first = body.readInteger(as: UInt8.self) else { throw FLVError(message: "empty video tag") }
        guard first & 0x80 == 0 else { throw FLVError(message: "enhanced RTMP (HEVC/AV1 FourCC) video is not supported") }
        guard let frameType = FrameType(rawValue: first >> 4) else { throw FLVError(message: "video frame type \(first >> 4)") }
        self.frameType = frameType
        self.codecID = first & 0x0F
        guard codecID == 7 else { throw FLVError(message: "video codec id \(codecID) (only H.264, id 7, is supported)") }
        guard let packetType = body.readInteger(as: UInt8.self), body.readableBytes >= 3 else {
            throw FLVError(message: "truncated AVC video tag")
        }
        var cts = Int32(body.readUInt24())
        if cts & 0x80_0000 != 0 { cts -= 0x100_0000 }
        switch packetType {
        case 0: self.packet = .sequenceHeader(try AVCDecoderConfigurationRecord(decoding: body))
        case 1: self.packet = .nalus(body, compositionTime: cts)
        case 2: self.packet = .endOfSequence
        default: throw FLVError(message: "AVC packet type \(packetType)")
        }
    }
}

/// The body of an FLV audio tag (= an RTMP audio message), as far as AAC needs it.
public struct FLVAudioTag: Sendable, Equatable {
    public enum Packet: Sendable, Equatable {
        case sequenceHeader(AudioSpecificConfig)
        /// One raw AAC frame (no ADTS header).
        case raw(ByteBuffer)
    }
    /// 10 is AAC; other formats are reported as unsupported.
    public var soundFormat: UInt8
    public var packet: Packet

    public init(decoding body: ByteBuffer) throws(FLVError) {
        var body = body
        guard let first = body.readInteger(as: UInt8.self) else { throw FLVError(message: "empty audio tag") }
        soundFormat = first >> 4
        guard soundFormat == 10 else { throw FLVError(message: "sound format \(soundFormat) (only AAC, 10, is supported)") }
        guard let packetType = body.readInteger(as: UInt8.self) else { throw FLVError(message: "truncated AAC audio tag") }
        switch packetType {
        case 0: packet = .sequenceHeader(try AudioSpecificConfig(decoding: body))
        case 1: packet = .raw(body)
        default: throw FLVError(message: "AAC packet type \(packetType)")
        }
    }
}

/// ISO/IEC 14496-15 AVCDecoderConfigurationRecord ("avcC").
public struct AVCDecoderConfigurationRecord: Sendable, Equatable {
    public var profile: UInt8
    public var compatibility: UInt8
    public var level: UInt8
    /// Bytes of each NAL unit's length prefix (1, 2 or 4).
    public var naluLengthSize: Int
    public var sequenceParameterSets: [[UInt8]]
    public var pictureParameterSets: [[UInt8]]
    /// The record's bytes, as the MP4 muxer wants them for extradata.
    public var bytes: [UInt8]

    public init(decoding body: ByteBuffer) throws(FLVError) {
        var body = body
        bytes = Array(body.readableBytesView)
        guard body.readableBytes >= 6, body.readInteger(as: UInt8.self) == 1 else { throw FLVError(message: "avcC: bad version or truncated") }
        profile = body.readInteger()!
        compatibility = body.readInteger()!
        level = body.readInteger()!
        naluLengthSize = Int(body.readInteger(as: UInt8.self)! & 0x03) + 1
        guard naluLengthSize != 3 else { throw FLVError(message: "avcC: NAL unit length size 3") }
        let spsCount = Int(body.readInteger(as: UInt8.self)! & 0x1F)
        sequenceParameterSets = []
        for _ in 0..<spsCount {
            guard let n = body.readInteger(as: UInt16.self), let sps = body.readBytes(length: Int(n)) else { throw FLVError(message: "avcC: truncated SPS") }
            sequenceParameterSets.append(sps)
        }
        guard let ppsCount = body.readInteger(as: UInt8.self) else { throw FLVError(message: "avcC: truncated") }
        pictureParameterSets = []
        for _ in 0..<ppsCount {
            guard let n = body.readInteger(as: UInt16.self), let pps = body.readBytes(length: Int(n)) else { throw FLVError(message: "avcC: truncated PPS") }
            pictureParameterSets.append(pps)
        }
        guard !sequenceParameterSets.isEmpty else { throw FLVError(message: "avcC: no SPS") }
    }

    /// Splits length-prefixed NAL units.
    public func nalUnits(_ data: ByteBuffer) throws(FLVError) -> [ByteBuffer] {
        var data = data
        var units: [ByteBuffer] = []
        while data.readableBytes > 0 {
            let length: Int
            switch naluLengthSize {
            case 1: length = Int(data.readInteger(as: UInt8.self) ?? 0)
            case 2: guard let n = data.readInteger(as: UInt16.self) else { throw FLVError(message: "truncated NAL length") }; length = Int(n)
            default: guard let n = data.readInteger(as: UInt32.self) else { throw FLVError(message: "truncated NAL length") }; length = Int(n)
            }
            guard let unit = data.readSlice(length: length) else { throw FLVError(message: "NAL unit of \(length) bytes overruns its tag") }
            units.append(unit)
        }
        return units
    }
}

/// The parts of an H.264 sequence parameter set the MP4 muxer needs: the picture size.
public struct H264SequenceParameterSet: Sendable, Equatable {
    public var profile: Int
    public var level: Int
    public var width: Int
    public var height: Int

    public init(decoding nal: [UInt8]) throws(FLVError) {
        guard nal.count > 4, nal[0] & 0x1F == 7 else { throw FLVError(message: "SPS: not an SPS NAL unit") }
        // Remove emulation prevention bytes (00 00 03 → 00 00).
        var rbsp: [UInt8] = []
        rbsp.reserveCapacity(nal.count)
        var zeros = 0
        for byte in nal.dropFirst() {
            if zeros >= 2, byte == 3 { zeros = 0; continue }
            zeros = byte == 0 ? zeros + 1 : 0
            rbsp.append(byte)
        }
        var r = BitReader(rbsp)
        profile = try r.bits(8)
        _ = try r.bits(8)
        level = try r.bits(8)
        _ = try r.ue()
        var chromaFormat = 1
        var separateColourPlanes = false
        if [100, 110, 122, 244, 44, 83, 86, 118, 128, 138, 139, 134, 135].contains(profile) {
            chromaFormat = try r.ue()
            if chromaFormat == 3 { separateColourPlanes = try r.bits(1) == 1 }
            _ = try r.ue(); _ = try r.ue(); _ = try r.bits(1)
            if try r.bits(1) == 1 {
                for i in 0..<(chromaFormat != 3 ? 8 : 12) where try r.bits(1) == 1 {
                    var last = 8, next = 8
                    for _ in 0..<(i < 6 ? 16 : 64) where next != 0 {
                        next = (last + (try r.se()) + 256) % 256
                        last = next == 0 ? last : next
                    }
                }
            }
        }
        _ = try r.ue()
        let pocType = try r.ue()
        if pocType == 0 {
            _ = try r.ue()
        } else if pocType == 1 {
            _ = try r.bits(1); _ = try r.se(); _ = try r.se()
            let n = try r.ue()
            guard n < 256 else { throw FLVError(message: "SPS: bad POC cycle") }
            for _ in 0..<n { _ = try r.se() }
        }
        _ = try r.ue(); _ = try r.bits(1)
        let widthInMbs = try r.ue() + 1
        let heightInMapUnits = try r.ue() + 1
        let frameMbsOnly = try r.bits(1)
        if frameMbsOnly == 0 { _ = try r.bits(1) }
        _ = try r.bits(1)
        var crop = (left: 0, right: 0, top: 0, bottom: 0)
        if try r.bits(1) == 1 { crop = (try r.ue(), try r.ue(), try r.ue(), try r.ue()) }
        let chromaArrayType = separateColourPlanes ? 0 : chromaFormat
        let cropUnitX = chromaArrayType == 0 ? 1 : (chromaFormat == 3 ? 1 : 2)
        let cropUnitY = (chromaArrayType == 0 ? 1 : (chromaFormat == 1 ? 2 : 1)) * (2 - frameMbsOnly)
        width = widthInMbs * 16 - cropUnitX * (crop.left + crop.right)
        height = (2 - frameMbsOnly) * heightInMapUnits * 16 - cropUnitY * (crop.top + crop.bottom)
        guard width > 0, height > 0, width <= 16384, height <= 16384 else { throw FLVError(message: "SPS: picture size \(width)x\(height)") }
    }
}

struct BitReader {
    let bytes: [UInt8]
    var position = 0
    init(_ bytes: [UInt8]) { self.bytes = bytes }

    mutating func bits(_ n: Int) throws(FLVError) -> Int {
        var value = 0
        for _ in 0..<n {
            guard position < bytes.count * 8 else { throw FLVError(message: "SPS: truncated") }
            value = value << 1 | Int((bytes[position / 8] >> (7 - UInt8(position % 8))) & 1)
            position += 1
        }
        return value
    }

    mutating func ue() throws(FLVError) -> Int {
        var zeros = 0
        while try bits(1) == 0 {
            zeros += 1
            guard zeros < 32 else { throw FLVError(message: "SPS: bad Exp-Golomb code") }
        }
        return (1 << zeros) - 1 + (try bits(zeros))
    }

    mutating func se() throws(FLVError) -> Int {
        let k = try ue()
        return k % 2 == 1 ? (k + 1) / 2 : -(k / 2)
    }
}

/// ISO/IEC 14496-3 AudioSpecificConfig, as the AAC sequence header carries it.
public struct AudioSpecificConfig: Sendable, Equatable {
    public var objectType: Int
    public var sampleRate: Int
    public var channels: Int
    public var bytes: [UInt8]

    static let rates = [96000, 88200, 64000, 48000, 44100, 32000, 24000, 22050, 16000, 12000, 11025, 8000, 7350]

    public init(decoding body: ByteBuffer) throws(FLVError) {
        bytes = Array(body.readableBytesView)
        var r = BitReader(bytes)
        do throws(FLVError) {
            objectType = try r.bits(5)
            if objectType == 31 { objectType = 32 + (try r.bits(6)) }
            let index = try r.bits(4)
            if index == 15 { sampleRate = try r.bits(24) } else {
                guard index < Self.rates.count else { throw FLVError(message: "sampling frequency index \(index)") }
                sampleRate = Self.rates[index]
            }
            channels = try r.bits(4)
        } catch {
            throw FLVError(message: "AudioSpecificConfig: \(error.message)")
        }
        guard channels >= 1, channels <= 7 else { throw FLVError(message: "AudioSpecificConfig: channel configuration \(channels)") }
        if channels == 7 { channels = 8 }
    }
}
