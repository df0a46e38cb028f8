import Testing
import Foundation
import Logging
import class ReplayCapture.ApplicationCapture
@testable import ReplayEngine
@testable import ReplayMedia
import ReplayTesting

/// The privacy model at the engine: two applications (`replay-testcontent --app`, each a window of
/// one colour and a tone) side by side and overlapping on a real Xvfb with a private PulseAudio;
/// an application's recording holds only its own colour (even where the other covers it) and its
/// own tone, also while its window moves and the other opens one over it; a system recording holds
/// both; protected windows and OpenReplayKit's own windows are never in a frame.
@Suite("Engine: app-scoped capture and protected content", .serialized, .timeLimit(.minutes(3)))
struct ApplicationCaptureTests {
    static let red: UInt32 = 0xff0000, blue: UInt32 = 0x0000ff, green: UInt32 = 0x00ff00
    static let toneA = 500.0, toneB = 1500.0
    let logger = Logger(label: "test.app-capture")

    /// Points this process's PulseAudio variables at the environment's private server: the engine
    /// and the sound sources run in this process. (Why this suite is serialized.)
    static func useTheTestsPulseAudio(_ environment: TestEnvironment) {
        for (key, value) in environment.pulse?.clientEnvironment ?? [:] where key != "HOME" { setenv(key, value, 1) }
    }

    static func environment() -> TestEnvironment.Configuration {
        TestEnvironment.Configuration(width: 480, height: 270, audio: .pulseAudio, content: nil)
    }

    /// Records `seconds` of `video` (and `audio`) to a file in the environment's folder.
    func record(_ video: VideoSource, audio: [AudioSource] = [], seconds: Double, name: String,
                in environment: TestEnvironment) async throws -> String {
        try await recordTimed(video, audio: audio, seconds: seconds, name: name, in: environment).file
    }

    /// `record`, also returning a CLOCK_MONOTONIC time (ns) no later than the recording's time zero.
    func recordTimed(_ video: VideoSource, audio: [AudioSource] = [], seconds: Double, name: String,
                     in environment: TestEnvironment) async throws -> (file: String, running: Int64) {
        let file = environment.outputPath(name)
        Self.useTheTestsPulseAudio(environment)
        let engine = try await RecordingEngine.prepare(
            configuration: EngineConfiguration(video: video, audio: audio, audioRequired: !audio.isEmpty, durationSeconds: seconds,
                                               quality: .low, encoder: .x264),
            logger: logger)
        try engine.attach(try MovieWriter(path: file, logger: logger))
        let running = MonotonicClock.now()
        try await engine.run()
        return (file, running)
    }

    @Test func anAppsRecordingHoldsOnlyItsWindowsEvenWhereCovered() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            let rectA = PixelRect(x: 30, y: 30, width: 160, height: 100)
            let rectB = PixelRect(x: 130, y: 80, width: 160, height: 100)   // over A's lower right
            let a = try await TestApp.start(on: environment.xvfb, pulseEnvironment: environment.pulse?.clientEnvironment,
                                            options: TestApp.Options(colour: Self.red, rect: rectA, tone: Self.toneA))
            let b = try await TestApp.start(on: environment.xvfb, pulseEnvironment: environment.pulse?.clientEnvironment,
                                            options: TestApp.Options(colour: Self.blue, rect: rectB, tone: Self.toneB))
            defer { a.kill(); b.kill() }
            let display = environment.xvfb.display

            let scopeA = ApplicationScope(processID: a.pid)
            let own = try await record(.application(display: display, scopeA), audio: [.application(scopeA)], seconds: 2.5,
                                       name: "app-a.mp4", in: environment)
            let probe = try await MediaProbe.probe(own)
            let video = try #require(probe.videoStreams.first)
            #expect(video.width == 480 && video.height == 270, "the canvas is the screen's size: \(video)")
            let frame = try await FrameDecoder.frame(at: 1.5, in: own)
            let report = Self.check(frame, only: [(rectA, RGB(hex: Self.red))])
            #expect(report.isEmpty, "A's recording: A's window red everywhere (also under B), black elsewhere: \(report)")
            let sound = try await ToneAnalyzer.load(file: own, from: 0.5, to: 2.4)
            let (amplitudeA, amplitudeB) = (sound.amplitude(frequency: Self.toneA), sound.amplitude(frequency: Self.toneB))
            #expect(amplitudeA > 0.1, "A's tone in A's recording: \(amplitudeA)")
            #expect(amplitudeB < 0.003, "B's tone absent from A's recording: \(amplitudeB) (A's \(amplitudeA))")

