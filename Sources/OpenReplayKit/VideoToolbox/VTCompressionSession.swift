// VideoToolbox's compression session, the subset upload extensions use to encode a broadcast's
// pictures to H.264 for their own RTMP or WebRTC code: create, set properties, encode (the output
// handler and the callback forms), complete, invalidate. Over libx264 (`OpenReplayKitMedia`): the
// pictures are encoded on a serial queue of the session's own, in order, and the encoded samples
// arrive there, as VideoToolbox's do on its own thread. docs/PORTING.md lists what differs.
public import Foundation
internal import Dispatch
internal import Synchronization
internal import OpenReplayKitMedia

public let kVTPropertyNotSupportedErr: OSStatus = -12900
public let kVTPropertyReadOnlyErr: OSStatus = -12901
public let kVTParameterErr: OSStatus = -12902
public let kVTInvalidSessionErr: OSStatus = -12903
public let kVTAllocationFailedErr: OSStatus = -12904
public let kVTPixelTransferNotSupportedErr: OSStatus = -12905
public let kVTCouldNotFindVideoEncoderErr: OSStatus = -12908
public let kVTVideoEncoderMalfunctionErr: OSStatus = -12912

/// CoreFoundation's number and boolean, for the property values iOS code passes (`kCFBooleanTrue`,
/// `30 as CFNumber`).
public typealias CFNumber = NSNumber
public typealias CFBoolean = NSNumber
public let kCFBooleanTrue: CFBoolean! = NSNumber(value: true)
public let kCFBooleanFalse: CFBoolean! = NSNumber(value: false)

/// CoreFoundation's byte order swaps, with which code reads AVCC's big-endian NAL unit lengths.
public func CFSwapInt32BigToHost(_ arg: UInt32) -> UInt32 { UInt32(bigEndian: arg) }
public func CFSwapInt32HostToBig(_ arg: UInt32) -> UInt32 { arg.bigEndian }
public func CFSwapInt16BigToHost(_ arg: UInt16) -> UInt16 { UInt16(bigEndian: arg) }
public func CFSwapInt16HostToBig(_ arg: UInt16) -> UInt16 { arg.bigEndian }

/// What VideoToolbox says about a frame it encoded (or dropped).
public struct VTEncodeInfoFlags: OptionSet, Sendable, Hashable {
    public var rawValue: UInt32
    public init(rawValue: UInt32) { self.rawValue = rawValue }
    public static let asynchronous = VTEncodeInfoFlags(rawValue: 1 << 0)
    public static let frameDropped = VTEncodeInfoFlags(rawValue: 1 << 1)
}

// Session properties (VideoToolbox's key strings).
public let kVTCompressionPropertyKey_RealTime: CFString = "RealTime"
public let kVTCompressionPropertyKey_AverageBitRate: CFString = "AverageBitRate"
public let kVTCompressionPropertyKey_DataRateLimits: CFString = "DataRateLimits"
public let kVTCompressionPropertyKey_MaxKeyFrameInterval: CFString = "MaxKeyFrameInterval"
public let kVTCompressionPropertyKey_MaxKeyFrameIntervalDuration: CFString = "MaxKeyFrameIntervalDuration"
public let kVTCompressionPropertyKey_ExpectedFrameRate: CFString = "ExpectedFrameRate"
public let kVTCompressionPropertyKey_ProfileLevel: CFString = "ProfileLevel"
public let kVTCompressionPropertyKey_AllowFrameReordering: CFString = "AllowFrameReordering"

// Profiles and levels (`kVTCompressionPropertyKey_ProfileLevel`'s values).
public let kVTProfileLevel_H264_Baseline_AutoLevel: CFString = "H264_Baseline_AutoLevel"
public let kVTProfileLevel_H264_Baseline_3_0: CFString = "H264_Baseline_3_0"
public let kVTProfileLevel_H264_Baseline_3_1: CFString = "H264_Baseline_3_1"
public let kVTProfileLevel_H264_Baseline_4_1: CFString = "H264_Baseline_4_1"
public let kVTProfileLevel_H264_Main_AutoLevel: CFString = "H264_Main_AutoLevel"
public let kVTProfileLevel_H264_Main_3_1: CFString = "H264_Main_3_1"
public let kVTProfileLevel_H264_Main_4_0: CFString = "H264_Main_4_0"
public let kVTProfileLevel_H264_Main_4_1: CFString = "H264_Main_4_1"
public let kVTProfileLevel_H264_High_AutoLevel: CFString = "H264_High_AutoLevel"
public let kVTProfileLevel_H264_High_4_0: CFString = "H264_High_4_0"
public let kVTProfileLevel_H264_High_4_1: CFString = "H264_High_4_1"

