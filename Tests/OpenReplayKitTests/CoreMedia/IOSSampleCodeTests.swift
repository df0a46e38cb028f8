import Foundation
import OpenReplayKit
import ReplayTesting
import Synchronization
import Testing

@Suite("CoreMedia and CoreVideo names for code written for iOS")
struct IOSSampleCodeTests {
    /// `SampleHandler` (IOSSampleHandler.swift, iOS code with only its imports changed) on the
    /// buffers of a real ring written by another process.
    @Test func iOSSampleHandlingCodeRunsOnBuffersFromARing() async throws {
        let peer = try RingPeer(["--width", "160", "--height", "90", "--frames", "20", "--interval-ms", "15", "--audio-frames", "800"])
        defer { peer.closeSocket() }
        let handler = Mutex(SampleHandler())
        try await peer.deliver { buffer, type in
            handler.withLock { $0.processSampleBuffer(buffer, with: type) }
        }
        let report = try await peer.report()
        handler.withLock { handler in
            #expect(UInt64(handler.videoFrameCount) == report.framesWritten && handler.videoFrameCount > 0)
            #expect(handler.videoTimestampsIncrease)
            #expect(handler.frameSize.width == 160 && handler.frameSize.height == 90)
            #expect(handler.lumaBytesPerRow >= 160 && handler.chromaBytesPerRow >= 160)
            // Picture 0 (the first, never dropped: every slot is free then), NV12: Y, then Cb Cr interleaved.
            #expect(handler.firstLumaBytes == [RingTestPattern.deliveredLuma(x: 0, y: 0, frame: 0), RingTestPattern.deliveredLuma(x: 1, y: 0, frame: 0),
                                               RingTestPattern.deliveredLuma(x: 0, y: 1, frame: 0)])
            #expect(handler.firstChromaBytes == [RingTestPattern.deliveredCb(x: 0, y: 0, frame: 0), RingTestPattern.deliveredCr(x: 0, y: 0, frame: 0),
                                                 RingTestPattern.deliveredCb(x: 0, y: 1, frame: 0), RingTestPattern.deliveredCr(x: 0, y: 1, frame: 0)])
            #expect(handler.appAudioFrames == 20 * 800 && handler.micAudioFrames == 20 * 800)
            #expect(handler.appAudioPeak > 0.45 && handler.appAudioPeak <= 0.5)
            #expect(handler.micAudioPeak > 0.45 && handler.micAudioPeak <= 0.5)
            #expect(handler.audioSampleRate == 48_000 && handler.audioChannels == 2 && handler.audioIsFloat)
            // Times are on the session clock (CLOCK_MONOTONIC, seconds).
            #expect(abs(handler.firstAppAudioTimestamp - Double(peer.startTime) / 1e9) < 1e-6)
        }
    }

    @Test func cmTime() {
        let time = CMTimeMake(value: 3, timescale: 2)
        #expect(time.seconds == 1.5 && CMTimeGetSeconds(time) == 1.5 && time.isValid && time.isNumeric)
        #expect(CMTime(value: 1_500_000_000, timescale: 1_000_000_000) == time)
        #expect(Set([CMTime(value: 1_500_000_000, timescale: 1_000_000_000), time]).count == 1)
        #expect(CMTime.zero < time && time < CMTime.positiveInfinity && CMTime.positiveInfinity < CMTime.invalid)
        #expect(CMTime.negativeInfinity < CMTime.zero)
        #expect(!CMTime.invalid.isValid && CMTimeGetSeconds(.invalid).isNaN && CMTime().isValid == false)
        #expect(kCMTimeZero == .zero && CMTimeCompare(time, .zero) == 1 && CMTimeCompare(.zero, time) == -1)
        #expect(CMTimeAdd(time, CMTimeMake(value: 1, timescale: 4)) == CMTimeMake(value: 7, timescale: 4))
        #expect(time - CMTimeMake(value: 1, timescale: 2) == CMTimeMake(value: 1, timescale: 1))
        #expect(CMTimeMakeWithSeconds(0.5, preferredTimescale: 600).value == 300)
        #expect(CMTime(value: 1, timescale: 3).convertScale(1000).value == 333)
        #expect((CMTime.invalid + time).isValid == false)
    }

    @Test func constantsHaveTheirAppleValues() {
        #expect(kCVPixelFormatType_420YpCbCr8BiPlanarFullRange == 0x3432_3066)   // '420f'
        #expect(kCVReturnSuccess == 0 && noErr == 0)
        #expect(RPSampleBufferType.video.rawValue == 1 && RPSampleBufferType.audioApp.rawValue == 2 && RPSampleBufferType.audioMic.rawValue == 3)
        #expect(CVPixelBufferLockFlags.readOnly.rawValue == 1)
        #expect(MemoryLayout<AudioStreamBasicDescription>.size == 40)
        #expect(MemoryLayout<AudioBufferList>.size == 24 && MemoryLayout<AudioBuffer>.size == 16)
    }
}