            let system = try await record(.screen(display: display), seconds: 2, name: "screen.mp4", in: environment)
            let screen = try await FrameDecoder.frame(at: 1.0, in: system)
            #expect(screen.pixel(x: 60, y: 60).isClose(to: RGB(hex: Self.red), tolerance: 60), "the system recording has A")
            #expect(screen.pixel(x: 250, y: 150).isClose(to: RGB(hex: Self.blue), tolerance: 60), "and B")
            #expect(screen.pixel(x: 160, y: 110).isClose(to: RGB(hex: Self.blue), tolerance: 60), "with B over A")
            await a.stop()
            await b.stop()
        }
    }

    @Test func noPixelOfAnotherAppWhileWindowsMoveAndOpen() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            var optionsA = TestApp.Options(colour: Self.red, rect: PixelRect(x: 20, y: 20, width: 140, height: 90))
            optionsA.moveTo = (250, 140)
            optionsA.moveAfter = 1.0
            let movedA = PixelRect(x: 250, y: 140, width: 140, height: 90)
            var optionsB = TestApp.Options(colour: Self.blue, rect: PixelRect(x: 60, y: 50, width: 140, height: 90))
            optionsB.second = (Self.green, PixelRect(x: 300, y: 160, width: 120, height: 80))   // over A's new place
            optionsB.secondAfter = 1.6
            let a = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil, options: optionsA)
            let b = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil, options: optionsB)
            defer { a.kill(); b.kill() }

            let file = try await record(.application(display: environment.xvfb.display, ApplicationScope(processID: a.pid)),
                                        seconds: 3.2, name: "app-a-moving.mp4", in: environment)
            let frames = try await FrameDecoder.allFrames(in: file, crop: PixelRect(x: 0, y: 0, width: 480, height: 270))
            // A picture when something changed (and a repeat each second): the start, the move, the
            // second window (which changes nothing in A's), the end.
            #expect(frames.count >= 4, "\(frames.count) frames")
            var foreign = 0
            for frame in frames {
                foreign += frame.count { ($0.b > 120 || $0.g > 120) && $0.r < 120 }
            }
            #expect(foreign == 0, "no pixel of B's windows (blue, green) in any of A's \(frames.count) frames: \(foreign)")
            let last = try #require(frames.last)
            let report = Self.check(last, only: [(movedA, RGB(hex: Self.red))])
            #expect(report.isEmpty, "at the end A is at its new place, whole under B's second window, black elsewhere: \(report)")
            await a.stop()
            await b.stop()
        }
    }

    /// A change followed by stillness is in the recording at once: the picture taken when the
    /// window changed holds the change (a pooled picture takes the capture's latest changes too, not
    /// only those of the pictures sent before it), and every picture after it does, though libx264
    /// is told that nothing changed in them.
    @Test func aChangeAndThenStillnessIsRecordedAtOnce() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            let rect = PixelRect(x: 40, y: 30, width: 160, height: 100)
            var options = TestApp.Options(colour: Self.red, rect: rect)
            options.flipEvery = 1.4   // red, then its inverse (cyan) from 1.4 s until 2.8 s
            options.flipLog = environment.outputPath("flips.log")
            let app = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil, options: options)
            defer { app.kill() }
            let (file, running) = try await recordTimed(.application(display: environment.xvfb.display, ApplicationScope(processID: app.pid)),
                                                        seconds: 2.4, name: "app-flip.mp4", in: environment)
            let log = try String(contentsOfFile: try #require(options.flipLog), encoding: .utf8)
            let flipped = try #require(log.split(separator: "\n").first.flatMap { $0.split(separator: " ").first }.flatMap { Int64($0) },
                                       "the app flipped: \(log)")
            let frames = try await FrameDecoder.allFrames(in: file, crop: PixelRect(x: 0, y: 0, width: 480, height: 270))
            let times = try await MediaProbe.videoPictures(file).map(\.time)
            try #require(frames.count == times.count && !times.isEmpty, "\(frames.count) pictures, \(times.count) times")
            let cyan = RGB(hex: ~Self.red & 0xffffff)
            let colours = frames.map { frame -> String in
                if Self.check(frame, only: [(rect, RGB(hex: Self.red))]).isEmpty { return "red" }
                if Self.check(frame, only: [(rect, cyan)]).isEmpty { return "cyan" }
                return "mixed"
            }
            // The pictures after the flip (by the media clock, which started no earlier than
            // `running`) are cyan: the one taken when the window changed, and the repeats that push
            // it through the encoder. One red one at most, a once-a-second repeat taken before a
            // busy X server drew the flip; an older picture's red kept for the change and its
            // repeats would be several.
            let flipTime = Double(flipped - running) / 1e9
            let after = times.indices.filter { times[$0] - times[0] >= flipTime }
            #expect(after.count >= 3, "pictures follow the flip at \(flipTime) s: \(times)")
            let stale = after.filter { colours[$0] != "cyan" }
            #expect(stale.count <= 1, "pictures after the flip at \(flipTime) s keep the old colour: \(stale.map { "\($0) at \(times[$0] - times[0]) s: \(colours[$0])" })")
            #expect(colours.allSatisfy { $0 != "mixed" }, "each picture is the window in one colour: \(colours)")
            await app.stop()
        }
    }

    /// A capture-only session takes the application's picture when it draws, not at the next tick:
    /// its drawing wakes the capture's wait before the deadline. (The test application repaints its
    /// window every 50 ms, as a live one does: those repaints wake the wait too, and change nothing.)
    @Test func theApplicationsDrawingWakesTheCapture() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            var options = TestApp.Options(colour: Self.red, rect: PixelRect(x: 20, y: 20, width: 140, height: 90))
            options.moveTo = (200, 120)
            options.moveAfter = 2.0
            let app = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil, options: options)
            defer { app.kill() }
            let capture = try ApplicationCapture(display: environment.xvfb.display, processID: app.pid, logger: logger)
            capture.prime()
            let opened = MonotonicClock.now(), end = opened + 4_000_000_000
            var movedAt: Int64?
            while MonotonicClock.now() < end {
                // Woken before the deadline by the application's drawing; the picture changes at its move.
                if capture.waitForChange(until: end), try capture.update(), MonotonicClock.now() - opened > 1_000_000_000 {
                    movedAt = movedAt ?? MonotonicClock.now()
                }
            }
            #expect(movedAt.map { $0 < end - 500_000_000 } == true,
                    "the window's move (2 s after it opened) woke the capture at once, and its picture changed")
            await app.stop()
        }
    }

    @Test func underAWindowManagerOnlyTheClientWindowNotItsFrame() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            // openbox reparents each window into a frame with a title bar (its own pixels, not the app's).
            let manager = try BackgroundProcess("openbox", arguments: [], environment: environment.xvfb.environment)
            defer { manager.signal(SIGKILL) }
            try await Task.sleep(for: .milliseconds(700))
            let a = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                            options: TestApp.Options(colour: Self.red, rect: PixelRect(x: 40, y: 40, width: 160, height: 100)))
            let b = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                            options: TestApp.Options(colour: Self.blue, rect: PixelRect(x: 120, y: 90, width: 160, height: 100)))
            defer { a.kill(); b.kill() }
            try await Task.sleep(for: .milliseconds(300))
            let file = try await record(.application(display: environment.xvfb.display, ApplicationScope(processID: a.pid)),
                                        seconds: 2, name: "app-under-wm.mp4", in: environment)
            let frame = try await FrameDecoder.frame(at: 1.0, in: file)
            let red = frame.count { $0.isClose(to: RGB(hex: Self.red), tolerance: 60) }
            let other = frame.count { !$0.isClose(to: RGB(hex: Self.red), tolerance: 90) && $0.luma > 40 }
            #expect(red > 150 * 90, "A's client window is there: \(red) red pixels")
            #expect(other < 20, "nothing else: not the frame's title bar, not B: \(other) other pixels")
            await a.stop()
            await b.stop()
            await manager.terminate(grace: .seconds(1))
        }
    }

    @Test func aProtectedSinkInputIsSilentInTheSystemMix() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            var protectedOptions = TestApp.Options(colour: Self.red, rect: PixelRect(x: 20, y: 20, width: 100, height: 80), tone: Self.toneA)
            protectedOptions.protectedAudio = true
            let protected = try await TestApp.start(on: environment.xvfb, pulseEnvironment: environment.pulse?.clientEnvironment,
                                                    options: protectedOptions)
            let plain = try await TestApp.start(on: environment.xvfb, pulseEnvironment: environment.pulse?.clientEnvironment,
                                                options: TestApp.Options(colour: Self.blue, rect: PixelRect(x: 200, y: 20, width: 100, height: 80),
                                                                         tone: Self.toneB))
            defer { protected.kill(); plain.kill() }
            let file = try await record(.screen(display: environment.xvfb.display), audio: [.systemMix], seconds: 2.5,
                                        name: "system-sound.mp4", in: environment)
            let sound = try await ToneAnalyzer.load(file: file, from: 0.3, to: 2.4)
            let (heard, hidden) = (sound.amplitude(frequency: Self.toneB), sound.amplitude(frequency: Self.toneA))
            #expect(heard > 0.1, "the unprotected app's tone is in the system sound: \(heard)")
            #expect(hidden < 0.003, "the protected sink-input is silent in it: \(hidden)")
            await protected.stop()
            await plain.stop()
        }
    }

    @Test func theRootWindowSaysWhileADisplayIsCaptured() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            func flag() async throws -> String {
                let result = try await ProcessRunner.run("xprop", arguments: ["-root", "_OPENREPLAYKIT_CAPTURED"],
                                                         environment: environment.xvfb.environment, timeout: .seconds(5))
                return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
            }
            let engine = try await RecordingEngine.prepare(
                configuration: EngineConfiguration(video: .screen(display: environment.xvfb.display), audio: [], durationSeconds: 30,
                                                   quality: .low, encoder: .x264),
                logger: logger)
            try engine.attach(try MovieWriter(path: environment.outputPath("flag.mp4"), logger: logger))
            let running = Task { try await engine.run() }
            var seen = ""
            for _ in 0..<40 {
                seen = try await flag()
                if seen.hasSuffix("= 1") { break }
                try await Task.sleep(for: .milliseconds(50))
            }
            #expect(seen == "_OPENREPLAYKIT_CAPTURED(CARDINAL) = 1", "while capturing: \(seen)")
            engine.stop()
            try await running.value
            #expect(try await flag() == "_OPENREPLAYKIT_CAPTURED(CARDINAL) = 0", "after the capture")
        }
    }

    @Test func protectedWindowsAndSystemWindowsAreNeverInASystemRecording() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            var protectedOptions = TestApp.Options(colour: Self.red, rect: PixelRect(x: 20, y: 20, width: 160, height: 100))
            protectedOptions.protectedWindow = true
            let protected = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil, options: protectedOptions)
            let plain = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                                options: TestApp.Options(colour: Self.blue, rect: PixelRect(x: 260, y: 20, width: 160, height: 100)))
            // A window of OpenReplayKit's own (WM_CLASS openreplaykit-…), as the consent prompt is, over both.
            let ours = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                               options: TestApp.Options(colour: Self.green, rect: PixelRect(x: 100, y: 150, width: 240, height: 80)))
            defer { protected.kill(); plain.kill(); ours.kill() }
            // The pointer (white and black, drawn into system recordings) out of the way.
            _ = try await ProcessRunner.run("xdotool", arguments: ["mousemove", "479", "269"],
                                            environment: environment.xvfb.environment, timeout: .seconds(5))
            let window = try #require(ours.output.split(separator: " ").first { $0.hasPrefix("0x") })
            let set = try await ProcessRunner.run("xdotool", arguments: ["set_window", "--classname", "openreplaykit-consent", String(window)],
                                                  environment: environment.xvfb.environment, timeout: .seconds(5))
            #expect(set.succeeded, "\(set)")

            let file = try await record(.screen(display: environment.xvfb.display), seconds: 2, name: "protected.mp4", in: environment)
            let frames = try await FrameDecoder.allFrames(in: file, crop: PixelRect(x: 0, y: 0, width: 480, height: 270))
            #expect(!frames.isEmpty)
            var leaked = 0
            for frame in frames { leaked += frame.count(in: PixelRect(x: 0, y: 0, width: 460, height: 250)) { $0.r > 120 || $0.g > 120 } }
            #expect(leaked == 0, "neither the protected window (red) nor OpenReplayKit's (green) in any frame: \(leaked) pixels")
            let last = try #require(frames.last)
            #expect(last.pixel(x: 340, y: 70).isClose(to: RGB(hex: Self.blue), tolerance: 60), "the other window shows")
            #expect(last.pixel(x: 100, y: 70).luma < 30, "the protected window is black")
            await protected.stop()
            await plain.stop()
            await ours.stop()
        }
    }

    /// A protected window reparented into another app's window (as `xdotool windowreparent` did it)
    /// is no longer a top-level window, and it stays blank all the same.
    @Test func aProtectedWindowReparentedIntoAnotherStaysBlank() async throws {
        try await TestEnvironment.with(Self.environment()) { environment in
            var protectedOptions = TestApp.Options(colour: Self.red, rect: PixelRect(x: 20, y: 20, width: 80, height: 50))
            protectedOptions.protectedWindow = true
            let protected = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil, options: protectedOptions)
            let host = try await TestApp.start(on: environment.xvfb, pulseEnvironment: nil,
                                               options: TestApp.Options(colour: Self.blue, rect: PixelRect(x: 260, y: 20, width: 160, height: 100)))
            defer { protected.kill(); host.kill() }
            _ = try await ProcessRunner.run("xdotool", arguments: ["mousemove", "479", "269"],
                                            environment: environment.xvfb.environment, timeout: .seconds(5))
            let victim = try #require(protected.output.split(separator: " ").first { $0.hasPrefix("0x") }.map(String.init))
            let into = try #require(host.output.split(separator: " ").first { $0.hasPrefix("0x") }.map(String.init))
            let reparent = try await ProcessRunner.run("xdotool", arguments: ["windowreparent", victim, into],
                                                       environment: environment.xvfb.environment, timeout: .seconds(5))
            #expect(reparent.succeeded, "\(reparent)")
            // On the screen the red window is now inside the blue one's top-left corner.
            var screen = try await environment.xvfb.screenshot()
            for _ in 0..<50 where !screen.pixel(x: 300, y: 40).isClose(to: RGB(hex: Self.red)) {
                try await Task.sleep(for: .milliseconds(100))
                screen = try await environment.xvfb.screenshot()
            }
            #expect(screen.pixel(x: 300, y: 40).isClose(to: RGB(hex: Self.red)), "reparented: \(screen.pixel(x: 300, y: 40))")

            let file = try await record(.screen(display: environment.xvfb.display), seconds: 2, name: "reparented-protected.mp4", in: environment)
            let frames = try await FrameDecoder.allFrames(in: file, crop: PixelRect(x: 0, y: 0, width: 480, height: 270))
            #expect(!frames.isEmpty)
            var leaked = 0
            for frame in frames { leaked += frame.count(in: PixelRect(x: 0, y: 0, width: 460, height: 250)) { $0.r > 120 } }
            #expect(leaked == 0, "the protected window (red) in no frame: \(leaked) pixels")
            let last = try #require(frames.last)
            #expect(last.pixel(x: 300, y: 40).luma < 30, "blank where it is: \(last.pixel(x: 300, y: 40))")
            #expect(last.pixel(x: 400, y: 100).isClose(to: RGB(hex: Self.blue), tolerance: 60), "the window it is in shows around it")
            await protected.stop()
            await host.stop()
        }
    }

    /// Grid points (every 3 pixels) that break "inside each rectangle (5 pixels in) its colour,
    /// outside all of them (5 pixels out) black": at most 10 described.
    static func check(_ image: RGBImage, only windows: [(PixelRect, RGB)]) -> [String] {
        var problems: [String] = []
        for y in stride(from: 0, to: image.height, by: 3) {
            for x in stride(from: 0, to: image.width, by: 3) {
                let colour = image.pixel(x: x, y: y)
                if let inside = windows.first(where: { $0.0.insetBy(-5, clippedTo: image.bounds).contains(x: x, y: y) }) {
                    if !colour.isClose(to: inside.1, tolerance: 60) { problems.append("(\(x),\(y)) is \(colour), not \(inside.1)") }
                } else if !windows.contains(where: { $0.0.insetBy(5, clippedTo: image.bounds).contains(x: x, y: y) }) {
                    if colour.luma > 30 { problems.append("(\(x),\(y)) is \(colour), not black") }
                }
                if problems.count >= 10 { return problems }
            }
        }
        return problems
    }
}