/// A frame property (`VTCompressionSessionEncodeFrame`'s `frameProperties`): true makes the picture a keyframe.
public let kVTEncodeFrameOptionKey_ForceKeyFrame: CFString = "ForceKeyFrame"

/// The callback form's output: called on the session's queue with the `refcon` given at creation,
/// the frame's `sourceFrameRefcon`, a status, flags and the encoded sample (nil when dropped or failed).
/// `@Sendable` where iOS's is `@convention(c)`: a function or a closure that captures nothing passes both.
public typealias VTCompressionOutputCallback = @Sendable (UnsafeMutableRawPointer?, UnsafeMutableRawPointer?, OSStatus,
                                                          VTEncodeInfoFlags, CMSampleBuffer?) -> Void
/// The block form's output, called on the session's queue. Not `@Sendable`, as iOS types it.
public typealias VTCompressionOutputHandler = (OSStatus, VTEncodeInfoFlags, CMSampleBuffer?) -> Void

/// Any VideoToolbox session, as `VTSessionSetProperty` takes it.
public typealias VTSession = AnyObject

/// A compression session: H.264 (`kCMVideoCodecType_H264`) of one picture size, from NV12
/// ('420f', '420v') or BGRA pixel buffers of that size.
///
/// `Sendable`: its state is a `Mutex`; the encoder is used on its serial queue only.
public final class VTCompressionSession: Sendable {
    let width: Int
    let height: Int
    private let callback: VTCompressionOutputCallback?
    /// The pictures' range as the image buffer attributes' pixel format says it, nil when they do not.
    private let attributesFullRange: Bool?
    private let refcon: SendableRawPointer
    /// Encoding runs here, one picture after another, and outputs are called from here.
    private let queue = DispatchQueue(label: "org.openreplaykit.vtcompressionsession")
    /// Set on `queue`, so that a call from an output (which runs there) does not wait for itself.
    private static let onQueue = DispatchSpecificKey<Bool>()
    /// At most this many pictures wait for the encoder: `EncodeFrame` then waits for a place, as
    /// VideoToolbox's blocks its caller when it is behind.
    private let places = DispatchSemaphore(value: 3)
    private let state: Mutex<State>

    struct State: ~Copyable {
        var settings: H264CompressorSettings
        var realTime = false
        var allowFrameReordering = true
        var keyframeIntervalDuration: Double?
        var invalidated = false
        /// Made by `PrepareToEncodeFrames` or the first frame, used on `queue` only.
        var encoder: EncoderBox?
    }

    init(width: Int, height: Int, callback: VTCompressionOutputCallback?, refcon: UnsafeMutableRawPointer?,
         pixelFormat: OSType?) {
        self.width = width
        self.height = height
        attributesFullRange = pixelFormat.map(Self.isFullRange)
        self.callback = callback
        self.refcon = SendableRawPointer(refcon)
        state = Mutex(State(settings: H264CompressorSettings(width: width, height: height)))
        queue.setSpecific(key: Self.onQueue, value: true)
    }

    /// Waits for what is queued before now, unless called from the queue itself (an output).
    private func drain() {
        if DispatchQueue.getSpecific(key: Self.onQueue) != true { queue.sync {} }
    }

    var isValid: Bool { state.withLock { !$0.invalidated } }

