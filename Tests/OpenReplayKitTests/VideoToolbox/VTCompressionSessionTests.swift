import Foundation
import OpenReplayKit
import ReplayTesting
import Synchronization
import Testing

/// `VTCompressionSession` encodes real pictures: AVCC samples with the SPS and PPS in their format
/// description, key pictures told by their attachments as real code reads them, a stream that FFmpeg
/// decodes back to the pictures given; and the statuses Apple gives for bad input.
@Suite("VTCompressionSession")
struct VTCompressionSessionTests {
    static let width = 320
    static let height = 240

    /// A moving gradient: picture `index` of NV12 (grey, luma rising left to right) or BGRA
    /// (blue rising left to right, green top to bottom, red 200), moving 4 pixels a picture.
    static func picture(_ index: Int, format: OSType) -> CVPixelBuffer {
        var made: CVPixelBuffer?
        #expect(CVPixelBufferCreate(kCFAllocatorDefault, width, height, format, nil, &made) == kCVReturnSuccess)
        let pixels = made!
        CVPixelBufferLockBaseAddress(pixels, [])
        defer { CVPixelBufferUnlockBaseAddress(pixels, []) }
        if format == kCVPixelFormatType_32BGRA {
            let base = CVPixelBufferGetBaseAddress(pixels)!.assumingMemoryBound(to: UInt8.self)
            let stride = CVPixelBufferGetBytesPerRow(pixels)
            for y in 0..<height {
                for x in 0..<width {
                    let pixel = base + y * stride + x * 4
                    pixel[0] = UInt8((x + 4 * index) & 255)
                    pixel[1] = UInt8(y)
                    pixel[2] = 200
                    pixel[3] = 255
                }
            }
        } else {
            let luma = CVPixelBufferGetBaseAddressOfPlane(pixels, 0)!.assumingMemoryBound(to: UInt8.self)
            let lumaStride = CVPixelBufferGetBytesPerRowOfPlane(pixels, 0)
            for y in 0..<height {
                for x in 0..<width { luma[y * lumaStride + x] = UInt8((x + 4 * index) & 255) }
            }
            let chroma = CVPixelBufferGetBaseAddressOfPlane(pixels, 1)!.assumingMemoryBound(to: UInt8.self)
            let chromaStride = CVPixelBufferGetBytesPerRowOfPlane(pixels, 1)
            for y in 0..<(height / 2) {
                for x in 0..<width { chroma[y * chromaStride + x] = 128 }
            }
        }
        return pixels
    }

    /// The colour (R, G, B) of pixel `x`, `y` of picture `index`.
    static func expectedColour(x: Int, y: Int, index: Int, format: OSType) -> (Int, Int, Int) {
        let ramp = (x + 4 * index) & 255
        switch format {
        case kCVPixelFormatType_32BGRA: return (200, y, ramp)
        case kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange:
            let level = min(255, max(0, (ramp - 16) * 255 / 219))
            return (level, level, level)
        default: return (ramp, ramp, ramp)
        }
    }

    static func makeSession(width: Int = width, height: Int = height, attributes: CFDictionary? = nil) -> VTCompressionSession {
        var session: VTCompressionSession?
        let status = VTCompressionSessionCreate(allocator: nil, width: Int32(width), height: Int32(height), codecType: kCMVideoCodecType_H264,
                                                encoderSpecification: nil, imageBufferAttributes: attributes, compressedDataAllocator: nil,
                                                outputCallback: nil, refcon: nil, compressionSessionOut: &session)
        #expect(status == noErr)
        return session!
    }

    /// Whether a sample is a keyframe, read as real code reads it.
    static func isNotSync(_ sample: CMSampleBuffer) -> Bool {
        let attachments = CMSampleBufferGetSampleAttachmentsArray(sample, createIfNecessary: true) as? [[CFString: Any]]
        return attachments?.first?[kCMSampleAttachmentKey_NotSync] as? Bool ?? false
    }

