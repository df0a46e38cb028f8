// CoreMedia's sample buffer, as iOS sample-handling code reads one: its time, its picture or its
// sound. A video sample buffer wraps one slot of the shared frame ring, in place; the slot is given
// back to replayd when the last reference to the buffer (and its pixel buffer) goes, so an app that
// keeps buffers holds slots, and replayd drops new pictures (counted) rather than wait for it.
// An audio sample buffer holds one chunk of sound: Float32 interleaved, 48 kHz, stereo
// (`CMAudioFormatDescriptionGetStreamBasicDescription` says so, as on iOS).
public import Foundation
internal import Synchronization
package import ReplayIPC

public typealias CMItemCount = Int
public typealias CMMediaType = FourCharCode
public typealias AudioFormatID = UInt32
public typealias AudioFormatFlags = UInt32

public let kCMMediaType_Video: CMMediaType = 0x7669_6465   // 'vide'
public let kCMMediaType_Audio: CMMediaType = 0x736F_756E   // 'soun'
public let kAudioFormatLinearPCM: AudioFormatID = 0x6C70_636D   // 'lpcm'
public let kAudioFormatFlagIsFloat: AudioFormatFlags = 1 << 0
public let kAudioFormatFlagIsBigEndian: AudioFormatFlags = 1 << 1
public let kAudioFormatFlagIsSignedInteger: AudioFormatFlags = 1 << 2
public let kAudioFormatFlagIsPacked: AudioFormatFlags = 1 << 3
public let kAudioFormatFlagIsNonInterleaved: AudioFormatFlags = 1 << 5
public let kAudioFormatFlagsNativeFloatPacked: AudioFormatFlags = kAudioFormatFlagIsFloat | kAudioFormatFlagIsPacked

public let kCMBlockBufferNoErr: OSStatus = 0
public let kCMBlockBufferBadOffsetParameterErr: OSStatus = -12703
public let kCMBlockBufferBadLengthParameterErr: OSStatus = -12704
public let kCMSampleBufferError_RequiredParameterMissing: OSStatus = -12731
public let kCMSampleBufferError_ArrayTooSmall: OSStatus = -12737
public let kCMSampleBufferError_InvalidMediaTypeForOperation: OSStatus = -12743
public let kCMSampleBufferError_Invalidated: OSStatus = -12744
/// Accepted and always true here: the samples are 16-byte aligned.
public let kCMSampleBufferFlag_AudioBufferList_Assure16ByteAlignment: UInt32 = 1 << 0

/// CoreFoundation's allocator, only so that calls written for iOS can pass `nil` or `kCFAllocatorDefault`.
public final class CFAllocator: Sendable {
    private init() {}
}
public let kCFAllocatorDefault: CFAllocator? = nil

public struct CMVideoDimensions: Sendable, Hashable {
    public var width: Int32
    public var height: Int32
    public init(width: Int32, height: Int32) {
        self.width = width
        self.height = height
    }
}

/// CoreAudio's description of a PCM stream (the C struct's fields and layout).
public struct AudioStreamBasicDescription: Sendable, Hashable {
    public var mSampleRate: Float64
    public var mFormatID: AudioFormatID
    public var mFormatFlags: AudioFormatFlags
    public var mBytesPerPacket: UInt32
    public var mFramesPerPacket: UInt32
    public var mBytesPerFrame: UInt32
    public var mChannelsPerFrame: UInt32
    public var mBitsPerChannel: UInt32
    public var mReserved: UInt32

    public init() {
        self.init(mSampleRate: 0, mFormatID: 0, mFormatFlags: 0, mBytesPerPacket: 0, mFramesPerPacket: 0,
                  mBytesPerFrame: 0, mChannelsPerFrame: 0, mBitsPerChannel: 0, mReserved: 0)
    }

    public init(mSampleRate: Float64, mFormatID: AudioFormatID, mFormatFlags: AudioFormatFlags, mBytesPerPacket: UInt32,
                mFramesPerPacket: UInt32, mBytesPerFrame: UInt32, mChannelsPerFrame: UInt32, mBitsPerChannel: UInt32,
                mReserved: UInt32) {
        self.mSampleRate = mSampleRate
        self.mFormatID = mFormatID
        self.mFormatFlags = mFormatFlags
        self.mBytesPerPacket = mBytesPerPacket
        self.mFramesPerPacket = mFramesPerPacket
        self.mBytesPerFrame = mBytesPerFrame
        self.mChannelsPerFrame = mChannelsPerFrame
        self.mBitsPerChannel = mBitsPerChannel
        self.mReserved = mReserved
    }
}