    func setProperty(_ key: CFString, _ value: Any?) -> OSStatus {
        state.withLock { state in
            guard !state.invalidated else { return kVTInvalidSessionErr }
            switch key {
            case kVTCompressionPropertyKey_RealTime:
                guard let flag = Self.bool(value) else { return kVTParameterErr }
                state.realTime = flag
            case kVTCompressionPropertyKey_AllowFrameReordering:
                guard let flag = Self.bool(value) else { return kVTParameterErr }
                state.allowFrameReordering = flag
            case kVTCompressionPropertyKey_AverageBitRate:
                guard let bits = Self.number(value), bits >= 0 else { return kVTParameterErr }
                state.settings.averageBitRate = bits > 0 ? Int(bits) : nil
                reconfigure(state.encoder, averageBitRate: state.settings.averageBitRate, dataRateLimit: nil)
            case kVTCompressionPropertyKey_DataRateLimits:
                // Pairs of bytes and seconds; the first pair is kept.
                guard let pair = Self.numbers(value), pair.count >= 2, pair.count % 2 == 0, pair[0] > 0, pair[1] > 0 else {
                    return kVTParameterErr
                }
                state.settings.dataRateLimit = (Int(pair[0]), pair[1])
                reconfigure(state.encoder, averageBitRate: nil, dataRateLimit: state.settings.dataRateLimit)
            case kVTCompressionPropertyKey_MaxKeyFrameInterval:
                guard let frames = Self.number(value), frames >= 0 else { return kVTParameterErr }
                state.settings.maximumKeyframeInterval = frames > 0 ? Int(frames) : nil
            case kVTCompressionPropertyKey_MaxKeyFrameIntervalDuration:
                guard let seconds = Self.number(value), seconds >= 0 else { return kVTParameterErr }
                state.keyframeIntervalDuration = seconds > 0 ? seconds : nil
            case kVTCompressionPropertyKey_ExpectedFrameRate:
                guard let rate = Self.number(value), rate > 0 else { return kVTParameterErr }
                state.settings.framesPerSecond = rate
            case kVTCompressionPropertyKey_ProfileLevel:
                guard let name = value as? String, let (profile, level) = Self.profileLevel(name) else { return kVTParameterErr }
                state.settings.profile = profile
                state.settings.level = level
            default:
                return kVTPropertyNotSupportedErr
            }
            return noErr
        }
    }

    /// A running encoder's new bitrate, applied on the queue between two pictures (libx264 is used there only).
    private func reconfigure(_ encoder: EncoderBox?, averageBitRate: Int?, dataRateLimit: (bytes: Int, seconds: Double)?) {
        guard let encoder else { return }
        let limit = dataRateLimit.map { DataRateLimit(bytes: $0.bytes, seconds: $0.seconds) }
        queue.async {
            _ = encoder.compressor.reconfigure(averageBitRate: averageBitRate, dataRateLimit: limit.map { ($0.bytes, $0.seconds) })
        }
    }

    private struct DataRateLimit: Sendable {
        let bytes: Int
        let seconds: Double
    }

    /// "H264_Main_4_1" → (main, 41); "H264_High_AutoLevel" → (high, nil).
    static func profileLevel(_ name: String) -> (H264CompressorSettings.Profile, Int?)? {
        let parts = name.split(separator: "_")
        guard parts.count >= 3, parts[0] == "H264" else { return nil }
        let profile: H264CompressorSettings.Profile
        switch parts[1] {
        case "Baseline", "ConstrainedBaseline": profile = .baseline
        case "Main": profile = .main
        case "High", "ConstrainedHigh": profile = .high
        default: return nil
        }
        if parts[2] == "AutoLevel" { return (profile, nil) }
        guard parts.count == 4, let major = Int(parts[2]), let minor = Int(parts[3]) else { return nil }
        return (profile, major * 10 + minor)
    }

    static func bool(_ value: Any?) -> Bool? {
        if let flag = value as? Bool { return flag }
        return (value as? NSNumber)?.boolValue
    }

    static func number(_ value: Any?) -> Double? {
        switch value {
        case let number as NSNumber: number.doubleValue
        case let integer as Int: Double(integer)
        case let double as Double: double
        case let float as Float: Double(float)
        case let integer as Int32: Double(integer)
        default: nil
        }
    }

    static func numbers(_ value: Any?) -> [Double]? {
        if let array = value as? NSArray { return array.compactMap { number($0) }.count == array.count ? array.compactMap { number($0) } : nil }
        if let array = value as? [Any] { return array.compactMap { number($0) }.count == array.count ? array.compactMap { number($0) } : nil }
        return nil
    }

    /// Opens the encoder with the properties set so far, if not open yet.
    func prepare() -> OSStatus {
        state.withLock { state in
            guard !state.invalidated else { return kVTInvalidSessionErr }
            // Before any picture: the range the attributes say, else the capture's ('420f').
            return Self.open(&state, fullRange: attributesFullRange ?? true)
        }
    }

    /// '420f' is full range; '420v' video range, and BGRA is converted to it.
    static func isFullRange(_ format: OSType) -> Bool {
        format != kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange && format != kCVPixelFormatType_32BGRA
    }

