// What iOS sample-processing code asks of each buffer before encoding it: its orientation (both
// spellings real code uses), readiness, format, time against the host clock, key-frame attachments,
// audio format, the H.264 parameter sets of an encoded stream, and the bytes of a block buffer.
// Only `import OpenReplayKit` (on iOS: ReplayKit, CoreMedia, CoreVideo). A compile fixture.
import OpenReplayKit

extension CMSampleBuffer {
    var videoOrientation: UInt32 {
        let value = CMGetAttachment(self, key: RPVideoSampleOrientationKey as CFString, attachmentModeOut: nil)
        return value?.uint32Value ?? CGImagePropertyOrientation.up.rawValue
    }
}

struct SampleInspector {
    var latencies: [Double] = []

    mutating func inspect(_ sampleBuffer: CMSampleBuffer) -> Bool {
        guard CMSampleBufferIsValid(sampleBuffer), sampleBuffer.dataReadiness == .ready else { return false }
        if let orientation = CMGetAttachment(sampleBuffer, key: RPVideoSampleOrientationKey as CFString, attachmentModeOut: nil),
           CGImagePropertyOrientation(rawValue: orientation.uint32Value) != .up {
            return false
        }
        guard let format = CMSampleBufferGetFormatDescription(sampleBuffer) else { return false }
        if format.mediaType == .video {
            let dimensions = CMVideoFormatDescriptionGetDimensions(format)
            _ = dimensions.width * dimensions.height
            _ = format.mediaSubType == .pixelFormat_420YpCbCr8BiPlanarFullRange
        } else if format.mediaType == .audio, let asbd = format.audioStreamBasicDescription {
            _ = asbd.mSampleRate
        }
        let now = CMClockGetTime(CMClockGetHostTimeClock())
        latencies.append(CMTimeGetSeconds(CMTimeSubtract(now, CMSampleBufferGetPresentationTimeStamp(sampleBuffer))))
        var isKeyFrame = true
        if let attachments = CMSampleBufferGetSampleAttachmentsArray(sampleBuffer, createIfNecessary: false) as? [[CFString: Any]],
           let first = attachments.first {
            isKeyFrame = !(first[kCMSampleAttachmentKey_NotSync] as? Bool ?? false)
        }
        return isKeyFrame
    }

    func sameFormat(_ a: CMSampleBuffer, _ b: CMSampleBuffer) -> Bool {
        CMFormatDescriptionEqual(CMSampleBufferGetFormatDescription(a), otherFormatDescription: CMSampleBufferGetFormatDescription(b))
    }

    /// SPS and PPS of an encoded H.264 stream, as an RTMP or WebRTC packetizer reads them.
    func parameterSets(of format: CMFormatDescription) -> [Data] {
        guard CMFormatDescriptionGetMediaSubType(format) == kCMVideoCodecType_H264 else { return [] }
        var count = 0
        var headerLength: Int32 = 0
        guard CMVideoFormatDescriptionGetH264ParameterSetAtIndex(format, parameterSetIndex: 0, parameterSetPointerOut: nil,
                                                                 parameterSetSizeOut: nil, parameterSetCountOut: &count,
                                                                 nalUnitHeaderLengthOut: &headerLength) == noErr else { return [] }
        var sets: [Data] = []
        for index in 0..<count {
            var pointer: UnsafePointer<UInt8>?
            var size = 0
            if CMVideoFormatDescriptionGetH264ParameterSetAtIndex(format, parameterSetIndex: index, parameterSetPointerOut: &pointer,
                                                                  parameterSetSizeOut: &size, parameterSetCountOut: nil,
                                                                  nalUnitHeaderLengthOut: nil) == noErr, let pointer {
                sets.append(Data(bytes: pointer, count: size))
            }
        }
        return sets
    }

    func bytes(of sampleBuffer: CMSampleBuffer) -> Data? {
        guard let block = CMSampleBufferGetDataBuffer(sampleBuffer) else { return nil }
        var length = 0
        var pointer: UnsafeMutablePointer<CChar>?
        guard CMBlockBufferGetDataPointer(block, atOffset: 0, lengthAtOffsetOut: nil, totalLengthOut: &length,
                                          dataPointerOut: &pointer) == kCMBlockBufferNoErr, let pointer else { return nil }
        return Data(bytes: pointer, count: length)
    }

    func pixelBufferOptions(width: Int, height: Int) -> CFDictionary {
        [kCVPixelBufferPixelFormatTypeKey: kCVPixelFormatType_420YpCbCr8BiPlanarFullRange,
         kCVPixelBufferWidthKey: width,
         kCVPixelBufferHeightKey: height] as CFDictionary
    }

    func pixelBufferAttributes(width: Int, height: Int) -> [String: Any] {
        [kCVPixelBufferPixelFormatTypeKey as String: kCVPixelFormatType_420YpCbCr8BiPlanarFullRange,
         kCVPixelBufferWidthKey as String: width,
         kCVPixelBufferHeightKey as String: height,
         kCVPixelBufferIOSurfacePropertiesKey as String: [:] as [String: Any]]
    }

    func isHEVC(_ format: CMFormatDescription) -> Bool {
        CMFormatDescriptionGetMediaSubType(format) == kCMVideoCodecType_HEVC || format.mediaSubType == .hevc
    }
}
