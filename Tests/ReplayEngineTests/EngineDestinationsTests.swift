import Testing
import Foundation
import Logging
import ReplayEngine
import ReplayMedia
import ReplayTesting

/// The engine in-process on a real display, encoding once for two destinations at the same time:
/// the fragmented MP4 file and a live RTMP stream to a real ingest (nginx-rtmp), read back by ffmpeg.
@Suite("Engine: one capture, several destinations", .serialized, .timeLimit(.minutes(2)))
struct EngineDestinationsTests {
    @Test func oneCaptureFeedsAFileAndALiveStream() async throws {
        let logger = Logger(label: "test.engine")
        try await TestEnvironment.with(TestEnvironment.Configuration(width: 640, height: 360, audio: .deadServer)) { environment in
            let nginx = try await NginxRTMPServer.start()
            do {
                try await run(environment: environment, nginx: nginx, logger: logger)
            } catch {
                await nginx.stop()
                throw error
            }
            await nginx.stop()
        }
    }

    private func run(environment: TestEnvironment, nginx: NginxRTMPServer, logger: Logger) async throws {
        do {
            let file = environment.outputPath("engine.mp4")
            let streamURL = "\(nginx.base)/enginetest"
            let copy = environment.outputPath("from-ingest.flv")

            let engine = try await RecordingEngine.prepare(
                configuration: EngineConfiguration(video: .screen(display: environment.xvfb.display), audio: [], durationSeconds: 6),
                logger: logger)
            try engine.attach(try MovieWriter(path: file, logger: logger))
            try engine.attach(try StreamOutput(url: streamURL, logger: logger))
            // A viewer of the ingest: what it reads back from the live stream.
            let reader = try BackgroundProcess("ffmpeg", arguments: ["-nostdin", "-v", "error", "-rw_timeout", "15000000",
                                                                     "-i", streamURL, "-t", "3", "-c", "copy", copy])
            try await Task.sleep(for: .milliseconds(300))
            try await engine.run()
            let statistics = engine.statistics()
            let finished = try await reader.waitForExit(timeout: .seconds(20))
            #expect(finished.status == 0, "ffmpeg read the stream back: \(reader.currentError)")

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