    private static func open(_ state: inout State, fullRange: Bool) -> OSStatus {
        guard state.encoder == nil else { return noErr }
        var settings = state.settings
        settings.fullRange = fullRange
        if let seconds = state.keyframeIntervalDuration {
            let frames = max(1, Int((seconds * settings.framesPerSecond).rounded()))
            settings.maximumKeyframeInterval = min(settings.maximumKeyframeInterval ?? frames, frames)
        }
        do {
            let compressor = try H264Compressor(settings: settings)
            let description = CMFormatDescription.encodedVideo(
                codec: kCMVideoCodecType_H264, parameterSets: compressor.parameterSets, nalUnitHeaderLength: 4,
                dimensions: CMVideoDimensions(width: Int32(settings.width), height: Int32(settings.height)))
            state.encoder = EncoderBox(compressor: compressor, formatDescription: description)
            return noErr
        } catch {
            return kVTCouldNotFindVideoEncoderErr
        }
    }

    /// Checks the picture and queues it; the output comes on the session's queue.
    func encode(_ pixels: CVPixelBuffer, pts: CMTime, duration: CMTime, properties: CFDictionary?,
                output: Output, infoFlagsOut: UnsafeMutablePointer<VTEncodeInfoFlags>?) -> OSStatus {
        infoFlagsOut?.pointee = []
        let format = CVPixelBufferGetPixelFormatType(pixels)
        let status: OSStatus = state.withLock { state in
            guard !state.invalidated else { return kVTInvalidSessionErr }
            guard pts.isValid else { return kVTParameterErr }
            // VideoToolbox would scale or convert the picture (a pixel transfer); this subset does neither.
            guard CVPixelBufferGetWidth(pixels) == width, CVPixelBufferGetHeight(pixels) == height,
                  [kCVPixelFormatType_420YpCbCr8BiPlanarFullRange, kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange,
                   kCVPixelFormatType_32BGRA].contains(format) else { return kVTPixelTransferNotSupportedErr }
            // Not prepared: the first frame prepares, as on Apple's; its range sets the stream's.
            return Self.open(&state, fullRange: Self.isFullRange(format))
        }
        guard status == noErr else { return status }
        let forceKeyframe = Self.bool(properties?[kVTEncodeFrameOptionKey_ForceKeyFrame]) ?? false
        // From an output (on the queue itself) it cannot wait for the queue to make a place.
        let holdsPlace = DispatchQueue.getSpecific(key: Self.onQueue) != true
        if holdsPlace { places.wait() }
        infoFlagsOut?.pointee = .asynchronous
        let job = EncodeJob(pixels: pixels, pts: pts, duration: duration, forceKeyframe: forceKeyframe, output: output)
        queue.async { [self] in
            defer { if holdsPlace { places.signal() } }
            run(job)
        }
        return noErr
    }

    /// Encodes one picture on the queue and hands its sample to its output.
    private func run(_ job: EncodeJob) {
        guard let encoder = state.withLock({ $0.invalidated ? nil : $0.encoder }) else { return }
        let pixels = job.pixels
        CVPixelBufferLockBaseAddress(pixels, .readOnly)
        defer { CVPixelBufferUnlockBaseAddress(pixels, .readOnly) }
        let input: H264CompressorInput
        if CVPixelBufferGetPixelFormatType(pixels) == kCVPixelFormatType_32BGRA {
            input = .bgra(UnsafeRawPointer(CVPixelBufferGetBaseAddress(pixels)!), stride: CVPixelBufferGetBytesPerRow(pixels))
        } else {
            input = .nv12(luma: UnsafeRawPointer(CVPixelBufferGetBaseAddressOfPlane(pixels, 0)!),
                          lumaStride: CVPixelBufferGetBytesPerRowOfPlane(pixels, 0),
                          chroma: UnsafeRawPointer(CVPixelBufferGetBaseAddressOfPlane(pixels, 1)!),
                          chromaStride: CVPixelBufferGetBytesPerRowOfPlane(pixels, 1))
        }
        let sequence = encoder.nextSequence()
        let sample: CMSampleBuffer?
        let status: OSStatus
        do {
            if let picture = try encoder.compressor.encode(input, pts: sequence, keyframe: job.forceKeyframe) {
                // No reordering: the picture that comes out is the one that went in, decoded when shown.
                sample = CMSampleBuffer(compressed: picture.bytes, formatDescription: encoder.formatDescription,
                                        presentationTimeStamp: job.pts, decodeTimeStamp: job.pts, duration: job.duration,
                                        isKeyframe: picture.isKeyframe)
                status = noErr
            } else {
                sample = nil
                status = noErr
            }
        } catch {
            sample = nil
            status = kVTVideoEncoderMalfunctionErr
        }
        let flags: VTEncodeInfoFlags = sample == nil ? [.asynchronous, .frameDropped] : .asynchronous
        switch job.output {
        case .handler(let box): box.handler(status, flags, sample)
        case .callback(let sourceFrameRefcon):
            callback?(refcon.pointer, sourceFrameRefcon.pointer, status, flags, sample)
        }
    }

