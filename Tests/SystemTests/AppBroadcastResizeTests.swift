import Foundation
import ReplayTesting
import Testing

extension SystemTests {
    /// An app's own broadcast (`RPBroadcastController`, driven by `replay-testapp`) follows the
    /// screen's resolution as a system broadcast does, and still holds only the app's pixels. The
    /// screen is made 640x360 (of an Xvfb of 1280x720, its largest) before the broadcast; the app's
    /// window (green, a child process of the app) reaches past that screen's edge, and another
    /// application's window (red) lies over part of it. Mid-broadcast xrandr grows the screen to
    /// 1280x720 (past the frame ring's capacity: replayd hands the extension a larger ring). The shipped
    /// RTMP extension (its setup answered by the test setup extension) streams to nginx-rtmp, whose
    /// recording holds pictures of 640x360, then of 1280x720 with the app's whole window, green where
    /// the app's window is (also under the other window), black elsewhere, and no red anywhere.
    @Suite("app broadcast: a resolution change mid-broadcast is followed")
    struct AppBroadcastResizeTests {
        /// The app's window, in screen pixels: at 640x360 only its top-left part shows.
        static let window = (x: 400, y: 200, width: 600, height: 300)
        /// The other application's, over the app's upper part.
        static let other = (x: 300, y: 120, width: 600, height: 180)

        @Test("xrandr 640x360 → 1280x720 mid-way through an app's broadcast: the stream at nginx-rtmp takes the new size, with only the app's pixels",
              .timeLimit(.minutes(4)))
        func resizeMidAppBroadcast() async throws {
            try await NginxRTMPServer.with { nginx in try await broadcast(to: nginx) }
        }

        private func broadcast(to nginx: NginxRTMPServer) async throws {
            try await TestEnvironment.with(TestEnvironment.Configuration(width: 1280, height: 720, content: nil)) { environment in
                // replayd reads the extensions of its own environment: $HOME/.local/share here. The
                // shipped RTMP extension, whose setup (a test one) gives it the ingest.
                let dataHome = environment.homeDirectory.appendingPathComponent(".local/share")
                let order: [String: Any] = ["action": "complete", "setupInfo": ["url": nginx.recordingBase, "key": "appresize"]]
                _ = try BroadcastSetupTests.install(order: order, in: dataHome, upload: "replay-extension-rtmp")
                #expect(try await environment.xvfb.resize(to: "640x360") == "640x360")
                let replayd = try await AppSessionTests.startReplayd(environment, consent: "allow", picker: BroadcastSetupTests.uploadID)
                defer { replayd.signal(SIGTERM) }

                let w = Self.window
                let child = "child=" + [try Binaries.testContent(), "--app", "\(w.width)x\(w.height)+\(w.x)+\(w.y)", "--colour", "00ff00", "--no-audio"]
                    .joined(separator: "|")
                let app = try BackgroundProcess(try Binaries.testApp(), arguments: [child, "broadcast-load", "broadcast-start", "sleep=9", "broadcast-finish"],
                                                environment: environment.environment)
                defer { Task { await app.terminate() } }
                try await BroadcastTests.waitFor("the app's broadcast to start", timeout: .seconds(60)) {
                    app.currentOutput.contains("\"step\":\"broadcast-start\"")
                }
                let started = AppSessionTests.lines(app.currentOutput).first { $0["step"] as? String == "broadcast-start" }
                try #require(started?["broadcasting"] as? Bool == true,
                             "app: \(app.currentOutput) \(app.currentError.suffix(1500)); replayd: \(environment.replaydLog.suffix(3000))")
                // Another application's window, over the app's (opened after it: above it).
                let o = Self.other
                let other = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                                    options: TestApp.Options(colour: 0xff0000, rect: PixelRect(x: o.x, y: o.y, width: o.width, height: o.height)))
                defer { other.kill() }
                try await Task.sleep(for: .seconds(2.5))
                #expect(try await environment.xvfb.resize(to: "1280x720") == "1280x720")