/// What a sample buffer holds: a picture's size and pixel format, a sound's stream description, or
/// an H.264/HEVC stream's parameter sets (`CMVideoFormatDescriptionCreateFromH264ParameterSets`).
///
/// `@unchecked Sendable`: immutable; `streamDescription` points to memory allocated once and never
/// written or freed (the two capture descriptions are shared by every buffer, as `CMFormatDescription`s
/// are), and the parameter sets are copied in at creation and freed only in `deinit`.
public final class CMFormatDescription: @unchecked Sendable, Hashable {
    /// The media type as the iOS overlay spells it (`formatDescription.mediaType == .video`).
    public let mediaType: MediaType
    public let mediaSubType: MediaSubType
    public let dimensions: CMVideoDimensions
    let streamDescription: UnsafePointer<AudioStreamBasicDescription>?
    /// SPS, PPS (H.264) or VPS, SPS, PPS (HEVC), each in memory of its own, as given.
    let parameterSets: [UnsafeBufferPointer<UInt8>]
    let nalUnitHeaderLength: Int32

    private init(mediaType: CMMediaType, mediaSubType: FourCharCode, dimensions: CMVideoDimensions,
                 streamDescription: UnsafePointer<AudioStreamBasicDescription>?,
                 parameterSets: [[UInt8]] = [], nalUnitHeaderLength: Int32 = 0) {
        self.mediaType = MediaType(rawValue: mediaType)
        self.mediaSubType = MediaSubType(rawValue: mediaSubType)
        self.dimensions = dimensions
        self.streamDescription = streamDescription
        self.parameterSets = parameterSets.map { bytes in
            let copy = UnsafeMutableBufferPointer<UInt8>.allocate(capacity: bytes.count)
            _ = copy.initialize(from: bytes)
            return UnsafeBufferPointer(copy)
        }
        self.nalUnitHeaderLength = nalUnitHeaderLength
    }

    deinit {
        for set in parameterSets { set.deallocate() }
    }

    static func video(width: Int, height: Int) -> CMFormatDescription {
        CMFormatDescription(mediaType: kCMMediaType_Video, mediaSubType: kCVPixelFormatType_420YpCbCr8BiPlanarFullRange,
                            dimensions: CMVideoDimensions(width: Int32(width), height: Int32(height)), streamDescription: nil)
    }

    /// An encoded video stream's description: its codec and parameter sets.
    static func encodedVideo(codec: CMVideoCodecType, parameterSets: [[UInt8]], nalUnitHeaderLength: Int32,
                             dimensions: CMVideoDimensions = CMVideoDimensions(width: 0, height: 0)) -> CMFormatDescription {
        CMFormatDescription(mediaType: kCMMediaType_Video, mediaSubType: codec, dimensions: dimensions,
                            streamDescription: nil, parameterSets: parameterSets, nalUnitHeaderLength: nalUnitHeaderLength)
    }

    /// Float32, interleaved, 48 kHz, stereo: every audio buffer of in-app capture.
    static let audio: CMFormatDescription = {
        let description = UnsafeMutablePointer<AudioStreamBasicDescription>.allocate(capacity: 1)
        let bytesPerFrame = UInt32(FrameRingLayout.channels * MemoryLayout<Float>.size)
        description.initialize(to: AudioStreamBasicDescription(
            mSampleRate: Float64(FrameRingLayout.sampleRate), mFormatID: kAudioFormatLinearPCM,
            mFormatFlags: kAudioFormatFlagsNativeFloatPacked, mBytesPerPacket: bytesPerFrame, mFramesPerPacket: 1,
            mBytesPerFrame: bytesPerFrame, mChannelsPerFrame: UInt32(FrameRingLayout.channels), mBitsPerChannel: 32, mReserved: 0))
        return CMFormatDescription(mediaType: kCMMediaType_Audio, mediaSubType: kAudioFormatLinearPCM,
                                   dimensions: CMVideoDimensions(width: 0, height: 0), streamDescription: UnsafePointer(description))
    }()

    /// The iOS overlay's `audioStreamBasicDescription`: the sound's format, nil for a picture.
    public var audioStreamBasicDescription: AudioStreamBasicDescription? { streamDescription?.pointee }