    /// Waits until every picture given so far has come out (none is held back: there is no reordering).
    func completeFrames() -> OSStatus {
        guard isValid else { return kVTInvalidSessionErr }
        drain()
        return noErr
    }

    /// Pictures still queued are dropped without output; the encoder is closed once the one being
    /// encoded is out. Later calls give `kVTInvalidSessionErr`.
    func invalidate() {
        let encoder = state.withLock { state -> EncoderBox? in
            state.invalidated = true
            defer { state.encoder = nil }
            return state.encoder
        }
        // The encoder is released on the queue, after any picture it is encoding.
        queue.async { withExtendedLifetime(encoder) {} }
        drain()
    }

    /// Where one picture's output goes.
    enum Output: Sendable {
        case handler(HandlerBox)
        case callback(sourceFrameRefcon: SendableRawPointer)
    }

    struct EncodeJob: Sendable {
        let pixels: CVPixelBuffer
        let pts: CMTime
        let duration: CMTime
        let forceKeyframe: Bool
        let output: Output
    }
}

/// The app's output handler, called on the session's queue only.
///
/// `@unchecked Sendable`: iOS types the handler without `@Sendable` and calls it on VideoToolbox's own
/// thread; here it is called on the session's serial queue, one call at a time, as there.
final class HandlerBox: @unchecked Sendable {
    let handler: VTCompressionOutputHandler
    init(_ handler: @escaping VTCompressionOutputHandler) { self.handler = handler }
}

/// A pointer the app passed (`refcon`, `sourceFrameRefcon`), handed back as it is.
///
/// `@unchecked Sendable`: never dereferenced here, only passed back to the app's callback.
struct SendableRawPointer: @unchecked Sendable {
    let pointer: UnsafeMutableRawPointer?
    init(_ pointer: UnsafeMutableRawPointer?) { self.pointer = pointer }
}

/// The session's encoder and the description of its stream.
///
/// `@unchecked Sendable`: the compressor (one `x264_t`, its only owner) is used on the session's serial
/// queue only; the description is immutable; the sequence counter is a `Mutex`.
final class EncoderBox: @unchecked Sendable {
    let compressor: H264Compressor
    let formatDescription: CMFormatDescription
    private let sequence = Mutex<Int64>(0)

    init(compressor: H264Compressor, formatDescription: CMFormatDescription) {
        self.compressor = compressor
        self.formatDescription = formatDescription
    }

    func nextSequence() -> Int64 {
        sequence.withLock { value in
            defer { value += 1 }
            return value
        }
    }
}

/// Creates a session for `width`×`height` H.264 (`kCMVideoCodecType_H264`; another codec:
/// `kVTCouldNotFindVideoEncoderErr`; a size not above 0, or odd: `kVTParameterErr`). Of the image
/// buffer attributes only `kCVPixelBufferPixelFormatTypeKey` is read (the stream's range, when the
/// session is prepared before its first picture); the encoder specification and allocators are not. Samples go to
/// `outputCallback` with `outputCallbackRefCon`, or to each frame's `outputHandler`.
@discardableResult
public func VTCompressionSessionCreate(
    allocator: CFAllocator?, width: Int32, height: Int32, codecType: CMVideoCodecType, encoderSpecification: CFDictionary?,
    imageBufferAttributes sourceImageBufferAttributes: CFDictionary?, compressedDataAllocator: CFAllocator?,
    outputCallback: VTCompressionOutputCallback?, refcon outputCallbackRefCon: UnsafeMutableRawPointer?,
    compressionSessionOut: UnsafeMutablePointer<VTCompressionSession?>
) -> OSStatus {
    guard codecType == kCMVideoCodecType_H264 else { return kVTCouldNotFindVideoEncoderErr }
    guard width > 0, height > 0, width % 2 == 0, height % 2 == 0 else { return kVTParameterErr }
    let format = (sourceImageBufferAttributes?[kCVPixelBufferPixelFormatTypeKey] as? NSNumber)?.uint32Value
    compressionSessionOut.pointee = VTCompressionSession(width: Int(width), height: Int(height), callback: outputCallback,
                                                         refcon: outputCallbackRefCon, pixelFormat: format)
    return noErr
}

