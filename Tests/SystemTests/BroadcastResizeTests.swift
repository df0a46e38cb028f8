import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// Issue 16: a system broadcast follows the screen's resolution. The screen is made 640x360 (of an
    /// Xvfb of 1280x720, its largest) before the broadcast starts; mid-broadcast xrandr grows it to
    /// 1280x720 (past the frame ring's capacity: replayd makes a larger ring and hands it to the
    /// extension) and shrinks it to 960x540 (within it). The RTMP extension's stream, as nginx-rtmp
    /// recorded it byte for byte, holds pictures of the three sizes in that order, each showing the
    /// test content's part of the screen that size shows, and sound without a gap.
    @Suite("broadcast: a resolution change mid-broadcast is followed")
    struct BroadcastResizeTests {
        @Test("xrandr 640x360 → 1280x720 → 960x540 mid-broadcast: the stream at nginx-rtmp carries each size, its content, and unbroken sound",
              .timeLimit(.minutes(4)))
        func resizeMidBroadcast() async throws {
            try await NginxRTMPServer.with { nginx in try await broadcast(to: nginx) }
        }

        private func broadcast(to nginx: NginxRTMPServer) async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 1280, height: 720)) { environment in
                let env: [String: String?] = ["XDG_DATA_HOME": BroadcastTests.dataHome(environment).path]
                #expect(try await environment.xvfb.resize(to: "640x360") == "640x360")
                let broadcast = try environment.startReplay(["broadcast", "--service", "org.openreplaykit.rtmp", "--mic",
                                                             "--setup", "url=\(nginx.recordingBase)", "--setup", "key=resize"], environment: env)
                try await BroadcastTests.waitFor("the broadcast URL on stdout") { broadcast.currentOutput.contains(nginx.recordingBase) }
                try await Task.sleep(for: .seconds(3))
                #expect(try await environment.xvfb.resize(to: "1280x720") == "1280x720")
                try await Task.sleep(for: .seconds(3))
                #expect(try await environment.xvfb.resize(to: "960x540") == "960x540")
                try await Task.sleep(for: .seconds(3))
                let stop = try await environment.replay(["stop"], environment: env)
                #expect(stop.succeeded, "\(stop)")
                let ended = try await broadcast.waitForExit(timeout: .seconds(20))
                #expect(ended.succeeded, "\(ended)")
                let file = try await nginx.finishedRecording(of: "resize")

                // The sizes, in order: 640x360, then 1280x720, then 960x540, each for a while.
                let sizes = try await MediaProbe.videoFrameSizes(file)
                var runs: [(size: String, count: Int)] = []
                for size in sizes.map({ "\($0.width)x\($0.height)" }) {
                    if runs.last?.size == size { runs[runs.count - 1].count += 1 } else { runs.append((size, 1)) }
                }
                #expect(runs.map(\.size) == ["640x360", "1280x720", "960x540"], "\(runs)")
                #expect(runs.allSatisfy { $0.count >= 20 }, "each size for about 3 s: \(runs)")

                // Every picture, scaled here to 320x180 (the sizes are ffprobe's), shows the part of the
                // 1280x720 test content its size covers: the bars and the top band where they are on the
                // screen, flashes aside.
                let small = try await FrameDecoder.allFrames(in: file, scaledTo: 320, 180)
                let (smallWidth, smallHeight) = (320, 180)
                #expect(small.count == sizes.count, "\(small.count) pictures decoded, \(sizes.count) probed")
                let pattern = TestPattern(width: 1280, height: 720)
                var checked = 0
                var mismatches: [String] = []
                var wrongPictures = 0
                for (image, size) in zip(small, sizes) {
                    func seen(_ x: Int, _ y: Int) -> RGB {
                        image.pixel(x: x * smallWidth / size.width, y: y * smallHeight / size.height)
                    }
                    // The top band's left end is black but in a flash.
                    if seen(80, 90).luma > 200 { continue }
                    checked += 1
                    let before = mismatches.count
                    defer { if mismatches.count > before { wrongPictures += 1 } }
                    var points = (0..<8).map { pattern.barCentre($0) }
                    points += [(80, 90), (240, 90), (1200, 90)]
                    for (x, y) in points where x < size.width && y < size.height {
                        guard let expected = pattern.expectedColour(x: x, y: y) else { continue }
                        let colour = seen(x, y)
                        if !colour.isClose(to: expected, tolerance: 60) {
                            mismatches.append("\(size.width)x\(size.height) at (\(x), \(y)): expected \(expected), saw \(colour)")
                        }
                    }
                }
                #expect(checked >= sizes.count * 3 / 4, "\(checked) of \(sizes.count) pictures were not flashes")
                // A picture taken as a flash begins or ends, or as the screen is resized, may be partly
                // one thing and partly another: a few such, never many.
                #expect(wrongPictures <= sizes.count / 20, "\(wrongPictures) pictures of \(sizes.count) wrong: \(mismatches.prefix(12))")

                // Sound all along: no gap between the audio packets, across both changes.
                let audio = try await ProcessRunner.run("ffprobe", arguments: ["-v", "error", "-select_streams", "a:0", "-show_entries",
                                                                               "packet=pts_time", "-of", "csv=p=0", file], timeout: .seconds(60))
                let times = audio.stdout.split(separator: "\n").compactMap { Double($0.trimmingCharacters(in: .whitespaces).split(separator: ",").first ?? "") }
                #expect(times.count > 100, "\(times.count) audio packets")
                let gaps = zip(times, times.dropFirst()).map { $1 - $0 }.filter { $0 > 0.1 }
                #expect(gaps.isEmpty, "gaps in the sound: \(gaps)")
                if let first = times.first, let last = times.last {
                    #expect(last - first > 8, "sound from start to end: \(first)…\(last) s")
                }
            }
        }
    }
}