    /// Equal when they describe the same media (as `CFEqual` on two format descriptions).
    public static func == (lhs: CMFormatDescription, rhs: CMFormatDescription) -> Bool {
        lhs === rhs || (lhs.mediaType == rhs.mediaType && lhs.mediaSubType == rhs.mediaSubType && lhs.dimensions == rhs.dimensions
                        && lhs.audioStreamBasicDescription == rhs.audioStreamBasicDescription
                        && lhs.nalUnitHeaderLength == rhs.nalUnitHeaderLength
                        && lhs.parameterSets.map(Array.init) == rhs.parameterSets.map(Array.init))
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(mediaType)
        hasher.combine(mediaSubType)
        hasher.combine(dimensions)
    }
}

extension CMFormatDescription {
    /// The iOS overlay's media type: `kCMMediaType_…` as a type, so that `mediaType == .video` reads.
    public struct MediaType: RawRepresentable, Sendable, Hashable {
        public var rawValue: FourCharCode
        public init(rawValue: FourCharCode) { self.rawValue = rawValue }
        public static let video = MediaType(rawValue: kCMMediaType_Video)
        public static let audio = MediaType(rawValue: kCMMediaType_Audio)
        public static let muxed = MediaType(rawValue: 0x6D75_7820)           // 'mux '
        public static let text = MediaType(rawValue: 0x7465_7874)            // 'text'
        public static let closedCaption = MediaType(rawValue: 0x636C_6370)   // 'clcp'
        public static let subtitle = MediaType(rawValue: 0x7362_746C)        // 'sbtl'
        public static let timeCode = MediaType(rawValue: 0x746D_6364)        // 'tmcd'
        public static let metadata = MediaType(rawValue: 0x6D65_7461)        // 'meta'
    }

    /// The iOS overlay's media subtype: a codec (`.h264`), an audio format (`.linearPCM`) or a pixel format.
    public struct MediaSubType: RawRepresentable, Sendable, Hashable {
        public var rawValue: FourCharCode
        public init(rawValue: FourCharCode) { self.rawValue = rawValue }
        public static let h264 = MediaSubType(rawValue: kCMVideoCodecType_H264)
        public static let hevc = MediaSubType(rawValue: kCMVideoCodecType_HEVC)
        public static let linearPCM = MediaSubType(rawValue: kAudioFormatLinearPCM)
        public static let mpeg4AAC = MediaSubType(rawValue: kAudioFormatMPEG4AAC)
        public static let pixelFormat_420YpCbCr8BiPlanarFullRange = MediaSubType(rawValue: kCVPixelFormatType_420YpCbCr8BiPlanarFullRange)
        public static let pixelFormat_420YpCbCr8BiPlanarVideoRange = MediaSubType(rawValue: kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange)
    }
}

public typealias CMVideoCodecType = FourCharCode
public let kCMVideoCodecType_H264: CMVideoCodecType = 0x6176_6331   // 'avc1'
public let kCMVideoCodecType_HEVC: CMVideoCodecType = 0x6876_6331   // 'hvc1'
public let kAudioFormatMPEG4AAC: AudioFormatID = 0x6161_6320         // 'aac '

public let kCMFormatDescriptionError_InvalidParameter: OSStatus = -12710
public let kCMFormatDescriptionBridgeError_InvalidParameter: OSStatus = -12712

/// Whether two descriptions describe the same media; two nils are equal, as in CoreMedia.
public func CMFormatDescriptionEqual(_ formatDescription: CMFormatDescription?, otherFormatDescription: CMFormatDescription?) -> Bool {
    formatDescription == otherFormatDescription
}

/// An H.264 stream's description from its SPS and PPS (NAL units without start codes), as an
/// encoder's output or an RTMP/FLV reader makes one. `NALUnitHeaderLength` is 1, 2 or 4 (AVCC).
/// The picture's size is not read from the SPS: `CMVideoFormatDescriptionGetDimensions` gives 0×0.
@discardableResult
public func CMVideoFormatDescriptionCreateFromH264ParameterSets(
    allocator: CFAllocator?, parameterSetCount: Int, parameterSetPointers: UnsafePointer<UnsafePointer<UInt8>>,
    parameterSetSizes: UnsafePointer<Int>, nalUnitHeaderLength NALUnitHeaderLength: Int32,
    formatDescriptionOut: UnsafeMutablePointer<CMFormatDescription?>
) -> OSStatus {
    createFromParameterSets(codec: kCMVideoCodecType_H264, minimumCount: 2, parameterSetCount, parameterSetPointers, parameterSetSizes,
                            NALUnitHeaderLength, formatDescriptionOut)
}