                let result = try await app.waitForExit(timeout: .seconds(60))
                let finished = AppSessionTests.lines(result.stdout).first { $0["step"] as? String == "broadcast-finish" }
                #expect(finished?["ok"] as? Bool != false && finished?["broadcasting"] as? Bool == false,
                        "the app finished its broadcast: \(result.stdout) \(result.stderr.suffix(1500))")
                let file = try await nginx.finishedRecording(of: "appresize")
                await other.stop()

                // The sizes, in order: 640x360, then 1280x720, each for a while.
                let sizes = try await MediaProbe.videoFrameSizes(file)
                var runs: [(size: String, count: Int)] = []
                for size in sizes.map({ "\($0.width)x\($0.height)" }) {
                    if runs.last?.size == size { runs[runs.count - 1].count += 1 } else { runs.append((size, 1)) }
                }
                #expect(runs.map(\.size) == ["640x360", "1280x720"], "\(runs) (replayd: \(environment.replaydLog.suffix(2000)))")
                #expect(runs.allSatisfy { $0.count >= 15 }, "each size for a few seconds: \(runs)")

                // Every picture, scaled here to 640x360 (the sizes are ffprobe's): the app's window green
                // where the screen of that size holds it, black elsewhere, the other window's red nowhere.
                let pictures = try await FrameDecoder.allFrames(in: file, scaledTo: 640, 360)
                #expect(pictures.count == sizes.count, "\(pictures.count) pictures decoded, \(sizes.count) probed")
                var wrong: [String] = []
                var red = 0
                var wholeWindow = 0
                for (picture, size) in zip(pictures, sizes) {
                    let scale = size.width / 640   // 1 or 2
                    let screen = PixelRect(x: 0, y: 0, width: 640, height: 360)
                    let shown = PixelRect(x: w.x / scale, y: w.y / scale, width: w.width / scale, height: w.height / scale)
                    let problems = SystemTests.onlyWindow(shown, colour: RGB(0, 255, 0), in: picture, bounds: screen)
                    if !problems.isEmpty { wrong.append("\(size.width)x\(size.height): \(problems)") }
                    red += picture.count { $0.r > 120 && Int($0.r) > Int($0.g) + 60 }
                    if size.width == 1280, picture.pixel(x: (w.x + w.width - 20) / 2, y: (w.y + w.height - 20) / 2).isClose(to: RGB(0, 255, 0), tolerance: 60) {
                        wholeWindow += 1
                    }
                }
                #expect(red == 0, "no pixel of the other application's window in any picture: \(red) red pixels")
                #expect(wrong.isEmpty, "\(wrong.count) of \(pictures.count) pictures not only the app's window: \(wrong.prefix(4))")
                // The window's far corner, past the first screen's edge, shows at the new size.
                #expect(wholeWindow >= (runs.last?.count ?? 0) * 9 / 10, "the app's whole window at 1280x720 in \(wholeWindow) pictures")
            }
        }
    }

    /// Where `image` breaks "inside `window` (6 pixels in, within `bounds`) `colour`, outside it
    /// (6 pixels out) black", on a grid of every 4 pixels: at most 6 described.
    static func onlyWindow(_ window: PixelRect, colour: RGB, in image: RGBImage, bounds: PixelRect) -> [String] {
        let inside = window.insetBy(-6, clippedTo: bounds), around = window.insetBy(6, clippedTo: bounds)   // (insetBy grows by its margin)
        var problems: [String] = []
        for y in stride(from: 0, to: image.height, by: 4) {
            for x in stride(from: 0, to: image.width, by: 4) {
                let seen = image.pixel(x: x, y: y)
                if inside.contains(x: x, y: y) {
                    if !seen.isClose(to: colour, tolerance: 60) { problems.append("(\(x),\(y)) is \(seen), not \(colour)") }
                } else if !around.contains(x: x, y: y), seen.luma > 30 {
                    problems.append("(\(x),\(y)) is \(seen), not black")
                }
                if problems.count >= 6 { return problems }
            }
        }
        return problems
    }
}
