import Foundation
import OpenReplayKit
import ReplayIPC
import ReplayTesting
import Synchronization
import Testing
#if canImport(Glibc)
import Glibc
#endif

/// The frame ring between two real processes: `replay-ring write` (replayd's side: a RingTap fed
/// test pictures and sound, as the engine feeds it) and this process (the app: OpenReplayKit's
/// sample buffers), the ring's memfd and eventfd handed over once on a socket pair.
@Suite("Frame ring: in-app capture between two processes")
struct FrameRingTests {
    /// What the app saw, checked as it arrived (on the ring's thread).
    struct Received: Sendable {
        var frames: [Int] = []          // picture numbers, in arrival order
        var badPixels: [String] = []
        var badTimes: [String] = []
        var audioFrames: [RPSampleBufferType: Int] = [:]   // next expected audio frame, per kind
        var audioChunks = 0
        var audioFaults: [String] = []
    }

    /// Checks a picture against test picture `n` through the CoreVideo calls, every pixel.
    static func check(_ buffer: CMSampleBuffer, start: Int64, into received: inout Received) {
        let time = CMSampleBufferGetPresentationTimeStamp(buffer)
        let offset = time.value - start
        guard time.timescale == 1_000_000_000, offset >= 0, offset % RingTestPattern.frameInterval == 0 else {
            received.badTimes.append("picture at \(time)")
            return
        }
        let n = Int(offset / RingTestPattern.frameInterval)
        guard let pixels = CMSampleBufferGetImageBuffer(buffer) else {
            received.badPixels.append("picture \(n) without a pixel buffer")
            return
        }
        CVPixelBufferLockBaseAddress(pixels, .readOnly)
        defer { CVPixelBufferUnlockBaseAddress(pixels, .readOnly) }
        let luma = CVPixelBufferGetBaseAddressOfPlane(pixels, 0)!.assumingMemoryBound(to: UInt8.self)
        let chroma = CVPixelBufferGetBaseAddressOfPlane(pixels, 1)!.assumingMemoryBound(to: UInt8.self)
        let (lumaRow, chromaRow) = (CVPixelBufferGetBytesPerRowOfPlane(pixels, 0), CVPixelBufferGetBytesPerRowOfPlane(pixels, 1))
        var wrong = 0
        for y in 0..<CVPixelBufferGetHeightOfPlane(pixels, 0) {
            for x in 0..<CVPixelBufferGetWidthOfPlane(pixels, 0) where luma[y * lumaRow + x] != RingTestPattern.deliveredLuma(x: x, y: y, frame: n) {
                wrong += 1
            }
        }
        for y in 0..<CVPixelBufferGetHeightOfPlane(pixels, 1) {
            for x in 0..<CVPixelBufferGetWidthOfPlane(pixels, 1) {
                if chroma[y * chromaRow + 2 * x] != RingTestPattern.deliveredCb(x: x, y: y, frame: n) { wrong += 1 }
                if chroma[y * chromaRow + 2 * x + 1] != RingTestPattern.deliveredCr(x: x, y: y, frame: n) { wrong += 1 }
            }
        }
        if wrong > 0 { received.badPixels.append("picture \(n): \(wrong) wrong samples") }
        received.frames.append(n)
    }

    /// Checks a chunk of sound: its time and samples continue its kind's sound exactly where the last left off.
    static func check(audio buffer: CMSampleBuffer, type: RPSampleBufferType, start: Int64, into received: inout Received) {
        let expected = received.audioFrames[type, default: 0]
        let time = CMSampleBufferGetPresentationTimeStamp(buffer)
        if time.value != RingTestPattern.audioTime(start: start, frame: expected) {
            received.audioFaults.append("\(type) chunk at \(time.value - start) ns, expected frame \(expected) at \(RingTestPattern.audioTime(start: start, frame: expected) - start)")
        }
        var length = 0
        var data: UnsafeMutablePointer<CChar>?
        guard let block = CMSampleBufferGetDataBuffer(buffer),
              CMBlockBufferGetDataPointer(block, atOffset: 0, lengthAtOffsetOut: nil, totalLengthOut: &length, dataPointerOut: &data) == noErr,
              let data else {
            received.audioFaults.append("\(type) chunk without data")
            return
        }
        let frames = CMSampleBufferGetNumSamples(buffer)
        #expect(length == frames * 8)
        let samples = UnsafeRawPointer(data).assumingMemoryBound(to: Float.self)
        var wrong = 0
        for index in 0..<frames {
            for channel in 0..<2 where samples[index * 2 + channel] != RingTestPattern.sample(expected + index, channel: channel, microphone: type == .audioMic) {
                wrong += 1
            }
        }
        if wrong > 0 { received.audioFaults.append("\(type) chunk at frame \(expected): \(wrong) wrong samples") }
        received.audioFrames[type] = expected + frames
        received.audioChunks += 1
    }