    /// The NAL units of an AVCC sample (4-byte lengths), nil when the lengths do not add up to its bytes.
    static func nalUnits(_ sample: CMSampleBuffer) -> [[UInt8]]? {
        guard let block = CMSampleBufferGetDataBuffer(sample) else { return nil }
        let length = CMBlockBufferGetDataLength(block)
        var bytes = [UInt8](repeating: 0, count: length)
        guard CMBlockBufferCopyDataBytes(block, atOffset: 0, dataLength: length, destination: &bytes) == kCMBlockBufferNoErr else { return nil }
        var units: [[UInt8]] = []
        var offset = 0
        while offset < length {
            guard offset + 4 <= length else { return nil }
            let size = bytes[offset..<offset + 4].reduce(0) { $0 << 8 | Int($1) }
            guard size > 0, offset + 4 + size <= length else { return nil }
            units.append(Array(bytes[offset + 4..<offset + 4 + size]))
            offset += 4 + size
        }
        return units
    }

    static func parameterSets(_ description: CMFormatDescription) -> (sets: [[UInt8]], headerLength: Int32)? {
        var count = 0
        var headerLength: Int32 = 0
        guard CMVideoFormatDescriptionGetH264ParameterSetAtIndex(description, parameterSetIndex: 0, parameterSetPointerOut: nil,
                                                                 parameterSetSizeOut: nil, parameterSetCountOut: &count,
                                                                 nalUnitHeaderLengthOut: &headerLength) == noErr else { return nil }
        var sets: [[UInt8]] = []
        for index in 0..<count {
            var pointer: UnsafePointer<UInt8>?
            var size = 0
            guard CMVideoFormatDescriptionGetH264ParameterSetAtIndex(description, parameterSetIndex: index, parameterSetPointerOut: &pointer,
                                                                     parameterSetSizeOut: &size, parameterSetCountOut: nil,
                                                                     nalUnitHeaderLengthOut: nil) == noErr, let pointer else { return nil }
            sets.append(Array(UnsafeBufferPointer(start: pointer, count: size)))
        }
        return (sets, headerLength)
    }

    /// Collects what a session gives, from its queue.
    final class Collector: Sendable {
        let samples = Mutex<[(status: OSStatus, sample: CMSampleBuffer?, refcon: Int)]>([])
        var all: [(status: OSStatus, sample: CMSampleBuffer?, refcon: Int)] { samples.withLock { $0 } }
    }