/// The same for HEVC: VPS, SPS and PPS. `extensions` is accepted and not kept.
@discardableResult
public func CMVideoFormatDescriptionCreateFromHEVCParameterSets(
    allocator: CFAllocator?, parameterSetCount: Int, parameterSetPointers: UnsafePointer<UnsafePointer<UInt8>>,
    parameterSetSizes: UnsafePointer<Int>, nalUnitHeaderLength NALUnitHeaderLength: Int32, extensions: CFDictionary?,
    formatDescriptionOut: UnsafeMutablePointer<CMFormatDescription?>
) -> OSStatus {
    createFromParameterSets(codec: kCMVideoCodecType_HEVC, minimumCount: 3, parameterSetCount, parameterSetPointers, parameterSetSizes,
                            NALUnitHeaderLength, formatDescriptionOut)
}

private func createFromParameterSets(codec: CMVideoCodecType, minimumCount: Int, _ count: Int, _ pointers: UnsafePointer<UnsafePointer<UInt8>>,
                                     _ sizes: UnsafePointer<Int>, _ nalUnitHeaderLength: Int32,
                                     _ out: UnsafeMutablePointer<CMFormatDescription?>) -> OSStatus {
    guard count >= minimumCount, [1, 2, 4].contains(nalUnitHeaderLength),
          (0..<count).allSatisfy({ sizes[$0] > 0 }) else { return kCMFormatDescriptionError_InvalidParameter }
    let sets = (0..<count).map { Array(UnsafeBufferPointer(start: pointers[$0], count: sizes[$0])) }
    out.pointee = .encodedVideo(codec: codec, parameterSets: sets, nalUnitHeaderLength: nalUnitHeaderLength)
    return noErr
}

/// Parameter set `parameterSetIndex` of an H.264 description (valid while the description lives),
/// how many there are and the NAL unit header length; each out-pointer may be nil (index 0 with only
/// `parameterSetCountOut` asks the count). Not an H.264 description, or an index out of range:
/// `kCMFormatDescriptionBridgeError_InvalidParameter`.
@discardableResult
public func CMVideoFormatDescriptionGetH264ParameterSetAtIndex(
    _ videoDesc: CMFormatDescription, parameterSetIndex: Int, parameterSetPointerOut: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    parameterSetSizeOut: UnsafeMutablePointer<Int>?, parameterSetCountOut: UnsafeMutablePointer<Int>?,
    nalUnitHeaderLengthOut NALUnitHeaderLengthOut: UnsafeMutablePointer<Int32>?
) -> OSStatus {
    parameterSet(videoDesc, codec: kCMVideoCodecType_H264, parameterSetIndex, parameterSetPointerOut, parameterSetSizeOut,
                 parameterSetCountOut, NALUnitHeaderLengthOut)
}

/// The same for an HEVC description.
@discardableResult
public func CMVideoFormatDescriptionGetHEVCParameterSetAtIndex(
    _ videoDesc: CMFormatDescription, parameterSetIndex: Int, parameterSetPointerOut: UnsafeMutablePointer<UnsafePointer<UInt8>?>?,
    parameterSetSizeOut: UnsafeMutablePointer<Int>?, parameterSetCountOut: UnsafeMutablePointer<Int>?,
    nalUnitHeaderLengthOut NALUnitHeaderLengthOut: UnsafeMutablePointer<Int32>?
) -> OSStatus {
    parameterSet(videoDesc, codec: kCMVideoCodecType_HEVC, parameterSetIndex, parameterSetPointerOut, parameterSetSizeOut,
                 parameterSetCountOut, NALUnitHeaderLengthOut)
}

private func parameterSet(_ description: CMFormatDescription, codec: CMVideoCodecType, _ index: Int,
                          _ pointerOut: UnsafeMutablePointer<UnsafePointer<UInt8>?>?, _ sizeOut: UnsafeMutablePointer<Int>?,
                          _ countOut: UnsafeMutablePointer<Int>?, _ lengthOut: UnsafeMutablePointer<Int32>?) -> OSStatus {
    guard description.mediaSubType.rawValue == codec, !description.parameterSets.isEmpty else {
        return kCMFormatDescriptionBridgeError_InvalidParameter
    }
    countOut?.pointee = description.parameterSets.count
    lengthOut?.pointee = description.nalUnitHeaderLength
    guard pointerOut != nil || sizeOut != nil else { return noErr }
    guard description.parameterSets.indices.contains(index) else { return kCMFormatDescriptionBridgeError_InvalidParameter }
    pointerOut?.pointee = description.parameterSets[index].baseAddress
    sizeOut?.pointee = description.parameterSets[index].count
    return noErr
}