    @Test func picturesArriveInOrderWithTheirPixelsAndTimesAndSoundWithoutGaps() async throws {
        let peer = try RingPeer(["--width", "160", "--height", "90", "--frames", "60", "--interval-ms", "15", "--audio-frames", "720"])
        defer { peer.closeSocket() }
        #expect(peer.ring.width == 160 && peer.ring.height == 90)
        let received = Mutex(Received())
        let start = peer.startTime
        try await peer.deliver { buffer, type in
            received.withLock { received in
                if type == .video { Self.check(buffer, start: start, into: &received) } else { Self.check(audio: buffer, type: type, start: start, into: &received) }
            }
        }
        let report = try await peer.report()
        let seen = received.withLock { $0 }
        #expect(seen.badPixels.isEmpty, "\(seen.badPixels.prefix(5))")
        #expect(seen.badTimes.isEmpty, "\(seen.badTimes.prefix(5))")
        #expect(seen.frames == seen.frames.sorted() && Set(seen.frames).count == seen.frames.count, "in order, each once: \(seen.frames)")
        // Every picture offered is either received or counted as dropped; none is lost silently.
        #expect(report.offered == 60)
        #expect(UInt64(seen.frames.count) == report.framesWritten)
        #expect(report.framesWritten + report.framesDropped == 60)
        #expect(seen.frames.count >= 30, "a reader that keeps up gets most pictures (\(report.framesDropped) dropped)")
        // Sound: every sample of both kinds, in order, no gap, no drop.
        #expect(seen.audioFaults.isEmpty, "\(seen.audioFaults.prefix(5))")
        #expect(report.audioChunksDropped == 0)
        #expect(seen.audioFrames[.audioApp] == 60 * 720 && seen.audioFrames[.audioMic] == 60 * 720)
        #expect(UInt64(seen.audioChunks) == report.audioChunksWritten)
        #expect(peer.ring.counters.closed)
    }

    /// An app that keeps every buffer holds every slot: the writer drops each later picture whole,
    /// counted, and goes on (it offered them all and exited while the app still held the slots).
    @Test func anAppHoldingEverySlotLosesWholePicturesCountedAndNeverStallsTheWriter() async throws {
        let peer = try RingPeer(["--width", "64", "--height", "32", "--slots", "5", "--frames", "40", "--interval-ms", "2", "--audio-frames", "0"])
        defer { peer.closeSocket() }
        let held = Mutex<[CMSampleBuffer]>([])
        try await peer.deliver { buffer, _ in held.withLock { $0.append(buffer) } }
        let report = try await peer.report()
        #expect(report.offered == 40)
        #expect(report.framesWritten == 5, "one picture per slot, then none free")
        #expect(report.framesDropped == 35)
        #expect(held.withLock { $0.count } == 5)
        let counters = peer.ring.counters
        #expect(counters.framesWritten == 5 && counters.framesDropped == 35, "the app reads the same counts in the ring")
        #expect(held.withLock { $0.map { CMSampleBufferGetPresentationTimeStamp($0).value - peer.startTime } }
                == (0..<5).map { Int64($0) * RingTestPattern.frameInterval }, "the first five pictures, in order")
    }

    /// An app whose handler blocks stalls only itself: meanwhile the writer offers every picture and
    /// all its sound, dropping whole pictures and whole audio chunks, counted; afterwards the app
    /// gets exactly what was written, in order.
    @Test func aBlockedHandlerDropsPicturesAndSoundCountedWhileTheWriterGoesOn() async throws {
        let peer = try RingPeer(["--width", "64", "--height", "32", "--slots", "4", "--frames", "30", "--interval-ms", "2",
                                 "--audio-frames", "9600"])
        defer { peer.closeSocket() }
        let received = Mutex(Received())
        let writerFinishedWhileBlocked = Mutex<Bool?>(nil)
        let writer = peer.writer
        let start = peer.startTime
        try await peer.deliver { buffer, type in
            let first = writerFinishedWhileBlocked.withLock { state in
                defer { if state == nil { state = false } }
                return state == nil
            }
            if first {
                // Block the app's thread until the writer has offered everything and exited.
                let deadline = Date().addingTimeInterval(30)
                while writer.isRunning, Date() < deadline { usleep(5_000) }
                writerFinishedWhileBlocked.withLock { $0 = !writer.isRunning }
            }
            received.withLock { received in
                if type == .video { Self.check(buffer, start: start, into: &received) } else { Self.check(audio: buffer, type: type, start: start, into: &received) }
            }
        }
        let report = try await peer.report()
        let seen = received.withLock { $0 }
        #expect(writerFinishedWhileBlocked.withLock { $0 } == true, "the writer never waited for the app")
        #expect(report.offered == 30 && report.framesWritten + report.framesDropped == 30)
        #expect(report.framesDropped >= 30 - 4 - 1, "at most a slot count of pictures (and the one in hand) got through")
        #expect(UInt64(seen.frames.count) == report.framesWritten)
        #expect(seen.frames == seen.frames.sorted())
        #expect(seen.badPixels.isEmpty && seen.badTimes.isEmpty)
        #expect(report.audioChunksDropped > 0, "the audio ring overran while the app was blocked")
        #expect(UInt64(seen.audioChunks) == report.audioChunksWritten, "every chunk written was delivered")
        #expect(peer.ring.counters.audioChunksDropped == report.audioChunksDropped)
    }
}
