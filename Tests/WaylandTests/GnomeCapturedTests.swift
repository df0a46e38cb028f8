import Foundation
import ReplayTesting
import Testing

extension WaylandDesktops {
    /// `RPScreen.isCaptured` on Wayland (issue 27, point 3): true while anyone reads one of the
    /// compositor's screen-cast streams, not only replayd. Here the reader is GNOME Shell's own screen
    /// recorder (`org.gnome.Shell.Screencast`, a gjs process reading Mutter's stream through PipeWire),
    /// which replayd knows nothing of but PipeWire's graph; an app watching `isCaptured` (the built
    /// `replay-testapp watch-captured=…`) must see it turn true while that recorder runs and false after.
    @Suite(.serialized)
    struct GnomeCapturedTests {
        static let support = URL(fileURLWithPath: #filePath).deletingLastPathComponent().appendingPathComponent("Support")

        @Test("isCaptured follows a screen cast that does not go through replayd (GNOME Shell's own recorder)",
              .timeLimit(.minutes(3)))
        func capturedFollowsTheCompositorsStreams() async throws {
            try await GnomeSession.with { session in
                let app = try session.startClient(try Binaries.testApp(), arguments: ["watch-captured=40"])
                // The first value (false) says the app watches.
                try await waitFor("the app's first isCaptured", timeout: .seconds(30), app: app) { $0.count >= 1 }
                #expect(Self.captured(app).first == false, "nothing captures at first: \(app.currentOutput)")

                let file = session.outputDirectory.appendingPathComponent("gnome.webm").path
                let recorder = try session.startClient("/usr/bin/python3", arguments: [
                    Self.support.appendingPathComponent("gnome-recorder.py").path, file, "4",
                ])
                let deadline = ContinuousClock.now + .seconds(20)
                while !recorder.currentOutput.contains("recording") {
                    try #require(recorder.isRunning && ContinuousClock.now < deadline,
                                 "GNOME Shell's recorder started: \(recorder.currentOutput)\(recorder.currentError)")
                    try await Task.sleep(for: .milliseconds(20))
                }
                let started = Date().timeIntervalSince1970
                try await waitFor("isCaptured true while GNOME Shell records", timeout: .seconds(10), app: app) { $0.contains(true) }
                let becameTrue = try #require(Self.events(app).first { $0.captured }?.time)
                // Its stream is read a moment after the call returns (it builds its pipeline then):
                // what counts is that the app hears it without polling.
                #expect(becameTrue - started < 3, "isCaptured turned true \(becameTrue - started) s after the recorder started")

                let stop = try await recorder.waitForExit(timeout: .seconds(20))
                try #require(stop.succeeded, "GNOME Shell's recorder ran 4 s and stopped: \(stop)")
                let stopped = Date().timeIntervalSince1970
                try await waitFor("isCaptured false once it stopped", timeout: .seconds(10), app: app) { $0.last == false && $0.count >= 3 }
                let becameFalse = try #require(Self.events(app).last { !$0.captured }?.time)
                #expect(becameFalse - stopped < 2, "isCaptured turned false \(becameFalse - stopped) s after the recorder stopped")
                #expect(Self.captured(app) == [false, true, false], "one change each way: \(Self.captured(app))")
                print(String(format: "isCaptured: true %.3f s after GNOME Shell's recorder started, false %.3f s after it stopped",
                             becameTrue - started, becameFalse - stopped))
                await session.stopClient(app)
            }
        }

        @Test("replay record --region on Wayland crops the monitor's stream: a part of the window, then the top bar",
              .timeLimit(.minutes(3)))
        func regionCropsTheMonitorStream() async throws {
            try await GnomeSession.with { session in
                let green = RGB(0x20, 0xC0, 0x40)
                // Maximized: GNOME's top bar stays above it, dark.
                let window = try session.startClient("/usr/bin/python3", arguments: [
                    Self.support.appendingPathComponent("colour-window.py").path, "\(green.r)", "\(green.g)", "\(green.b)", "--maximized",
                ])
                let deadline = ContinuousClock.now + .seconds(60)
                while !window.currentOutput.contains("shown") {
                    try #require(window.isRunning && ContinuousClock.now < deadline, "the window showed: \(window.currentError)")
                    try await Task.sleep(for: .milliseconds(50))
                }
                for (region, size, greenShare) in [("640x360+320+200", (640, 360), 0.95...1.0), ("1280x24+0+0", (1280, 24), 0.0...0.05)] {
                    let file = session.outputDirectory.appendingPathComponent("region-\(size.1).mp4").path
                    // The first asks (answered as a person would), the second has the token.
                    let helper = try session.startClient("/usr/bin/python3", arguments: [
                        Self.support.appendingPathComponent("answer-portal.py").path, "--timeout", "30",
                    ])
                    let result = try await session.run(try Binaries.replay(), arguments: ["record", "--duration", "2", "--region", region, "-o", file],
                                                       timeout: .seconds(90))
                    await session.stopClient(helper)
                    try #require(result.succeeded, "replay record --region \(region): \(result)")
                    let info = try await MediaProbe.probe(file, countFrames: false)
                    let video = try #require(info.videoStreams.first)
                    #expect(video.width == size.0 && video.height == size.1, "the region's size \(size): \(video.width ?? 0)x\(video.height ?? 0)")
                    let frame = try await FrameDecoder.frame(at: 1, in: file)
                    var matching = 0
                    for y in 0..<frame.height { for x in 0..<frame.width where frame.pixel(x: x, y: y).isClose(to: green, tolerance: 40) { matching += 1 } }
                    let share = Double(matching) / Double(frame.width * frame.height)
                    #expect(greenShare.contains(share), "--region \(region): \(Int(share * 100)) % the window's colour, expected \(greenShare)")
                }
            }
        }

        struct Event {
            var captured: Bool
            var time: Double
        }

        /// The app's `watch-captured` lines, in order.
        static func events(_ app: BackgroundProcess) -> [Event] {
            app.currentOutput.split(separator: "\n").compactMap { line in
                guard let object = try? JSONSerialization.jsonObject(with: Data(line.utf8)) as? [String: Any],
                      (object["step"] as? String)?.hasPrefix("watch-captured") == true,
                      let captured = object["captured"] as? Bool, let time = object["time"] as? Double else { return nil }
                return Event(captured: captured, time: time)
            }
        }

        static func captured(_ app: BackgroundProcess) -> [Bool] { events(app).map(\.captured) }

        func waitFor(_ what: String, timeout: Duration, app: BackgroundProcess, _ condition: ([Bool]) -> Bool) async throws {
            let deadline = ContinuousClock.now + timeout
            while !condition(Self.captured(app)) {
                guard ContinuousClock.now < deadline, app.isRunning else {
                    throw HarnessError("\(what): not seen in \(timeout); the app said:\n\(app.currentOutput)\n\(app.currentError)")
                }
                try await Task.sleep(for: .milliseconds(50))
            }
        }
    }
}