public typealias CMAudioFormatDescription = CMFormatDescription
public typealias CMVideoFormatDescription = CMFormatDescription

public func CMFormatDescriptionGetMediaType(_ desc: CMFormatDescription) -> CMMediaType { desc.mediaType.rawValue }
public func CMFormatDescriptionGetMediaSubType(_ desc: CMFormatDescription) -> FourCharCode { desc.mediaSubType.rawValue }
public func CMVideoFormatDescriptionGetDimensions(_ videoDesc: CMVideoFormatDescription) -> CMVideoDimensions { videoDesc.dimensions }

/// The stream description of an audio format (nil for a video one).
public func CMAudioFormatDescriptionGetStreamBasicDescription(_ desc: CMAudioFormatDescription) -> UnsafePointer<AudioStreamBasicDescription>? {
    desc.streamDescription
}

/// CoreMedia's block buffer: the bytes of an audio sample buffer, or of an encoded picture
/// (`VTCompressionSession`'s output), contiguous, valid while it lives.
///
/// `@unchecked Sendable`: it holds its chunk, immutable after it was read from the ring, or bytes of
/// its own, written once at creation and freed only in `deinit`.
public final class CMBlockBuffer: @unchecked Sendable {
    let chunk: FrameRingAudioChunk?
    private let owned: UnsafeMutableRawBufferPointer?

    init(chunk: FrameRingAudioChunk) {
        self.chunk = chunk
        owned = nil
    }

    /// A copy of `data`.
    init(copying data: [UInt8]) {
        let memory = UnsafeMutableRawBufferPointer.allocate(byteCount: max(data.count, 1), alignment: 16)
        data.withUnsafeBytes { memory.copyMemory(from: $0) }
        chunk = nil
        owned = UnsafeMutableRawBufferPointer(rebasing: memory[0..<data.count])
    }

    deinit { owned?.deallocate() }

    var length: Int { chunk.map { $0.samples.count * MemoryLayout<Float>.size } ?? owned?.count ?? 0 }
    var bytes: UnsafeMutableRawPointer {
        if let chunk { UnsafeMutableRawPointer(chunk.samples.baseAddress!) } else { owned!.baseAddress! }
    }
}

public func CMBlockBufferGetDataLength(_ theBuffer: CMBlockBuffer) -> Int { theBuffer.length }

public func CMBlockBufferIsRangeContiguous(_ theBuffer: CMBlockBuffer, atOffset offset: Int, length: Int) -> Bool {
    offset >= 0 && length >= 0 && offset + length <= theBuffer.length
}

/// A pointer to the bytes at `offset` (they are contiguous: what follows it is the rest of the buffer).
@discardableResult
public func CMBlockBufferGetDataPointer(_ theBuffer: CMBlockBuffer, atOffset offset: Int,
                                       lengthAtOffsetOut: UnsafeMutablePointer<Int>?, totalLengthOut: UnsafeMutablePointer<Int>?,
                                       dataPointerOut: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>?) -> OSStatus {
    guard offset >= 0, offset < max(theBuffer.length, 1) else { return kCMBlockBufferBadOffsetParameterErr }
    lengthAtOffsetOut?.pointee = theBuffer.length - offset
    totalLengthOut?.pointee = theBuffer.length
    dataPointerOut?.pointee = (theBuffer.bytes + offset).assumingMemoryBound(to: CChar.self)
    return kCMBlockBufferNoErr
}

/// Copies `dataLength` bytes from `offset` to `destination`.
@discardableResult
public func CMBlockBufferCopyDataBytes(_ theSourceBuffer: CMBlockBuffer, atOffset offsetToData: Int, dataLength: Int,
                                       destination: UnsafeMutableRawPointer) -> OSStatus {
    guard offsetToData >= 0, offsetToData <= theSourceBuffer.length else { return kCMBlockBufferBadOffsetParameterErr }
    guard dataLength >= 0, offsetToData + dataLength <= theSourceBuffer.length else { return kCMBlockBufferBadLengthParameterErr }
    destination.copyMemory(from: theSourceBuffer.bytes + offsetToData, byteCount: dataLength)
    return kCMBlockBufferNoErr
}