    /// Prepared before the first picture: the stream's range is the one the attributes' pixel format says.
    @Test(arguments: [kCVPixelFormatType_420YpCbCr8BiPlanarFullRange, kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange, kCVPixelFormatType_32BGRA])
    func encodedPicturesDecodeBack(format: OSType) async throws {
        let attributes: [String: Any] = [kCVPixelBufferPixelFormatTypeKey as String: NSNumber(value: format),
                                         kCVPixelBufferWidthKey as String: Self.width, kCVPixelBufferHeightKey as String: Self.height]
        let session = Self.makeSession(attributes: attributes as CFDictionary)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_RealTime, value: kCFBooleanTrue) == noErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_ProfileLevel, value: kVTProfileLevel_H264_Main_AutoLevel) == noErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_ExpectedFrameRate, value: 30 as CFNumber) == noErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_MaxKeyFrameInterval, value: 10 as CFTypeRef) == noErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_AllowFrameReordering, value: kCFBooleanFalse) == noErr)
        #expect(VTCompressionSessionPrepareToEncodeFrames(session) == noErr)
        let collector = Collector()
        let count = 30
        for index in 0..<count {
            let pts = CMTime(value: Int64(index), timescale: 30)
            let status = VTCompressionSessionEncodeFrame(session, imageBuffer: Self.picture(index, format: format), presentationTimeStamp: pts,
                                                         duration: CMTime(value: 1, timescale: 30), frameProperties: nil,
                                                         infoFlagsOut: nil) { status, _, sample in
                collector.samples.withLock { $0.append((status, sample, index)) }
            }
            #expect(status == noErr)
        }
        #expect(VTCompressionSessionCompleteFrames(session, untilPresentationTimeStamp: .invalid) == noErr)
        VTCompressionSessionInvalidate(session)

        let outputs = collector.all
        try #require(outputs.count == count)
        #expect(outputs.allSatisfy { $0.status == noErr })
        let samples = outputs.compactMap(\.sample)
        try #require(samples.count == count)

        // The SPS (7) and PPS (8), 4-byte lengths, the Main profile (77).
        let description = try #require(CMSampleBufferGetFormatDescription(samples[0]))
        #expect(description.mediaType == .video && description.mediaSubType == .h264)
        #expect(CMVideoFormatDescriptionGetDimensions(description) == CMVideoDimensions(width: Int32(Self.width), height: Int32(Self.height)))
        let (sets, headerLength) = try #require(Self.parameterSets(description))
        #expect(headerLength == 4)
        #expect(sets.map { $0[0] & 0x1F } == [7, 8])
        #expect(sets[0][1] == 77)

        var annexB: [UInt8] = []
        for set in sets { annexB += [0, 0, 0, 1] + set }
        for (index, sample) in samples.enumerated() {
            #expect(CMSampleBufferGetPresentationTimeStamp(sample) == CMTime(value: Int64(index), timescale: 30))
            #expect(CMSampleBufferGetDecodeTimeStamp(sample) == CMSampleBufferGetPresentationTimeStamp(sample))
            let units = try #require(Self.nalUnits(sample), "sample \(index) is not AVCC")
            let isIDR = units.contains { $0[0] & 0x1F == 5 }
            // A keyframe every 10 pictures at most, the first a keyframe; NotSync exactly on the others.
            #expect(Self.isNotSync(sample) == !isIDR, "sample \(index)")
            if index % 10 == 0 { #expect(isIDR, "sample \(index)") }
            for unit in units { annexB += [0, 0, 0, 1] + unit }
        }

        let folder = FileManager.default.temporaryDirectory.appendingPathComponent("ork-vt-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        let stream = folder.appendingPathComponent("stream.h264")
        try Data(annexB).write(to: stream)
        let probe = try await ProcessRunner.run("ffprobe", arguments: ["-v", "error", "-count_frames", "-select_streams", "v:0",
                                                                        "-show_entries", "stream=nb_read_frames,width,height,profile",
                                                                        "-of", "default=noprint_wrappers=1", stream.path])
        let probed = String(decoding: probe.standardOutput, as: UTF8.self)
        #expect(probe.succeeded, "\(probe)")
        #expect(probed.contains("nb_read_frames=\(count)"), "\(probed)")
        #expect(probed.contains("width=\(Self.width)") && probed.contains("height=\(Self.height)"), "\(probed)")
        #expect(probed.contains("profile=Main"), "\(probed)")

        // Picture 20's colours, decoded to RGB by FFmpeg as a player would (the stream says its levels and matrix).
        let rgb = folder.appendingPathComponent("picture.rgb")
        let decode = try await ProcessRunner.run("ffmpeg", arguments: ["-v", "error", "-i", stream.path, "-vf", "select=eq(n\\,20)",
                                                                        "-frames:v", "1", "-pix_fmt", "rgb24", "-f", "rawvideo", rgb.path])
        #expect(decode.succeeded, "\(decode)")
        let pixels = [UInt8](try Data(contentsOf: rgb))
        try #require(pixels.count == Self.width * Self.height * 3)
        for (x, y) in [(40, 60), (160, 120), (200, 180)] {
            let offset = (y * Self.width + x) * 3
            let got = (Int(pixels[offset]), Int(pixels[offset + 1]), Int(pixels[offset + 2]))
            let want = Self.expectedColour(x: x, y: y, index: 20, format: format)
            #expect(abs(got.0 - want.0) <= 12 && abs(got.1 - want.1) <= 12 && abs(got.2 - want.2) <= 12,
                    "pixel \(x),\(y): \(got), wanted \(want)")
        }
    }

    /// The callback form: the session's refcon and each frame's own, and a keyframe when asked.
    @Test func callbackFormWithForcedKeyframe() throws {
        let collector = Collector()
        var made: VTCompressionSession?
        let callback: VTCompressionOutputCallback = { refcon, sourceFrameRefcon, status, _, sample in
            let collector = Unmanaged<Collector>.fromOpaque(refcon!).takeUnretainedValue()
            collector.samples.withLock { $0.append((status, sample, Int(bitPattern: sourceFrameRefcon))) }
        }
        let status = VTCompressionSessionCreate(allocator: nil, width: Int32(Self.width), height: Int32(Self.height),
                                                codecType: kCMVideoCodecType_H264, encoderSpecification: nil, imageBufferAttributes: nil,
                                                compressedDataAllocator: nil, outputCallback: callback,
                                                refcon: Unmanaged.passUnretained(collector).toOpaque(), compressionSessionOut: &made)
        let session = try #require(made)
        #expect(status == noErr)
        #expect(VTSessionSetProperties(session, propertyDictionary: [kVTCompressionPropertyKey_RealTime: true,
                                                                     kVTCompressionPropertyKey_AverageBitRate: 400_000,
                                                                     kVTCompressionPropertyKey_DataRateLimits: [75_000, 1],
                                                                     kVTCompressionPropertyKey_ProfileLevel: kVTProfileLevel_H264_Baseline_AutoLevel]
                                                                    as CFDictionary) == noErr)
        // Not prepared: the first frame prepares, as on Apple's.
        for index in 0..<12 {
            let properties: CFDictionary? = index == 7 ? [kVTEncodeFrameOptionKey_ForceKeyFrame: kCFBooleanTrue as Any] as CFDictionary : nil
            var flags = VTEncodeInfoFlags()
            #expect(VTCompressionSessionEncodeFrame(session, imageBuffer: Self.picture(index, format: kCVPixelFormatType_420YpCbCr8BiPlanarFullRange),
                                                    presentationTimeStamp: CMTime(value: Int64(index) * 1000, timescale: 30_000),
                                                    duration: .invalid, frameProperties: properties,
                                                    sourceFrameRefcon: UnsafeMutableRawPointer(bitPattern: 100 + index),
                                                    infoFlagsOut: &flags) == noErr)
        }
        #expect(VTCompressionSessionCompleteFrames(session, untilPresentationTimeStamp: CMTime(value: 11_000, timescale: 30_000)) == noErr)
        VTCompressionSessionInvalidate(session)
        let outputs = collector.all
        try #require(outputs.count == 12)
        #expect(outputs.map(\.refcon) == Array(100..<112))
        let notSync = outputs.map { Self.isNotSync($0.sample!) }
        #expect(notSync[0] == false && notSync[7] == false)
        #expect(notSync.enumerated().filter { $0.offset != 0 && $0.offset != 7 }.allSatisfy { $0.element })
        // Baseline (66).
        let sets = try #require(Self.parameterSets(CMSampleBufferGetFormatDescription(outputs[0].sample!)!))
        #expect(sets.sets[0][1] == 66)
    }

    /// A live stream adapting to its link changes the bitrate of a running session; an output that
    /// encodes the next picture itself (on the session's queue) does not wait for itself.
    @Test func runningSessionTakesNewBitrateAndOutputsMayEncode() throws {
        let session = Self.makeSession()
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_AverageBitRate, value: NSNumber(value: 600_000)) == noErr)
        let collector = Collector()
        let format = kCVPixelFormatType_420YpCbCr8BiPlanarFullRange
        let second = Self.picture(1, format: format)
        #expect(VTCompressionSessionEncodeFrame(session, imageBuffer: Self.picture(0, format: format), presentationTimeStamp: CMTime(value: 0, timescale: 30),
                                                duration: .invalid, frameProperties: nil, infoFlagsOut: nil) { status, _, sample in
            collector.samples.withLock { $0.append((status, sample, 0)) }
            VTCompressionSessionEncodeFrame(session, imageBuffer: second, presentationTimeStamp: CMTime(value: 1, timescale: 30),
                                            duration: .invalid, frameProperties: nil, infoFlagsOut: nil) { status, _, sample in
                collector.samples.withLock { $0.append((status, sample, 1)) }
            }
        } == noErr)
        #expect(VTCompressionSessionCompleteFrames(session, untilPresentationTimeStamp: .invalid) == noErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_AverageBitRate, value: NSNumber(value: 200_000)) == noErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_DataRateLimits, value: [30_000, 1] as CFArray) == noErr)
        for index in 2..<8 {
            #expect(VTCompressionSessionEncodeFrame(session, imageBuffer: Self.picture(index, format: format),
                                                    presentationTimeStamp: CMTime(value: Int64(index), timescale: 30), duration: .invalid,
                                                    frameProperties: nil, infoFlagsOut: nil) { status, _, sample in
                collector.samples.withLock { $0.append((status, sample, index)) }
            } == noErr)
        }
        #expect(VTCompressionSessionCompleteFrames(session, untilPresentationTimeStamp: .invalid) == noErr)
        VTCompressionSessionInvalidate(session)
        let outputs = collector.all
        #expect(outputs.map(\.refcon) == Array(0..<8))
        #expect(outputs.allSatisfy { $0.status == noErr && $0.sample != nil })
    }

    @Test func badInputGivesApplesStatuses() throws {
        var made: VTCompressionSession?
        #expect(VTCompressionSessionCreate(allocator: nil, width: 320, height: 240, codecType: kCMVideoCodecType_HEVC, encoderSpecification: nil,
                                           imageBufferAttributes: nil, compressedDataAllocator: nil, outputCallback: nil, refcon: nil,
                                           compressionSessionOut: &made) == kVTCouldNotFindVideoEncoderErr)
        #expect(VTCompressionSessionCreate(allocator: nil, width: 0, height: 240, codecType: kCMVideoCodecType_H264, encoderSpecification: nil,
                                           imageBufferAttributes: nil, compressedDataAllocator: nil, outputCallback: nil, refcon: nil,
                                           compressionSessionOut: &made) == kVTParameterErr)

        let session = Self.makeSession()
        #expect(VTSessionSetProperty(session, key: "NoSuchProperty", value: kCFBooleanTrue) == kVTPropertyNotSupportedErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_AverageBitRate, value: "fast") == kVTParameterErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_ProfileLevel, value: "H264_Nope_AutoLevel") == kVTParameterErr)

        // A picture of another size: VideoToolbox would scale it (a pixel transfer), which this subset does not.
        let collector = Collector()
        let wrong = Self.picture(0, format: kCVPixelFormatType_32BGRA)
        let small = Self.makeSession(width: 160, height: 120)
        #expect(VTCompressionSessionEncodeFrame(small, imageBuffer: wrong, presentationTimeStamp: CMTime(value: 0, timescale: 30),
                                                duration: .invalid, frameProperties: nil, infoFlagsOut: nil) { status, _, sample in
            collector.samples.withLock { $0.append((status, sample, 0)) }
        } == kVTPixelTransferNotSupportedErr)
        VTCompressionSessionInvalidate(small)
        #expect(collector.all.isEmpty)

        // Encoding before PrepareToEncodeFrames works; after Invalidate nothing does.
        var flags = VTEncodeInfoFlags()
        #expect(VTCompressionSessionEncodeFrame(session, imageBuffer: Self.picture(0, format: kCVPixelFormatType_32BGRA),
                                                presentationTimeStamp: CMTime(value: 0, timescale: 30), duration: .invalid,
                                                frameProperties: nil, infoFlagsOut: &flags) { status, _, sample in
            collector.samples.withLock { $0.append((status, sample, 1)) }
        } == noErr)
        #expect(VTCompressionSessionCompleteFrames(session, untilPresentationTimeStamp: .invalid) == noErr)
        #expect(collector.all.count == 1 && collector.all.first?.sample != nil)
        VTCompressionSessionInvalidate(session)
        #expect(VTCompressionSessionEncodeFrame(session, imageBuffer: Self.picture(1, format: kCVPixelFormatType_32BGRA),
                                                presentationTimeStamp: CMTime(value: 1, timescale: 30), duration: .invalid,
                                                frameProperties: nil, infoFlagsOut: nil) { _, _, _ in } == kVTInvalidSessionErr)
        #expect(VTCompressionSessionPrepareToEncodeFrames(session) == kVTInvalidSessionErr)
        #expect(VTCompressionSessionCompleteFrames(session, untilPresentationTimeStamp: .invalid) == kVTInvalidSessionErr)
        #expect(VTSessionSetProperty(session, key: kVTCompressionPropertyKey_RealTime, value: kCFBooleanTrue) == kVTInvalidSessionErr)
    }
}
