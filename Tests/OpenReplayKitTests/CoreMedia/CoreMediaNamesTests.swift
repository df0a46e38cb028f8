import Foundation
@testable import OpenReplayKit
import ReplayTesting
import Synchronization
import Testing

/// The CoreMedia names iOS sample code calls beyond the basics (IOSSampleCodeTests): attachments,
/// the host clock, readiness and format descriptions on buffers of a real ring written by another
/// process, block-buffer copies of the sound that process wrote, and H.264 parameter sets.
@Suite("CoreMedia names: attachments, host clock, block buffers, parameter sets")
struct CoreMediaNamesTests {
    /// What the delivery thread saw, checked as the buffers arrived.
    struct Seen: Sendable {
        var pictures = 0
        var orientations: Set<UInt32> = []
        var orientationMode: CMAttachmentMode?
        var customAttachment: UInt32?
        var nonNumberReadsNil = false
        var removedReadsNil = false
        var attachmentsBeforeCreate = true
        var sampleAttachmentCount = 0
        var sampleAttachmentKept = false
        var allReady = true
        var videoFormatsRight = true
        var videoFormatsEqual = true
        var audioFormatRight = false
        var audioAndVideoDiffer = false
        var ages: [Double] = []
        var copiedAudio: [RPSampleBufferType: Bool] = [:]
        var offsetCopy = false
        var badCopiesRefused = false
        var firstVideoFormat: CMFormatDescription?
    }

    @Test func onBuffersOfARing() async throws {
        let peer = try RingPeer(["--width", "160", "--height", "90", "--frames", "6", "--interval-ms", "15", "--audio-frames", "800"])
        defer { peer.closeSocket() }
        let seen = Mutex(Seen())
        try await peer.deliver { buffer, type in
            let now = CMClockGetTime(CMClockGetHostTimeClock())
            seen.withLock { seen in
                seen.allReady = seen.allReady && buffer.dataReadiness == .ready
                seen.ages.append(CMTimeGetSeconds(CMTimeSubtract(now, CMSampleBufferGetPresentationTimeStamp(buffer))))
                if type == .video {
                    Self.checkPicture(buffer, into: &seen)
                } else {
                    Self.checkSound(buffer, type: type, into: &seen)
                }
            }
        }
        _ = try await peer.report()
        let result = seen.withLock { $0 }
        #expect(result.pictures > 0)
        #expect(result.orientations == [CGImagePropertyOrientation.up.rawValue], "every picture says .up")
        #expect(result.orientationMode == kCMAttachmentMode_ShouldPropagate)
        #expect(result.customAttachment == 42)
        #expect(result.nonNumberReadsNil && result.removedReadsNil)
        #expect(result.attachmentsBeforeCreate == false, "no attachments array until asked to create one")
        #expect(result.sampleAttachmentCount == 1 && result.sampleAttachmentKept)
        #expect(result.allReady)
        #expect(result.videoFormatsRight && result.videoFormatsEqual)
        #expect(result.audioFormatRight && result.audioAndVideoDiffer)
        #expect(result.copiedAudio == [.audioApp: true, .audioMic: true])
        #expect(result.offsetCopy && result.badCopiesRefused)
        // The samples' times are on the host clock: each is in the past, and recent.
        #expect(!result.ages.isEmpty && result.ages.allSatisfy { $0 >= 0 && $0 < 30 }, "\(result.ages.prefix(5))")
    }

    static func checkPicture(_ buffer: CMSampleBuffer, into seen: inout Seen) {
        seen.pictures += 1
        var mode: CMAttachmentMode = 99
        if let orientation = CMGetAttachment(buffer, key: RPVideoSampleOrientationKey as CFString, attachmentModeOut: &mode) as? NSNumber {
            seen.orientations.insert(orientation.uint32Value)
            seen.orientationMode = mode
        } else {
            seen.orientations.insert(0)
        }
        let format = CMSampleBufferGetFormatDescription(buffer)
        seen.videoFormatsRight = seen.videoFormatsRight && format?.mediaType == .video
            && format?.mediaSubType == .pixelFormat_420YpCbCr8BiPlanarFullRange
            && format.map(CMVideoFormatDescriptionGetDimensions) == CMVideoDimensions(width: 160, height: 90)
        if let first = seen.firstVideoFormat {
            seen.videoFormatsEqual = seen.videoFormatsEqual && CMFormatDescriptionEqual(first, otherFormatDescription: format)
        } else {
            seen.firstVideoFormat = format
        }
        guard seen.pictures == 1 else { return }
        CMSetAttachment(buffer, key: "com.example.frameNumber", value: NSNumber(value: 42), attachmentMode: kCMAttachmentMode_ShouldNotPropagate)
        seen.customAttachment = CMGetAttachment(buffer, key: "com.example.frameNumber", attachmentModeOut: nil)?.uint32Value
        CMSetAttachment(buffer, key: "com.example.frameNumber", value: NSString(string: "not a number"), attachmentMode: kCMAttachmentMode_ShouldNotPropagate)
        seen.nonNumberReadsNil = CMGetAttachment(buffer, key: "com.example.frameNumber", attachmentModeOut: nil) == nil
        CMRemoveAttachment(buffer, key: RPVideoSampleOrientationKey)
        seen.removedReadsNil = CMGetAttachment(buffer, key: RPVideoSampleOrientationKey, attachmentModeOut: nil) == nil

        seen.attachmentsBeforeCreate = CMSampleBufferGetSampleAttachmentsArray(buffer, createIfNecessary: false) != nil
        let made = CMSampleBufferGetSampleAttachmentsArray(buffer, createIfNecessary: true)
        seen.sampleAttachmentCount = made?.count ?? 0
        // Kept once made, and read as iOS code reads it: a picture is a key frame (no NotSync).
        let again = CMSampleBufferGetSampleAttachmentsArray(buffer, createIfNecessary: false) as? [[CFString: Any]]
        seen.sampleAttachmentKept = again?.count == 1 && again?.first?[kCMSampleAttachmentKey_NotSync] == nil
    }