/// CoreAudio's buffer: `mDataByteSize` bytes at `mData`, `mNumberChannels` interleaved.
public struct AudioBuffer: @unchecked Sendable {
    public var mNumberChannels: UInt32
    public var mDataByteSize: UInt32
    public var mData: UnsafeMutableRawPointer?

    public init() {
        self.init(mNumberChannels: 0, mDataByteSize: 0, mData: nil)
    }

    public init(mNumberChannels: UInt32, mDataByteSize: UInt32, mData: UnsafeMutableRawPointer?) {
        self.mNumberChannels = mNumberChannels
        self.mDataByteSize = mDataByteSize
        self.mData = mData
    }
}

/// CoreAudio's list of buffers, the C struct's layout: a count, then that many `AudioBuffer`s in a
/// row (one is declared; interleaved sound, as in-app capture's, needs only one).
public struct AudioBufferList: @unchecked Sendable {
    public var mNumberBuffers: UInt32
    public var mBuffers: AudioBuffer

    public init() {
        self.init(mNumberBuffers: 0, mBuffers: AudioBuffer())
    }

    public init(mNumberBuffers: UInt32, mBuffers: AudioBuffer) {
        self.mNumberBuffers = mNumberBuffers
        self.mBuffers = mBuffers
    }

    /// Bytes of a list of `maximumBuffers` buffers.
    public static func sizeInBytes(maximumBuffers: Int) -> Int {
        MemoryLayout<AudioBufferList>.size - MemoryLayout<AudioBuffer>.size + maximumBuffers * MemoryLayout<AudioBuffer>.stride
    }

    /// A list of `maximumBuffers` buffers, allocated (free it with `free` of its `unsafeMutablePointer`).
    public static func allocate(maximumBuffers: Int) -> UnsafeMutableAudioBufferListPointer {
        let raw = UnsafeMutableRawPointer.allocate(byteCount: sizeInBytes(maximumBuffers: maximumBuffers),
                                                   alignment: MemoryLayout<AudioBufferList>.alignment)
        let list = raw.bindMemory(to: AudioBufferList.self, capacity: 1)
        list.initialize(to: AudioBufferList(mNumberBuffers: UInt32(maximumBuffers), mBuffers: AudioBuffer()))
        return UnsafeMutableAudioBufferListPointer(list)
    }
}

/// The buffers of an `AudioBufferList` as a collection, as CoreAudio's Swift overlay gives them.
public struct UnsafeMutableAudioBufferListPointer: MutableCollection, RandomAccessCollection {
    public let unsafeMutablePointer: UnsafeMutablePointer<AudioBufferList>

    public init(_ p: UnsafeMutablePointer<AudioBufferList>) {
        unsafeMutablePointer = p
    }

    public init?(_ p: UnsafeMutablePointer<AudioBufferList>?) {
        guard let p else { return nil }
        self.init(p)
    }

    public var unsafePointer: UnsafePointer<AudioBufferList> { UnsafePointer(unsafeMutablePointer) }

    public var count: Int {
        get { Int(unsafeMutablePointer.pointee.mNumberBuffers) }
        nonmutating set { unsafeMutablePointer.pointee.mNumberBuffers = UInt32(newValue) }
    }

    public var startIndex: Int { 0 }
    public var endIndex: Int { count }

    private var buffers: UnsafeMutablePointer<AudioBuffer> {
        let offset = MemoryLayout<AudioBufferList>.offset(of: \AudioBufferList.mBuffers)!
        return (UnsafeMutableRawPointer(unsafeMutablePointer) + offset).assumingMemoryBound(to: AudioBuffer.self)
    }

    public subscript(index: Int) -> AudioBuffer {
        get {
            precondition(index >= 0 && index < count, "audio buffer index out of range")
            return buffers[index]
        }
        nonmutating set {
            precondition(index >= 0 && index < count, "audio buffer index out of range")
            buffers[index] = newValue
        }
    }
}

/// CoreMedia's sample buffer: one picture (`.video`) or one chunk of sound (`.audioApp`, `.audioMic`)
/// from in-app capture, with its presentation time on the session clock (nanoseconds).
///
/// `Sendable`: what it holds is fixed at creation (the picture is read in place, the sound owned).
public final class CMSampleBuffer: Sendable {
    enum Content: Sendable {
        case video(CVPixelBuffer)
        case audio(CMBlockBuffer)
        /// One encoded picture (`VTCompressionSession`'s output).
        case compressed(CMBlockBuffer, duration: CMTime)
    }