/// Sets one property. Values: numbers as `NSNumber`/`CFNumber` or Swift numbers, flags as
/// `kCFBooleanTrue`/`Bool`, `DataRateLimits` as `[bytes, seconds] as CFArray`, `ProfileLevel` as a
/// `kVTProfileLevel_H264_…` string. Another key: `kVTPropertyNotSupportedErr`; a value of the wrong
/// kind: `kVTParameterErr`. The bitrate and its limits apply from the next picture on; the others
/// when the encoder opens (`PrepareToEncodeFrames` or the first frame).
@discardableResult
public func VTSessionSetProperty(_ session: VTSession, key propertyKey: CFString, value propertyValue: Any?) -> OSStatus {
    guard let session = session as? VTCompressionSession else { return kVTParameterErr }
    return session.setProperty(propertyKey, propertyValue)
}

/// Sets each property of the dictionary; the first failure's status, after trying them all.
@discardableResult
public func VTSessionSetProperties(_ session: VTSession, propertyDictionary: CFDictionary) -> OSStatus {
    guard let session = session as? VTCompressionSession else { return kVTParameterErr }
    var result = noErr
    for (key, value) in propertyDictionary {
        guard let key = key as? String else {
            if result == noErr { result = kVTParameterErr }
            continue
        }
        let status = session.setProperty(key, value)
        if result == noErr { result = status }
    }
    return result
}

/// Opens the encoder now (optional: the first frame opens it otherwise); later calls do nothing.
@discardableResult
public func VTCompressionSessionPrepareToEncodeFrames(_ session: VTCompressionSession) -> OSStatus {
    session.prepare()
}

/// Queues one picture; its sample comes to the session's callback with `sourceFrameRefcon`, on the
/// session's queue. `frameProperties` may hold `kVTEncodeFrameOptionKey_ForceKeyFrame`. A picture
/// of another size or format: `kVTPixelTransferNotSupportedErr`; after `Invalidate`: `kVTInvalidSessionErr`.
@discardableResult
public func VTCompressionSessionEncodeFrame(
    _ session: VTCompressionSession, imageBuffer: CVImageBuffer, presentationTimeStamp: CMTime, duration: CMTime,
    frameProperties: CFDictionary?, sourceFrameRefcon: UnsafeMutableRawPointer?, infoFlagsOut: UnsafeMutablePointer<VTEncodeInfoFlags>?
) -> OSStatus {
    session.encode(imageBuffer, pts: presentationTimeStamp, duration: duration, properties: frameProperties,
                   output: .callback(sourceFrameRefcon: SendableRawPointer(sourceFrameRefcon)), infoFlagsOut: infoFlagsOut)
}

/// The same, with the sample going to `outputHandler` (on the session's queue) instead of the callback.
@discardableResult
public func VTCompressionSessionEncodeFrame(
    _ session: VTCompressionSession, imageBuffer: CVImageBuffer, presentationTimeStamp: CMTime, duration: CMTime,
    frameProperties: CFDictionary?, infoFlagsOut: UnsafeMutablePointer<VTEncodeInfoFlags>?,
    outputHandler: @escaping VTCompressionOutputHandler
) -> OSStatus {
    session.encode(imageBuffer, pts: presentationTimeStamp, duration: duration, properties: frameProperties,
                   output: .handler(HandlerBox(outputHandler)), infoFlagsOut: infoFlagsOut)
}

/// Returns once every picture given so far has come out (`completeUntilPresentationTimeStamp` is
/// accepted: none is held back here, so all are complete).
@discardableResult
public func VTCompressionSessionCompleteFrames(_ session: VTCompressionSession,
                                               untilPresentationTimeStamp completeUntilPresentationTimeStamp: CMTime) -> OSStatus {
    session.completeFrames()
}

/// Tears the session down: pictures still queued are dropped, the encoder closes, and later calls
/// give `kVTInvalidSessionErr`.
public func VTCompressionSessionInvalidate(_ session: VTCompressionSession) {
    session.invalidate()
}