    static func checkSound(_ buffer: CMSampleBuffer, type: RPSampleBufferType, into seen: inout Seen) {
        let format = CMSampleBufferGetFormatDescription(buffer)
        seen.audioFormatRight = format?.mediaType == .audio && format?.mediaSubType == .linearPCM
            && format?.audioStreamBasicDescription?.mSampleRate == 48_000 && format?.audioStreamBasicDescription?.mChannelsPerFrame == 2
        seen.audioAndVideoDiffer = !CMFormatDescriptionEqual(format, otherFormatDescription: .video(width: 160, height: 90))
            && CMFormatDescriptionEqual(format, otherFormatDescription: CMFormatDescription.audio)
            && CMFormatDescriptionEqual(nil, otherFormatDescription: nil)
        guard seen.copiedAudio[type] == nil, let block = CMSampleBufferGetDataBuffer(buffer) else { return }
        // The first chunk of each kind starts at frame 0 of its sound: the bytes copied are the samples written.
        let frames = CMSampleBufferGetNumSamples(buffer)
        let length = CMBlockBufferGetDataLength(block)
        var samples = [Float](repeating: .nan, count: frames * 2)
        let status = samples.withUnsafeMutableBytes { CMBlockBufferCopyDataBytes(block, atOffset: 0, dataLength: length, destination: $0.baseAddress!) }
        let expected = (0..<frames * 2).map { RingTestPattern.sample($0 / 2, channel: $0 % 2, microphone: type == .audioMic) }
        seen.copiedAudio[type] = status == kCMBlockBufferNoErr && length == frames * 8 && samples == expected

        // Frame 1 alone, from its offset; then an offset and a length past the end are refused.
        var pair: [Float] = [0, 0]
        let offsetStatus = pair.withUnsafeMutableBytes { CMBlockBufferCopyDataBytes(block, atOffset: 8, dataLength: 8, destination: $0.baseAddress!) }
        seen.offsetCopy = offsetStatus == kCMBlockBufferNoErr && pair == Array(expected[2..<4])
        var scratch = [UInt8](repeating: 0, count: 16)
        let badOffset = scratch.withUnsafeMutableBytes { CMBlockBufferCopyDataBytes(block, atOffset: length + 1, dataLength: 1, destination: $0.baseAddress!) }
        let badLength = scratch.withUnsafeMutableBytes { CMBlockBufferCopyDataBytes(block, atOffset: length - 4, dataLength: 8, destination: $0.baseAddress!) }
        seen.badCopiesRefused = badOffset == kCMBlockBufferBadOffsetParameterErr && badLength == kCMBlockBufferBadLengthParameterErr
    }

    @Test func hostClockAdvancesOnTheMonotonicClock() async throws {
        let first = CMClockGetTime(CMClockGetHostTimeClock())
        try await Task.sleep(for: .milliseconds(20))
        let second = CMClock.hostTimeClock.time
        #expect(first.timescale == 1_000_000_000 && first.isNumeric)
        #expect(CMTimeGetSeconds(second - first) >= 0.02)
        var now = timespec()
        clock_gettime(CLOCK_MONOTONIC, &now)
        let monotonic = Int64(now.tv_sec) * 1_000_000_000 + Int64(now.tv_nsec)
        #expect(monotonic >= second.value && monotonic - second.value < 1_000_000_000)
    }

    // An SPS (Baseline, 1280×720) and a PPS as an encoder emits them, without start codes.
    static let sps: [UInt8] = [0x67, 0x42, 0xC0, 0x1F, 0xDA, 0x01, 0x40, 0x16, 0xE8, 0x06, 0xD0, 0xA1, 0x35]
    static let pps: [UInt8] = [0x68, 0xCE, 0x06, 0xE2]