    let content: Content
    /// What it holds, as `RPSampleBufferType` says it.
    package let sampleBufferType: RPSampleBufferType
    public let presentationTimeStamp: CMTime
    /// Invalid but for an encoded picture.
    public let decodeTimeStamp: CMTime
    public let formatDescription: CMFormatDescription?
    private let invalidated = Atomic<Bool>(false)
    /// `CMGetAttachment`'s: a picture starts with `RPVideoSampleOrientationKey`, as on iOS.
    let attachments: Mutex<[String: AttachmentValue]>
    /// `CMSampleBufferGetSampleAttachmentsArray`'s, made on the first call that asks for it.
    let sampleAttachments = Mutex<AttachmentValue?>(nil)

    /// A picture read in place from its ring slot (freed when this buffer and its pixel buffer go).
    package init(video frame: FrameRingVideoFrame) {
        content = .video(CVPixelBuffer(frame: frame))
        sampleBufferType = .video
        presentationTimeStamp = CMTime(value: frame.time, timescale: 1_000_000_000)
        decodeTimeStamp = .invalid
        formatDescription = .video(width: frame.width, height: frame.height)
        // Pictures are the screen as it shows (X and Wayland give a rotated screen's pixels turned already).
        attachments = Mutex([RPVideoSampleOrientationKey: AttachmentValue(NSNumber(value: CGImagePropertyOrientation.up.rawValue))])
    }

    /// A chunk of sound read from the ring.
    package init(audio chunk: FrameRingAudioChunk) {
        content = .audio(CMBlockBuffer(chunk: chunk))
        sampleBufferType = chunk.kind == .microphone ? .audioMic : .audioApp
        presentationTimeStamp = CMTime(value: chunk.time, timescale: 1_000_000_000)
        decodeTimeStamp = .invalid
        formatDescription = CMFormatDescription.audio
        attachments = Mutex([:])
    }

    /// One encoded picture, as `VTCompressionSession` gives it: its bytes (copied), its description,
    /// its times, and its sample attachments (`kCMSampleAttachmentKey_NotSync` and `…DependsOnOthers`
    /// true on a picture that is not a keyframe; none on a keyframe).
    package init(compressed bytes: [UInt8], formatDescription: CMFormatDescription, presentationTimeStamp: CMTime,
                 decodeTimeStamp: CMTime, duration: CMTime, isKeyframe: Bool) {
        content = .compressed(CMBlockBuffer(copying: bytes), duration: duration)
        sampleBufferType = .video
        self.presentationTimeStamp = presentationTimeStamp
        self.decodeTimeStamp = decodeTimeStamp
        self.formatDescription = formatDescription
        attachments = Mutex([:])
        let sample = NSMutableDictionary()
        if !isKeyframe {
            sample[kCMSampleAttachmentKey_NotSync] = NSNumber(value: true)
            sample[kCMSampleAttachmentKey_DependsOnOthers] = NSNumber(value: true)
        }
        let array = NSMutableArray()
        array.add(sample)
        sampleAttachments.withLock { $0 = AttachmentValue(array) }
    }

    /// Whatever the ring delivered.
    package convenience init(_ delivery: FrameRingReader.Delivery) {
        switch delivery {
        case .video(let frame): self.init(video: frame)
        case .audio(let chunk): self.init(audio: chunk)
        }
    }

    public var isValid: Bool { !invalidated.load(ordering: .acquiring) }

    /// The iOS overlay's readiness: a buffer from the capture is whole when it arrives.
    public enum DataReadiness: Sendable, Hashable {
        case ready
        case notReady
        case failed(OSStatus)
    }

    public var dataReadiness: DataReadiness { .ready }

    /// 1 for a picture; the frames (samples per channel) of a chunk of sound.
    public var numSamples: CMItemCount {
        switch content {
        case .video, .compressed: 1
        case .audio(let block): block.chunk?.frames ?? 0
        }
    }

    /// A chunk's length; a picture's is not known (invalid), as from a live capture on iOS.
    public var duration: CMTime {
        switch content {
        case .video: .invalid
        case .compressed(_, let duration): duration
        case .audio(let block): CMTime(value: Int64(block.chunk?.frames ?? 0), timescale: Int32(FrameRingLayout.sampleRate))
        }
    }

