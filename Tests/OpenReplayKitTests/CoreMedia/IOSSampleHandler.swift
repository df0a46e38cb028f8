// Written as an iOS app's in-app capture code is (ReplayKit's `startCapture` handler, in the shape of
// Apple's samples and of the common Stack Overflow answers), with only the imports changed: on iOS
// this file starts with `import ReplayKit`, `import CoreMedia` and `import CoreVideo`. That it
// compiles in this test target is the proof; IOSSampleCodeTests runs it on buffers from a real ring.
import OpenReplayKit

final class SampleHandler {
    var videoFrameCount = 0
    var lastVideoTimestamp: Double = -1
    var videoTimestampsIncrease = true
    var frameSize = (width: 0, height: 0)
    var lumaBytesPerRow = 0
    var chromaBytesPerRow = 0
    var firstLumaBytes: [UInt8] = []
    var firstChromaBytes: [UInt8] = []
    var appAudioFrames = 0
    var micAudioFrames = 0
    var appAudioPeak: Float = 0
    var micAudioPeak: Float = 0
    var audioSampleRate: Double = 0
    var audioChannels: UInt32 = 0
    var audioIsFloat = false
    var firstAppAudioTimestamp: Double = -1

    func processSampleBuffer(_ sampleBuffer: CMSampleBuffer, with sampleBufferType: RPSampleBufferType) {
        guard CMSampleBufferIsValid(sampleBuffer) else { return }
        switch sampleBufferType {
        case RPSampleBufferType.video:
            guard let pixelBuffer = CMSampleBufferGetImageBuffer(sampleBuffer) else { return }
            let timestamp = CMTimeGetSeconds(CMSampleBufferGetPresentationTimeStamp(sampleBuffer))
            if timestamp <= lastVideoTimestamp { videoTimestampsIncrease = false }
            lastVideoTimestamp = timestamp

            CVPixelBufferLockBaseAddress(pixelBuffer, .readOnly)
            defer { CVPixelBufferUnlockBaseAddress(pixelBuffer, .readOnly) }

            let pixelFormat = CVPixelBufferGetPixelFormatType(pixelBuffer)
            guard pixelFormat == kCVPixelFormatType_420YpCbCr8BiPlanarFullRange,
                  CVPixelBufferGetPlaneCount(pixelBuffer) == 2 else { return }
            let width = CVPixelBufferGetWidth(pixelBuffer)
            let height = CVPixelBufferGetHeight(pixelBuffer)
            guard let yBaseAddress = CVPixelBufferGetBaseAddressOfPlane(pixelBuffer, 0),
                  let uvBaseAddress = CVPixelBufferGetBaseAddressOfPlane(pixelBuffer, 1) else { return }
            let yBytesPerRow = CVPixelBufferGetBytesPerRowOfPlane(pixelBuffer, 0)
            let uvBytesPerRow = CVPixelBufferGetBytesPerRowOfPlane(pixelBuffer, 1)
            let yPlane = yBaseAddress.assumingMemoryBound(to: UInt8.self)
            let uvPlane = uvBaseAddress.assumingMemoryBound(to: UInt8.self)

            frameSize = (width, height)
            lumaBytesPerRow = yBytesPerRow
            chromaBytesPerRow = uvBytesPerRow
            if videoFrameCount == 0 {
                // The top-left corner, and the pixel at the start of the second row.
                firstLumaBytes = [yPlane[0], yPlane[1], yPlane[yBytesPerRow]]
                firstChromaBytes = [uvPlane[0], uvPlane[1], uvPlane[uvBytesPerRow], uvPlane[uvBytesPerRow + 1]]
            }
            videoFrameCount += 1

        case RPSampleBufferType.audioApp:
            // PCM through an AudioBufferList, as most iOS audio code reads it.
            var blockBuffer: CMBlockBuffer?
            var audioBufferList = AudioBufferList()
            let status = CMSampleBufferGetAudioBufferListWithRetainedBlockBuffer(
                sampleBuffer,
                bufferListSizeNeededOut: nil,
                bufferListOut: &audioBufferList,
                bufferListSize: MemoryLayout<AudioBufferList>.size,
                blockBufferAllocator: nil,
                blockBufferMemoryAllocator: nil,
                flags: kCMSampleBufferFlag_AudioBufferList_Assure16ByteAlignment,
                blockBufferOut: &blockBuffer)
            guard status == noErr else { return }
            if firstAppAudioTimestamp < 0 {
                firstAppAudioTimestamp = CMSampleBufferGetPresentationTimeStamp(sampleBuffer).seconds
            }
            if let formatDescription = CMSampleBufferGetFormatDescription(sampleBuffer),
               let asbd = CMAudioFormatDescriptionGetStreamBasicDescription(formatDescription)?.pointee {
                audioSampleRate = asbd.mSampleRate
                audioChannels = asbd.mChannelsPerFrame
                audioIsFloat = asbd.mFormatFlags & kAudioFormatFlagIsFloat != 0 && asbd.mBitsPerChannel == 32
            }
            let buffers = UnsafeMutableAudioBufferListPointer(&audioBufferList)
            for buffer in buffers {
                guard let data = buffer.mData else { continue }
                let samples = data.assumingMemoryBound(to: Float.self)
                let count = Int(buffer.mDataByteSize) / MemoryLayout<Float>.size
                for index in 0..<count { appAudioPeak = max(appAudioPeak, abs(samples[index])) }
            }
            appAudioFrames += CMSampleBufferGetNumSamples(sampleBuffer)

        case RPSampleBufferType.audioMic:
            // PCM through the data buffer's pointer, the other common way.
            guard let blockBuffer = CMSampleBufferGetDataBuffer(sampleBuffer) else { return }
            var lengthAtOffset = 0
            var totalLength = 0
            var dataPointer: UnsafeMutablePointer<Int8>?
            let status = CMBlockBufferGetDataPointer(blockBuffer, atOffset: 0, lengthAtOffsetOut: &lengthAtOffset,
                                                     totalLengthOut: &totalLength, dataPointerOut: &dataPointer)
            guard status == kCMBlockBufferNoErr, let dataPointer else { return }
            dataPointer.withMemoryRebound(to: Float.self, capacity: totalLength / 4) { samples in
                for index in 0..<totalLength / 4 { micAudioPeak = max(micAudioPeak, abs(samples[index])) }
            }
            micAudioFrames += CMSampleBufferGetNumSamples(sampleBuffer)

        @unknown default:
            fatalError("Unknown type of sample buffer")
        }
    }
}
