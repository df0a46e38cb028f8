// An upload extension's H.264 encoder as streaming SDKs write one: a VTCompressionSession set up for
// live streaming (real time, bitrate with its limits, keyframe interval, profile, no reordering),
// fed the broadcast's pictures, its samples walked as AVCC with the SPS and PPS read from the
// format description and key frames told by their attachments, for the SDK's own RTMP code.
// Both output forms: the C callback with a refcon, and the block. Only `import OpenReplayKit` (on
// iOS: ReplayKit, VideoToolbox, CoreMedia, CoreVideo). A compile fixture.
import OpenReplayKit

protocol H264EncoderDelegate: AnyObject {
    func encoder(_ encoder: H264Encoder, didOutputParameterSets sps: Data, pps: Data)
    func encoder(_ encoder: H264Encoder, didOutputNALUnits units: [Data], isKeyFrame: Bool, timestamp: CMTime)
}

final class H264Encoder {
    weak var delegate: H264EncoderDelegate?
    private var session: VTCompressionSession?
    private var sentParameterSets = false
    private var frameCount: Int64 = 0
    var width: Int32 = 1280
    var height: Int32 = 720
    var bitrate = 2_500_000
    var fps = 30

    private static let outputCallback: VTCompressionOutputCallback = { refcon, _, status, infoFlags, sampleBuffer in
        guard status == noErr, let refcon, let sampleBuffer else { return }
        if infoFlags.contains(.frameDropped) { return }
        let encoder = Unmanaged<H264Encoder>.fromOpaque(refcon).takeUnretainedValue()
        encoder.handle(sampleBuffer)
    }