    public var imageBuffer: CVImageBuffer? {
        if case .video(let pixels) = content { pixels } else { nil }
    }

    public var dataBuffer: CMBlockBuffer? {
        switch content {
        case .audio(let block), .compressed(let block, _): block
        case .video: nil
        }
    }

    public var outputPresentationTimeStamp: CMTime { presentationTimeStamp }

    /// Bytes of sound or of an encoded picture; 0 for a picture (its bytes are in the pixel buffer).
    public var totalSampleSize: Int { dataBuffer.map(CMBlockBufferGetDataLength) ?? 0 }

    fileprivate func invalidate() { invalidated.store(true, ordering: .releasing) }
}

public func CMSampleBufferGetPresentationTimeStamp(_ sbuf: CMSampleBuffer) -> CMTime { sbuf.presentationTimeStamp }
public func CMSampleBufferGetOutputPresentationTimeStamp(_ sbuf: CMSampleBuffer) -> CMTime { sbuf.presentationTimeStamp }
public func CMSampleBufferGetDecodeTimeStamp(_ sbuf: CMSampleBuffer) -> CMTime { sbuf.decodeTimeStamp }
public func CMSampleBufferGetDuration(_ sbuf: CMSampleBuffer) -> CMTime { sbuf.duration }
public func CMSampleBufferGetImageBuffer(_ sbuf: CMSampleBuffer) -> CVImageBuffer? { sbuf.imageBuffer }
public func CMSampleBufferGetDataBuffer(_ sbuf: CMSampleBuffer) -> CMBlockBuffer? { sbuf.dataBuffer }
public func CMSampleBufferGetFormatDescription(_ sbuf: CMSampleBuffer) -> CMFormatDescription? { sbuf.formatDescription }
public func CMSampleBufferGetNumSamples(_ sbuf: CMSampleBuffer) -> CMItemCount { sbuf.numSamples }
public func CMSampleBufferGetTotalSampleSize(_ sbuf: CMSampleBuffer) -> Int { sbuf.totalSampleSize }
public func CMSampleBufferIsValid(_ sbuf: CMSampleBuffer) -> Bool { sbuf.isValid }
public func CMSampleBufferDataIsReady(_ sbuf: CMSampleBuffer) -> Bool { true }

/// Marks the buffer invalid (`CMSampleBufferIsValid` then says false); its memory stays until it goes.
@discardableResult
public func CMSampleBufferInvalidate(_ sbuf: CMSampleBuffer) -> OSStatus {
    sbuf.invalidate()
    return noErr
}

/// Fills `bufferListOut` with one buffer over the sound's bytes (interleaved: one buffer, two
/// channels) and gives the block buffer that owns them in `blockBufferOut`, as CoreMedia does:
/// the bytes are valid while that block buffer is kept. `bufferListSizeNeededOut` says how big the
/// list must be. Errors: not a sound buffer, a list too small, the buffer invalidated.
@discardableResult
public func CMSampleBufferGetAudioBufferListWithRetainedBlockBuffer(
    _ sbuf: CMSampleBuffer, bufferListSizeNeededOut: UnsafeMutablePointer<Int>?,
    bufferListOut: UnsafeMutablePointer<AudioBufferList>?, bufferListSize: Int,
    blockBufferAllocator: CFAllocator?, blockBufferMemoryAllocator: CFAllocator?, flags: UInt32,
    blockBufferOut: UnsafeMutablePointer<CMBlockBuffer?>?
) -> OSStatus {
    let needed = AudioBufferList.sizeInBytes(maximumBuffers: 1)
    bufferListSizeNeededOut?.pointee = needed
    guard sbuf.isValid else { return kCMSampleBufferError_Invalidated }
    guard case .audio(let block) = sbuf.content else { return kCMSampleBufferError_InvalidMediaTypeForOperation }
    guard let bufferListOut else {
        return bufferListSizeNeededOut == nil ? kCMSampleBufferError_RequiredParameterMissing : noErr
    }
    guard bufferListSize >= needed else { return kCMSampleBufferError_ArrayTooSmall }
    bufferListOut.pointee = AudioBufferList(mNumberBuffers: 1, mBuffers: AudioBuffer(
        mNumberChannels: UInt32(FrameRingLayout.channels), mDataByteSize: UInt32(block.length), mData: block.bytes))
    blockBufferOut?.pointee = block
    return noErr
}
