import Testing
import Foundation
import Logging
import Synchronization
@testable import ReplayEngine
@testable import ReplayMedia
import ReplayIPC
import ReplayTesting

/// A tap as a frame ring will be: it copies what it needs (here one luma sample of the white bar)
/// and returns at once.
final class RecordingTap: FrameTap {
    struct Seen: Sendable { var tick: Int64; var time: Int64; var whiteLuma: UInt8 }
    let seen = Mutex<[Seen]>([])

    func receive(_ picture: VideoFrame, tick: Int64, time: Int64) {
        let pattern = TestPattern(width: picture.width, height: picture.height)
        let (x, y) = pattern.barCentre(0)
        let luma = picture.planes.y[y * picture.strides.y + x]
        seen.withLock { $0.append(Seen(tick: tick, time: time, whiteLuma: luma)) }
    }
}

/// The engine in-process on a real display, encoding once for two destinations at the same time:
/// the fragmented MP4 file and a live RTMP stream to a real ingest (nginx-rtmp), read back by ffmpeg.
@Suite("Engine: one capture, several destinations", .serialized, .timeLimit(.minutes(2)))
struct EngineDestinationsTests {
    @Test func oneCaptureFeedsAFileAndALiveStream() async throws {
        let logger = Logger(label: "test.engine")
        try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 360, audio: .deadServer)) { environment in
            try await NginxRTMPServer.with { nginx in try await run(environment: environment, nginx: nginx, logger: logger) }
        }
    }

    private func run(environment: TestEnvironment, nginx: NginxRTMPServer, logger: Logger) async throws {
        do {
            let file = environment.outputPath("engine.mp4")
            // Published to nginx's `rec` application, which writes the stream as it arrived: a
            // player started beside the engine may join late on a loaded machine, and one that
            // joins late on a stream without sound probes for 5 s (ffprobe -v debug:
            // "max_analyze_duration 5000000 reached"), which failed the windows phase twice.
            let streamURL = "\(nginx.recordingBase)/enginetest"

            let engine = try await RecordingEngine.prepare(
                configuration: EngineConfiguration(video: .screen(display: environment.xvfb.display), audio: [], durationSeconds: 6),
                logger: logger)
            try engine.attach(try MovieWriter(path: file, logger: logger))
            try engine.attach(try StreamOutput(url: streamURL, logger: logger))
            let tap = RecordingTap()
            try engine.attach(tap: tap)
            // And a frame ring, read here as an app reads it (in place, each slot freed at once).
            let ring = try RingTap(width: engine.width, height: engine.height)
            try engine.attach(tap: ring)
            try engine.attach(audioTap: ring)
            let descriptors = ring.descriptors.map { dup($0) }
            let ringReader = try FrameRingReader(memory: descriptors[0], signal: descriptors[1])
            let fromRing = Mutex<[(time: Int64, whiteLuma: UInt8)]>([])
            let ringEnded = DispatchSemaphore(value: 0)
            ringReader.start(handler: { delivery in
                guard case .video(let frame) = delivery else { return }
                let (x, y) = TestPattern(width: frame.width, height: frame.height).barCentre(0)
                let luma = frame.luma.load(fromByteOffset: y * frame.lumaStride + x, as: UInt8.self)
                fromRing.withLock { $0.append((frame.time, luma)) }
            }, ended: { ringEnded.signal() })
            try await engine.run()
            ring.close()
            let statistics = engine.statistics()
            let copy = try await nginx.finishedRecording(of: "enginetest")

            // Both copies hold the test content's bars, and the stream went out as H.264 at the engine's size.
            for path in [file, copy] {
                let probe = try await MediaProbe.probe(path)
                let video = try #require(probe.videoStreams.first, "\(path) has a picture")
                #expect(video.codecName == "h264" && video.width == 640 && video.height == 360, "\(path): \(video)")
                let frame = try await FrameDecoder.frame(at: 1.0, in: path)
                let pattern = TestPattern(width: frame.width, height: frame.height)
                for bar in [0, 2, 5, 6] {
                    let (x, y) = pattern.barCentre(bar)
                    let colour = frame.pixel(x: x, y: y)
                    #expect(colour.isClose(to: TestPattern.barColours[bar], tolerance: 60) || TestPattern.isFlash(frame),
                            "\(path): bar \(TestPattern.barNames[bar]) is \(colour)")
                }
            }
            let movie = try await MediaProbe.probe(file)
            #expect(abs((movie.videoStreams.first?.duration ?? 0) - 6) < 0.5, "the file holds the 6 s")
            #expect(statistics.framesWritten >= 150, "\(statistics)")
            #expect(statistics.bytesWritten > 0)
            // The tap saw every picture the encoder got, on the engine's clock, before encoding.
            let seen = tap.seen.withLock { $0 }
            #expect(seen.count >= statistics.framesWritten, "\(seen.count) pictures tapped, \(statistics.framesWritten) encoded")
            #expect(zip(seen, seen.dropFirst()).allSatisfy { $0.tick < $1.tick && $0.time < $1.time }, "ticks and times rise")
            if let first = seen.first, let last = seen.last, last.tick > first.tick {
                let nanosecondsPerTick = Double(last.time - first.time) / Double(last.tick - first.tick)
                #expect(abs(nanosecondsPerTick - 1e9 / 30) < 1, "times are the ticks of the 30 fps clock: \(nanosecondsPerTick) ns")
            }
            #expect(seen.filter { $0.whiteLuma > 200 }.count >= seen.count * 9 / 10, "the tap sees the white bar white")
            // The ring got the same pictures (or counted those it dropped), in order, times as the tap's, NV12 luma as I420's.
            await withCheckedContinuation { (done: CheckedContinuation<Void, Never>) in
                DispatchQueue.global().async { ringEnded.wait(); done.resume() }
            }
            let ringFrames = fromRing.withLock { $0 }
            let counters = ring.counters
            #expect(counters.framesWritten + counters.framesDropped == UInt64(seen.count), "\(counters), \(seen.count) tapped")
            #expect(UInt64(ringFrames.count) == counters.framesWritten && ringFrames.count >= seen.count / 2)
            #expect(Set(ringFrames.map(\.time)).isSubset(of: Set(seen.map(\.time))) && ringFrames.map(\.time) == ringFrames.map(\.time).sorted())
            #expect(ringFrames.filter { $0.whiteLuma > 200 }.count >= ringFrames.count * 9 / 10, "the app sees the white bar white")
        }
    }

    @Test func aStreamAddressThatIsNotOneIsAClearError() throws {
        #expect(throws: MediaError.self) { try StreamOutput(url: "http://example.org/live", logger: Logger(label: "t")) }
        do {
            _ = try StreamOutput(url: "ftp://x/y", logger: Logger(label: "t"))
        } catch {
            #expect(error.message.contains("rtmp://"), "says what an address looks like: \(error.message)")
        }
    }
}