    func setUp() -> Bool {
        var newSession: VTCompressionSession?
        let status = VTCompressionSessionCreate(allocator: kCFAllocatorDefault, width: width, height: height,
                                                codecType: kCMVideoCodecType_H264, encoderSpecification: nil,
                                                imageBufferAttributes: nil, compressedDataAllocator: nil,
                                                outputCallback: H264Encoder.outputCallback,
                                                refcon: Unmanaged.passUnretained(self).toOpaque(),
                                                compressionSessionOut: &newSession)
        guard status == noErr, let session = newSession else {
            print("VTCompressionSessionCreate failed: \(status)")
            return false
        }
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_RealTime, value: kCFBooleanTrue)
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_ProfileLevel, value: kVTProfileLevel_H264_Main_AutoLevel)
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_AllowFrameReordering, value: kCFBooleanFalse)
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_AverageBitRate, value: NSNumber(value: bitrate))
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_DataRateLimits, value: [bitrate / 8 * 3 / 2, 1] as CFArray)
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_MaxKeyFrameInterval, value: fps * 2 as CFTypeRef)
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_MaxKeyFrameIntervalDuration, value: 2 as CFTypeRef)
        VTSessionSetProperty(session, key: kVTCompressionPropertyKey_ExpectedFrameRate, value: fps as CFNumber)
        let properties: [CFString: Any] = [kVTCompressionPropertyKey_RealTime: true,
                                           kVTCompressionPropertyKey_ProfileLevel: kVTProfileLevel_H264_Baseline_AutoLevel]
        VTSessionSetProperties(session, propertyDictionary: properties as CFDictionary)
        VTCompressionSessionPrepareToEncodeFrames(session)
        self.session = session
        return true
    }

    func encode(_ sampleBuffer: CMSampleBuffer, forceKeyFrame: Bool = false) {
        guard let session, let imageBuffer = CMSampleBufferGetImageBuffer(sampleBuffer) else { return }
        let pts = CMSampleBufferGetPresentationTimeStamp(sampleBuffer)
        let properties: [String: Any]? = forceKeyFrame ? [kVTEncodeFrameOptionKey_ForceKeyFrame as String: kCFBooleanTrue as Any] : nil
        var flags = VTEncodeInfoFlags()
        let status = VTCompressionSessionEncodeFrame(session, imageBuffer: imageBuffer, presentationTimeStamp: pts,
                                                     duration: .invalid, frameProperties: properties as CFDictionary?,
                                                     sourceFrameRefcon: nil, infoFlagsOut: &flags)
        if status != noErr {
            print("encode failed: \(status)")
        }
        frameCount += 1
    }

    /// The block form, as newer SDKs write it.
    func encode(pixelBuffer: CVPixelBuffer, at time: CMTime) {
        guard let session else { return }
        VTCompressionSessionEncodeFrame(session, imageBuffer: pixelBuffer, presentationTimeStamp: time,
                                        duration: CMTime(value: 1, timescale: CMTimeScale(fps)), frameProperties: nil,
                                        infoFlagsOut: nil) { [weak self] status, _, sampleBuffer in
            guard status == noErr, let sampleBuffer else { return }
            self?.handle(sampleBuffer)
        }
    }

    func stop() {
        guard let session else { return }
        VTCompressionSessionCompleteFrames(session, untilPresentationTimeStamp: .invalid)
        VTCompressionSessionInvalidate(session)
        self.session = nil
    }

    private func handle(_ sampleBuffer: CMSampleBuffer) {
        guard CMSampleBufferDataIsReady(sampleBuffer) else { return }
        var isKeyFrame = true
        if let attachments = CMSampleBufferGetSampleAttachmentsArray(sampleBuffer, createIfNecessary: true) as? [[CFString: Any]],
           let first = attachments.first {
            isKeyFrame = !(first[kCMSampleAttachmentKey_NotSync] as? Bool ?? false)
        }
        if isKeyFrame, !sentParameterSets, let format = CMSampleBufferGetFormatDescription(sampleBuffer) {
            var spsPointer: UnsafePointer<UInt8>?
            var spsSize = 0
            var ppsPointer: UnsafePointer<UInt8>?
            var ppsSize = 0
            var count = 0
            var headerLength: Int32 = 0
            let spsStatus = CMVideoFormatDescriptionGetH264ParameterSetAtIndex(format, parameterSetIndex: 0, parameterSetPointerOut: &spsPointer,
                                                                               parameterSetSizeOut: &spsSize, parameterSetCountOut: &count,
                                                                               nalUnitHeaderLengthOut: &headerLength)
            let ppsStatus = CMVideoFormatDescriptionGetH264ParameterSetAtIndex(format, parameterSetIndex: 1, parameterSetPointerOut: &ppsPointer,
                                                                               parameterSetSizeOut: &ppsSize, parameterSetCountOut: nil,
                                                                               nalUnitHeaderLengthOut: nil)
            if spsStatus == noErr, ppsStatus == noErr, let spsPointer, let ppsPointer {
                delegate?.encoder(self, didOutputParameterSets: Data(bytes: spsPointer, count: spsSize),
                                  pps: Data(bytes: ppsPointer, count: ppsSize))
                sentParameterSets = true
            }
        }
        guard let dataBuffer = CMSampleBufferGetDataBuffer(sampleBuffer) else { return }
        var totalLength = 0
        var lengthAtOffset = 0
        var dataPointer: UnsafeMutablePointer<Int8>?
        guard CMBlockBufferGetDataPointer(dataBuffer, atOffset: 0, lengthAtOffsetOut: &lengthAtOffset,
                                          totalLengthOut: &totalLength, dataPointerOut: &dataPointer) == kCMBlockBufferNoErr,
              let dataPointer else { return }
        var units: [Data] = []
        var offset = 0
        let headerLength = 4
        while offset < totalLength - headerLength {
            var nalLength: UInt32 = 0
            memcpy(&nalLength, dataPointer + offset, headerLength)
            nalLength = CFSwapInt32BigToHost(nalLength)
            let unit = Data(bytes: dataPointer + offset + headerLength, count: Int(nalLength))
            units.append(unit)
            offset += headerLength + Int(nalLength)
        }
        delegate?.encoder(self, didOutputNALUnits: units, isKeyFrame: isKeyFrame,
                          timestamp: CMSampleBufferGetPresentationTimeStamp(sampleBuffer))
    }
}

/// The extension's handler: every picture to the encoder, a keyframe when the stream asks for one.
class EncodingSampleHandler: RPBroadcastSampleHandler, H264EncoderDelegate {
    let encoder = H264Encoder()
    var needsKeyFrame = false
    var sentBytes = 0

    override init() {
        super.init()
        encoder.delegate = self
    }

    override func broadcastStarted(withSetupInfo setupInfo: [String: NSObject]?) {
        _ = encoder.setUp()
    }

    override func processSampleBuffer(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {
        switch sampleBufferType {
        case .video:
            encoder.encode(sampleBuffer, forceKeyFrame: needsKeyFrame)
            needsKeyFrame = false
        case .audioApp, .audioMic:
            break
        @unknown default:
            break
        }
    }

    override func broadcastFinished() {
        encoder.stop()
    }

    func encoder(_ encoder: H264Encoder, didOutputParameterSets sps: Data, pps: Data) {
        sentBytes += sps.count + pps.count
    }

    func encoder(_ encoder: H264Encoder, didOutputNALUnits units: [Data], isKeyFrame: Bool, timestamp: CMTime) {
        sentBytes += units.reduce(0) { $0 + $1.count }
    }
}
