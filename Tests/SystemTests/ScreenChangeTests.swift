import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// RandR: the screen changes size mid-recording; the recording goes on at its first size, the
    /// new screen scaled to fit (letterboxed), and comes back to full size when the screen does.
    @Suite("screen size changes")
    struct ScreenChangeTests {
        @Test("xrandr shrinks the screen to 960x720 and back: the movie stays 1280x720, pillarboxed meanwhile, every frame accounted for",
              .timeLimit(.minutes(2)))
        func resizeMidRecording() async throws {
            try await TestEnvironment.with(.init(content: .twiceTheRecordingRate)) { environment in
                let file = environment.outputPath("resized.mp4")
                let recorder = try environment.startReplay(["record", "-o", file, "--duration", "7", "--no-system-audio"])
                _ = try await waitUntilRecording(environment, background: recorder)
                let started = ContinuousClock.now
                try await Task.sleep(for: .seconds(1.5))
                #expect(try await environment.xvfb.resize(to: "960x720") == "960x720")
                let shrunkAt = (ContinuousClock.now - started) / .seconds(1)
                try await Task.sleep(for: .seconds(2.5))
                #expect(try await environment.xvfb.resize(to: "1280x720") == "1280x720")
                let restoredAt = (ContinuousClock.now - started) / .seconds(1)
                let result = try await recorder.waitForExit(timeout: .seconds(40))
                #expect(result.succeeded, "\(result)")

                let info = try await MediaProbe.probe(file)
                let video = try #require(info.videoStreams.first)
                #expect(video.width == 1280 && video.height == 720, "the recording keeps its size: \(video.width ?? 0)x\(video.height ?? 0)")
                // Every tick of 7 s at 30 fps is in the movie, or was dropped and `replay` said so: a
                // busy machine may drop frames, never silently (with two busy loops beside it, the
                // capture thread woke up to 1.5 s late right after the screen grew back).
                let frames = video.readFrames ?? 0
                let dropped = result.stderr.firstMatch(of: /(\d+) of \d+ frames were dropped/).flatMap { Int($0.1) } ?? 0
                #expect((203...217).contains(frames + dropped), "7 s at 30 fps: \(frames) frames in the movie, \(dropped) dropped; \(result)")

                // While small: 960x720 fits 1280x720 at scale 1, centred: black columns of 160 pixels each side.
                let pattern = TestPattern(width: 1280, height: 720)
                let y = (pattern.topBandBottom + pattern.barsBottom) / 2
                let middleOfSmall = shrunkAt + 1.2
                #expect(middleOfSmall < restoredAt - 0.5)
                let small = try await FrameDecoder.frame(at: middleOfSmall, in: file)
                if !TestPattern.isFlash(small) {
                    let left = small.pixel(x: 60, y: y), right = small.pixel(x: 1220, y: y)
                    #expect(left.isClose(to: RGB(0, 0, 0), tolerance: 30) && right.isClose(to: RGB(0, 0, 0), tolerance: 30),
                            "pillarbox while the screen is 960 wide: left \(left), right \(right)")
                    // The 960-wide screen's first bar (white) now starts at x = 160.
                    #expect(small.pixel(x: 200, y: y).isClose(to: TestPattern.barColours[0], tolerance: 40), "\(small.pixel(x: 200, y: y))")
                }
                // After the restore: the full screen again, its first bar at the left edge.
                let restored = try await FrameDecoder.frame(at: min(6.5, restoredAt + 1.5), in: file)
                if !TestPattern.isFlash(restored) {
                    #expect(barMismatches(in: restored, tolerance: 40) == [])
                }
            }
        }
    }
}