    static func h264Description(_ sets: [[UInt8]], nalUnitHeaderLength: Int32 = 4) -> (OSStatus, CMFormatDescription?) {
        var description: CMFormatDescription?
        let pointers = sets.map { set -> UnsafePointer<UInt8> in
            let copy = UnsafeMutablePointer<UInt8>.allocate(capacity: set.count)
            copy.initialize(from: set, count: set.count)
            return UnsafePointer(copy)
        }
        defer { pointers.forEach { $0.deallocate() } }
        let sizes = sets.map(\.count)
        let status = CMVideoFormatDescriptionCreateFromH264ParameterSets(allocator: kCFAllocatorDefault, parameterSetCount: sets.count,
                                                                        parameterSetPointers: pointers, parameterSetSizes: sizes,
                                                                        nalUnitHeaderLength: nalUnitHeaderLength, formatDescriptionOut: &description)
        return (status, description)
    }

    @Test func h264ParameterSetsComeBack() throws {
        let (status, made) = Self.h264Description([Self.sps, Self.pps])
        let description = try #require(made)
        #expect(status == noErr)
        #expect(description.mediaType == .video && description.mediaSubType == .h264)
        #expect(CMFormatDescriptionGetMediaSubType(description) == kCMVideoCodecType_H264)

        var count = 0
        var headerLength: Int32 = 0
        #expect(CMVideoFormatDescriptionGetH264ParameterSetAtIndex(description, parameterSetIndex: 0, parameterSetPointerOut: nil, parameterSetSizeOut: nil,
                                                                   parameterSetCountOut: &count, nalUnitHeaderLengthOut: &headerLength) == noErr)
        #expect(count == 2 && headerLength == 4)
        var sets: [[UInt8]] = []
        for index in 0..<count {
            var pointer: UnsafePointer<UInt8>?
            var size = 0
            #expect(CMVideoFormatDescriptionGetH264ParameterSetAtIndex(description, parameterSetIndex: index, parameterSetPointerOut: &pointer,
                                                                       parameterSetSizeOut: &size, parameterSetCountOut: nil, nalUnitHeaderLengthOut: nil) == noErr)
            if let pointer { sets.append(Array(UnsafeBufferPointer(start: pointer, count: size))) }
        }
        #expect(sets == [Self.sps, Self.pps])

        var size = 0
        #expect(CMVideoFormatDescriptionGetH264ParameterSetAtIndex(description, parameterSetIndex: 2, parameterSetPointerOut: nil, parameterSetSizeOut: &size,
                                                                   parameterSetCountOut: nil, nalUnitHeaderLengthOut: nil) == kCMFormatDescriptionBridgeError_InvalidParameter)
        #expect(CMVideoFormatDescriptionGetHEVCParameterSetAtIndex(description, parameterSetIndex: 0, parameterSetPointerOut: nil, parameterSetSizeOut: nil,
                                                                   parameterSetCountOut: &count, nalUnitHeaderLengthOut: nil) == kCMFormatDescriptionBridgeError_InvalidParameter)

        // Equal to another made of the same bytes, not to one with another PPS.
        #expect(CMFormatDescriptionEqual(description, otherFormatDescription: Self.h264Description([Self.sps, Self.pps]).1))
        #expect(!CMFormatDescriptionEqual(description, otherFormatDescription: Self.h264Description([Self.sps, [0x68, 0xCE, 0x06, 0xE3]]).1))
    }

    @Test func badParameterSetsAreRefused() {
        #expect(Self.h264Description([Self.sps]).0 == kCMFormatDescriptionError_InvalidParameter, "a PPS is needed")
        #expect(Self.h264Description([Self.sps, Self.pps], nalUnitHeaderLength: 3).0 == kCMFormatDescriptionError_InvalidParameter)
        #expect(Self.h264Description([Self.sps, []]).0 == kCMFormatDescriptionError_InvalidParameter)
        #expect(Self.h264Description([Self.sps]).1 == nil)
    }

    @Test func constantsHaveTheirAppleValues() {
        #expect(kCMVideoCodecType_H264 == 0x6176_6331 && kCMVideoCodecType_HEVC == 0x6876_6331)   // 'avc1', 'hvc1'
        #expect(CMFormatDescription.MediaType.video.rawValue == kCMMediaType_Video && CMFormatDescription.MediaType.audio.rawValue == kCMMediaType_Audio)
        #expect(CGImagePropertyOrientation.up.rawValue == 1 && CGImagePropertyOrientation.left.rawValue == 8)
        #expect(kCVPixelBufferPixelFormatTypeKey == "PixelFormatType" && kCVPixelBufferWidthKey == "Width" && kCVPixelBufferHeightKey == "Height")
        #expect(kCMSampleAttachmentKey_NotSync == "NotSync" && RPVideoSampleOrientationKey == "RPVideoSampleOrientationKey")
    }
}
